"""The deprecated ``ttml`` package: every old name still works on tttv2.ttnn and warns with the new name."""

from __future__ import annotations

import importlib
import warnings

import ml_dtypes
import numpy as np
import pytest

from tttv2 import ttnn

# every call warns; the tests check the messages with pytest.warns and silence the rest
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def ttml():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import ttml as module
    yield module
    ctx = module.autograd.AutoContext._instance
    if ctx is not None and ctx._device is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.close_device()
    if ctx is not None and ctx._grad_scope is not None:
        ctx._grad_scope.__exit__(None, None, None)
        ctx._grad_scope = None


def test_import_warns():
    import ttml

    with pytest.warns(DeprecationWarning, match=r"the ttml package is deprecated; use tttv2\.ttnn"):
        importlib.reload(ttml)


def test_auto_context(ttml):
    with pytest.warns(
        DeprecationWarning, match=r"AutoContext.get_instance\(\) is deprecated; use ttnn.open_mesh_device"
    ):
        ctx = ttml.autograd.AutoContext.get_instance()
    assert ttml.autograd.AutoContext.get_instance() is ctx
    with pytest.warns(DeprecationWarning, match="ttnn.nn.manual_seed"):
        ctx.set_seed(3)
    with pytest.warns(DeprecationWarning, match="ttnn.open_mesh_device"):
        ctx.open_device((1, 2))
    assert ctx.get_device().get_num_devices() == 2 and ttnn.GetDefaultDevice() is ctx.get_device()
    with pytest.raises(RuntimeError, match="already open"), pytest.warns(DeprecationWarning):
        ctx.open_device()
    with pytest.warns(DeprecationWarning, match="drop the call"):
        ctx.reset_graph()
    with pytest.warns(DeprecationWarning, match="no_grad"):
        ctx.set_gradient_mode(ttml.autograd.GradMode.DISABLED)
    assert not ttnn.autograd.is_grad_enabled()
    with pytest.warns(DeprecationWarning):
        ctx.set_gradient_mode(ttml.autograd.GradMode.ENABLED)
    assert ttnn.autograd.is_grad_enabled()
    with pytest.warns(DeprecationWarning, match="close_mesh_device"):
        ctx.close_device()
    assert ctx.get_device().get_num_devices() == 1  # reopened lazily, as TTML did


def test_tensor(ttml):
    with pytest.warns(DeprecationWarning, match=r"Tensor.from_numpy is deprecated; use ttnn.from_numpy"):
        t = ttml.autograd.Tensor.from_numpy(np.arange(64, dtype=np.float32).reshape(1, 1, 2, 32))
    assert t.dtype() is ttnn.bfloat16 and t.shape() == [1, 1, 2, 32] and "ttml.autograd.Tensor" in repr(t)
    ids = ttml.autograd.Tensor.from_numpy(np.arange(4, dtype=np.int64).reshape(1, 4))
    assert ids.dtype() is ttnn.uint32 and ids.get_value().layout is ttnn.ROW_MAJOR_LAYOUT
    bf = ttml.autograd.Tensor.from_numpy(
        np.ones((1, 32), dtype=ml_dtypes.bfloat16)
    )  # TTML scripts pass these
    assert bf.dtype() is ttnn.bfloat16 and bf.to_numpy().sum() == 32
    f32 = ttml.autograd.Tensor.from_numpy(np.ones((1, 32), np.float32), new_type=ttnn.float32)
    assert f32.dtype() is ttnn.float32
    with pytest.warns(DeprecationWarning, match="requires_grad = "):
        t.set_requires_grad(True)
    with pytest.warns(DeprecationWarning, match="ttnn.Tensor.requires_grad"):
        assert t.get_requires_grad()
    loss = ttml.ops.binary.mul(t, t)
    with pytest.warns(DeprecationWarning, match="retain_graph"):
        loss.backward(False)
    with pytest.warns(DeprecationWarning, match=r"ttnn.Tensor.grad is not None"):
        assert t.is_grad_initialized()
    with pytest.warns(DeprecationWarning, match="ttnn.Tensor.grad"):
        np.testing.assert_allclose(
            ttnn.to_numpy(t.get_grad()), 2 * np.arange(64).reshape(1, 1, 2, 32), rtol=1e-2
        )
    with pytest.warns(DeprecationWarning, match="ttnn.to_numpy"):
        assert t.to_numpy().dtype == np.float32
    assert ids.to_numpy(ttnn.uint32).dtype == np.uint32 and ids.to_numpy(ttnn.int32).dtype == np.int64
    with pytest.warns(DeprecationWarning, match="the ttnn.Tensor itself"):
        value = t.get_value()
    assert isinstance(value, ttnn.Tensor)
    other = ttml.autograd.Tensor.from_numpy(np.zeros((1, 1, 2, 32), np.float32))
    with pytest.warns(DeprecationWarning, match="load_state_dict"):
        other.assign(t)
    np.testing.assert_array_equal(other.to_numpy(), t.to_numpy())
    with pytest.warns(DeprecationWarning, match="assign the ttnn.Tensor"):
        other.set_value(value)
    assert other.get_value() is value
    with pytest.raises(TypeError, match=r"wraps a ttnn\.Tensor"):
        ttml.autograd.Tensor(np.zeros(3))


