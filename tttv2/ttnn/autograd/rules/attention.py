"""Backward rules of the attention ops: head split/merge (the inverse data movement), rotary embeddings and
prefill scaled dot-product attention.

* ``nlp_create_qkv_heads`` (+ decode) / ``nlp_concat_heads`` (+ decode): the gradient is moved back to where
  each element came from (heads that got no gradient contribute zeros; padding rows get none).
* rotary (Llama, adjacent pairs): ``y = x·cos + (x·T)·sin`` per 32-wide tile, so ``dx = dy·cos + (dy·sin)·Tᵀ``
  — with the standard pair-swap matrix ``Tᵀ = −T``, a rotation by −θ; ``dcos = dy·x`` and ``dsin = dy·(x·T)``
  summed over what they were broadcast along; ``dT = Σ tiles of xᵀ·(dy·sin)``.
* rotary (HF rotate-half): ``dx = dy·cos + R ᵀ(dy·sin)`` with ``Rᵀ[u₁, u₂] = [u₂, −u₁]``.
* SDPA (non-fused, P recomputed in float32 per KV group): ``dV = Pᵀ·dO``, ``dP = dO·Vᵀ``,
  ``dS = P ⊙ (dP − rowsum(dO ⊙ O))``, ``dQ = scale·dS·K``, ``dK = scale·dSᵀ·Q``; K and V gradients are summed over
  the query heads of their group (GQA); an additive ``attn_mask`` gets ``dS`` summed over its broadcast dims.

The decode, chunked and paged SDPA forms read KV caches for inference and have no backward (the engine raises
if a tensor that requires grad reaches them).
"""

from __future__ import annotations

import numpy as np

from ..._remote import local_shards
from ...ops.sdpa import _allowed, _scale
from ...types import TILE_SIZE
from ..engine import register_backward
from ._util import arrays, grad_like, per_device, unbroadcast

# --- heads -------------------------------------------------------------------------------------------------


def _zeros_if_none(grads, n: int, shapes) -> list[list[np.ndarray]]:
    out = []
    for g, shape in zip(grads, shapes):
        out.append([np.zeros(shape, dtype=np.float32)] * n if g is None else arrays(g))
    return out


@register_backward("ttnn.experimental.nlp_create_qkv_heads")
def nlp_create_qkv_heads_backward(ctx, grads):
    x, kv = ctx.args["input"], ctx.args["input_kv"]
    nq = ctx.args["num_heads"]
    nkv = nq if ctx.args["num_kv_heads"] is None else ctx.args["num_kv_heads"]
    transpose_k = ctx.args["transpose_k_heads"]
    sharded = x.is_sharded()
    group = nq // nkv
    q_out, k_out, v_out = ctx.output
    gq, gk, gv = _zeros_if_none(grads, len(x.shards()), (q_out.shape, k_out.shape, v_out.shape))

    def one(q, k, v):
        b, _, s, hd = q.shape
        q = q.transpose(0, 2, 1, 3)  # [b, s, nq, hd]
        k = k.transpose(0, 3, 1, 2) if transpose_k else k.transpose(0, 2, 1, 3)
        v = v.transpose(0, 2, 1, 3)
        if kv is not None:
            if sharded:
                pair = np.stack([k, v], axis=3)  # [b, s, nkv, 2, hd]
                kv_grad = pair.reshape(b, 1, s, 2 * nkv * hd)
            else:
                kv_grad = np.concatenate([k.reshape(b, s, nkv * hd), v.reshape(b, s, nkv * hd)], axis=-1)
                kv_grad = kv_grad.reshape(b, 1, s, 2 * nkv * hd)
            return q.reshape(b, 1, s, nq * hd), kv_grad
        if sharded:
            grouped = np.concatenate(
                [q.reshape(b, s, nkv, group, hd), k[:, :, :, None], v[:, :, :, None]], axis=3
            )
            return grouped.reshape(b, 1, s, -1), None
        out = np.empty((b, 1, s, (nq + 2 * nkv) * hd), dtype=np.float32)  # owned: stored without a copy
        np.concatenate([q, k, v], axis=2, out=out.reshape(b, s, nq + 2 * nkv, hd))
        return out, None

    results = per_device(one, gq, gk, gv)
    out = {}
    if ctx.needs_grad("input") and (kv is None or grads[0] is not None):
        out["input"] = grad_like(ctx, x, [r[0] for r in results])
    if kv is not None and ctx.needs_grad("input_kv") and (grads[1] is not None or grads[2] is not None):
        out["input_kv"] = grad_like(ctx, kv, [r[1] for r in results])
    return out


