"""ttnn.nn: modules against torch with the same weights (forward and gradients), module bookkeeping,
dropout, gradient checkpointing, state dicts, clip_grad_norm_ on meshes, NanoGPT training, the memory tracker.

Tolerances: float32 modules match torch float32 to ~1e-4 relative (the emulator computes in float32 with
HiFi4 matmuls; differences are summation order); bfloat16 modules are checked by PCC > 0.99.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.ttnn import ValidationError
from tttv2.ttnn.memory_tracker import MemoryTracker

nn = ttnn.nn
F32, BF16 = ttnn.float32, ttnn.bfloat16
TILE = ttnn.TILE_LAYOUT
RNG = np.random.default_rng(7)


@pytest.fixture
def mesh(open_mesh):
    m = open_mesh((1, 1))
    ttnn.SetDefaultDevice(m)
    nn.manual_seed(0)
    return m


def rand(*shape, scale=1.0):
    return (scale * RNG.standard_normal(shape)).astype(np.float32)


def dev(mesh, array, dtype=F32, grad=False):
    t = ttnn.from_numpy(np.asarray(array, np.float32), dtype=dtype, layout=TILE, device=mesh)
    t.requires_grad = grad
    return t


def ids_tensor(mesh, ids):
    return ttnn.from_numpy(np.asarray(ids, np.uint32), dtype=ttnn.uint32, device=mesh)


def host(t) -> np.ndarray:
    return ttnn.to_numpy(t).astype(np.float64)


def torch_params(module) -> dict[str, torch.Tensor]:
    return {
        n: torch.tensor(host(p), dtype=torch.float32, requires_grad=True)
        for n, p in module.named_parameters()
    }


def compare(module, torch_fn, x_np, *, rtol=2e-4, atol=2e-5, ids=False, call=None, bf16_grads=()):
    """Forward and backward of ``module`` vs ``torch_fn(params, x)`` on the same weights; returns the outputs.

    Parameters in ``bf16_grads`` get a bfloat16 gradient (a float32 embedding table is looked up through a
    bfloat16 copy, whose gradient is bfloat16): checked to 2 % of the largest gradient."""
    mesh = ttnn.GetDefaultDevice()
    tp = torch_params(module)
    if ids:
        x_tt, x_t = ids_tensor(mesh, x_np), torch.tensor(x_np.astype(np.int64))
    else:
        x_tt, x_t = dev(mesh, x_np, grad=True), torch.tensor(x_np, requires_grad=True)
    out = (call or module)(x_tt)
    ref = torch_fn(tp, x_t)
    np.testing.assert_allclose(host(out), ref.detach().numpy(), rtol=rtol, atol=atol)
    weights = rand(*ref.shape)
    ttnn.sum(ttnn.multiply(out, dev(mesh, weights))).backward()
    (ref * torch.tensor(weights)).sum().backward()
    for name, p in module.named_parameters():
        assert p.grad is not None, name
        want = tp[name].grad.numpy()
        if name in bf16_grads:
            np.testing.assert_allclose(
                host(p.grad), want, rtol=2e-2, atol=2e-2 * np.abs(want).max(), err_msg=name
            )
        else:
            np.testing.assert_allclose(host(p.grad), want, rtol=rtol * 5, atol=atol * 5, err_msg=name)
    if not ids:
        np.testing.assert_allclose(host(x_tt.grad), x_t.grad.numpy(), rtol=rtol * 5, atol=atol * 5)
    return out, ref


# --- torch references (weights in this library's layout: linear [in, out], norms [1, 1, 1, C]) --------------------


def t_linear(p, prefix, x):
    y = x @ p[f"{prefix}weight"]
    return y + p[f"{prefix}bias"].reshape(-1) if f"{prefix}bias" in p else y


def t_layer_norm(p, prefix, x, eps=1e-5):
    bias = p.get(f"{prefix}bias")
    return F.layer_norm(
        x, (x.shape[-1],), p[f"{prefix}weight"].reshape(-1), None if bias is None else bias.reshape(-1), eps
    )


def t_rms_norm(p, prefix, x, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * p[f"{prefix}weight"].reshape(-1)


def t_heads(x, n):
    b, _, s, e = x.shape
    return x.reshape(b, s, n, e // n).transpose(1, 2)


def t_merge(x):
    b, h, s, d = x.shape
    return x.transpose(1, 2).reshape(b, 1, s, h * d)


def t_mha(p, prefix, x, heads):
    e = x.shape[-1]
    qkv = t_linear(p, f"{prefix}qkv.", x)
    q, k, v = (t_heads(t, heads) for t in qkv.split(e, dim=-1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return t_linear(p, f"{prefix}out_proj.", t_merge(o))


def t_rope(x, theta=10000.0):
    s, d = x.shape[-2], x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    ang = torch.outer(torch.arange(s, dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], -1).float()
    half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * ang.cos() + half * ang.sin()


def t_gqa(p, prefix, x, heads, kv_heads):
    e = x.shape[-1]
    d = e // heads
    q = t_heads(t_linear(p, f"{prefix}q_proj.", x), heads)
    kv = t_linear(p, f"{prefix}kv_proj.", x)
    k, v = (t_heads(t, kv_heads) for t in kv.split(kv_heads * d, dim=-1))
    q, k = t_rope(q), t_rope(k)
    k = k.repeat_interleave(heads // kv_heads, dim=1)
    v = v.repeat_interleave(heads // kv_heads, dim=1)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return t_linear(p, f"{prefix}out_proj.", t_merge(o))


def t_gpt_block(p, prefix, x, heads):
    x = x + t_mha(p, f"{prefix}attn.", t_layer_norm(p, f"{prefix}ln1.", x), heads)
    h = F.gelu(t_linear(p, f"{prefix}mlp.fc.", t_layer_norm(p, f"{prefix}ln2.", x)), approximate="tanh")
    return x + t_linear(p, f"{prefix}mlp.proj.", h)


def t_swiglu(p, prefix, x):
    return (F.silu(x @ p[f"{prefix}w1"]) * (x @ p[f"{prefix}w3"])) @ p[f"{prefix}w2"]


def t_llama_block(p, prefix, x, heads, kv_heads, eps=1e-5):
    x = x + t_gqa(p, f"{prefix}attn.", t_rms_norm(p, f"{prefix}attention_norm.", x, eps), heads, kv_heads)
    return x + t_swiglu(p, f"{prefix}mlp.", t_rms_norm(p, f"{prefix}mlp_norm.", x, eps))


# --- layers against torch -----------------------------------------------------------------------------------------


def test_linear_matches_torch(mesh):
    lin = nn.Linear(64, 96)
    assert tuple(lin.weight.shape) == (64, 96) and tuple(lin.bias.shape) == (1, 96)
    assert np.abs(host(lin.weight)).max() <= 1 / 8 + 1e-6
    compare(lin, lambda p, x: t_linear(p, "", x), rand(2, 1, 32, 64))
    no_bias = nn.Linear(32, 32, bias=False)
    assert no_bias.bias is None and [n for n, _ in no_bias.named_parameters()] == ["weight"]
    compare(no_bias, lambda p, x: t_linear(p, "", x), rand(1, 1, 32, 32))
    assert repr(no_bias) == "Linear(in_features=32, out_features=32, bias=False)"


def test_norms_match_torch(mesh):
    ln = nn.LayerNorm(64)
    ln.load_state_dict({"weight": rand(1, 1, 1, 64), "bias": rand(1, 1, 1, 64)})
    compare(ln, lambda p, x: t_layer_norm(p, "", x), rand(2, 1, 32, 64))
    ln_nobias = nn.LayerNorm(32, eps=1e-3, bias=False)
    compare(ln_nobias, lambda p, x: t_layer_norm(p, "", x, 1e-3), rand(1, 1, 32, 32))
    rms = nn.RMSNorm(64, eps=1e-5)
    rms.load_state_dict({"weight": rand(1, 1, 1, 64)})
    compare(rms, lambda p, x: t_rms_norm(p, "", x, 1e-5), rand(2, 1, 32, 64))
    assert "eps=1e-05" in repr(rms) and "bias=False" in repr(ln_nobias)


def test_embedding_matches_torch(mesh):
    emb = nn.Embedding(40, 64, dtype=BF16)
    ids = RNG.integers(0, 40, (2, 32))
    ids[0, :4] = 3  # a repeated id accumulates gradient
    compare(emb, lambda p, x: F.embedding(x, p["weight"])[:, None], ids, ids=True, rtol=1e-2, atol=1e-2)
    emb32 = nn.Embedding(40, 64, padding_idx=0)  # float32 table, looked up through a bfloat16 copy
    assert np.all(host(emb32.weight)[0] == 0)
    out = emb32(ids_tensor(mesh, ids[:, None, None, :]))
    assert tuple(out.shape) == (2, 1, 32, 64) and out.dtype is F32
    w = host(emb32.weight)
    np.testing.assert_allclose(host(out)[:, 0], w[ids], rtol=1e-2, atol=1e-2)
    ttnn.sum(out).backward()
    counts = np.bincount(ids.reshape(-1), minlength=40).astype(np.float64)
    counts[0] = 0.0
    np.testing.assert_allclose(host(emb32.weight.grad), np.repeat(counts[:, None], 64, axis=1))
    out1 = nn.Embedding(10, 32)(ids_tensor(mesh, np.arange(8)))
    assert tuple(out1.shape) == (1, 1, 8, 32)
    with pytest.raises(ValidationError, match="uint32 ids"):
        emb(np.zeros((1, 4)))
    with pytest.raises(ValidationError, match="padding_idx"):
        nn.Embedding(4, 32, padding_idx=9)


def test_attention_matches_torch(mesh):
    mha = nn.MultiHeadAttention(64, 2)
    compare(mha, lambda p, x: t_mha(p, "", x, 2), rand(2, 1, 32, 64))
    rope = nn.RotaryEmbedding(64, 64)
    gqa = nn.GroupedQueryAttention(256, 4, 2, rope=rope)
    assert [n for n, _ in gqa.named_parameters()] == ["q_proj.weight", "kv_proj.weight", "out_proj.weight"]
    compare(gqa, lambda p, x: t_gqa(p, "", x, 4, 2), rand(1, 1, 32, 256), rtol=1e-3, atol=1e-4)
    assert "num_kv_heads=2" in repr(gqa) and "max_seq_len=64" in repr(rope)


def test_attention_mask_replaces_causal(mesh):
    mha = nn.MultiHeadAttention(64, 2, causal=False)
    x = rand(1, 1, 32, 64)
    causal = np.triu(np.full((32, 32), -1e9, np.float32), 1)[None, None]
    with_mask = mha(dev(mesh, x), dev(mesh, causal))
    mha.causal = True
    np.testing.assert_allclose(host(with_mask), host(mha(dev(mesh, x))), rtol=1e-5, atol=1e-6)


def test_blocks_match_torch(mesh):
    block = nn.GPTBlock(64, 2)
    compare(block, lambda p, x: t_gpt_block(p, "", x, 2), rand(2, 1, 32, 64), rtol=5e-4, atol=5e-5)
    rope = nn.RotaryEmbedding(64, 32)
    llama = nn.LlamaBlock(128, 2, 1, hidden_dim=96, rope=rope)
    assert llama.mlp.hidden_dim == 96
    compare(llama, lambda p, x: t_llama_block(p, "", x, 2, 1), rand(1, 1, 32, 128), rtol=1e-3, atol=1e-4)
    assert nn.llama_hidden_dim(256) == 768 and nn.LlamaMLP(64).hidden_dim == 256


def test_gelu_exact_option(mesh):
    mlp = nn.GPTMLP(32, approximate_gelu=False, hidden_dim=64)

    def ref(p, x):
        return t_linear(p, "proj.", F.gelu(t_linear(p, "fc.", x)))

    compare(mlp, ref, rand(1, 1, 32, 32), rtol=1e-3, atol=1e-4)


def t_embedding(w, ids):
    """A float32 table is looked up through a bfloat16 copy (the gradient passes straight through)."""
    return F.embedding(ids, w + (w.bfloat16().float() - w).detach())[:, None]


def _gpt_ref(config, p, ids):
    s = ids.shape[1]
    x = t_embedding(p["embed.weight"], ids) + p["pos_embed"][:, :, :s]
    for i in range(config.n_layer):
        x = t_gpt_block(p, f"blocks.{i}.", x, config.n_head)
    x = t_layer_norm(p, "ln_f.", x)
    return x @ p["embed.weight"].T if config.weight_tying else x @ p["lm_head.weight"]


@pytest.mark.parametrize("tying", [False, True])
def test_gpt_matches_torch(mesh, tying):
    config = nn.GPTConfig(
        vocab_size=48, block_size=64, n_layer=2, n_head=2, n_embd=64, dropout=0.0, weight_tying=tying
    )
    model = nn.GPT(config)
    names = [n for n, _ in model.named_parameters()]
    assert names[:2] == ["pos_embed", "embed.weight"] and ("lm_head.weight" in names) != tying
    ids = RNG.integers(0, 48, (2, 32))  # shorter than block_size: the position table is sliced
    compare(
        model,
        lambda p, x: _gpt_ref(config, p, x),
        ids,
        ids=True,
        rtol=1e-3,
        atol=1e-4,
        bf16_grads=("embed.weight",),
    )


def test_llama_matches_torch(mesh):
    config = nn.LlamaConfig(
        vocab_size=40, max_seq_len=32, n_layer=1, n_head=2, n_kv_head=1, dim=128, hidden_dim=64
    )
    model = nn.Llama(config)
    assert "rope.cos" not in model.state_dict()  # tables are not persistent state

    def ref(p, ids):
        x = t_embedding(p["embed.weight"], ids)
        x = t_llama_block(p, "blocks.0.", x, 2, 1)
        return t_rms_norm(p, "norm.", x, 1e-5) @ p["lm_head.weight"]

    compare(
        model, ref, RNG.integers(0, 40, (1, 32)), ids=True, rtol=1e-3, atol=1e-4, bf16_grads=("embed.weight",)
    )
    tied = nn.Llama(
        nn.LlamaConfig(
            vocab_size=40, max_seq_len=32, n_layer=1, n_head=2, n_kv_head=2, dim=128, weight_tying=True
        )
    )
    logits = tied(RNG.integers(0, 40, (1, 32)))
    assert tuple(logits.shape) == (1, 1, 32, 40)
    with pytest.raises(ValidationError, match="max_seq_len"):
        model(np.zeros((1, 64), np.int64))
    with pytest.raises(ValidationError, match="exceeds max_seq_len"):
        model.rope(dev(mesh, rand(1, 2, 64, 64)))


def test_bfloat16_gpt_tracks_float32(mesh):
    config = nn.GPTConfig(vocab_size=32, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.0)
    nn.manual_seed(1)
    m32 = nn.GPT(config)
    nn.manual_seed(1)
    m16 = nn.GPT(config, dtype=BF16)
    m16.load_state_dict(m32.state_dict())
    ids = RNG.integers(0, 32, (2, 32))
    out32, out16 = m32(ids), m16(ids)
    assert out16.dtype is BF16
    assert_pcc(ttnn.to_torch(out32).float(), ttnn.to_torch(out16).float(), 0.99)


# --- module bookkeeping ---------------------------------------------------------------------------------------------


class Tiny(nn.Module):
    def __init__(self, mesh):
        super().__init__()
        self.a = nn.Linear(32, 32, device=mesh)
        self.b = nn.Linear(32, 32, device=mesh)
        self.b.weight = self.a.weight  # tied
        self.scale = nn.Parameter(dev(mesh, np.ones((1, 32))))
        self.register_buffer("table", dev(mesh, np.arange(32.0).reshape(1, 32)))
        self.register_buffer("scratch", dev(mesh, np.zeros((1, 32))), persistent=False)
        self.plain = 3

    def forward(self, x):
        return ttnn.multiply(self.b(self.a(x)), self.scale)


def test_module_registration(mesh):
    m = Tiny(mesh)
    assert [n for n, _ in m.named_parameters()] == ["scale", "a.weight", "a.bias", "b.bias"]
    assert len(list(m.parameters())) == 4 and m.num_parameters() == 32 + 32 * 32 + 32 + 32
    assert [n for n, _ in m.named_buffers()] == ["table", "scratch"] and len(list(m.buffers())) == 2
    assert list(m.state_dict()) == ["scale", "table", "a.weight", "a.bias", "b.weight", "b.bias"]
    assert [n for n, _ in m.named_children()] == ["a", "b"] and len(list(m.children())) == 2
    assert [n for n, _ in m.named_modules()] == ["", "a", "b"]
    assert m.get_submodule("a") is m.a and m.get_submodule("") is m
    with pytest.raises(ValidationError, match="no sub-module"):
        m.get_submodule("a.zz")
    assert m.plain == 3 and isinstance(m.scale, nn.Parameter) and m.scale.requires_grad
    assert "Parameter(Tensor(shape=[1, 32]" in repr(m.scale)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        _ = m.missing
    # gradients reach the tied weight along both paths
    ttnn.sum(m(dev(mesh, rand(1, 1, 32, 32)))).backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert np.all(host(m.a.weight.grad) == 0)
    m.zero_grad()
    assert m.a.weight.grad is None
    m.eval()
    assert not m.training and not m.a.training
    m.train()
    assert m.b.training
    m.requires_grad_(False)
    assert not m.a.weight.requires_grad
    seen = []
    m.apply(lambda mod: seen.append(type(mod).__name__))
    assert seen == ["Tiny", "Linear", "Linear"]
    # reassignments and deletions
    m.a.bias = None
    assert "a.bias" not in dict(m.named_parameters())
    with pytest.raises(ValidationError, match="is a parameter"):
        m.scale = dev(mesh, np.ones((1, 32)))
    with pytest.raises(ValidationError, match="is a sub-module"):
        m.a = 5
    m.a = None
    assert m.a is None and [n for n, _ in m.named_modules()] == ["", "b"]
    with pytest.raises(ValidationError, match="is a buffer"):
        m.table = 5
    m.table = None
    del m.scratch
    assert not hasattr(m, "scratch")
    m.extra = nn.Linear(8, 8, device=mesh)
    with pytest.raises(ValidationError, match="is a sub-module"):
        m.extra = 7
    del m.plain
    assert not hasattr(m, "plain")
    m.register_parameter("p2", None)
    m.add_module("child", nn.Dropout(0.1))
    assert "(child): Dropout(p=0.1)" in repr(m)
    with pytest.raises(ValidationError, match="register_parameter"):
        m.register_parameter("p3", dev(mesh, np.ones((1, 32))))
    with pytest.raises(ValidationError, match="register_buffer"):
        m.register_buffer("b3", 1.0)
    with pytest.raises(ValidationError, match="add_module"):
        m.add_module("c3", 1.0)


def test_module_needs_init_and_forward(mesh):
    class NoInit(nn.Module):
        def __init__(self):
            self.x = 1

    with pytest.raises(ValidationError, match=r"super\(\).__init__\(\)"):
        NoInit()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(1)


def test_parameter_adopts_tensor(mesh):
    t = dev(mesh, np.ones((1, 32)))
    p = nn.Parameter(t)
    assert p is t and type(t) is nn.Parameter and t.requires_grad
    x = dev(mesh, np.ones((1, 32)), grad=True)
    y = ttnn.multiply(x, 2.0)
    q = nn.Parameter(y, requires_grad=False)  # a non-leaf is detached first
    assert q is not y and q.is_leaf and not q.requires_grad
    with pytest.raises(ValidationError, match=r"expected a ttnn\.Tensor"):
        nn.Parameter(np.ones(3))


def test_sequential_and_module_list(mesh):
    seq = nn.Sequential(nn.Linear(32, 32), nn.Dropout(0.0), nn.Linear(32, 32))
    assert len(seq) == 3 and isinstance(seq[1], nn.Dropout) and len(seq[1:]) == 2
    out = seq(dev(mesh, rand(1, 1, 32, 32)))
    assert tuple(out.shape) == (1, 1, 32, 32)
    ml = nn.ModuleList().extend([nn.Dropout(0.0)])
    assert [n for n, _ in ml.named_children()] == ["0"]


def test_constructor_validation(mesh, open_mesh):
    ttnn.SetDefaultDevice(None)
    with pytest.raises(ValidationError, match="SetDefaultDevice"):
        nn.Linear(4, 4)
    ttnn.SetDefaultDevice(mesh)
    with pytest.raises(ValidationError, match="in_features"):
        nn.Linear(0, 4)
    with pytest.raises(ValidationError, match="dtype"):
        nn.Linear(4, 4, dtype=ttnn.bfloat8_b)
    with pytest.raises(ValidationError, match="probability"):
        nn.Dropout(1.0)
    with pytest.raises(ValidationError, match="divisible by num_heads"):
        nn.MultiHeadAttention(30, 4)
    with pytest.raises(ValidationError, match="divisible by num_heads"):
        nn.GroupedQueryAttention(30, 4, 2)
    with pytest.raises(ValidationError, match="divisible by num_kv_heads"):
        nn.GroupedQueryAttention(64, 4, 3)
    with pytest.raises(ValidationError, match=r"rope\.head_dim"):
        nn.GroupedQueryAttention(64, 2, 2, rope=nn.RotaryEmbedding(64, 32))
    with pytest.raises(ValidationError, match="multiple of 64"):
        nn.RotaryEmbedding(32, 32)
    model = nn.GPT(nn.GPTConfig(vocab_size=16, block_size=32, n_layer=1, n_head=1, n_embd=32))
    with pytest.raises(ValidationError, match="block_size"):
        model(np.zeros((1, 64), np.int64))
    with pytest.raises(ValidationError, match="integer array"):
        model(np.zeros((1, 32), np.float32))
    with pytest.raises(ValidationError, match="expected integers"):
        model.generate(np.zeros(3, np.int64), 1)


# --- dropout and checkpointing --------------------------------------------------------------------------------------


def test_dropout(mesh):
    x = dev(mesh, np.ones((2, 1, 64, 64)), grad=True)
    drop = nn.Dropout(0.25)
    y = host(drop(x))
    zeros = (y == 0).mean()
    assert 0.2 < zeros < 0.3 and np.allclose(y[y != 0], 1 / 0.75)
    a = nn.functional.dropout(x, 0.25, seed=5)
    b = nn.functional.dropout(x, 0.25, seed=5)
    np.testing.assert_array_equal(host(a), host(b))
    ttnn.sum(a).backward()
    np.testing.assert_allclose(host(x.grad), host(a))  # d/dx of mask·x is the mask
    drop.eval()
    assert drop(x) is x and nn.functional.dropout(x, 0.0) is x
    with pytest.raises(ValidationError, match=r"expected a ttnn\.Tensor"):
        nn.functional.dropout(np.ones(3), 0.5)
    for seed in (-1, 1.7, "5", True, 2**32):  # ttnn's seeds are uint32: no silent int(1.7) == 1
        with pytest.raises(ValidationError, match=r"dropout: seed: expected an int in \[0, 4294967296\)"):
            nn.functional.dropout(x, 0.25, seed=seed)
    np.testing.assert_array_equal(host(nn.functional.dropout(x, 0.25, seed=np.uint32(5))), host(a))


def test_dropout_keeps_a_float_dtype_and_refuses_integer_tensors(mesh):
    """ttnn's dropout output has the input's dtype; its kernel handles floats only. Token ids (uint32 ROW_MAJOR,
    as an embedding takes them) or an int32 tensor are refused in one line, never returned as float32."""
    for dtype in (ttnn.bfloat16, ttnn.float32):
        x = ttnn.from_numpy(np.ones((1, 1, 32, 64), np.float32), dtype=dtype, layout=TILE, device=mesh)
        assert nn.functional.dropout(x, 0.5, seed=3).dtype == dtype
    ids = ttnn.from_numpy(np.arange(64, dtype=np.uint32).reshape(1, 64), dtype=ttnn.uint32, device=mesh)
    counts = ttnn.from_numpy(np.ones((1, 1, 32, 32), np.int32), dtype=ttnn.int32, layout=TILE, device=mesh)
    for t, name in ((ids, "UINT32"), (counts, "INT32")):
        with pytest.raises(ValidationError) as info:
            nn.functional.dropout(t, 0.1, seed=1)
        assert str(info.value) == (
            f"ttnn.nn.functional.dropout: x.dtype: expected ttnn.float32 or ttnn.bfloat16, got DataType.{name}"
        )
    assert nn.functional.dropout(counts, 0.1, training=False) is counts  # identity: nothing is computed


@pytest.mark.parametrize("p", [0.1, 0.2, 1 / 3, 0.9])
@pytest.mark.parametrize("shape", [(1, 1), (1, 2)])
def test_dropout_mask_is_the_ops_composition_bit_for_bit(open_mesh, p, shape):
    """The fused mask equals ttnn.multiply(ttnn.ge(rand, p), 1 / (1 - p)) exactly, values, layout and placement
    (an activation shape of a real model, replicated over a mesh, bfloat16 input too)."""
    m = open_mesh(shape)
    rng = np.random.default_rng(11)
    x = ttnn.from_numpy(
        rng.standard_normal((3, 1, 96, 160)).astype(np.float32), dtype=ttnn.bfloat16, layout=TILE, device=m
    )
    uniform = ttnn.rand((3, 1, 96, 160), device=m, dtype=F32, layout=TILE, seed=7)
    reference = ttnn.multiply(ttnn.ge(uniform, p), 1.0 / (1.0 - p))
    fused = nn.layers._dropout_mask(uniform, p)
    for a, b in zip(ttnn.get_device_tensors(reference), ttnn.get_device_tensors(fused)):
        np.testing.assert_array_equal(ttnn.to_numpy(a).view(np.uint32), ttnn.to_numpy(b).view(np.uint32))
    assert (fused.dtype, fused.layout, fused.memory_config()) == (
        reference.dtype,
        reference.layout,
        reference.memory_config(),
    )
    out = nn.functional.dropout(x, p, seed=7)
    np.testing.assert_array_equal(host(out), host(ttnn.multiply(x, reference)))


@pytest.mark.parametrize("workers", [1, 2])
def test_dropout_mask_in_pieces_is_the_ops_composition_bit_for_bit(open_mesh, monkeypatch, workers):
    """The mask computed in pieces on the workers (small pieces here: 45 of 1024 values) has the composition's bits."""
    from tttv2.ttnn import _threads, numerics

    monkeypatch.setattr(_threads, "WORKERS", workers)
    monkeypatch.setattr(numerics, "_ELEMENTWISE_BLOCK", 4096)
    m = open_mesh((1, 2))
    uniform = ttnn.rand((3, 1, 96, 160), device=m, dtype=F32, layout=TILE, seed=5)
    reference = ttnn.multiply(ttnn.ge(uniform, 0.3), 1.0 / (1.0 - 0.3))
    fused = nn.layers._dropout_mask(uniform, 0.3)
    for a, b in zip(ttnn.get_device_tensors(reference), ttnn.get_device_tensors(fused), strict=True):
        np.testing.assert_array_equal(ttnn.to_numpy(a).view(np.uint32), ttnn.to_numpy(b).view(np.uint32))