def test_ops(ttml):
    a = ttml.autograd.Tensor.from_numpy(np.full((1, 1, 32, 32), 3.0, np.float32), new_type=ttnn.float32)
    b = ttml.autograd.Tensor.from_numpy(np.full((1, 1, 32, 32), 2.0, np.float32), new_type=ttnn.float32)
    for name, op, want in (
        ("add", "ttnn.add", 5.0),
        ("sub", "ttnn.subtract", 1.0),
        ("mul", "ttnn.multiply", 6.0),
        ("div", "ttnn.divide", 1.5),
    ):
        with pytest.warns(DeprecationWarning, match=rf"ttml.ops.binary.{name} is deprecated; use {op}"):
            out = getattr(ttml.ops.binary, name)(a, b)
        np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-2)
    with pytest.warns(DeprecationWarning, match="reduction="):
        reduce_type = ttml.ops.ReduceType
    with pytest.warns(DeprecationWarning, match="ttnn.mse_loss"):
        mse = ttml.ops.loss.mse_loss(a, b, reduce_type.SUM)
    assert float(mse.to_numpy().reshape(-1)[0]) == 1024.0
    assert float(ttml.ops.loss.mse_loss(a, b).to_numpy().reshape(-1)[0]) == 1.0
    logits = ttml.autograd.Tensor.from_numpy(np.zeros((2, 1, 32, 8), np.float32), new_type=ttnn.float32)
    target = ttml.autograd.Tensor.from_numpy(np.zeros((2, 32), np.uint32))
    with pytest.warns(DeprecationWarning, match="ttnn.cross_entropy_loss"):
        ce = ttml.ops.loss.cross_entropy_loss(logits, target, reduce_type.NONE)
    assert ce.shape() == [2, 1, 32, 1]
    np.testing.assert_allclose(ce.to_numpy(), np.log(8), rtol=1e-5)
    assert ttml.ops.loss.cross_entropy_loss(logits, target, "mean").shape() == [1, 1, 1, 1]
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = ttml.ops.Nope


