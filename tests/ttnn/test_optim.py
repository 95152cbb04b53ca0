"""ttnn.optim: SGD / AdamW trajectories against torch.optim over 20 steps, parameter groups, state dicts, and the
learning-rate schedulers against their formulas (and torch's where torch has the same schedule).

Tolerances: float32 parameters follow torch to 1e-5 relative after 20 steps (the fused steps do torch's float32
math); a bfloat16 model is only checked to keep training (its updates round to bfloat16).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import ValidationError

nn, optim = ttnn.nn, ttnn.optim
RNG = np.random.default_rng(5)


@pytest.fixture
def mesh(open_mesh):
    m = open_mesh((1, 1))
    ttnn.SetDefaultDevice(m)
    nn.manual_seed(0)
    return m


def host(t) -> np.ndarray:
    return ttnn.to_numpy(t).astype(np.float64)


def tensor(mesh, a):
    return ttnn.from_numpy(
        np.asarray(a, np.float32), dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh
    )


class Problem:
    """The same two-layer regression in ttnn and torch: Linear(16, 32) → ReLU → Linear(32, 8), MSE."""

    def __init__(self, mesh):
        self.mesh = mesh
        self.model = nn.Sequential(nn.Linear(16, 32), nn.Linear(32, 8))
        self.ref = torch.nn.ModuleList([torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)])
        with torch.no_grad():
            for mine, theirs in zip(self.model, self.ref):
                theirs.weight.copy_(torch.tensor(host(mine.weight).T))
                theirs.bias.copy_(torch.tensor(host(mine.bias).reshape(-1)))
        self.batches = [(RNG.standard_normal((32, 16)), RNG.standard_normal((32, 8))) for _ in range(4)]

    def loss(self, step: int):
        x, y = self.batches[step % len(self.batches)]
        h = ttnn.relu(self.model[0](tensor(self.mesh, x[None, None])))
        return ttnn.mse_loss(self.model[1](h), tensor(self.mesh, y[None, None]))

    def ref_loss(self, step: int):
        x, y = (torch.tensor(a, dtype=torch.float32) for a in self.batches[step % len(self.batches)])
        return torch.nn.functional.mse_loss(self.ref[1](torch.relu(self.ref[0](x))), y)

    def check(self, rtol=1e-5, atol=1e-6):
        for mine, theirs in zip(self.model, self.ref):
            np.testing.assert_allclose(
                host(mine.weight), theirs.weight.detach().numpy().T, rtol=rtol, atol=atol
            )
            np.testing.assert_allclose(
                host(mine.bias).reshape(-1), theirs.bias.detach().numpy(), rtol=rtol, atol=atol
            )


def run(problem, opt, ref_opt, steps=20, scheds=None):
    for step in range(steps):
        opt.zero_grad()
        problem.loss(step).backward()
        opt.step()
        ref_opt.zero_grad()
        problem.ref_loss(step).backward()
        ref_opt.step()
        if scheds:
            for s in scheds:
                s.step()
    problem.check()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 0.05},
        {"lr": 0.05, "momentum": 0.9},
        {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01},
        {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1},
    ],
)
def test_sgd_matches_torch(mesh, kwargs):
    problem = Problem(mesh)
    run(
        problem,
        optim.SGD(problem.model.parameters(), **kwargs),
        torch.optim.SGD(problem.ref.parameters(), **kwargs),
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lr": 1e-2},
        {"lr": 1e-2, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1},
        {"lr": 1e-2, "amsgrad": True, "weight_decay": 0.0},
    ],
)
def test_adamw_matches_torch(mesh, kwargs):
    problem = Problem(mesh)
    run(
        problem,
        optim.AdamW(problem.model.parameters(), **kwargs),
        torch.optim.AdamW(problem.ref.parameters(), **kwargs),
    )


def test_param_groups_and_schedulers_match_torch(mesh):
    problem = Problem(mesh)
    mine = [p for n, p in problem.model.named_parameters() if n.endswith("weight")]
    rest = [p for n, p in problem.model.named_parameters() if n.endswith("bias")]
    theirs = [p for n, p in problem.ref.named_parameters() if n.endswith("weight")]
    theirs_rest = [p for n, p in problem.ref.named_parameters() if n.endswith("bias")]
    opt = optim.AdamW([{"params": mine}, {"params": rest, "lr": 5e-3, "weight_decay": 0.0}], lr=1e-2)
    ref = torch.optim.AdamW(
        [{"params": theirs}, {"params": theirs_rest, "lr": 5e-3, "weight_decay": 0.0}], lr=1e-2
    )
    sched = optim.CosineScheduler(opt, total_steps=20, eta_min=1e-4)
    ref_sched = torch.optim.lr_scheduler.CosineAnnealingLR(ref, T_max=20, eta_min=1e-4)
    run(problem, opt, ref, scheds=[sched, ref_sched])
    np.testing.assert_allclose(sched.get_last_lr(), ref_sched.get_last_lr(), rtol=1e-9)
    assert [g["lr"] for g in opt.param_groups] == sched.get_last_lr()


def test_zero_grad_and_step_details(mesh):
    problem = Problem(mesh)
    opt = optim.SGD(problem.model.named_parameters(), lr=0.1)
    problem.loss(0).backward()
    opt.zero_grad(set_to_none=False)
    assert all(np.all(host(p.grad) == 0) for p in problem.model.parameters())
    before = {n: host(p) for n, p in problem.model.named_parameters()}
    assert opt.step(closure=lambda: 3.0) == 3.0  # zero gradients: nothing moves
    assert all(np.array_equal(host(p), before[n]) for n, p in problem.model.named_parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in problem.model.parameters())
    opt.step()  # parameters without gradients are skipped
    assert all(s["step"] == 1 for s in opt.state.values())
    assert opt.get_lr() == 0.1
    opt.set_lr(0.5)
    assert opt.get_lr() == 0.5 and "lr: 0.5" in repr(opt)


def test_state_dict_round_trip(mesh):
    problem = Problem(mesh)
    opt = optim.AdamW(problem.model.named_parameters(), lr=1e-2, amsgrad=True)
    for step in range(3):
        opt.zero_grad()
        problem.loss(step).backward()
        opt.step()
    saved_model = problem.model.state_dict()
    saved = opt.state_dict()
    assert list(saved["state"]) == ["0.weight", "0.bias", "1.weight", "1.bias"]
    assert saved["param_groups"][0]["params"] == list(saved["state"])
    assert saved["state"]["0.weight"]["step"] == 3 and set(saved["state"]["0.weight"]) == {
        "step",
        "exp_avg",
        "exp_avg_sq",
        "max_exp_avg_sq",
    }
    # continue training, then restore the checkpoint into fresh objects and replay: the same trajectory
    for step in range(3, 6):
        opt.zero_grad()
        problem.loss(step).backward()
        opt.step()
    expected = {n: host(p) for n, p in problem.model.named_parameters()}
    problem.model.load_state_dict(saved_model)
    fresh = optim.AdamW(problem.model.named_parameters(), lr=1.0)
    fresh.load_state_dict(saved)
    assert fresh.param_groups[0]["lr"] == 1e-2 and fresh.param_groups[0]["amsgrad"]
    for step in range(3, 6):
        fresh.zero_grad()
        problem.loss(step).backward()
        fresh.step()
    for n, p in problem.model.named_parameters():
        np.testing.assert_allclose(host(p), expected[n], rtol=1e-6, atol=1e-7, err_msg=n)
    # loading into existing state copies in place; numpy values work too
    numpy_state = {
        "state": {
            k: {s: (ttnn.to_numpy(v) if isinstance(v, ttnn.Tensor) else v) for s, v in e.items()}
            for k, e in saved["state"].items()
        },
        "param_groups": saved["param_groups"],
    }
    held = fresh.state[problem.model[0].weight]["exp_avg"]
    fresh.load_state_dict(numpy_state)
    assert fresh.state[problem.model[0].weight]["exp_avg"] is held
    np.testing.assert_allclose(host(held), host(saved["state"]["0.weight"]["exp_avg"]))
    empty = {"state": {}, "param_groups": saved["param_groups"]}
    fresh.load_state_dict(empty)
    assert fresh.state == {}


def test_state_dict_keys_by_position_and_errors(mesh):
    problem = Problem(mesh)
    opt = optim.SGD(problem.model.parameters(), lr=0.1, momentum=0.9)
    problem.loss(0).backward()
    opt.step()
    saved = opt.state_dict()
    assert list(saved["state"]) == [0, 1, 2, 3] and saved["state"][0]["step"] == 1
    with pytest.raises(ValidationError, match="parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValidationError, match="a group has 4 parameters"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})
    with pytest.raises(ValidationError, match="differ"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": ["a", "b", "c", "d"]}]})


def test_optimizer_arguments(mesh):
    problem = Problem(mesh)
    params = list(problem.model.parameters())
    optim.SGD({"w": params[0]}, lr=0.1)  # a {name: tensor} dict, as TTML's parameters()
    optim.SGD({"params": params[:1], "lr": 0.2})  # a single group dict
    with pytest.raises(ValidationError, match="single tensor"):
        optim.SGD(params[0])
    with pytest.raises(ValidationError, match="empty parameter list"):
        optim.SGD([])
    with pytest.raises(ValidationError, match="expected ttnn tensors"):
        optim.SGD([1.0])
    x = tensor(problem.mesh, np.ones((1, 32)))
    x.requires_grad = True
    with pytest.raises(ValidationError, match="not a leaf"):
        optim.SGD([ttnn.multiply(x, 2.0)])
    ids = ttnn.from_numpy(np.zeros((1, 4), np.uint32), dtype=ttnn.uint32, device=problem.mesh)
    with pytest.raises(ValidationError, match="UINT32"):
        optim.SGD([ids])
    with pytest.raises(ValidationError, match="more than one group"):
        optim.SGD([{"params": params[:1]}, {"params": params[:1]}])
    with pytest.raises(ValidationError, match="unknown hyper-parameters"):
        optim.SGD([{"params": params, "beta": 1}])
    with pytest.raises(ValidationError, match="'params' entry"):
        optim.SGD(params).add_param_group({"lr": 1})
    with pytest.raises(ValidationError, match="lr"):
        optim.SGD(params, lr=-1)
    with pytest.raises(ValidationError, match="momentum"):
        optim.SGD(params, momentum=-0.5)
    with pytest.raises(ValidationError, match="nesterov"):
        optim.SGD(params, nesterov=True)
    with pytest.raises(ValidationError, match="betas"):
        optim.AdamW(params, betas=(0.9, 1.0))
    with pytest.raises(ValidationError, match="eps"):
        optim.AdamW(params, eps=-1.0)
    with pytest.raises(NotImplementedError):
        optim.Optimizer(params, {"lr": 0.1})._update(None, None, {}, {})


def test_bfloat16_model_trains(mesh):
    lin = nn.Linear(16, 4, dtype=ttnn.bfloat16)
    opt = optim.AdamW(lin.parameters(), lr=1e-2, amsgrad=True)
    x = RNG.standard_normal((32, 16)).astype(np.float32)
    y = x @ RNG.standard_normal((16, 4)).astype(np.float32)
    X = ttnn.from_numpy(x[None, None], dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    Y = ttnn.from_numpy(y[None, None], dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh)
    losses = []
    for _ in range(30):
        loss = ttnn.mse_loss(lin(X), Y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(nn.utils.item(loss))
    assert losses[-1] < 0.7 * losses[0]
    assert opt.state[lin.weight]["exp_avg"].dtype is ttnn.bfloat16


# --- schedulers -------------------------------------------------------------------------------------------------------


def _lrs(sched, steps):
    out = [sched.get_last_lr()[0]]
    for _ in range(steps):
        sched.step()
        out.append(sched.get_last_lr()[0])
    return out


def _opt(mesh, lr=1.0):
    return optim.SGD([nn.module.make_parameter(np.zeros((1, 32)), device=mesh)], lr=lr)


def test_schedulers_follow_their_formulas(mesh):
    assert _lrs(optim.ConstantScheduler(_opt(mesh, 0.3)), 5) == [0.3] * 6
    warm = _lrs(
        optim.WarmupLinearScheduler(_opt(mesh, 2.0), warmup_steps=4, total_steps=12, end_factor=0.1), 14
    )
    expected = [2.0 * t / 4 for t in range(4)] + [
        2.0 * (1 + (0.1 - 1) * min(1, (t - 4) / 8)) for t in range(4, 15)
    ]
    np.testing.assert_allclose(warm, expected, rtol=1e-12)
    cos = _lrs(optim.CosineScheduler(_opt(mesh, 1.0), total_steps=10, eta_min=0.1, warmup_steps=2), 12)
    expected = [t / 2 for t in range(2)] + [
        0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, (t - 2) / 8))) for t in range(2, 13)
    ]
    np.testing.assert_allclose(cos, expected, rtol=1e-12)
    lam = _lrs(optim.LambdaScheduler(_opt(mesh, 0.5), lambda t: 0.9**t), 3)
    np.testing.assert_allclose(lam, [0.5 * 0.9**t for t in range(4)])
    ref = torch.optim.lr_scheduler.LambdaLR(
        torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5), lambda t: 0.9**t
    )
    ref_lrs = [ref.get_last_lr()[0]]
    for _ in range(3):
        ref.optimizer.step()
        ref.step()
        ref_lrs.append(ref.get_last_lr()[0])
    np.testing.assert_allclose(lam, ref_lrs, rtol=1e-12)


def test_scheduler_state_and_validation(mesh):
    opt = _opt(mesh, 1.0)
    sched = optim.CosineScheduler(opt, total_steps=10)
    for _ in range(4):
        sched.step()
    state = sched.state_dict()
    again = optim.CosineScheduler(_opt(mesh, 1.0), total_steps=10)
    again.load_state_dict(state)
    assert again.get_last_lr() == sched.get_last_lr() and again.last_step == 4
    assert opt.param_groups[0]["initial_lr"] == 1.0
    with pytest.raises(ValidationError, match=r"ttnn\.optim\.Optimizer"):
        optim.ConstantScheduler("opt")
    with pytest.raises(ValidationError, match="total_steps"):
        optim.WarmupLinearScheduler(opt, warmup_steps=5, total_steps=5)
    with pytest.raises(ValidationError, match="warmup_steps"):
        optim.CosineScheduler(opt, total_steps=5, warmup_steps=-1)
    with pytest.raises(ValidationError, match="callable"):
        optim.LambdaScheduler(opt, 3)
    with pytest.raises(NotImplementedError):
        optim.LRScheduler(opt)