def test_rng_state_round_trip(mesh):
    state = nn.get_rng_state()
    first = [nn._random.next_seed() for _ in range(3)]
    nn.set_rng_state(state)
    assert [nn._random.next_seed() for _ in range(3)] == first


def _grads(model, ids, targets, seed):
    nn.manual_seed(seed)
    model.zero_grad()
    ttnn.cross_entropy_loss(model(ids), targets).backward()
    return {n: host(p.grad) for n, p in model.named_parameters()}


def test_checkpointing_gives_the_same_gradients_with_dropout(mesh):
    config = nn.GPTConfig(vocab_size=32, block_size=32, n_layer=2, n_head=2, n_embd=64, dropout=0.2)
    model = nn.GPT(config)
    ids = ids_tensor(mesh, RNG.integers(0, 32, (2, 32)))
    targets = ids_tensor(mesh, RNG.integers(0, 32, (2, 32)))
    plain = _grads(model, ids, targets, seed=11)
    config.checkpointing = True
    checkpointed = _grads(model, ids, targets, seed=11)
    other_seed = _grads(model, ids, targets, seed=12)
    for name in plain:
        np.testing.assert_allclose(checkpointed[name], plain[name], rtol=1e-5, atol=1e-7, err_msg=name)
    assert not np.allclose(other_seed["blocks.0.mlp.fc.weight"], plain["blocks.0.mlp.fc.weight"])


