"""Scaled dot-product attention: the ``ttnn.transformer`` prefill, chunked-prefill and decode ops (+ paged).

Per device (heads are sharded over the mesh by the caller; each device attends with its own heads):

* prefill: Q ``[B, nh, Sq, D]``, K/V ``[B, nkv, Sk, D]`` → ``[B, nh, Sq, D]``;
* chunked prefill: Q is a chunk of queries at absolute positions ``chunk_start_idx + i``, K/V a paged cache;
* decode: Q ``[1, B, nh, D]``, K/V cache ``[B, nkv, max_seq, D]`` (or paged) → ``[1, B, nh, D]``; user b attends
  positions ``0 .. cur_pos[b]`` inclusive; ``cur_pos[b] = -1`` skips the user (its output is left zero here;
  hardware leaves it unwritten).

Grouped-query attention: Q head h uses K/V head ``h // (nh / nkv)``. Causal prefill masks keys after the query;
a sliding window of W keeps keys ``(q − W, q]`` (causal) or ``[q − W//2, q + W//2]`` (non-causal).

Numerics (the emulator's model): scores ``q·kᵀ·scale`` in float32 on the stored values (scale defaults to
``1/sqrt(D)``), masked keys get −inf, softmax by ``_kernels.softmax`` in float32, ``·v`` in float32, and the
output is quantised to Q's dtype. Flash-attention chunking (program_config) and math fidelity do not change the
emulated result; chunk sizes are still validated the way the hardware requires.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _kernels
from .._remote import fill_remote, skipped
from ..memory import DRAM_MEMORY_CONFIG, MemoryConfig
from ..program_configs import SDPAProgramConfig, WormholeComputeKernelConfig
from ..storage import is_storage
from ..tensor import Tensor
from ..types import TILE_SIZE, BufferType, DataType, Layout, TensorMemoryLayout
from ._common import (
    check_compute_config,
    check_memory_config,
    expect,
    expect_optional,
    expect_tensor,
    output_like,
    same_mesh,
    ttnn_op,
)
from .data_movement import reshape
from .kv_cache import _index, _page_rows, _page_table, _physical_block

__all__: list[str] = []
__experimental__: list[str] = []
__transformer__: list[str] = [
    "chunked_scaled_dot_product_attention",
    "paged_scaled_dot_product_attention_decode",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
]

_SDPA_DTYPES = (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.BFLOAT4_B)
_HEIGHT = TensorMemoryLayout.HEIGHT_SHARDED
_MAX_SCORES = 1 << 22  # score elements computed at once (bounds memory for long sequences)


# --- the math ------------------------------------------------------------------------------------------------


def _allowed(q_pos: np.ndarray, k_len: int, causal: bool, window: int | None) -> np.ndarray | None:
    """Boolean [len(q_pos), k_len] of attendable keys, or None when every key is."""
    if not causal and not window:
        return None
    k_pos = np.arange(k_len)[None, :]
    q_pos = q_pos[:, None]
    if causal:
        ok = k_pos <= q_pos
        if window:
            ok &= k_pos > q_pos - window
        return ok
    half = window // 2
    return np.abs(k_pos - q_pos) <= half


def _attend(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    scale: float,
    q_pos: np.ndarray,
    causal: bool,
    window: int | None,
    mask: np.ndarray | None,
) -> np.ndarray:
    """One user: q [nh, Sq, D], k/v [nkv, Sk, D], mask additive [1 or nh, Sq, Sk] → [nh, Sq, D] float32."""
    nh, sq, _ = q.shape
    nkv, sk, _ = k.shape
    group = nh // nkv
    out = np.zeros((nh, sq, v.shape[-1]), dtype=np.float32)
    step = max(1, _MAX_SCORES // max(1, group * sk))
    scale = np.float32(scale)
    for g in range(nkv):
        heads = slice(g * group, (g + 1) * group)
        kt = np.ascontiguousarray(k[g].T)
        for r0 in range(0, sq, step):
            rows = slice(r0, min(sq, r0 + step))
            scores = np.matmul(q[heads, rows], kt, dtype=np.float32) * scale
            ok = _allowed(q_pos[rows], sk, causal, window)
            if mask is not None:
                scores = scores + (mask[heads, rows] if mask.shape[0] == nh else mask[:, rows])
            if ok is not None:
                live = ok.any(axis=-1)
                scores = np.where(ok[None], scores, np.float32(-np.inf))
                scores[:, ~live] = 0.0  # a row with no key left: zero output, not NaN
            probs = _kernels.softmax(scores.reshape(-1, sk)).reshape(scores.shape)
            if ok is not None:
                probs[:, ~live] = 0.0
            out[heads, rows] = np.matmul(probs, v[g], dtype=np.float32)
    return out


# --- argument checks -----------------------------------------------------------------------------------------


def _qkv(op: str, q_value, k_value, v_value, q_layouts=(Layout.TILE,)) -> tuple[Tensor, Tensor, Tensor]:
    q = expect_tensor(op, "input_tensor_q", q_value, dtypes=_SDPA_DTYPES, layouts=q_layouts, rank=4)
    k = expect_tensor(op, "input_tensor_k", k_value, dtypes=_SDPA_DTYPES, layouts=(Layout.TILE,), rank=4)
    v = expect_tensor(op, "input_tensor_v", v_value, dtypes=_SDPA_DTYPES, layouts=(Layout.TILE,), rank=4)
    same_mesh(op, input_tensor_q=q, input_tensor_k=k, input_tensor_v=v)
    return q, k, v


def _options(op: str, scale, sliding_window_size, memory_config, program_config, compute_kernel_config):
    expect(
        scale is None
        or (isinstance(scale, (int, float)) and not isinstance(scale, bool) and math.isfinite(scale)),
        op,
        "scale",
        "a finite float or None",
        repr(scale),
    )
    window = None
    if sliding_window_size is not None:
        window = _index(op, "sliding_window_size", sliding_window_size) or None  # 0 means no window
    check_memory_config(op, memory_config)
    expect_optional(op, "program_config", program_config, SDPAProgramConfig)
    check_compute_config(op, compute_kernel_config)
    return window, memory_config or DRAM_MEMORY_CONFIG


def _not_emulated(op: str, **kwargs) -> None:
    for name, value in kwargs.items():
        expect(value is None, op, name, "None (not emulated)", "a value")


def _check_heads(op: str, nh: int, nkv: int) -> None:
    expect(nh >= nkv and nh % nkv == 0, op, "num heads", f"Q heads a multiple of the {nkv} K/V heads", nh)


def _check_head_dim(op: str, q: Tensor, k: Tensor, v: Tensor) -> None:
    d = q.shape[-1]
    expect(d % TILE_SIZE == 0, op, "head_dim", "a multiple of 32 (head_dim padding is not supported)", d)
    expect(
        k.shape[-1] == d and v.shape[-1] == d,
        op,
        "K/V head_dim",
        f"Q's head_dim {d}",
        (k.shape[-1], v.shape[-1]),
    )


def _check_grid(op: str, program_config, q: Tensor) -> None:
    """The program config's core grid (its sub-core grids when it names them) must fit the device's compute grid."""
    if program_config is None:
        return
    device = q.device().compute_with_storage_grid_size()
    sub = program_config.sub_core_grids
    if sub is not None:
        corner = sub.bounding_box().end
        expect(
            corner.x < device.x and corner.y < device.y,
            op,
            "program_config.sub_core_grids",
            f"cores within the device's {device.x}x{device.y} grid",
            f"a core at ({corner.x}, {corner.y})",
        )
        return
    grid = program_config.compute_with_storage_grid_size
    expect(
        grid.x <= device.x and grid.y <= device.y,
        op,
        "program_config.compute_with_storage_grid_size",
        f"a grid within the device's {device.x}x{device.y} cores",
        f"{grid.x}x{grid.y}",
    )


def _check_prefill_chunks(op: str, program_config, q_len_padded: int, k_len_padded: int | None) -> None:
    if program_config is None:
        return
    qc, kc = program_config.q_chunk_size, program_config.k_chunk_size
    expect(
        qc > 0 and kc > 0,
        op,
        "program_config",
        "positive q_chunk_size and k_chunk_size for prefill",
        (qc, kc),
    )
    expect(
        q_len_padded % qc == 0,
        op,
        "program_config.q_chunk_size",
        f"a divisor of the padded Q length {q_len_padded}",
        qc,
    )
    if k_len_padded is not None:
        expect(
            k_len_padded % kc == 0,
            op,
            "program_config.k_chunk_size",
            f"a divisor of the padded K length {k_len_padded}",
            kc,
        )


def _cache_prefix(cache, user: int, length: int) -> np.ndarray:
    """Positions ``0 .. length - 1`` of one user of a cache [B, nkv, S, D] as [nkv, length, D]; from a stored
    (bfloat16 / block-float) cache only those rows are unpacked."""
    if not is_storage(cache):
        return cache[user][:, :length]
    _, nkv, seq, d = cache.shape
    rows = (user * nkv + np.arange(nkv))[:, None] * seq + np.arange(length)[None, :]
    return cache.take_rows(rows.reshape(-1)).reshape(nkv, length, d)


def _gather_pages(cache, phys: list[int], length: int) -> np.ndarray:
    """Blocks ``phys`` of a paged cache [blocks, nkv, bs, D] as one sequence [nkv, length, D] (from a stored cache,
    only those rows are unpacked)."""
    if is_storage(cache):
        _, nkv, bs, d = cache.shape
        rows = (np.asarray(phys, dtype=np.intp)[None, :, None] * nkv + np.arange(nkv)[:, None, None]) * bs
        rows = (rows + np.arange(bs)[None, None, :]).reshape(nkv, -1)[:, :length]
        return cache.take_rows(rows.reshape(-1)).reshape(nkv, length, d)
    blocks = cache[phys]  # [n, nkv, bs, D]
    seq = blocks.transpose(1, 0, 2, 3).reshape(blocks.shape[1], -1, blocks.shape[-1])
    return seq[:, :length]


def _user_pages(op: str, rows: np.ndarray, user: int, length: int, block: int, num_blocks: int) -> list[int]:
    return [
        _physical_block(op, "page_table_tensor", rows, user, vb, num_blocks)
        for vb in range(-(-length // block))
    ]


def _scale(scale, d: int) -> float:
    return float(scale) if scale is not None else 1.0 / math.sqrt(d)


# --- prefill -------------------------------------------------------------------------------------------------


@ttnn_op("ttnn.transformer.scaled_dot_product_attention")
def scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    causal_mask: Tensor | None = None,
    *,
    attn_mask: Tensor | None = None,
    is_causal: bool = True,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    attention_sink: Tensor | None = None,
    cu_window_seqlens: Tensor | None = None,
    windowed_q_token_offset: int = 0,
    windowed_q_token_offset_tensor: Tensor | None = None,
) -> Tensor:
    """Prefill attention: Q ``[B, nh, Sq, D]``, K/V ``[B, nkv, Sk, D]`` → ``[B, nh, Sq, D]`` (GQA by head groups).

    ``causal_mask`` is the older API's fourth positional argument (the T3000 Falcon-40B and Llama-2-70B demos),
    the same mask as ``attn_mask``: give one of the two.
    Causal needs Sq == Sk; ``attn_mask`` (additive, ``[1|B, 1|nh, Sq, Sk]``) only without causal and without a
    sliding window. ``program_config``'s q/k chunk sizes must divide the padded Q/K lengths. Attention sinks and
    windowed (``cu_window_seqlens``) attention are not emulated.
    """
    op = "ttnn.transformer.scaled_dot_product_attention"
    expect(
        causal_mask is None or attn_mask is None,
        op,
        "causal_mask",
        "None when attn_mask is given (the same mask, by its older name)",
        "a second mask",
    )
    if causal_mask is not None:
        attn_mask = causal_mask
    q, k, v = _qkv(op, input_tensor_q, input_tensor_k, input_tensor_v)
    window, out_mc = _options(
        op, scale, sliding_window_size, memory_config, program_config, compute_kernel_config
    )
    _check_grid(op, program_config, q)
    _not_emulated(
        op,
        attention_sink=attention_sink,
        cu_window_seqlens=cu_window_seqlens,
        windowed_q_token_offset_tensor=windowed_q_token_offset_tensor,
    )
    expect(
        windowed_q_token_offset == 0,
        op,
        "windowed_q_token_offset",
        "0 (windowed attention is not emulated)",
        windowed_q_token_offset,
    )
    expect(isinstance(is_causal, bool), op, "is_causal", "a bool", repr(is_causal))
    for name, t in (("input_tensor_q", q), ("input_tensor_k", k), ("input_tensor_v", v)):
        expect(
            not t.is_sharded(),
            op,
            f"{name} memory layout",
            "DRAM/L1 interleaved",
            t.memory_config().memory_layout.name,
        )
    b, nh, sq, d = q.shape
    nkv, sk = k.shape[1], k.shape[2]
    expect(not (is_causal and attn_mask is not None), op, "attn_mask", "None when is_causal=True", "a tensor")
    expect(
        not (window and attn_mask is not None),
        op,
        "attn_mask",
        "None with a sliding window (bake the window into the mask)",
        "a tensor",
    )
    if is_causal:
        expect(sq == sk, op, "input_tensor_k.shape[2]", f"Q's sequence length {sq} (causal)", sk)
    expect(k.shape[0] == b and v.shape[0] == b, op, "K/V batch", f"Q's batch {b}", (k.shape[0], v.shape[0]))
    expect(v.shape[1] == nkv, op, "input_tensor_v.shape[1]", f"K's {nkv} heads", v.shape[1])
    expect(v.shape[2] == sk, op, "input_tensor_v.shape[2]", f"K's sequence length {sk}", v.shape[2])
    _check_head_dim(op, q, k, v)
    _check_heads(op, nh, nkv)
    _check_prefill_chunks(op, program_config, q.padded_shape[2], k.padded_shape[2])
    mask = None
    if attn_mask is not None:
        mask = expect_tensor(op, "attn_mask", attn_mask, dtypes=_SDPA_DTYPES, layouts=(Layout.TILE,), rank=4)
        same_mesh(op, input_tensor_q=q, attn_mask=mask)
        expect(
            mask.memory_config().buffer_type is BufferType.DRAM,
            op,
            "attn_mask buffer",
            "DRAM",
            mask.memory_config().buffer_type.name,
        )
        ms = mask.shape
        expect(
            ms[0] in (1, b) and ms[1] in (1, nh) and ms[2] == sq and ms[3] == sk,
            op,
            "attn_mask shape",
            f"[1|{b}, 1|{nh}, {sq}, {sk}]",
            list(ms),
        )
    scale_value = _scale(scale, d)
    q_pos = np.arange(sq)
    shards = []
    skip = skipped(q.device(), len(q.shards(op)))  # other ranks' devices (tttv2/ttnn/_remote.py)
    for i, (qs, ks, vs) in enumerate(zip(q.shards(op), k.shards(op), v.shards(op))):
        if i in skip:
            shards.append(None)
            continue
        ms = None if mask is None else mask.shards(op)[i]
        out = np.empty((b, nh, sq, d), dtype=np.float32)
        for u in range(b):
            m = None if ms is None else ms[u % ms.shape[0]]
            out[u] = _attend(qs[u], ks[u], vs[u], scale_value, q_pos, is_causal, window, m)
        shards.append(out)
    shards = fill_remote(shards, skip) if skip else shards
    return output_like(op, shards, q, layout=Layout.TILE, memory_config=out_mc)


@ttnn_op("ttnn.transformer.chunked_scaled_dot_product_attention")
def chunked_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    chunk_start_idx: int | None = None,
    *,
    chunk_start_idx_tensor: Tensor | None = None,
    scale: float | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
    paged_cache_geometry=None,
) -> Tensor:
    """Causal attention of a Q chunk ``[B, nh, Sq, D]`` at positions ``chunk_start_idx + i`` over a paged K/V cache.

    K/V ``[num_blocks, nkv, block_size, D]`` through ``page_table_tensor`` ``[B, max_blocks]`` (int32); query i sees
    cache positions ``0 .. chunk_start_idx + i``. The start is an int or a one-element int32 device tensor;
    with a program_config it must be a multiple of both chunk sizes.
    """
    op = "ttnn.transformer.chunked_scaled_dot_product_attention"
    q, k, v = _qkv(op, input_tensor_q, input_tensor_k, input_tensor_v)
    _, out_mc = _options(op, scale, None, memory_config, program_config, compute_kernel_config)
    _check_grid(op, program_config, q)
    _not_emulated(op, paged_cache_geometry=paged_cache_geometry)
    expect(
        (chunk_start_idx is None) != (chunk_start_idx_tensor is None),
        op,
        "chunk_start_idx/chunk_start_idx_tensor",
        "exactly one of them",
        "both" if chunk_start_idx is not None else "neither",
    )
    b, nh, sq, d = q.shape
    pt = _page_table(op, "page_table_tensor", page_table_tensor, users=b, sharded_ok=False)
    same_mesh(op, input_tensor_q=q, page_table_tensor=pt)
    if chunk_start_idx_tensor is not None:
        st = expect_tensor(op, "chunk_start_idx_tensor", chunk_start_idx_tensor, dtypes=(DataType.INT32,))
        same_mesh(op, input_tensor_q=q, chunk_start_idx_tensor=st)
        expect(tuple(st.shape) == (1,), op, "chunk_start_idx_tensor shape", "[1]", list(st.shape))
        starts = [_index(op, "chunk_start_idx_tensor", int(s.reshape(-1)[0])) for s in st.shards(op)]
    else:
        starts = [_index(op, "chunk_start_idx", chunk_start_idx)] * len(q.shards(op))
    nkv, block = k.shape[1], k.shape[2]
    expect(v.shape[2] == block, op, "input_tensor_v.shape[2]", f"K's block size {block}", v.shape[2])
    expect(v.shape[1] == nkv, op, "input_tensor_v.shape[1]", f"K's {nkv} heads", v.shape[1])
    expect(v.shape[0] == k.shape[0], op, "input_tensor_v.shape[0]", f"K's {k.shape[0]} blocks", v.shape[0])
    _check_head_dim(op, q, k, v)
    _check_heads(op, nh, nkv)
    _check_prefill_chunks(op, program_config, q.padded_shape[2], None)
    kv_len = pt.shape[1] * block
    for start in set(starts):
        if program_config is not None:
            for name in ("q_chunk_size", "k_chunk_size"):
                size = getattr(program_config, name)
                expect(
                    start % size == 0,
                    op,
                    "chunk_start_idx",
                    f"a multiple of program_config.{name}={size}",
                    start,
                )
        expect(
            start + sq <= kv_len,
            op,
            "chunk_start_idx + Q length",
            f"<= the paged K length {kv_len}",
            start + sq,
        )
    scale_value = _scale(scale, d)
    plans = []
    for i, start in enumerate(starts):
        rows = _page_rows(pt, i, b)
        plans.append([_user_pages(op, rows, u, start + sq, block, k.shape[0]) for u in range(b)])
    shards = []
    for i, (qs, ks, vs) in enumerate(zip(q.shards(op), k.shards(op), v.shards(op))):
        length = starts[i] + sq
        out = np.empty((b, nh, sq, d), dtype=np.float32)
        for u in range(b):
            ku = _gather_pages(ks, plans[i][u], length)
            vu = _gather_pages(vs, plans[i][u], length)
            out[u] = _attend(qs[u], ku, vu, scale_value, starts[i] + np.arange(sq), True, None, None)
        shards.append(out)
    return output_like(op, shards, q, layout=Layout.TILE, memory_config=out_mc)


# --- decode --------------------------------------------------------------------------------------------------


def _decode_chunk(op: str, program_config, s: int, paged: bool) -> int:
    """The k_chunk_size ttnn picks: the config's (a power of 2) or the largest power of 2 ≤ 512 dividing S."""
    given = program_config.k_chunk_size if program_config is not None else 0
    if given:
        expect(given & (given - 1) == 0, op, "program_config.k_chunk_size", "a power of 2", given)
        return given
    if paged:
        return 0
    i = 1
    while i < s and s % (1 << (i + 1)) == 0:
        i += 1
    chunk = min(512, 1 << i)
    expect(
        chunk % TILE_SIZE == 0,
        op,
        "input_tensor_k.shape[2]",
        f"a length whose k_chunk_size is a multiple of 32 (got {chunk})",
        s,
    )
    return chunk


