"""Runs an attention module and its Hugging Face reference through the same prefill / decode flow.

A case is upstream's tuple (mesh × family × heads × mode × seq_len × KV cache × weight dtype) plus the batch and
the optional features it switches on. Flows:

* prefill: one user's prompt, compared row by row; ``paged-chunked`` prefills it in 128-token chunks against a
  paged cache (later chunks attend to the earlier ones through the cache).
* decode: ``batch`` users. Without ``prefilled`` every user decodes from position 0 (each step writes its
  position, so the cache holds exactly the reference's history); with it, each user's prompt is prefilled first
  and users then decode at different positions (continuous batching), overwriting their own history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tttv2 import ttnn
from tttv2.modules import LazyWeight, RMSNorm1DConfig, RMSNorm2DConfig
from tttv2.modules.attention import (
    Attention1D,
    Attention1DConfig,
    Attention2D,
    Attention2DConfig,
    PagedAttentionConfig,
)
from tttv2.testing.host import to_host
from tttv2.testing.meshes import mesh_id

from . import _reference as R

DIM = 256
BLOCK = 32
CHUNK = 128
DTYPES = {"bf8": ttnn.bfloat8_b, "bf16": ttnn.bfloat16}


@dataclass(frozen=True)
class AttentionCase:
    mesh_shape: tuple[int, int]
    family: str
    n_heads: int
    n_kv_heads: int
    mode: str
    seq_len: int  # prefill: prompt length; decode: prefilled prompt length (0: decode from position 0)
    kv: str = "standard"  # standard | paged | paged-chunked
    wqkv_dtype: str = "bf8"
    batch: int = 1
    head_dim: int = 32
    dim: int = DIM
    steps: int = 2
    options: tuple = field(default=())  # extra config fields, e.g. (("sliding_window", 48),)

    @property
    def id(self) -> str:
        extra = "".join(f"-{k}" for k, _ in self.options)
        return (
            f"{mesh_id(self.mesh_shape)}-{self.family}-{self.n_heads}:{self.n_kv_heads}-{self.mode}-"
            f"{self.seq_len}-b{self.batch}-{self.kv}-{self.wqkv_dtype}{extra}"
        )

    @property
    def two_d(self) -> bool:
        return min(self.mesh_shape) > 1

    def hf(self):
        return R.hf_attention(
            R.key(
                self.family,
                n_heads=self.n_heads,
                n_kv_heads=self.n_kv_heads,
                head_dim=self.head_dim,
                dim=self.dim,
            )
        )

    def happy_path(self) -> bool:
        """Cases the seven-argument constructor can express (everything else goes through from_config)."""
        config, module = self.hf()
        weights = R.attention_weights(module, config)
        return (
            self.kv == "standard"
            and self.wqkv_dtype == "bf8"
            and not self.options
            and weights["bias"] is None
            and weights["q_norm"] is None
        )

    def max_seq_len(self) -> int:
        return 256


def build(case: AttentionCase, mesh):
    """The module under test: the happy path where it can express the case, from_config otherwise."""
    config, module = case.hf()
    w = R.attention_weights(module, config)
    cls, config_cls, norm_cls = (
        (Attention2D, Attention2DConfig, RMSNorm2DConfig)
        if case.two_d
        else (Attention1D, Attention1DConfig, RMSNorm1DConfig)
    )
    dims = (case.n_heads, case.n_kv_heads, case.head_dim)
    if case.happy_path():
        ttnn.SetDefaultDevice(mesh)  # the happy path takes the mesh from the default device
        try:
            return cls(LazyWeight(w["wqkv"]), LazyWeight(w["wo"]), *dims, case.batch, case.max_seq_len())
        finally:
            ttnn.SetDefaultDevice(None)
    extra = dict(case.options)
    if case.kv != "standard":
        extra["paged_attention_config"] = PagedAttentionConfig(
            block_size=BLOCK, max_num_blocks=case.batch * case.max_seq_len() // BLOCK
        )
    if w["bias"] is not None:
        extra["wqkv_bias"] = LazyWeight(w["bias"])
    for name in ("q_norm", "k_norm"):
        if w[name] is not None:
            extra[f"{name}_config"] = norm_cls(weight=LazyWeight(w[name]), eps=config.rms_norm_eps)
    return cls.from_config(
        config_cls(
            wqkv=LazyWeight(w["wqkv"]),
            wo=LazyWeight(w["wo"]),
            n_heads=case.n_heads,
            n_kv_heads=case.n_kv_heads,
            head_dim=case.head_dim,
            max_batch_size=case.batch,
            max_seq_len=case.max_seq_len(),
            mesh_device=mesh,
            wqkv_dtype=DTYPES[case.wqkv_dtype],
            **extra,
        )
    )


def page_table(case: AttentionCase, seed: int = 0) -> np.ndarray:
    """A random assignment of the cache's blocks to the users: [batch, max_seq_len / block]."""
    per_user = case.max_seq_len() // BLOCK
    perm = np.random.default_rng(seed).permutation(case.batch * per_user)
    return perm.reshape(case.batch, per_user).astype(np.int32)