def test_checkpoint_function_and_input_gradients(mesh):
    lin = nn.Linear(32, 32)
    x_np = rand(1, 1, 32, 32)
    x1 = dev(mesh, x_np, grad=True)
    ttnn.sum(
        nn.checkpoint(lambda t, s: ttnn.multiply(lin(t), s), x1, 3.0, params=list(lin.parameters()))
    ).backward()
    g_w = host(lin.weight.grad)
    lin.zero_grad()
    x2 = dev(mesh, x_np, grad=True)
    ttnn.sum(ttnn.multiply(lin(x2), 3.0)).backward()
    np.testing.assert_allclose(host(x1.grad), host(x2.grad), rtol=1e-6)
    np.testing.assert_allclose(g_w, host(lin.weight.grad), rtol=1e-6)
    # an input without grad and no parameters: nothing to record
    frozen = nn.checkpoint(lambda t: ttnn.multiply(t, 2.0), dev(mesh, x_np))
    assert frozen.grad_fn is None
    with pytest.raises(ValidationError, match=r"expected a ttnn\.Tensor"):
        nn.checkpoint(lin, x_np)


# --- state dicts --------------------------------------------------------------------------------------------------


def test_state_dict_round_trip(mesh):
    config = nn.GPTConfig(vocab_size=32, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.0)
    model = nn.GPT(config)
    snapshot = model.state_dict()
    before = {k: host(v) for k, v in snapshot.items()}
    ids = RNG.integers(0, 32, (1, 32))
    logits = host(model(ids))
    opt = ttnn.optim.SGD(model.parameters(), lr=0.5)
    ttnn.cross_entropy_loss(model(ids), ids_tensor(mesh, ids)).backward()
    opt.step()
    assert not np.allclose(host(model(ids)), logits)
    assert all(np.array_equal(host(v), before[k]) for k, v in snapshot.items())  # snapshots did not move
    result = model.load_state_dict(snapshot)
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_allclose(host(model(ids)), logits, rtol=1e-6)
    # a fresh model from numpy / torch values
    nn.manual_seed(99)
    other = nn.GPT(config)
    other.load_state_dict({k: ttnn.to_torch(v) for k, v in snapshot.items()})
    np.testing.assert_allclose(host(other(ids)), logits, rtol=1e-6)
    other.load_state_dict({k: ttnn.to_numpy(v) for k, v in snapshot.items()})
    other.load_state_dict({k: ttnn.from_device(v) for k, v in snapshot.items()})  # host tensors
    np.testing.assert_allclose(host(other(ids)), logits, rtol=1e-6)
    partial = {k: v for k, v in snapshot.items() if k != "pos_embed"}
    with pytest.raises(ValidationError, match=r"missing keys \['pos_embed'\]"):
        other.load_state_dict(partial)
    with pytest.raises(ValidationError, match="unexpected keys"):
        other.load_state_dict({**snapshot, "zzz": np.zeros(1)})
    keys = other.load_state_dict({**partial, "zzz": np.zeros(1)}, strict=False)
    assert keys.missing_keys == ["pos_embed"] and keys.unexpected_keys == ["zzz"]
    with pytest.raises(ValidationError, match="expected an array"):
        other.load_state_dict({**snapshot, "pos_embed": np.zeros((2, 2))})
    with pytest.raises(ValidationError, match="expected shape"):
        other.load_state_dict({**snapshot, "pos_embed": snapshot["ln_f.weight"]})