def test_optimizers_and_core(ttml):
    model = ttml.models.linear_regression.create_linear_regression_model(8, 2)
    params = model.parameters()
    assert sorted(params) == ["bias", "weight"]
    with pytest.warns(DeprecationWarning, match=r"SGDConfig.make is deprecated; use ttnn.optim.SGD"):
        cfg = ttml.optimizers.SGDConfig.make(0.1, 0.9, 0.0, 0.0, False)
    with pytest.warns(DeprecationWarning, match="ttnn.optim.SGD"):
        sgd = ttml.optimizers.SGD(params, cfg)
    assert isinstance(sgd, ttnn.optim.SGD) and sgd.param_groups[0]["momentum"] == 0.9
    with pytest.warns(DeprecationWarning, match="ttnn.optim.AdamW"):
        acfg = ttml.optimizers.AdamWConfig.make(1e-3, 0.9, 0.99, 1e-8, 0.0, stochastic_rounding=True)
    with pytest.warns(DeprecationWarning, match="stochastic rounding is not emulated"):
        adamw = ttml.optimizers.AdamW(list(params.values()), acfg)
    assert adamw.param_groups[0]["betas"] == (0.9, 0.99)
    x = ttml.autograd.Tensor.from_numpy(np.ones((4, 1, 1, 8), np.float32))
    y = ttml.autograd.Tensor.from_numpy(np.zeros((4, 1, 1, 2), np.float32))
    model.train()
    loss = ttml.ops.loss.mse_loss(model(x), y)
    loss.backward(False)
    with pytest.warns(DeprecationWarning, match="clip_grad_norm_"):
        norm = ttml.core.clip_grad_norm(params, 1e-3)
    assert norm > 1e-3
    sgd.step()
    model.eval()
    assert not model.module.training


def test_models_and_data(ttml):
    with pytest.warns(DeprecationWarning, match=r"CharTokenizer is deprecated"):
        tok = ttml.common.data.CharTokenizer("hello world")
    assert tok.itos[0] == "<PAD>" and tok.itos[-2:] == ["<BEG>", "<END>"] and tok.vocab_size == 8 + 3
    assert tok.decode(tok.encode("hello")) == "hello"
    plain = ttml.common.data.CharTokenizer("ba", add_padding_token=False, add_begin_end_tokens=False)
    assert plain.itos == ["a", "b"]
    with pytest.warns(DeprecationWarning, match="batching"):
        x, y = ttml.common.data.get_batch(np.arange(100, dtype=np.uint32), 8, 3)
    assert x.shape == y.shape == (3, 8) and np.all(y == x + 1)
    with pytest.warns(DeprecationWarning, match="causal by default"):
        mask = ttml.common.data.build_causal_mask(32)
    with pytest.warns(DeprecationWarning, match=r"NanoGPTConfig is deprecated; use ttnn.nn.GPTConfig"):
        config = ttml.models.nanogpt.NanoGPTConfig(
            vocab_size=32, block_size=32, n_embd=32, n_layer=1, n_head=1, dropout=0.0
        )
    with pytest.warns(DeprecationWarning, match=r"create_nanogpt is deprecated; use ttnn.nn.GPT"):
        model = ttml.models.create_nanogpt(config)
    assert isinstance(model.module, ttnn.nn.GPT) and model.module.embed.weight.dtype is ttnn.bfloat16
    idx = ttml.autograd.Tensor.from_numpy(np.arange(32, dtype=np.uint32).reshape(1, 1, 1, 32))
    causal = ttml.autograd.Tensor.from_numpy(mask)
    full = ttml.autograd.Tensor.from_numpy(np.ones((1, 1, 32, 32), np.float32))
    with_causal, without = model(idx, causal), model(idx)
    np.testing.assert_array_equal(with_causal.to_numpy(), without.to_numpy())
    assert model._masks[id(causal.get_value())] is None
    attend_all = model(idx, full).to_numpy()
    assert not np.allclose(attend_all[0, 0, 0], without.to_numpy()[0, 0, 0])  # position 0 now sees the future
    np.testing.assert_allclose(attend_all[0, 0, -1], without.to_numpy()[0, 0, -1], rtol=2e-2, atol=2e-2)


# --- bad input: every error names the argument -----------------------------------------------------------


