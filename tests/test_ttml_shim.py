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