def test_load_torch_state_dict(mesh):
    torch.manual_seed(0)
    ref = torch.nn.Linear(32, 16)
    lin = nn.Linear(32, 16)
    lin.load_torch_state_dict(ref.state_dict())
    x = rand(1, 1, 32, 32)
    np.testing.assert_allclose(
        host(lin(dev(mesh, x))), ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6
    )
    norm = nn.LayerNorm(32)
    norm.load_torch_state_dict({"weight": torch.full((32,), 2.0), "bias": torch.zeros(32)})
    assert np.all(host(norm.weight) == 2.0)
    mlp = nn.LlamaMLP(32, 64)
    w1 = torch.randn(64, 32)
    mlp.load_torch_state_dict({"w1": w1, "w2": torch.randn(32, 64), "w3": torch.randn(64, 32)})
    np.testing.assert_allclose(host(mlp.w1), w1.numpy().T, rtol=1e-6)


def test_assign_across_meshes_and_sharded(open_mesh):
    mesh = open_mesh((1, 2))
    other = open_mesh((1, 1))
    w = np.arange(64.0, dtype=np.float32).reshape(2, 32)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=1)
    p = nn.module.make_parameter(np.zeros((2, 32)), device=mesh, mesh_mapper=mapper)
    assert tuple(p.shape) == (2, 16)
    nn.module.assign_(p, w, "test")
    np.testing.assert_array_equal(ttnn.to_numpy(p, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=1)), w)
    with pytest.raises(ValidationError, match="expected a tensor on"):
        nn.module.assign_(p, ttnn.from_numpy(w, dtype=F32, layout=TILE, device=other), "test")