@register_backward("ttnn.experimental.nlp_create_qkv_heads_decode")
def nlp_create_qkv_heads_decode_backward(ctx, grads):
    x = ctx.args["input_tensor"]
    q_out, k_out, v_out = ctx.output
    users = q_out.shape[1]
    offset = 0
    batch_offset = ctx.args["batch_offset"]
    if x.is_sharded() and batch_offset is not None:
        offset = int(local_shards(batch_offset, "backward")[0].reshape(-1)[0])
    shape = tuple(x.shape)
    gq, gk, gv = _zeros_if_none(grads, len(x.shards()), (q_out.shape, k_out.shape, v_out.shape))

    def one(q, k, v):
        full = np.zeros(shape, dtype=np.float32)
        full[0, 0, offset : offset + users] = np.concatenate([q[0], k[0], v[0]], axis=1).reshape(users, -1)
        return full

    return {"input_tensor": grad_like(ctx, x, per_device(one, gq, gk, gv))}


@register_backward("ttnn.experimental.nlp_concat_heads")
def nlp_concat_heads_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    b, nh, s, hd = x.shape
    return {
        "input_tensor": grad_like(
            ctx, x, per_device(lambda g: g.reshape(b, s, nh, hd).transpose(0, 2, 1, 3), arrays(grad))
        )
    }


@register_backward("ttnn.experimental.nlp_concat_heads_decode")
def nlp_concat_heads_decode_backward(ctx, grad):
    x = ctx.args["input_tensor"]
    nh = ctx.args["num_heads"]
    shape = tuple(x.shape)
    users, hd = shape[1], shape[3]

    def one(g):
        full = np.zeros(shape, dtype=np.float32)
        full[0, :, :nh, :] = g[0, 0, :users].reshape(users, nh, hd)
        return full

    return {"input_tensor": grad_like(ctx, x, per_device(one, arrays(grad)))}


# --- rotary embeddings -------------------------------------------------------------------------------------