def _decode_checks(op, q, k, v, attn_mask, is_causal, out_mc, users):
    """Checks shared by both decode forms; returns the validated mask tensor (or None)."""
    expect(isinstance(is_causal, bool), op, "is_causal", "a bool", repr(is_causal))
    qmc = q.memory_config()
    if q.is_sharded():
        expect(
            qmc.memory_layout is _HEIGHT,
            op,
            "input_tensor_q memory layout",
            "HEIGHT_SHARDED when sharded",
            qmc.memory_layout.name,
        )
    else:
        expect(
            qmc.buffer_type is BufferType.DRAM,
            op,
            "input_tensor_q buffer",
            "DRAM when interleaved",
            qmc.buffer_type.name,
        )
    for name, t in (("input_tensor_k", k), ("input_tensor_v", v)):
        expect(
            t.memory_config().buffer_type is BufferType.DRAM and not t.is_sharded(),
            op,
            f"{name} memory",
            "DRAM interleaved",
            t.memory_config(),
        )
    if out_mc.is_sharded():
        expect(
            out_mc.memory_layout is _HEIGHT,
            op,
            "memory_config",
            "HEIGHT_SHARDED when sharded",
            out_mc.memory_layout.name,
        )
    expect(q.shape[0] == 1, op, "input_tensor_q.shape[0]", "1 (decode: [1, B, nh, D])", q.shape[0])
    expect(
        q.shape[1] == users,
        op,
        "input_tensor_q.shape[1]",
        f"the batch of the cache/page table ({users})",
        q.shape[1],
    )
    nh, nkv = q.shape[2], k.shape[1]
    expect(v.shape[1] == nkv, op, "input_tensor_v.shape[1]", f"K's {nkv} heads", v.shape[1])
    _check_head_dim(op, q, k, v)
    if nkv > 1:
        expect(
            not out_mc.is_sharded(),
            op,
            "memory_config",
            "an interleaved output with grouped-query attention",
            out_mc.memory_layout.name,
        )
        expect(
            q.dtype is DataType.BFLOAT16,
            op,
            "input_tensor_q.dtype",
            "BFLOAT16 with grouped-query attention",
            q.dtype.name,
        )
    _check_heads(op, nh, nkv)
    if is_causal:
        expect(attn_mask is None, op, "attn_mask", "None when is_causal=True", "a tensor")
        return None
    if attn_mask is None:
        return None
    mask = expect_tensor(op, "attn_mask", attn_mask, dtypes=_SDPA_DTYPES, layouts=(Layout.TILE,), rank=4)
    same_mesh(op, input_tensor_q=q, attn_mask=mask)
    expect(
        mask.shape[0] in (1, users) and mask.shape[1] == 1 and mask.shape[2] == nh,
        op,
        "attn_mask shape",
        f"[1|{users}, 1, {nh}, S]",
        list(mask.shape),
    )
    return mask