# --- clip_grad_norm_ --------------------------------------------------------------------------------------------------


def test_clip_grad_norm_matches_torch(mesh):
    lin = nn.Linear(32, 32)
    ref = torch.nn.Linear(32, 32)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(host(lin.weight).T))
        ref.bias.copy_(torch.tensor(host(lin.bias).reshape(-1)))
    x = rand(1, 1, 32, 32, scale=10.0)
    ttnn.sum(lin(dev(mesh, x))).backward()
    ref(torch.tensor(x)).sum().backward()
    total = nn.clip_grad_norm_(lin.parameters(), 1.0)
    ref_total = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
    assert math.isclose(total, float(ref_total), rel_tol=1e-5)
    np.testing.assert_allclose(host(lin.weight.grad), ref.weight.grad.numpy().T, rtol=1e-4, atol=1e-7)
    assert math.isclose(nn.utils.grad_norm(lin.parameters()), 1.0, rel_tol=1e-4)
    # below the limit nothing changes; inf norm; named / dict parameters
    g = host(lin.weight.grad)
    assert nn.clip_grad_norm_(dict(lin.named_parameters()), 100.0) < 100.0
    np.testing.assert_array_equal(host(lin.weight.grad), g)
    inf = nn.clip_grad_norm_(list(lin.named_parameters()), 1e9, norm_type=math.inf)
    assert math.isclose(inf, max(np.abs(host(lin.weight.grad)).max(), np.abs(host(lin.bias.grad)).max()))
    assert nn.clip_grad_norm_(lin.weight, 1e9) > 0
    lin.weight.grad = ttnn.multiply(lin.weight.grad, math.inf)
    with pytest.raises(ValidationError, match="error_if_nonfinite"):
        nn.clip_grad_norm_(lin.parameters(), 1.0, error_if_nonfinite=True)
    with pytest.raises(ValidationError, match="norm_type"):
        nn.clip_grad_norm_(lin.parameters(), 1.0, norm_type=-1)
    with pytest.raises(ValidationError, match="expected ttnn tensors"):
        nn.clip_grad_norm_([1.0], 1.0)


