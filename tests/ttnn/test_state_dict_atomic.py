"""``load_state_dict`` of modules and optimizers is all or nothing, and names what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn.errors import ValidationError


def _values(tensors) -> list[np.ndarray]:
    return [ttnn.to_numpy(t).copy() for t in tensors]


@pytest.fixture
def model(open_mesh):
    mesh = open_mesh()
    ttnn.nn.manual_seed(0)
    return ttnn.nn.Sequential(
        ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32),
        ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32),
    )


def test_module_load_checks_every_entry_before_writing_any(model):
    before = _values(model.parameters())
    versions = [p._version for p in model.parameters()]
    good = {k: np.full(tuple(v.shape), 7.0, np.float32) for k, v in model.state_dict().items()}
    for bad_key, bad_value in (("1.bias", np.zeros((3, 3), np.float32)), ("1.weight", "not an array")):
        state = {**good, bad_key: bad_value}
        with pytest.raises(ValidationError, match=f"Sequential.load_state_dict: {bad_key}: expected"):
            model.load_state_dict(state)
        # "0.weight" comes first and was valid: it must not have been written
        for got, want in zip(_values(model.parameters()), before):
            np.testing.assert_array_equal(got, want)
        assert [p._version for p in model.parameters()] == versions
    with pytest.raises(ValidationError, match="state_dict: expected a dict, got list"):
        model.load_state_dict([1, 2])
    model.load_state_dict(good)
    assert all((v == 7.0).all() for v in _values(model.parameters()))


def _trained(model, optimizer_class, **kwargs):
    opt = optimizer_class(model.named_parameters(), **kwargs)
    x = ttnn.from_numpy(
        np.ones((1, 1, 32, 32), np.float32), device=model[0].weight.device(), layout=ttnn.TILE_LAYOUT
    )
    ttnn.sum(model(x)).backward()
    opt.step()
    return opt


def _snapshot(opt):
    return (
        [dict((k, v) for k, v in g.items() if k != "params") for g in opt.param_groups],
        {
            id(p): {k: (ttnn.to_numpy(v).copy() if isinstance(v, ttnn.Tensor) else v) for k, v in st.items()}
            for p, st in opt.state.items()
        },
    )


def _assert_same(a, b):
    assert a[0] == b[0]
    assert a[1].keys() == b[1].keys()
    for key in a[1]:
        assert a[1][key].keys() == b[1][key].keys()
        for name in a[1][key]:
            np.testing.assert_array_equal(a[1][key][name], b[1][key][name])


def test_optimizer_of_another_class_is_rejected_naming_both(model):
    sgd = _trained(model, ttnn.optim.SGD, lr=0.1, momentum=0.9)
    adamw = _trained(model, ttnn.optim.AdamW, lr=0.1)
    before = _snapshot(adamw)
    with pytest.raises(
        ValidationError,
        match=r"AdamW\.load_state_dict: the state was saved by a SGD optimizer; a AdamW cannot load it",
    ):
        adamw.load_state_dict(sgd.state_dict())
    _assert_same(_snapshot(adamw), before)
    with pytest.raises(
        ValidationError, match=r"SGD\.load_state_dict: the state was saved by a AdamW optimizer"
    ):
        sgd.load_state_dict(adamw.state_dict())
    # a state saved without the optimizer's name: its hyper-parameters tell
    legacy = sgd.state_dict()
    del legacy["optimizer"]
    with pytest.raises(ValidationError, match=r"saved by a SGD optimizer, not a AdamW"):
        adamw.load_state_dict(legacy)
    _assert_same(_snapshot(adamw), before)
    adamw.step()  # still usable


def test_optimizer_load_is_all_or_nothing(model):
    opt = _trained(model, ttnn.optim.AdamW, lr=0.1, amsgrad=True)
    saved = opt.state_dict()
    opt.step()  # the state moves on from the saved one
    before = _snapshot(opt)
    names = list(saved["state"])
    broken = {**saved, "state": dict(saved["state"])}
    broken["state"][names[-1]] = {**saved["state"][names[-1]], "exp_avg": np.zeros((2, 2), np.float32)}
    with pytest.raises(ValidationError, match=rf"state {names[-1]}\.exp_avg: expected"):
        opt.load_state_dict(broken)
    _assert_same(_snapshot(opt), before)  # the first parameters' state was not restored either
    bad_lr = {**saved, "param_groups": [{**saved["param_groups"][0], "lr": -1.0}]}
    with pytest.raises(ValidationError, match="lr: expected a number >= 0"):
        opt.load_state_dict(bad_lr)
    _assert_same(_snapshot(opt), before)
    incomplete = {
        **saved,
        "state": {
            **saved["state"],
            names[0]: {"step": 3, "exp_avg_sq": saved["state"][names[0]]["exp_avg_sq"]},
        },
    }
    with pytest.raises(ValidationError, match=r"lacks the entries \['exp_avg'\]"):
        opt.load_state_dict(incomplete)
    with pytest.raises(ValidationError, match="state_dict: expected a dict"):
        opt.load_state_dict(None)
    opt.load_state_dict(saved)  # the real one loads
    restored = _snapshot(opt)
    assert restored[1][id(opt.param_groups[0]["params"][0])]["step"] == 1


def test_optimizer_load_names_malformed_states(model):
    opt = _trained(model, ttnn.optim.AdamW, lr=0.1)
    saved = opt.state_dict()
    key = next(iter(saved["state"]))
    cases = [
        ({**saved, "state": "x"}, "state: expected a dict, got str"),
        (
            {**saved, "state": {**saved["state"], key: 5}},
            f"state {key}: expected a dict of state entries, got 5",
        ),
        (
            {**saved, "state": {**saved["state"], key: {**saved["state"][key], "momentum_buffer": 1}}},
            rf"state {key} has entries \['momentum_buffer'\] that AdamW does not keep",
        ),
        (
            {"state": {}, "param_groups": [{**saved["param_groups"][0], "rho": 0.9}]},
            r"the state was saved by another optimizer, not a AdamW",
        ),
    ]
    for state, message in cases:
        with pytest.raises(ValidationError, match=message):
            opt.load_state_dict(state)