def _positions(op, q, users, cur_pos, cur_pos_tensor, required) -> list[np.ndarray] | None:
    """Per-device cur_pos [users] (int64) from the list or the int32 tensor."""
    listed = list(cur_pos) if cur_pos is not None else []
    if not required:
        return None
    expect(
        bool(listed) != (cur_pos_tensor is not None),
        op,
        "cur_pos/cur_pos_tensor",
        "exactly one of them with is_causal=True",
        "both" if listed else "neither",
    )
    if listed:
        expect(len(listed) == users, op, "cur_pos", f"one position per user ({users})", len(listed))
        values = [_index(op, "cur_pos", p) for p in listed]
        return [np.asarray(values, dtype=np.int64)] * len(q.shards(op))
    t = expect_tensor(
        op, "cur_pos_tensor", cur_pos_tensor, dtypes=(DataType.INT32,), layouts=(Layout.ROW_MAJOR,)
    )
    same_mesh(op, input_tensor_q=q, cur_pos_tensor=t)
    if t.is_sharded():
        return [
            s.reshape(-1, users)[np.arange(users) % s.reshape(-1, users).shape[0], np.arange(users)].astype(
                np.int64
            )
            for s in t.shards(op)
        ]
    expect(t.shape[-1] == users, op, "cur_pos_tensor shape", f"[{users}]", list(t.shape))
    return [s.reshape(-1)[-users:].astype(np.int64) for s in t.shards(op)]