def _users_mapper(case, mesh):
    """The decode rotary rows of the users: split over the mesh columns on 2-D meshes (RotarySetup's job)."""
    if not case.two_d or case.batch == 1:
        return None
    return ttnn.MeshMapperConfig(
        [ttnn.PlacementReplicate(), ttnn.PlacementShard(1)], ttnn.MeshShape(*case.mesh_shape)
    )


def _prefill_input(x):
    """[S, dim] → a LazyWeight of [1, 1, S, dim] (the module splits it over the mesh as it needs)."""
    return LazyWeight(np.ascontiguousarray(x[None, None]))


def run(case: AttentionCase, mesh, module) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(label, expected, got) for every compared output of the case's flow."""
    config, hf = case.hf()
    window = dict(case.options).get("sliding_window")
    rng = np.random.default_rng(7)
    total = case.seq_len + case.steps if case.mode == "decode" else case.seq_len
    x = rng.standard_normal((case.batch, total, case.dim)).astype(np.float32)
    expected = R.reference_attention(hf, config, x, sliding_window=window)
    table = page_table(case) if case.kv != "standard" else None
    results = []

    def prefill(user, start, length, **kwargs):
        rows = slice(start, start + length)
        out = module.prefill_forward(
            _prefill_input(x[user, rows]), R.prefill_rot_mats(mesh, config, start, length), **kwargs
        )
        return to_host(out)[0, 0]

    if case.mode == "prefill" and case.kv == "paged-chunked":
        blocks = CHUNK // BLOCK
        for start in range(0, case.seq_len, CHUNK):
            first = start // BLOCK
            got = prefill(
                0,
                start,
                CHUNK,
                page_table=LazyWeight(table[:1]),
                chunk_page_table=LazyWeight(table[:1, first : first + blocks]),
                chunk_start_idx=start,
            )
            results.append((f"prefill chunk @{start}", expected[0, start : start + CHUNK], got))
        return results
    if case.mode == "prefill":
        user_table = {} if table is None else {"page_table": LazyWeight(table[:1, : case.seq_len // BLOCK])}
        results.append(("prefill", expected[0], prefill(0, 0, case.seq_len, **user_table)))
        return results

    # decode
    positions = np.zeros(case.batch, dtype=np.int64)
    if case.seq_len:
        for user in range(case.batch):
            user_table = {} if table is None else {"page_table": LazyWeight(table[user : user + 1])}
            prefill(user, 0, case.seq_len, user_id=user if table is None else 0, **user_table)
        # continuous batching: the users continue from different points of their prompts
        positions = case.seq_len - 1 - 9 * (np.arange(case.batch) % 5)
    mapper = _users_mapper(case, mesh)
    for step in range(case.steps):
        tokens = np.zeros((1, 1, 32, case.dim), dtype=np.float32)
        tokens[0, 0, : case.batch] = x[np.arange(case.batch), positions]
        out = module.decode_forward(
            LazyWeight(tokens),
            LazyWeight(positions.astype(np.int32)),  # the module splits them over the mesh as it needs
            R.decode_rot_mats(mesh, config, positions, mapper),
            page_table=None if table is None else LazyWeight(table),
        )
        got = to_host(out)[0, 0, : case.batch]
        results.append((f"decode step {step}", expected[np.arange(case.batch), positions], got))
        positions = positions + 1
    return results