@pytest.mark.parametrize("shape", [(1, 2), (2, 2)])
def test_clip_grad_norm_counts_replicas_once_and_shards_in_full(open_mesh, shape):
    mesh = open_mesh(shape)
    full = rand(4, 64)
    replicated = nn.module.make_parameter(full, device=mesh)
    sharded = nn.module.make_parameter(full, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1))
    replicated.grad = ttnn.from_numpy(full, dtype=F32, layout=TILE, device=mesh)
    sharded.grad = ttnn.from_numpy(
        full, dtype=F32, layout=TILE, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1)
    )
    expected = float(np.linalg.norm(full.astype(np.float64)))
    assert math.isclose(nn.utils.grad_norm([replicated]), expected, rel_tol=1e-6)
    assert math.isclose(nn.utils.grad_norm([sharded]), expected, rel_tol=1e-6)
    total = nn.clip_grad_norm_([replicated, sharded], 1.0)
    assert math.isclose(total, expected * math.sqrt(2), rel_tol=1e-6)
    assert math.isclose(nn.utils.grad_norm([replicated, sharded]), 1.0, rel_tol=1e-5)


def test_item(mesh):
    assert nn.utils.item(dev(mesh, np.full((1, 1), 2.5))) == 2.5
    with pytest.raises(ValidationError, match="one-element"):
        nn.utils.item(dev(mesh, np.ones((2, 2))))
    with pytest.raises(ValidationError, match=r"expected a ttnn\.Tensor"):
        nn.utils.item(2.5)