def _decode_output(op, q, shards, out_mc) -> Tensor:
    return output_like(op, shards, q, memory_config=out_mc)


@ttnn_op("ttnn.transformer.scaled_dot_product_attention_decode")
def scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    cur_pos: list[int] | None = None,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos_tensor: Tensor | None = None,
    attention_sink: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """Decode attention: Q ``[1, B, nh, D]`` against the cache ``[B, nkv, S, D]`` → ``[1, B, nh, D]``.

    Causal (default): user b attends positions ``0 .. cur_pos[b]`` (list, or int32 ``cur_pos_tensor`` [B]; −1 skips
    the user, its output is zero). Non-causal: the whole cache, with an optional additive ``attn_mask``
    ``[1|B, 1, nh, S]``. The K chunk size (program_config or ttnn's choice from S) must be a multiple of 32 and
    divide S.

    The op's first form (mid-2024, MQA only: the Llama-2-70B T3000 attention) took ``cur_pos`` positionally and
    a cache ``[1, B, S, D]``, one KV head with the users on dim 1; a cache of that shape (dim 0 is 1 where Q has
    B > 1 users) is read so, as the ``[B, 1, S, D]`` it holds in the same order.
    """
    op = "ttnn.transformer.scaled_dot_product_attention_decode"
    q, k, v = _qkv(
        op, input_tensor_q, input_tensor_k, input_tensor_v, q_layouts=(Layout.TILE, Layout.ROW_MAJOR)
    )
    if q.shape[1] > 1 and k.shape[0] == 1 and k.shape[1] == q.shape[1] and v.shape[:2] == k.shape[:2]:
        k, v = (reshape(t, (t.shape[1], 1, t.shape[2], t.shape[3])) for t in (k, v))
    window, out_mc = _options(
        op, scale, sliding_window_size, memory_config, program_config, compute_kernel_config
    )
    _check_grid(op, program_config, q)
    _not_emulated(op, attention_sink=attention_sink)
    users = k.shape[0]
    mask = _decode_checks(op, q, k, v, attn_mask, is_causal, out_mc, users)
    expect(v.shape[0] == users, op, "input_tensor_v.shape[0]", f"K's batch {users}", v.shape[0])
    s = k.shape[2]
    expect(
        v.padded_shape[2] == k.padded_shape[2],
        op,
        "input_tensor_v.shape[2]",
        f"K's sequence length {s}",
        v.shape[2],
    )
    chunk = _decode_chunk(op, program_config, s, paged=False)
    expect(
        k.padded_shape[2] % chunk == 0,
        op,
        "program_config.k_chunk_size",
        f"a divisor of the K length {k.padded_shape[2]}",
        chunk,
    )
    if mask is not None:
        expect(mask.shape[3] == s, op, "attn_mask.shape[3]", f"K's sequence length {s}", mask.shape[3])
    positions = _positions(op, q, users, cur_pos, cur_pos_tensor, is_causal)
    if positions is not None:
        for pos in positions:
            for u, p in enumerate(pos):
                expect(
                    p == -1 or 0 <= p < s,
                    op,
                    f"cur_pos[{u}]",
                    f"-1 (skip) or a position < the cache length {s}",
                    int(p),
                )
    scale_value = _scale(scale, q.shape[-1])
    shards = []
    skip = skipped(q.device(), len(q.shards(op)))  # other ranks' devices (tttv2/ttnn/_remote.py)
    for i, (qs, ks, vs) in enumerate(zip(q.shards(op), k.stored_shards(op), v.stored_shards(op))):
        if i in skip:
            shards.append(None)
            continue
        nh, d = qs.shape[2], qs.shape[3]
        out = np.zeros((1, users, nh, d), dtype=np.float32)
        ms = None if mask is None else mask.shards(op)[i]
        for u in range(users):
            m = None if ms is None else ms[u % ms.shape[0], 0][:, None, :]
            if positions is None:
                q_pos, length = np.asarray([s - 1]), s
            elif positions[i][u] == -1:
                continue
            else:
                q_pos, length = positions[i][u : u + 1], int(positions[i][u]) + 1
            # decode masks relative to the query's position (the last one when non-causal): keys <= q_pos
            res = _attend(
                qs[0, u][:, None, :],
                _cache_prefix(ks, u, length),
                _cache_prefix(vs, u, length),
                scale_value,
                q_pos,
                True,
                window,
                m,
            )
            out[0, u] = res[:, 0]
        shards.append(out)
    shards = fill_remote(shards, skip) if skip else shards
    return _decode_output(op, q, shards, out_mc)


