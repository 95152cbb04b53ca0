"""Gradient hooks of the autograd engine: ``register_hook`` (before accumulation), post-accumulate hooks (once
per backward, when a leaf's gradient is complete) and ``queue_callback`` (after the outermost backward)."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn.autograd import Function, queue_callback

TILE = ttnn.TILE_LAYOUT


@pytest.fixture
def mesh(open_mesh):
    return open_mesh((1, 1))


def leaf(mesh, values):
    t = ttnn.from_numpy(np.asarray(values, np.float32), dtype=ttnn.float32, layout=TILE, device=mesh)
    t.requires_grad = True
    return t


def value(t) -> np.ndarray:
    return ttnn.to_numpy(t)


def test_register_hook_sees_each_contribution_and_may_replace_it(mesh):
    x = leaf(mesh, [[1.0, 2.0]])
    seen = []

    def double(grad):
        seen.append(value(grad).copy())
        return ttnn.multiply(grad, 2.0)

    x.register_hook(double)
    y = ttnn.add(ttnn.multiply(x, 3.0), ttnn.multiply(x, 5.0))  # two paths into x
    ttnn.sum(y).backward()
    assert sorted(float(s[0, 0]) for s in seen) == [3.0, 5.0]
    np.testing.assert_allclose(value(x.grad), [[16.0, 16.0]])


def test_register_hook_returning_a_wrong_shape_raises(mesh):
    x = leaf(mesh, [[1.0, 2.0]])
    x.register_hook(lambda g: ttnn.from_numpy(np.ones((1, 3), np.float32), layout=TILE, device=mesh))
    with pytest.raises(ValidationError, match="register_hook"):
        ttnn.sum(ttnn.multiply(x, 2.0)).backward()


def test_post_accumulate_hook_runs_once_with_the_complete_gradient(mesh):
    x = leaf(mesh, [[1.0, 2.0]])
    w = leaf(mesh, [[4.0, 4.0]])
    calls = []
    x.register_post_accumulate_grad_hook(lambda t: calls.append(("x", value(t.grad).copy())))
    w.register_post_accumulate_grad_hook(lambda t: calls.append(("w", value(t.grad).copy())))
    y = ttnn.multiply(ttnn.add(ttnn.multiply(x, 3.0), ttnn.multiply(x, w)), 1.0)
    ttnn.sum(y).backward()
    names = [c[0] for c in calls]
    assert sorted(names) == ["w", "x"]
    got = dict(calls)
    np.testing.assert_allclose(got["x"], [[7.0, 7.0]])  # 3 + w, both paths already added
    np.testing.assert_allclose(got["w"], [[1.0, 2.0]])


def test_post_accumulate_hook_skips_a_leaf_that_received_no_gradient(mesh):
    class FirstOnly(Function):
        @staticmethod
        def forward(ctx, a, b):
            return ttnn.add(a, b)

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    a, b = leaf(mesh, [[1.0]]), leaf(mesh, [[2.0]])
    fired = []
    a.register_post_accumulate_grad_hook(lambda t: fired.append("a"))
    b.register_post_accumulate_grad_hook(lambda t: fired.append("b"))
    FirstOnly.apply(a, b).backward()
    assert fired == ["a"] and b.grad is None


def test_hooks_on_a_leaf_root_and_removal(mesh):
    x = leaf(mesh, [[1.0]])
    fired = []
    handle = x.register_post_accumulate_grad_hook(lambda t: fired.append(1))
    x.backward()
    assert fired == [1]
    handle.remove()
    handle.remove()  # a second remove does nothing
    x.backward()
    assert fired == [1]


def test_queue_callback_runs_after_the_outermost_backward(mesh):
    block = ttnn.nn.Linear(2, 2, device=mesh)
    x = leaf(mesh, np.ones((1, 1, 32, 2)))
    events = []

    def hook(p):
        events.append("hook")
        queue_callback(lambda: (events.append("done"), queue_callback(lambda: events.append("again"))))

    block.weight.register_post_accumulate_grad_hook(hook)
    # the checkpointed block backpropagates in a backward nested inside the outer one
    out = ttnn.nn.checkpoint(block, x)
    ttnn.sum(ttnn.multiply(out, 2.0)).backward()
    assert events[-2:] == ["done", "again"] and events.count("done") == 1
    assert x.grad is not None  # the outer backward had finished: x got its gradient before the callback


def test_hook_errors_name_the_problem(mesh):
    x = leaf(mesh, [[1.0]])
    y = ttnn.multiply(x, 2.0)
    with pytest.raises(ValidationError, match="leaf"):
        y.register_hook(lambda g: g)
    with pytest.raises(ValidationError, match="callable"):
        x.register_post_accumulate_grad_hook(3)
    with pytest.raises(ValidationError, match=r"expected a ttnn\.Tensor"):
        ttnn.autograd.register_hook("x", lambda g: g)
    with pytest.raises(ValidationError, match="no backward is running"):
        queue_callback(lambda: None)
    x.register_post_accumulate_grad_hook(lambda t: queue_callback(5))
    with pytest.raises(ValidationError, match="callback: expected a callable"):
        x.backward()