def test_set_gradient_mode_takes_only_grad_modes(ttml):
    ctx = ttml.autograd.AutoContext.get_instance()
    for bad in ("off", "disabled", False, None):
        with pytest.raises(
            TypeError, match=r"set_gradient_mode: mode: expected ttml\.autograd\.GradMode\.ENABLED"
        ):
            ctx.set_gradient_mode(bad)
        assert ttnn.autograd.is_grad_enabled()  # "off" used to switch gradients on; nothing changes now
    ctx.set_gradient_mode(ttml.autograd.GradMode.DISABLED)
    assert not ttnn.autograd.is_grad_enabled()
    ctx.set_gradient_mode(ttml.autograd.GradMode.ENABLED)
    assert ttnn.autograd.is_grad_enabled()


def test_optimizers_name_a_missing_or_wrong_config(ttml):
    params = {"w": ttnn.from_numpy(np.ones((2, 2), np.float32))}
    with pytest.raises(
        TypeError,
        match=r"ttml\.optimizers\.SGD: config: expected a ttml\.optimizers\.SGDConfig, got NoneType",
    ):
        ttml.optimizers.SGD(params, None)
    with pytest.raises(
        TypeError,
        match=r"SGD: config: expected a ttml\.optimizers\.SGDConfig, got AdamWConfig \(an AdamWConfig goes with ttml\.optimizers\.AdamW\)",
    ):
        ttml.optimizers.SGD(params, ttml.optimizers.AdamWConfig())
    with pytest.raises(
        TypeError, match=r"AdamW: config: expected a ttml\.optimizers\.AdamWConfig, got SGDConfig"
    ):
        ttml.optimizers.AdamW(params, ttml.optimizers.SGDConfig())
    assert ttml.optimizers.SGD(params, ttml.optimizers.SGDConfig(lr=0.5)).get_lr() == 0.5


def test_from_numpy_refuses_non_numeric_arrays(ttml):
    for array in (np.array([1 + 2j]), np.array([1.0, "a"], dtype=object), np.array(["x"])):
        with pytest.raises(
            TypeError, match=r"ttml Tensor\.from_numpy: array: expected a numeric array .* got dtype"
        ):
            ttml.autograd.Tensor.from_numpy(array)
    ok = ttml.autograd.Tensor.from_numpy(
        np.ones((32, 32), dtype=ml_dtypes.bfloat16)
    )  # bfloat16 stays accepted
    assert ok.dtype() == ttnn.bfloat16


def test_char_tokenizer_names_bad_text_and_unknown_characters(ttml):
    data = ttml.common.data
    with pytest.raises(ValueError, match=r"CharTokenizer: text: expected a non-empty str"):
        data.CharTokenizer("")
    with pytest.raises(TypeError, match=r"CharTokenizer: text: expected a str .* got NoneType"):
        data.CharTokenizer(None)
    tok = data.CharTokenizer("hello")
    assert tok.decode(tok.encode("hole")) == "hole"
    with pytest.raises(
        ValueError, match=r"CharTokenizer\.encode: s: character 'z' at index 2 is not in the vocabulary"
    ):
        tok.encode("hez")


# --- issue 8 leftovers: ttml.ops.sample, ttml.modules, ttml.common.utils / config; issue 15: TTML's TP names -------
def _f32(ttml, array):
    return ttml.autograd.Tensor.from_numpy(np.asarray(array, np.float32), new_type=ttnn.float32)