@ttnn_op("ttnn.transformer.paged_scaled_dot_product_attention_decode")
def paged_scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos_tensor: Tensor | None = None,
    attention_sink: Tensor | None = None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config: WormholeComputeKernelConfig | None = None,
) -> Tensor:
    """:func:`scaled_dot_product_attention_decode` over a paged cache ``[num_blocks, nkv, block_size, D]``.

    ``page_table_tensor`` ``[B, max_blocks]`` (int32 interleaved, or uint16 L1-sharded) maps user b's positions to
    blocks; causal needs ``cur_pos_tensor``. Only the blocks holding positions ``0 .. cur_pos[b]`` are read (all of
    them when non-causal), and each must be a valid block index.
    """
    op = "ttnn.transformer.paged_scaled_dot_product_attention_decode"
    q, k, v = _qkv(
        op, input_tensor_q, input_tensor_k, input_tensor_v, q_layouts=(Layout.TILE, Layout.ROW_MAJOR)
    )
    window, out_mc = _options(
        op, scale, sliding_window_size, memory_config, program_config, compute_kernel_config
    )
    _check_grid(op, program_config, q)
    _not_emulated(op, attention_sink=attention_sink)
    raw = page_table_tensor
    expect(isinstance(raw, Tensor), op, "page_table_tensor", "a ttnn.Tensor", type(raw).__name__)
    users = q.shape[1] if raw.is_sharded() else (raw.shape[0] if len(raw.shape) == 2 else -1)
    pt = _page_table(op, "page_table_tensor", raw, users=users, sharded_ok=True)
    same_mesh(op, input_tensor_q=q, page_table_tensor=pt)
    mask = _decode_checks(op, q, k, v, attn_mask, is_causal, out_mc, users)
    block = k.shape[2]
    expect(v.shape[2] == block, op, "input_tensor_v.shape[2]", f"K's block size {block}", v.shape[2])
    expect(block % TILE_SIZE == 0, op, "input_tensor_k.shape[2] (block_size)", "a multiple of 32", block)
    span = pt.shape[1] * block
    chunk = _decode_chunk(op, program_config, span, paged=True)
    if not is_causal:
        expect(
            chunk > 0, op, "program_config.k_chunk_size", "a positive size for non-causal paged decode", chunk
        )
        expect(
            span % chunk == 0,
            op,
            "program_config.k_chunk_size",
            f"a divisor of the paged K length {span}",
            chunk,
        )
    if mask is not None:
        expect(mask.shape[3] == span, op, "attn_mask.shape[3]", f"the paged K length {span}", mask.shape[3])
    positions = None
    if is_causal:
        expect(cur_pos_tensor is not None, op, "cur_pos_tensor", "a tensor (causal paged decode)", None)
        positions = _positions(op, q, users, None, cur_pos_tensor, True)
    scale_value = _scale(scale, q.shape[-1])
    plans = []
    for i in range(len(q.shards(op))):
        rows = _page_rows(pt, i, users)
        plan = []
        for u in range(users):
            if positions is None:
                length = span
            else:
                p = int(positions[i][u])
                if p == -1:
                    plan.append(None)
                    continue
                expect(
                    0 <= p < span,
                    op,
                    f"cur_pos_tensor[{u}]",
                    f"-1 (skip) or a position < the paged K length {span}",
                    p,
                )
                length = p + 1
            plan.append((length, _user_pages(op, rows, u, length, block, k.shape[0])))
        plans.append(plan)
    shards = []
    skip = skipped(q.device(), len(q.shards(op)))  # other ranks' devices (tttv2/ttnn/_remote.py)
    for i, (qs, ks, vs) in enumerate(zip(q.shards(op), k.stored_shards(op), v.stored_shards(op))):
        if i in skip:
            shards.append(None)
            continue
        nh, d = qs.shape[2], qs.shape[3]
        out = np.zeros((1, users, nh, d), dtype=np.float32)
        ms = None if mask is None else mask.shards(op)[i]
        for u, item in enumerate(plans[i]):
            if item is None:
                continue
            length, phys = item
            m = None if ms is None else ms[u % ms.shape[0], 0][:, None, :]
            ku, vu = _gather_pages(ks, phys, length), _gather_pages(vs, phys, length)
            res = _attend(
                qs[0, u][:, None, :], ku, vu, scale_value, np.asarray([length - 1]), True, window, m
            )
            out[0, u] = res[:, 0]
        shards.append(out)
    shards = fill_remote(shards, skip) if skip else shards
    return _decode_output(op, q, shards, out_mc)