# --- training end to end ------------------------------------------------------------------------------------------------


def test_nanogpt_trains_and_generates(mesh):
    """A tiny NanoGPT learns a repeating sequence in 100 steps; greedy generation then continues it."""
    config = nn.GPTConfig(vocab_size=16, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.1)
    model = nn.GPT(config)
    opt = ttnn.optim.AdamW(model.named_parameters(), lr=1e-2, weight_decay=0.0)
    sched = ttnn.optim.WarmupLinearScheduler(opt, warmup_steps=10, total_steps=100, end_factor=0.1)
    data = np.tile(np.arange(16), 8)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(100):
        start = rng.integers(0, len(data) - 33, 4)
        x = np.stack([data[s : s + 32] for s in start])
        y = np.stack([data[s + 1 : s + 33] for s in start])
        loss = ttnn.cross_entropy_loss(model(x), ids_tensor(mesh, y))
        opt.zero_grad()
        loss.backward()
        nn.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(nn.utils.item(loss))
    assert losses[0] > 2.5 and np.mean(losses[-5:]) < 0.3 * losses[0], losses[::10]
    assert model.training
    out = model.generate(np.array([[3, 4, 5]]), 6)
    assert out.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10, 11]] and model.training
    sampled = model.generate(np.array([[3, 4, 5]]), 4, temperature=1.0, seed=1)
    assert sampled.shape == (1, 7)
    long = model.generate(np.arange(40)[None] % 16, 1)  # longer than the context: the last 32 are used
    assert long.shape == (1, 41)