def test_sample_op_masks_padding_and_matches_ttnn_sample(ttml):
    mesh = ttml.autograd.AutoContext.get_instance().get_device()
    logits = np.zeros((1, 1, 3, 64), np.float32)
    logits[0, 0, :, 60] = 9.0  # the largest logits sit in the padding
    logits[0, 0, 0, 40] = logits[0, 0, 1, 3] = logits[0, 0, 2, 7] = 5.0
    x = _f32(ttml, logits)
    mask = ttml.common.utils.build_logits_mask(50, 64)
    assert mask.shape() == [1, 1, 1, 64] and mask.dtype() == ttnn.bfloat16
    with pytest.warns(
        DeprecationWarning, match=r"ttml\.ops\.sample\.sample_op is deprecated; use ttnn\.sample"
    ):
        greedy = ttml.ops.sample.sample_op(x, 0.0, 7, mask)
    assert greedy.shape() == [1, 1, 3, 1] and greedy.dtype() == ttnn.uint32
    assert greedy.to_numpy().ravel().tolist() == [40, 3, 7]
    assert ttml.ops.sample.sample_op(x, 0.0, 7).to_numpy().ravel().tolist() == [60, 60, 60]  # no mask
    # with a temperature: ttnn.sample's Gumbel draw on logits / T - mask
    for temperature, seed in ((0.5, 11), (2.0, 3)):
        want = ttnn.sample(
            ttnn.from_numpy(
                logits / temperature - np.where(np.arange(64) >= 50, 1e4, 0), dtype=ttnn.float32, device=mesh
            ),
            temperature=1.0,
            seed=seed,
        )
        got = ttml.ops.sample.sample_op(x, temperature, seed, mask).to_numpy().ravel()
        assert got.tolist() == ttnn.to_numpy(want).ravel().tolist() and (got < 50).all()
    with pytest.raises(NotImplementedError, match=r"sample_op: seed_axes: per-device noise is not emulated"):
        ttml.ops.sample.sample_op(x, 1.0, 7, None, [0])


class _TinyMLP:
    """Built inside the tests (the class needs the ttml module): fc1 → fc2, times a trained scale."""

    @staticmethod
    def make(ttml):
        class TinyMLP(ttml.modules.AbstractModuleBase):
            def __init__(self):
                super().__init__()
                self.fc1 = ttml.modules.LinearLayer(8, 16)
                self.fc2 = ttml.modules.LinearLayer(16, 8, has_bias=False)
                self.scale = ttml.modules.Parameter(_f32(ttml, np.full((1, 8), 2.0)))
                self.offset = ttml.modules.Buffer(_f32(ttml, np.ones((1, 8))))

            def forward(self, x):
                y = ttml.ops.binary.mul(self.fc2(self.fc1(x)), self.scale.tensor)
                return ttml.ops.binary.add(y, self.offset.tensor)

        return TinyMLP()