def _tiles(a: np.ndarray) -> np.ndarray:
    """[..., hd] → [..., hd/32, 32]."""
    return a.reshape(*a.shape[:-1], a.shape[-1] // TILE_SIZE, TILE_SIZE)


def _rope_prefill(g, x, c, s, trans):
    """Gradients of ``x·c + (x·T)·s`` (c, s broadcast against x; one 32×32 T): (dx, dc, ds, dT)."""
    gs = g * s
    xt, gst = _tiles(x), _tiles(gs)
    rotated = np.matmul(xt, trans, dtype=np.float32).reshape(x.shape)
    dx = g * c + np.matmul(gst, trans.T, dtype=np.float32).reshape(x.shape)
    dtrans = np.matmul(xt.reshape(-1, TILE_SIZE).T, gst.reshape(-1, TILE_SIZE), dtype=np.float32)
    return dx, g * x, g * rotated, dtrans


def _rope_users(g, x, c_rows, s_rows, trans_tiles):
    """Decode rotary: x [B, nh, hd]; user b uses c_rows[b], s_rows[b] and the 32×32 tile trans_tiles[b].
    Returns (dx, dc_rows [B, hd], ds_rows [B, hd], dT per user [B, 32, 32])."""
    c, s = c_rows[:, None, :], s_rows[:, None, :]
    gs = g * s
    xt, gst = _tiles(x), _tiles(gs)
    rotated = np.einsum("bhti,bij->bhtj", xt, trans_tiles, dtype=np.float32).reshape(x.shape)
    dx = g * c + np.einsum("bhtj,bij->bhti", gst, trans_tiles, dtype=np.float32).reshape(x.shape)
    dtrans = np.einsum("bhti,bhtj->bij", xt, gst, dtype=np.float32)
    return dx, (g * x).sum(axis=1), (g * rotated).sum(axis=1), dtrans


def _tile_stack(trans: np.ndarray) -> np.ndarray:
    return trans.reshape(-1, TILE_SIZE, TILE_SIZE)


@register_backward("ttnn.experimental.rotary_embedding_llama")
def rotary_embedding_llama_backward(ctx, grad):
    x, cos, sin, trans = (ctx.args[k] for k in ("input_tensor", "cos_cache", "sin_cache", "trans_mat"))
    decode = ctx.args["is_decode_mode"]

    def one(g, xs, cs, ss, ts):
        tiles = _tile_stack(ts)
        if decode:
            users = xs.shape[1]
            which = tiles[np.arange(users) % len(tiles)]
            dx, dc, ds, dt_users = _rope_users(g[0], xs[0], cs[0, :, 0, :], ss[0, :, 0, :], which)
            dcos, dsin = np.zeros(cs.shape, np.float32), np.zeros(ss.shape, np.float32)
            dcos[0, :, 0, :], dsin[0, :, 0, :] = dc, ds
            dtiles = np.zeros(tiles.shape, np.float32)
            np.add.at(dtiles, np.arange(users) % len(tiles), dt_users)
            return dx[None], dcos, dsin, dtiles.reshape(ts.shape)
        seq = xs.shape[2]
        c, s = cs[0, :, :seq][None], ss[0, :, :seq][None]
        dx, dc, ds, dt = _rope_prefill(g, xs, c, s, tiles[0])
        dcos, dsin = np.zeros(cs.shape, np.float32), np.zeros(ss.shape, np.float32)
        dcos[:, :, :seq] = unbroadcast(dc, c.shape)
        dsin[:, :, :seq] = unbroadcast(ds, s.shape)
        dtiles = np.zeros(tiles.shape, np.float32)
        dtiles[0] = dt
        return dx, dcos, dsin, dtiles.reshape(ts.shape)

    results = per_device(one, arrays(grad), arrays(x), arrays(cos), arrays(sin), arrays(trans))
    out = {}
    for index, name in enumerate(("input_tensor", "cos_cache", "sin_cache", "trans_mat")):
        if ctx.needs_grad(name):
            out[name] = grad_like(ctx, ctx.args[name], [r[index] for r in results])
    return out


@register_backward("ttnn.experimental.rotary_embedding_llama_fused_qk")
def rotary_embedding_llama_fused_qk_backward(ctx, grads):
    q, k, cos, sin, trans = (
        ctx.args[name] for name in ("q_input_tensor", "k_input_tensor", "cos_cache", "sin_cache", "trans_mat")
    )
    users = q.shape[1]
    n = len(q.shards())
    gq, gk = _zeros_if_none(grads, n, (q.shape, k.shape))

    def one(g_q, g_k, qs, ks, cs, ss, ts):
        tiles = _tile_stack(ts)
        dcos, dsin = np.zeros(cs.shape, np.float32), np.zeros(ss.shape, np.float32)
        dtiles = np.zeros(tiles.shape, np.float32)
        dxs = []
        for g, xs, base in ((g_q, qs, 0), (g_k, ks, users)):
            rows = base + np.arange(users)
            which = rows % len(tiles)
            dx, dc, ds, dt_users = _rope_users(
                g[0], xs[0], cs[0, rows, 0, :], ss[0, rows, 0, :], tiles[which]
            )
            dcos[0, rows, 0, :] += dc
            dsin[0, rows, 0, :] += ds
            np.add.at(dtiles, which, dt_users)
            dxs.append(dx[None])
        return dxs[0], dxs[1], dcos, dsin, dtiles.reshape(ts.shape)

    results = per_device(one, gq, gk, arrays(q), arrays(k), arrays(cos), arrays(sin), arrays(trans))
    out = {}
    for index, name in enumerate(("q_input_tensor", "k_input_tensor", "cos_cache", "sin_cache", "trans_mat")):
        if ctx.needs_grad(name):
            out[name] = grad_like(ctx, ctx.args[name], [r[index] for r in results])
    return out


@register_backward("ttnn.experimental.rotary_embedding")
def rotary_embedding_backward(ctx, grad):
    x, cos, sin = ctx.args["input_tensor"], ctx.args["cos_cache"], ctx.args["sin_cache"]
    token_index = ctx.args["token_index"]
    half = x.shape[-1] // 2

    def one(g, xs, cs, ss):
        if token_index is not None:
            c, s = cs[0, 0, token_index], ss[0, 0, token_index]
        else:
            c, s = cs[0, 0, : xs.shape[-2]], ss[0, 0, : xs.shape[-2]]
        gs = g * s
        dx = g * c + np.concatenate([gs[..., half:], -gs[..., :half]], axis=-1)
        rotated = np.concatenate([-xs[..., half:], xs[..., :half]], axis=-1)
        dcos, dsin = np.zeros(cs.shape, np.float32), np.zeros(ss.shape, np.float32)
        if token_index is not None:
            dcos[0, 0, token_index] = unbroadcast(g * xs, c.shape)
            dsin[0, 0, token_index] = unbroadcast(g * rotated, s.shape)
        else:
            dcos[0, 0, : xs.shape[-2]] = unbroadcast(g * xs, c.shape)
            dsin[0, 0, : xs.shape[-2]] = unbroadcast(g * rotated, s.shape)
        return dx, dcos, dsin

    results = per_device(one, arrays(grad), arrays(x), arrays(cos), arrays(sin))
    out = {}
    for index, name in enumerate(("input_tensor", "cos_cache", "sin_cache")):
        if ctx.needs_grad(name):
            out[name] = grad_like(ctx, ctx.args[name], [r[index] for r in results])
    return out


# --- scaled dot-product attention ---------------------------------------------------------------------------


def sdpa_user_backward(q, k, v, do, scale, q_pos, causal, window, mask):
    """One user: q [nh, Sq, D], k/v [nkv, Sk, D], do [nh, Sq, D], additive mask [1 or nh, Sq, Sk] or None.
    Returns (dq, dk, dv, dmask [nh, Sq, Sk] or None), all float32."""
    nh, sq, _ = q.shape
    nkv, sk, _ = k.shape
    group = nh // nkv
    scale = np.float32(scale)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    dmask = None if mask is None else np.zeros((nh, sq, sk), dtype=np.float32)
    ok = _allowed(q_pos, sk, causal, window)
    for g in range(nkv):
        heads = slice(g * group, (g + 1) * group)
        scores = np.matmul(q[heads], k[g].T, dtype=np.float32) * scale
        if mask is not None:
            scores = scores + (mask[heads] if mask.shape[0] == nh else mask)
        if ok is not None:
            live = ok.any(axis=-1)
            scores = np.where(ok[None], scores, np.float32(-np.inf))
            scores[:, ~live] = 0.0
        e = np.exp(scores - scores.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True, dtype=np.float32)
        if ok is not None:
            p[:, ~live] = 0.0
        o = np.matmul(p, v[g], dtype=np.float32)
        d_o = do[heads]
        dv[g] = np.matmul(p.transpose(0, 2, 1), d_o, dtype=np.float32).sum(axis=0)
        dp = np.matmul(d_o, v[g].T, dtype=np.float32)
        ds = p * (dp - (d_o * o).sum(axis=-1, keepdims=True, dtype=np.float32))
        dq[heads] = scale * np.matmul(ds, k[g], dtype=np.float32)
        dk[g] = scale * np.matmul(ds.transpose(0, 2, 1), q[heads], dtype=np.float32).sum(axis=0)
        if dmask is not None:
            dmask[heads] = ds
    return dq, dk, dv, dmask


@register_backward("ttnn.transformer.scaled_dot_product_attention")
def scaled_dot_product_attention_backward(ctx, grad):
    q, k, v = ctx.args["input_tensor_q"], ctx.args["input_tensor_k"], ctx.args["input_tensor_v"]
    mask = ctx.args["attn_mask"]
    causal = ctx.args["is_causal"]
    window = ctx.args["sliding_window_size"] or None
    scale = _scale(ctx.args["scale"], q.shape[-1])
    q_pos = np.arange(q.shape[2])

    def one(g, qs, ks, vs, ms):
        b = qs.shape[0]
        dq, dk, dv = np.zeros_like(qs), np.zeros_like(ks), np.zeros_like(vs)
        dmask = None if ms is None else np.zeros(ms.shape, dtype=np.float32)
        for u in range(b):
            m = None if ms is None else ms[u % ms.shape[0]]
            dq[u], dk[u], dv[u], dm = sdpa_user_backward(
                qs[u], ks[u], vs[u], g[u], scale, q_pos, causal, window, m
            )
            if dmask is not None:
                dmask[u % ms.shape[0]] += unbroadcast(dm, ms.shape[1:])
        return dq, dk, dv, dmask

    results = per_device(one, arrays(grad), arrays(q), arrays(k), arrays(v), arrays(mask))
    out = {}
    for index, name in enumerate(("input_tensor_q", "input_tensor_k", "input_tensor_v", "attn_mask")):
        if ctx.needs_grad(name):
            out[name] = grad_like(ctx, ctx.args[name], [r[index] for r in results])
    return out
