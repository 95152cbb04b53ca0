"""The autograd engine: tensor-owned graphs, accumulation, retain_graph, grad modes, custom Functions, errors,
and the graph's memory going away with the loss."""

from __future__ import annotations

import gc
import inspect
import weakref

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import ValidationError
from tttv2.ttnn.autograd import engine
from tttv2.ttnn.ops._common import ttnn_op

F32, BF16, BF8 = ttnn.float32, ttnn.bfloat16, ttnn.bfloat8_b
TILE = ttnn.TILE_LAYOUT
RNG = np.random.default_rng(3)


@pytest.fixture
def mesh(open_mesh):
    return open_mesh((1, 1))


def leaf(mesh, arr, dtype=F32, grad=True, layout=TILE):
    t = ttnn.from_numpy(np.asarray(arr, np.float32), dtype=dtype, layout=layout, device=mesh)
    t.requires_grad = grad
    return t


def val(t):
    return ttnn.to_numpy(t).astype(np.float64)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_accumulation_for_tensors_used_several_times(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    y = ttnn.add(ttnn.multiply(x, x), ttnn.multiply(x, 3.0))  # x reaches the loss along three paths
    loss = ttnn.sum(y)
    assert loss.requires_grad and not loss.is_leaf and loss.grad_fn is not None
    assert "ttnn.sum" in repr(loss.grad_fn)
    loss.backward()
    np.testing.assert_allclose(val(x.grad), 2 * x_np + 3, rtol=1e-6, atol=1e-6)
    # a second, independent graph adds into .grad (gradient accumulation across steps)
    ttnn.sum(ttnn.multiply(x, 2.0)).backward()
    np.testing.assert_allclose(val(x.grad), 2 * x_np + 5, rtol=1e-6, atol=1e-6)
    x.grad = None
    assert x.grad is None
    with pytest.raises(ValidationError, match=r"Tensor\.grad"):
        x.grad = np.zeros(3)


def test_shared_intermediate_gets_summed_gradient(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    h = ttnn.exp(x)
    loss = ttnn.sum(ttnn.add(ttnn.multiply(h, 2.0), ttnn.square(h)))
    loss.backward()
    e = np.exp(x_np.astype(np.float64))
    np.testing.assert_allclose(val(x.grad), (2 + 2 * e) * e, rtol=1e-5)


def test_retain_graph_and_double_backward(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    loss = ttnn.sum(ttnn.multiply(ttnn.exp(x), 2.0))
    loss.backward(retain_graph=True)
    loss.backward()  # the graph was kept once: gradients add up
    np.testing.assert_allclose(val(x.grad), 4 * np.exp(x_np), rtol=1e-5)
    with pytest.raises(ValidationError, match=r"already freed.*retain_graph=True"):
        loss.backward()
    node = loss.grad_fn
    assert node.freed and node.ctx.output is None
    assert all(v is None for k, v in node.ctx.args.items() if k == "input_tensor")


def test_no_grad_enable_grad_nesting(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    assert ttnn.autograd.is_grad_enabled()
    with ttnn.autograd.no_grad():
        assert not ttnn.autograd.is_grad_enabled()
        a = ttnn.exp(x)
        with ttnn.autograd.enable_grad():
            assert ttnn.autograd.is_grad_enabled()
            b = ttnn.exp(x)
            with ttnn.autograd.no_grad():
                c = ttnn.exp(x)
            assert ttnn.autograd.is_grad_enabled()
        assert not ttnn.autograd.is_grad_enabled()
        with ttnn.autograd.set_grad_enabled(True):
            d = ttnn.exp(x)
    assert ttnn.autograd.is_grad_enabled()
    assert not a.requires_grad and b.requires_grad and not c.requires_grad and d.requires_grad
    with pytest.raises(RuntimeError), ttnn.autograd.no_grad():
        raise RuntimeError("the mode is restored when the block raises")
    assert ttnn.autograd.is_grad_enabled()


class Cube(ttnn.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return ttnn.multiply(ttnn.multiply(ttnn.multiply(x, x), x), scale)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        assert ctx.needs_input_grad == (True, False)
        return ttnn.multiply(ttnn.multiply(grad, ttnn.multiply(x, x)), 3.0 * ctx.scale), None


class SplitHalves(ttnn.autograd.Function):
    """Two outputs; returns a single gradient (not a tuple) for its single argument."""

    @staticmethod
    def forward(ctx, x):
        ctx.width = x.shape[-1]
        return tuple(ttnn.split(x, x.shape[-1] // 2, dim=-1))

    @staticmethod
    def backward(ctx, g_left, g_right):
        parts = [
            g if g is not None else ttnn.zeros_like(g_left if g_right is None else g_right)
            for g in (g_left, g_right)
        ]
        return ttnn.concat(parts, dim=-1)


class WrongCount(ttnn.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return ttnn.add(x, y)

    @staticmethod
    def backward(ctx, grad):
        return (grad,)


class StopsGradient(ttnn.autograd.Function):
    """Returns None for its (tracked) input: the graph behind it is reached but gets no gradient."""

    @staticmethod
    def forward(ctx, x):
        return ttnn.multiply(x, 1.0)

    @staticmethod
    def backward(ctx, grad):
        return None


class WrongShape(ttnn.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return ttnn.sum(x, dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_function_api(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    y = Cube.apply(x, 0.5)
    assert y.requires_grad and y.grad_fn.name == "Cube"
    ttnn.sum(y).backward()
    np.testing.assert_allclose(val(x.grad), 1.5 * x_np.astype(np.float64) ** 2, rtol=1e-5)
    # multiple outputs, one of them unused: its gradient arrives as None
    z = leaf(mesh, x_np)
    _, right = SplitHalves.apply(z)
    ttnn.sum(right).backward()
    expected = np.zeros_like(x_np)
    expected[..., 16:] = 1
    np.testing.assert_allclose(val(z.grad), expected)
    # a Function that returns no gradient: nothing reaches the graph behind it, which is still freed
    w = leaf(mesh, x_np)
    behind = ttnn.exp(w)
    ttnn.sum(StopsGradient.apply(behind)).backward()
    assert w.grad is None and behind.grad_fn.freed
    # no input requires grad, or grad mode off: a plain call without a node
    plain = leaf(mesh, x_np, grad=False)
    assert not Cube.apply(plain, 1.0).requires_grad
    with ttnn.autograd.no_grad():
        assert not Cube.apply(x, 1.0).requires_grad


def test_function_errors(mesh):
    x, y = leaf(mesh, rand(1, 1, 32, 32)), leaf(mesh, rand(1, 1, 32, 32))
    with pytest.raises(
        ValidationError, match=r"WrongCount\.backward returned 1 gradients for 2 forward arguments"
    ):
        ttnn.sum(WrongCount.apply(x, y)).backward()
    with pytest.raises(
        ValidationError, match=r"gradient for arg0: expected shape \[1, 1, 32, 32\], got \[1, 1, 32, 1\]"
    ):
        ttnn.sum(WrongShape.apply(x)).backward()


def test_requires_grad_rules(mesh):
    ints = ttnn.from_numpy(np.arange(32, dtype=np.int32).reshape(1, 32), dtype=ttnn.int32, device=mesh)
    with pytest.raises(ValidationError, match="only float tensors can require grad, this is INT32"):
        ints.requires_grad = True
    x = leaf(mesh, rand(1, 1, 32, 32))
    y = ttnn.exp(x)
    with pytest.raises(ValidationError, match="only leaf tensors"):
        y.requires_grad = False
    assert x.requires_grad_(False) is x and not x.requires_grad
    with pytest.raises(ValidationError, match="does not require grad and has no grad_fn"):
        x.backward()


def test_backward_argument_errors(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    y = ttnn.exp(x)
    bad = ttnn.from_numpy(np.ones((1, 1, 32, 16), np.float32), dtype=F32, layout=TILE, device=mesh)
    with pytest.raises(
        ValidationError, match=r"grad: expected a tensor of shape \[1, 1, 32, 32\], got \[1, 1, 32, 16\]"
    ):
        y.backward(bad)
    with pytest.raises(ValidationError, match="got ndarray"):
        y.backward(np.ones((1, 1, 32, 32)))
    # backward on a leaf: its gradient is the given one (ones by default)
    x.backward()
    np.testing.assert_allclose(val(x.grad), 1.0)


@ttnn_op("ttnn.test_only_op_without_rule")
def _op_without_rule(input_tensor):
    return ttnn.multiply(input_tensor, 2.0)


def test_op_without_rule_raises(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    with pytest.raises(
        ValidationError,
        match=r"ttnn\.test_only_op_without_rule: an input requires grad but .* has no backward",
    ):
        _op_without_rule(x)
    with ttnn.autograd.no_grad():
        _op_without_rule(x)
    _op_without_rule(x.detach())
    with pytest.raises(ValidationError, match="already has a backward rule"):
        ttnn.autograd.register_backward("ttnn.add")(lambda ctx, g: {})


def test_detach_cuts_the_graph(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    d = x.detach()
    assert d.is_leaf and not d.requires_grad and d.grad_fn is None
    np.testing.assert_array_equal(val(d), val(x))
    loss = ttnn.sum(ttnn.multiply(x, ttnn.exp(d)))
    loss.backward()
    np.testing.assert_allclose(
        val(x.grad), np.exp(x_np), rtol=1e-5
    )  # no gradient through the detached branch
    h = ttnn.exp(x)
    assert not h.detach().requires_grad and h.requires_grad


def test_retain_grad_on_non_leaves(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    h = ttnn.multiply(x, 2.0)
    h.retain_grad()
    loss = ttnn.sum(ttnn.multiply(h, h))
    loss.retain_grad()
    loss.backward()
    np.testing.assert_allclose(val(h.grad), 4 * x_np, rtol=1e-6)
    np.testing.assert_allclose(val(loss.grad), 1.0)
    np.testing.assert_allclose(val(x.grad), 8 * x_np, rtol=1e-6)


def test_graph_memory_released_with_the_loss(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    dram = mesh.get_devices()[0].allocators[ttnn.BufferType.DRAM]
    base = dram.used

    def build():
        h = ttnn.exp(x)
        loss = ttnn.sum(ttnn.multiply(h, 3.0))
        return loss, weakref.ref(h)

    # after backward without retain_graph the saved activations go at once (no garbage collector needed)
    gc.disable()
    try:
        loss, saved = build()
        assert saved() is not None
        loss.backward()
        assert saved() is None
        # with retain_graph they stay until the loss itself goes
        x.grad = None
        loss, saved = build()
        loss.backward(retain_graph=True)
        assert saved() is not None
        del loss
        assert saved() is None
        # and a graph that never ran backward goes with its loss
        loss, saved = build()
        del loss
        assert saved() is None
    finally:
        gc.enable()
    x.grad = None
    assert dram.used == base  # the emulated device memory of the graph is released too


def test_identity_returns_keep_leaves_and_grads_flow(mesh):
    x_np = rand(1, 1, 32, 32)
    x = leaf(mesh, x_np)
    same = ttnn.reshape(x, (1, 1, 32, 32))  # ops that return their input unchanged
    assert same is x and x.is_leaf
    assert ttnn.to_layout(x, TILE) is x and ttnn.permute(x, (0, 1, 2, 3)) is x and x.is_leaf
    pieces = ttnn.split(x, 32, dim=-1)
    assert pieces[0] is x and x.is_leaf
    ttnn.sum(ttnn.multiply(same, 2.0)).backward()
    np.testing.assert_allclose(val(x.grad), 2.0)


def test_in_place_outputs(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    y = leaf(mesh, rand(1, 1, 32, 32), grad=False)
    with pytest.raises(ValidationError, match="output_tensor is written in place, but it requires grad"):
        ttnn.add(y, x, output_tensor=x)
    with pytest.raises(ValidationError, match="output_tensor is written in place, but it is also an input"):
        ttnn.add(y, x, output_tensor=y)
    buf = leaf(mesh, np.zeros((1, 1, 32, 32), np.float32), grad=False)
    out = ttnn.add(y, x, output_tensor=buf)
    assert out is buf and buf.requires_grad and not buf.is_leaf
    ttnn.sum(out).backward()
    np.testing.assert_allclose(val(x.grad), 1.0)


def test_non_float_outputs_carry_no_gradient(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    as_int = ttnn.typecast(x, ttnn.int32)
    assert not as_int.requires_grad and as_int.is_leaf


def test_leaf_gradient_dtype_and_host_tensors(mesh):
    w = leaf(mesh, rand(1, 1, 32, 32), BF8)
    b = leaf(mesh, rand(1, 1, 32, 32), BF16)
    ttnn.sum(ttnn.add(ttnn.multiply(w, 2.0), b)).backward()
    assert w.grad.dtype is BF8 and b.grad.dtype is BF16
    np.testing.assert_allclose(val(w.grad), 2.0)
    # row-major leaf fed through tilize: its gradient comes back row-major
    r = leaf(mesh, rand(1, 1, 32, 32), layout=ttnn.ROW_MAJOR_LAYOUT)
    ttnn.sum(ttnn.tilize(r)).backward()
    assert r.grad.layout is ttnn.ROW_MAJOR_LAYOUT
    # host tensors take part too (elementwise ops accept them)
    h_np = rand(1, 32)
    h = ttnn.from_numpy(h_np, dtype=F32)
    h.requires_grad = True
    y = ttnn.multiply(h, h)
    y.backward(ttnn.from_numpy(np.ones((1, 32), np.float32), dtype=F32))
    assert h.grad.device() is None
    np.testing.assert_allclose(val(h.grad), 2 * h_np, rtol=1e-6)
    hb = ttnn.from_numpy(h_np, dtype=BF16)
    hb.requires_grad = True
    ttnn.multiply(hb, 2.0).backward(ttnn.from_numpy(np.ones((1, 32), np.float32), dtype=F32))
    assert hb.grad.dtype is BF16 and hb.grad.device() is None


def test_backward_context(mesh):
    x = leaf(mesh, rand(1, 1, 32, 32))
    y = ttnn.multiply(x, 2.0)
    ctx = y.grad_fn.ctx
    assert (
        ctx["input_tensor_a"] is x
        and ctx.needs_grad("input_tensor_a")
        and not ctx.needs_grad("input_tensor_b")
    )
    assert ctx.output is y and ctx.op_name == "ttnn.multiply"
    assert y.grad_fn.parents() == [x]
    assert engine.has_backward("ttnn.multiply")


def _reference_arguments(fn, args, kwargs):
    """What record() bound with before _Binder: Signature.bind, apply_defaults, **kwargs flattened at the end."""
    signature = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            arguments.update(arguments.pop(param.name, {}))
    return arguments


def _op_plain(a, b, c=3, *, d=None, e=5):
    return a


def _op_var_keyword(a, b=2, *, memory_config=None, **kwargs):
    return a


def _op_var_positional(a, *rest, scale=1.0):
    return a


def _op_positional_only(a, b=1, /, c=2):
    return a


def _op_positional_only_var_keyword(a, /, b=1, **kwargs):
    return a


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [
        (_op_plain, (1, 2), {}),
        (_op_plain, (1,), {"b": 2, "e": 9}),
        (_op_plain, (), {"e": 9, "b": 2, "a": 1}),
        (_op_plain, (1, 2, 3), {"d": 4}),
        (_op_var_keyword, (1,), {"z": 1, "memory_config": 2, "y": 3}),
        (_op_var_keyword, (1, 5), {}),
        (_op_var_keyword, (), {"a": 1, "b": 4, "extra": 7}),
        (_op_var_positional, (1, 2, 3), {"scale": 2.0}),
        (_op_var_positional, (1,), {}),
        (_op_positional_only, (1,), {"c": 7}),
        (_op_positional_only, (1, 2, 3), {}),
        (_op_positional_only_var_keyword, (1,), {"z": 2, "b": 3, "a": 4}),
    ],
)
def test_record_binds_arguments_as_signature_bind_does(fn, args, kwargs):
    """record()'s binder gives the same mapping, in the same order, as inspect's bind + apply_defaults."""
    got = engine._Binder(fn).arguments(args, kwargs)
    expected = _reference_arguments(fn, args, kwargs)
    assert list(got.items()) == list(expected.items())


@pytest.mark.parametrize(
    ("fn", "args", "kwargs"),
    [
        (_op_plain, (1,), {}),  # b missing
        (_op_plain, (1, 2), {"a": 1}),  # a twice
        (_op_plain, (1, 2, 3, 4), {}),  # too many positionals
        (_op_plain, (1, 2), {"zz": 1}),  # unknown keyword, no **kwargs
        (_op_positional_only, (), {"a": 1}),
    ],
)
def test_record_binder_rejects_what_signature_bind_rejects(fn, args, kwargs):
    with pytest.raises(TypeError):
        engine._Binder(fn).arguments(args, kwargs)