def test_modules_register_parameters_buffers_and_children(ttml):
    ttml.autograd.AutoContext.get_instance().open_device((1, 1))
    ttml.common.utils.set_seed(1)
    with pytest.warns(
        DeprecationWarning, match=r"AbstractModuleBase \(TinyMLP\) is deprecated; use ttnn\.nn\.Module"
    ):
        model = _TinyMLP.make(ttml)
    assert isinstance(model, ttnn.nn.Module)
    assert [n for n, _ in model.named_parameters()] == [
        "scale",
        "fc1.layer.weight",
        "fc1.layer.bias",
        "fc2.layer.weight",
    ]
    assert [n for n, _ in model.named_buffers()] == ["offset"]
    model.extra = _f32(ttml, np.zeros((1, 2)))  # a bare ttml tensor registers as a parameter too (as in TTML)
    assert model.extra.get_value() is model._parameters["extra"] and model.extra.get_requires_grad()
    del model.extra
    assert model.scale.tensor.get_value() is model._parameters["scale"]  # one tensor, two views of it
    model.set_run_mode(ttml.modules.RunMode.EVAL)
    assert model.get_run_mode() is ttml.modules.RunMode.EVAL and not model.fc1.training
    with pytest.raises(TypeError, match=r"set_run_mode: mode: expected a ttml\.modules\.RunMode, got 'eval'"):
        model.set_run_mode("eval")
    model.train()
    x = np.random.default_rng(0).random((2, 8), np.float32)
    out = model(_f32(ttml, x))
    w1, b1 = (ttnn.to_numpy(t) for t in (model.fc1.layer.weight, model.fc1.layer.bias))
    want = ((x @ w1 + b1) @ ttnn.to_numpy(model.fc2.layer.weight)) * 2.0 + 1.0
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-5)
    # an optimizer step through the shim moves the registered parameter that .tensor reads
    opt = ttml.optimizers.SGD(model.parameters(), ttml.optimizers.SGDConfig(lr=0.1))
    ttml.ops.loss.mse_loss(out, _f32(ttml, np.zeros((2, 8)))).backward()
    opt.step()
    assert not np.allclose(model.scale.tensor.to_numpy(), 2.0)
    items = ttml.modules.ModuleDict({"a": ttml.modules.LinearLayer(2, 2)})
    items["b"] = ttml.modules.LinearLayer(2, 3)
    layers = ttml.modules.ModuleList([items["a"]]).extend([items["b"]])
    assert list(items) == ["a", "b"] and len(layers) == 2 and layers[1] is items["b"] and "b" in items
    assert [n for n, _ in items.named_parameters()][:2] == ["a.layer.weight", "a.layer.bias"]
    del items["a"]
    assert list(items.keys()) == ["b"] and list(items.values()) == [layers[1]]
    with pytest.raises(
        NotImplementedError, match=r"LinearLayer: weight_init: ttml\.init initialisers are not shimmed"
    ):
        ttml.modules.LinearLayer(2, 2, weight_init=lambda shape: None)
    with pytest.raises(TypeError, match=r"Parameter: tensor: expected a ttml or ttnn Tensor, got ndarray"):
        ttml.modules.Parameter(np.ones(2))
    raw = ttnn.from_numpy(np.ones((1, 2), np.float32))  # a ttnn tensor is taken as it is
    assert repr(ttml.modules.Parameter(raw)).startswith("Parameter(ttml.autograd.Tensor(")
    assert repr(ttml.modules.Buffer(raw)).startswith("Buffer(ttml.autograd.Tensor(")
    assert [name for name, _ in items.items()] == ["b"]