def test_memory_tracker_records_phases(mesh):
    config = nn.GPTConfig(vocab_size=16, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.0)
    model = nn.GPT(config)
    opt = ttnn.optim.AdamW(model.parameters(), lr=1e-3)
    ids = RNG.integers(0, 16, (2, 32))
    tracker = MemoryTracker(mesh)
    tracker.snapshot("model")
    with tracker.phase("forward"):
        loss = ttnn.cross_entropy_loss(model(ids), ids_tensor(mesh, ids))
    with tracker.phase("backward"):
        loss.backward()
    with tracker.phase("optimizer"):
        opt.step()
    assert tracker.phases() == ["model", "forward", "backward", "optimizer"]
    rows = {r["phase"]: r for r in tracker.summary()}
    assert rows["forward"]["dram_delta_mb"] > 0  # activations kept for backward
    assert rows["forward"]["dram_peak_mb"] >= rows["forward"]["dram_used_mb"]
    assert rows["optimizer"]["dram_delta_mb"] > 0  # AdamW state appears on the first step
    assert rows["model"]["dram_peak_mb"] == rows["model"]["dram_used_mb"]
    from rich.console import Console

    console = Console(record=True, width=140)
    tracker.print(console)
    text = console.export_text()
    assert "Device memory by phase" in text and "backward" in text
    with pytest.raises(ValidationError, match="still open"):
        tracker.begin("a")
        tracker.begin("b")
    tracker.end()
    with pytest.raises(ValidationError, match="no phase is open"):
        tracker.end()
    tracker.reset()
    assert tracker.snapshots == []
    with pytest.raises(ValidationError, match="MeshDevice"):
        MemoryTracker("mesh")


@pytest.mark.parametrize("shape", [(1, 2), (2, 2)])
def test_data_parallel_matches_single_device(open_mesh, shape):
    """Batch split over the mesh + all_reduce_gradients_ = the single-device full-batch step."""
    config = nn.GPTConfig(vocab_size=16, block_size=32, n_layer=1, n_head=2, n_embd=64, dropout=0.0)
    ids = (np.arange(4 * 32).reshape(4, 32) * 7) % 16
    results = []
    for mesh_shape in ((1, 1), shape):
        mesh = open_mesh(mesh_shape)
        nn.manual_seed(0)
        model = nn.GPT(config, device=mesh)
        opt = ttnn.optim.SGD(model.parameters(), lr=0.5)
        mapper = ttnn.ShardTensorToMesh(mesh, dim=0) if mesh.get_num_devices() > 1 else None
        x = ttnn.from_numpy(ids.astype(np.uint32), dtype=ttnn.uint32, device=mesh, mesh_mapper=mapper)
        ttnn.cross_entropy_loss(model(x), x).backward()
        nn.utils.all_reduce_gradients_(model.parameters())
        opt.step()
        results.append([host(t) for t in ttnn.get_device_tensors(model.blocks[0].mlp.fc.weight)])
    for replica in results[1]:
        np.testing.assert_allclose(replica, results[0][0], rtol=1e-5, atol=1e-7)


def test_all_reduce_gradients_options(open_mesh):
    mesh = open_mesh((2, 2))
    p = nn.module.make_parameter(np.zeros((1, 32)), device=mesh)
    q = nn.module.make_parameter(np.zeros((1, 32)), device=mesh)  # no gradient: skipped
    p.grad = ttnn.from_numpy(np.ones((1, 32), np.float32), dtype=F32, layout=TILE, device=mesh)
    nn.utils.all_reduce_gradients_([p, q], average=False, cluster_axis=1)
    assert np.all(host(p.grad) == 2.0) and q.grad is None
    single = open_mesh((1, 1))
    r = nn.module.make_parameter(np.zeros((1, 32)), device=single)
    r.grad = ttnn.from_numpy(np.ones((1, 32), np.float32), dtype=F32, layout=TILE, device=single)
    nn.utils.all_reduce_gradients_([r])
    assert np.all(host(r.grad) == 1.0)


def test_reprs_and_traversal_details(mesh):
    assert "embed_dim=64, num_heads=2" in repr(nn.MultiHeadAttention(64, 2))
    assert repr(nn.LlamaMLP(32, 64)) == "LlamaMLP(embed_dim=32, hidden_dim=64\n  (dropout): Dropout(p=0.0)\n)"
    assert repr(nn.Embedding(10, 32)) == "Embedding(10, 32)"
    shared = nn.Linear(8, 8)
    twice = nn.ModuleList([shared, shared])
    assert [n for n, _ in twice.named_modules()] == ["", "0"]  # a module reached twice is visited once
    assert twice.num_parameters() == 8 * 8 + 8
    sharded = nn.module.make_parameter(np.zeros((4, 64)), device=mesh)
    holder = nn.Module()
    holder.w = sharded
    assert holder.num_parameters() == 256
    lin = nn.Linear(8, 8)
    keys = lin.load_torch_state_dict({"weight": torch.zeros(8, 8), "extra": torch.zeros(1)}, strict=False)
    assert keys.unexpected_keys == ["extra"] and keys.missing_keys == ["bias"]
    lin2 = nn.Linear(32, 32)
    ttnn.sum(lin2(dev(mesh, rand(1, 1, 32, 32)))).backward()
    lin2.bias.grad = None  # a parameter without gradient is skipped by clipping
    assert nn.clip_grad_norm_(lin2.parameters(), 1e-3) > 0 and lin2.bias.grad is None


def test_sharded_parameter_count(open_mesh):
    mesh = open_mesh((1, 2))
    holder = nn.Module()
    holder.w = nn.module.make_parameter(
        np.zeros((4, 64)), device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=1)
    )
    assert tuple(holder.w.shape) == (4, 32) and holder.num_parameters() == 256