def test_parallelize_module_matches_the_dense_model(ttml):
    """TTML's parallelize_module with ColwiseParallel / RowwiseParallel on 1x2: same outputs and the same
    gradients of the gathered weights as the dense model."""
    ctx = ttml.autograd.AutoContext.get_instance()
    ctx.open_device((1, 2))
    mesh = ctx.get_device()
    ttml.common.utils.set_seed(4)
    model = _TinyMLP.make(ttml)
    x = _f32(ttml, np.random.default_rng(1).random((2, 8)))
    target = _f32(ttml, np.zeros((2, 8)))

    def grads():
        loss = ttml.ops.loss.mse_loss(run(x), target)
        loss.backward()
        return float(loss.get_value().item())

    run = model
    dense_loss = grads()
    dense = {n: ttnn.to_numpy(p.grad) for n, p in model.named_parameters()}
    weights = {n: ttnn.to_numpy(p) for n, p in model.named_parameters()}
    model.zero_grad()
    plan = {r"fc1": ttml.distributed.ColwiseParallel(), r"fc\d": ttml.distributed.RowwiseParallel()}
    with pytest.warns(DeprecationWarning, match=r"parallelize_module is deprecated; use ttnn\.nn\.parallel"):
        run = ttml.distributed.parallelize_module(model, mesh, plan, tp_axis=1)
    assert isinstance(model.fc1, ttml.modules.ColumnParallelLinear) and isinstance(
        model.fc1.layer, ttnn.nn.parallel.ColumnParallelLinear
    )
    assert (
        isinstance(model.fc2.layer, ttnn.nn.parallel.RowParallelLinear) and model.fc2.layer.input_is_parallel
    )
    assert run.fc1 is model.fc1  # attributes go to the model
    composer = ttnn.ConcatMeshToTensor(mesh, dim=-1)
    assert list(model.fc1.layer.weight.shape) == [8, 8]  # half of [8, 16] per device
    np.testing.assert_allclose(
        ttnn.to_numpy(model.fc1.layer.weight, mesh_composer=composer), weights["fc1.layer.weight"]
    )
    assert grads() == pytest.approx(dense_loss, rel=1e-6)
    gathered = {
        "fc1.layer.weight": ttnn.to_numpy(model.fc1.layer.weight.grad, mesh_composer=composer),
        "fc2.layer.weight": ttnn.to_numpy(
            model.fc2.layer.weight.grad, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)
        ),
        "scale": ttnn.to_numpy(
            model.scale.tensor.get_value().grad, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0)
        )[:1],
    }
    for name, grad in gathered.items():
        np.testing.assert_allclose(grad, dense[name], rtol=1e-4, atol=1e-6, err_msg=name)
    with pytest.raises(ValueError, match=r"plan: patterns \['nope'\] match no LinearLayer"):
        ttml.distributed.parallelize_module(
            _TinyMLP.make(ttml), mesh, {"nope": ttml.distributed.ColwiseParallel()}, 1
        )
    with pytest.raises(
        ValueError,
        match=r"tp_axis: expected the index of a mesh axis with several devices on the 1x2 mesh, got 0",
    ):
        ttml.distributed.parallelize_module(_TinyMLP.make(ttml), mesh, {}, tp_axis=0)
    with pytest.raises(
        TypeError, match=r"plan\['fc1'\]: expected ColwiseParallel\(\) or RowwiseParallel\(\), got 'col'"
    ):
        ttml.distributed.parallelize_module(_TinyMLP.make(ttml), mesh, {"fc1": "col"}, 1)
    with pytest.raises(TypeError, match=r"module: expected a ttml\.modules\.AbstractModuleBase, got Linear"):
        ttml.distributed.parallelize_module(ttnn.nn.Linear(2, 2, device=mesh), mesh, {}, 1)
    with pytest.raises(
        TypeError, match=r"plan\['fc1\.layer'\]: matches 'fc1\.layer', a ColumnParallelLinear; expected"
    ):
        ttml.distributed.parallelize_module(model, mesh, {"fc1.layer": ttml.distributed.RowwiseParallel()}, 1)


def test_tp_layers_built_directly(ttml):
    ctx = ttml.autograd.AutoContext.get_instance()
    ctx.open_device((1, 2))
    col = ttml.modules.ColumnParallelLinear(8, 4, gather_output=True)
    row = ttml.modules.RowParallelLinear(4, 8, has_bias=False)
    assert list(col.layer.weight.shape) == [8, 2] and list(row.layer.weight.shape) == [2, 8]
    x = np.random.default_rng(2).random((2, 8), np.float32)
    # training needs TensorParallel's gradient reduction (parallelize_module adds it): forward only here
    with ttml.common.utils.no_grad():
        y = row(col(_f32(ttml, x)))
    composer = ttnn.ConcatMeshToTensor(ctx.get_device(), dim=0)
    w_col = ttnn.to_numpy(col.layer.weight, mesh_composer=ttnn.ConcatMeshToTensor(ctx.get_device(), dim=-1))
    want = (
        x @ w_col
        + ttnn.to_numpy(col.layer.bias, mesh_composer=ttnn.ConcatMeshToTensor(ctx.get_device(), dim=-1))
    ) @ ttnn.to_numpy(row.layer.weight, mesh_composer=composer)
    np.testing.assert_allclose(
        ttnn.to_numpy(y.get_value(), mesh_composer=composer)[:2], want, rtol=1e-5, atol=1e-5
    )
    ctx.close_device()
    ctx.open_device((2, 2))
    with pytest.raises(
        ValueError, match=r"axis_name: the 2x2 mesh has no single axis with several devices for 'tp'"
    ):
        ttml.modules.ColumnParallelLinear(8, 4)
    assert ttml.modules.RowParallelLinear(4, 8, cluster_axis=0).layer.tp_size == 2


def test_common_utils_and_config(ttml, tmp_path):
    cfg_file = tmp_path / "train.yaml"
    cfg_file.write_text(
        "training_config:\n  batch_size: 4\n  max_steps: 9\n  learning_rate: 0.5\n  weight_decay: 0.0\n"
        "  transformer_config:\n    num_heads: 2\n    max_sequence_length: 32\n"
        "device_config:\n  mesh_shape: [1, 2]\nscheduler_config:\n  warmup_steps: 3\n"
    )
    yaml_config = ttml.common.config.get_config(str(cfg_file))
    training = ttml.common.config.TrainingConfig(yaml_config)
    assert (training.batch_size, training.steps, training.epochs, training.seq_len) == (4, 9, 1, 32)
    assert training.transformer_config.num_heads == 2 and training.transformer_config.embedding_dim == 384
    training.update_config(
        {"training_config": {"batch_size": 8, "transformer_config": {"max_sequence_length": 64}}}
    )
    assert (training.batch_size, training.steps, training.seq_len) == (8, 9, 64)
    sched = ttml.common.config.SchedulerConfig(yaml_config)
    assert (sched.warmup_steps, sched.max_lr, sched.total_steps) == (3, 0.001, 1000)
    assert ttml.common.config.DeviceConfig(yaml_config).total_devices() == 2
    with pytest.raises(
        ValueError, match=r"TrainingConfig: training_config\.batch_size: expected a int, got 'many'"
    ):
        ttml.common.config.TrainingConfig({"training_config": {"batch_size": "many"}})
    with pytest.raises(FileNotFoundError, match=r"get_config: path: expected a YAML file, got 'nope\.yaml'"):
        ttml.common.config.get_config("nope.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ValueError, match=r"get_config: .*list\.yaml: expected a YAML mapping, got list"):
        ttml.common.config.get_config(tmp_path / "list.yaml")
    with pytest.raises(TypeError, match=r"DeviceConfig: yaml_config: expected a dict, got list"):
        ttml.common.config.DeviceConfig([])

    utils = ttml.common.utils
    utils.initialize_device(yaml_config)
    mesh = ttml.autograd.AutoContext.get_instance().get_device()
    assert mesh.get_num_devices() == 2
    assert [utils.round_up_to_tile(v) for v in (1, 32, 33)] == [32, 32, 64]
    with pytest.raises(ValueError, match=r"round_up_to_tile: tile: expected an integer >= 1, got 0"):
        utils.round_up_to_tile(3, 0)
    utils.set_seed(5)
    first = ttnn.nn.Linear(2, 2, device=mesh)
    utils.set_seed(5)
    np.testing.assert_array_equal(
        ttnn.to_numpy(ttnn.nn.Linear(2, 2, device=mesh).weight), ttnn.to_numpy(first.weight)
    )
    model = _TinyMLP.make(ttml)
    opt = utils.create_optimizer(model, yaml_config)
    assert isinstance(opt, ttnn.optim.AdamW) and opt.get_lr() == 0.5
    per_device = ttnn.from_numpy(
        np.array([[1.0], [3.0]], np.float32), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)
    )
    assert utils.get_loss_over_devices(ttml.autograd.Tensor(per_device)) == 2.0
    with utils.no_grad():
        assert not ttnn.autograd.is_grad_enabled()
    assert ttnn.autograd.is_grad_enabled()
    assert utils.no_grad()(ttnn.autograd.is_grad_enabled)() is False
    with pytest.raises(
        ValueError,
        match=r"build_logits_mask: vocab_size: expected 0 < vocab_size <= padded_vocab_size \(32\), got 40",
    ):
        utils.build_logits_mask(40, 32)
    meter = utils.PerformanceMeter(training, window_size=3)
    assert meter.get_metrics() == (0, 0)  # no step yet
    for _ in range(5):
        meter.step()
    samples, tokens = meter.get_metrics()
    assert len(meter.steps) == 3 and samples > 0 and tokens == pytest.approx(samples * 64)
    assert utils.get_tt_metal_home()
