"""MLP1D: the gated feed-forward block ``w2(act(x @ w1) * (x @ w3))`` on a 1-D mesh (1x1, 1x2, 1x4, 1x8).

The hidden dim is split over the devices (w1/w3 by columns, w2 by rows); each device's w2 product is a partial
sum, and a reduce-scatter over the mesh sums it and leaves each device its slice of ``dim`` (the fractured
residual stream TTTv1's decoder keeps). On one device there is nothing to reduce. Decode runs DRAM-sharded
matmuls on L1 width-sharded activations; prefill runs multicast matmuls from DRAM, folding long sequences into
rows of ``prefill_len_cutoff`` tokens.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule
from tttv2.modules._topology import default_topology, num_devices, require_1d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.tt_ccl import (
    CCL_CHUNKS_PER_SYNC,
    CCL_NUM_BUFFERS_PER_CHANNEL,
    CCL_NUM_WORKERS_PER_LINK,
    get_tt_ccl,
)

__all__ = ["MLP1D", "MLP1DConfig"]


# the TTTv1 tensor / op group of each dtype and compute-kernel field (MLP2D has the same fields)
HW_DTYPE_GROUPS = {"w1_w3_dtype": "ff1_3", "w2_dtype": "ff2"}
HW_MATH_GROUPS = {"ff1_3_compute_kernel_config": "li_ff1_3", "ff2_compute_kernel_config": "li_ff2"}


@dataclass
class MLP1DConfig:
    """Everything MLP1D needs; ``None`` fields are resolved by ``MLP1D`` (see docs/modules.md)."""

    w1: LazyWeight  # gate, [dim, hidden]
    w2: LazyWeight  # down, [hidden, dim]
    w3: LazyWeight  # up, [dim, hidden]

    # mesh and collectives
    mesh_device: Any = None
    tt_ccl: Any = None
    topology: Any = None
    num_reduce_scatter_links: int = 1
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL

    # dims: dim and hidden_dim come from w1; hidden_dim is padded so every device holds whole tiles
    dim: int | None = None
    hidden_dim: int | None = None
    max_batch_size: int = 32
    activation: Any = None  # ttnn.UnaryOpType applied to the gate (SiLU)

    # dtypes
    w1_w3_dtype: Any = None
    w2_dtype: Any = None
    activation_dtype: Any = None  # optional override of both below
    linear_dtype: Any = None
    mul_dtype: Any = None

    # compute kernels
    ff1_3_compute_kernel_config: Any = None
    ff2_compute_kernel_config: Any = None

    # weight placement
    w1_w3_memcfg: Any = None
    w2_memcfg: Any = None

    # decode
    decode_input_memcfg: Any = None
    decode_w1_w3_prg_config: Any = None
    decode_w1_w3_output_memcfg: Any = None
    decode_spill_w1_to_dram_before_w3: bool = False
    decode_mlp2_input_memcfg: Any = None
    decode_w2_prg_config: Any = None
    decode_w2_output_memcfg: Any = None
    decode_residual_memcfg: Any = None

    # prefill: program configs are functions of seq_len
    prefill_input_memcfg: Any = None
    prefill_len_cutoff: int | None = None
    prefill_w1_w3_prg_config: Callable[[int], Any] | None = None
    prefill_w2_prg_config: Callable[[int], Any] | None = None
    # seq_len → a MinimalMatmulConfig for the down projection, or None to use ``linear`` at that length
    prefill_w2_minimal_matmul_config: Callable[[int], Any] | None = None
    prefill_output_memcfg: Any = None


def _pad_columns(array: np.ndarray, size: int) -> np.ndarray:
    return np.pad(array, [(0, 0)] * (array.ndim - 1) + [(0, size - array.shape[-1])])


def _pad_rows(array: np.ndarray, size: int) -> np.ndarray:
    return np.pad(array, [(0, 0)] * (array.ndim - 2) + [(0, size - array.shape[-2]), (0, 0)])


def _check_shape(owner: str, name: str, weight, expected: tuple[int, int]) -> None:
    if not isinstance(weight, LazyWeight):
        raise TypeError(f"{owner}: {name} must be a LazyWeight, got {type(weight).__name__}")
    if weight.shape[-2:] != expected:
        raise ValueError(f"{owner}: {name} must have shape {expected} (in, out), got {weight.shape}")


def _resolve_mlp1d_config(config: MLP1DConfig) -> MLP1DConfig:
    """A resolved copy of ``config``; fields the caller set are kept as they are."""
    owner = "MLP1D"
    mesh = resolve_mesh_device(owner, config.mesh_device, config.w1, config.w2, config.w3)
    require_1d_mesh(owner, mesh, "MLP2D")
    n = num_devices(mesh)

    _check_shape(owner, "w1", config.w1, config.w1.shape[-2:])
    dim = config.dim or config.w1.shape[-2]
    logical_hidden = config.w1.shape[-1]
    _check_shape(owner, "w1", config.w1, (dim, logical_hidden))
    _check_shape(owner, "w3", config.w3, (dim, logical_hidden))
    _check_shape(owner, "w2", config.w2, (logical_hidden, dim))
    if dim % _grids.TILE:
        raise ValueError(f"{owner}: dim must be a multiple of {_grids.TILE}, got {dim}")
    hidden = config.hidden_dim or _grids.nearest_multiple(logical_hidden, _grids.TILE * n)
    if hidden < logical_hidden or hidden % (_grids.TILE * n):
        raise ValueError(
            f"{owner}: hidden_dim must be >= {logical_hidden} and a multiple of {_grids.TILE * n} "
            f"(32 × {n} devices), got {hidden}"
        )
    hidden_pd = hidden // n
    rows = _grids.nearest_multiple(config.max_batch_size, _grids.TILE)
    dram_banks = mesh.dram_grid_size().x

    # decode: activations width-sharded over grids that divide both K and N in tiles
    up_grid = _grids.grid_dividing(dim // _grids.TILE, hidden_pd // _grids.TILE)
    down_grid = _grids.grid_dividing(hidden_pd // _grids.TILE, dim // _grids.TILE)
    residual_grid = _grids.grid_near_32_cores(dim // n // _grids.TILE)
    activation_dtype = config.activation_dtype
    cutoff = config.prefill_len_cutoff or (512 if mesh.arch() == ttnn.Arch.BLACKHOLE else 1024)

    @functools.lru_cache
    def prefill_up(seq_len: int):
        m = min(seq_len, cutoff)
        return _grids.multicast_matmul(m, dim, hidden_pd, _grids.prefill_grid(m, hidden_pd))

    @functools.lru_cache
    def prefill_down(seq_len: int):
        m = min(seq_len, cutoff)
        return _grids.multicast_matmul(m, hidden_pd, dim, _grids.prefill_grid(m, dim))

    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh) if n > 1 else None,
        topology=default_topology(mesh),
        dim=dim,
        hidden_dim=hidden,
        activation=ttnn.UnaryOpType.SILU,
        w1_w3_dtype=ttnn.bfloat8_b,
        w2_dtype=ttnn.bfloat8_b,
        linear_dtype=activation_dtype or ttnn.bfloat16,
        mul_dtype=activation_dtype or ttnn.bfloat8_b,
        ff1_3_compute_kernel_config=_grids.default_matmul_compute_config(),
        ff2_compute_kernel_config=_grids.default_matmul_compute_config(),
        w1_w3_memcfg=_grids.dram_width_sharded(dim, hidden_pd, dram_banks),
        w2_memcfg=_grids.dram_width_sharded(hidden_pd, dim, dram_banks),
        decode_input_memcfg=_grids.width_sharded(rows, dim, up_grid),
        decode_w1_w3_prg_config=_grids.dram_sharded_matmul(rows, dim, hidden_pd, up_grid.num_cores),
        decode_w1_w3_output_memcfg=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
        decode_mlp2_input_memcfg=_grids.width_sharded(rows, hidden_pd, down_grid),
        decode_w2_prg_config=_grids.dram_sharded_matmul(rows, hidden_pd, dim, down_grid.num_cores),
        decode_w2_output_memcfg=ttnn.L1_WIDTH_SHARDED_MEMORY_CONFIG,
        decode_residual_memcfg=_grids.width_sharded(rows, dim // n, residual_grid),
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_len_cutoff=cutoff,
        prefill_w1_w3_prg_config=prefill_up,
        prefill_w2_prg_config=prefill_down,
        prefill_w2_minimal_matmul_config=_never_minimal_matmul,
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    if n > 1 and resolved.tt_ccl is None:  # pragma: no cover - defaults always set it
        raise ValueError(f"{owner}: tt_ccl is needed on {n} devices")

    # weights: pad the hidden dim with zeros (no effect on the result), split it over the devices, tile layout
    def weight(w: LazyWeight, pad, dtype, memcfg, shard_dim):
        if w.shape[-1 if shard_dim == -1 else -2] != hidden:
            w = replace(w, source=pad(host_array(w.source), hidden))
        return w.with_defaults(
            device=mesh,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=memcfg,
            mesh_mapper_config=ttnn.MeshMapperConfig([ttnn.PlacementShard(shard_dim)], ttnn.MeshShape(n)),
        )

    return replace(
        resolved,
        w1=weight(resolved.w1, _pad_columns, resolved.w1_w3_dtype, resolved.w1_w3_memcfg, -1),
        w3=weight(resolved.w3, _pad_columns, resolved.w1_w3_dtype, resolved.w1_w3_memcfg, -1),
        w2=weight(resolved.w2, _pad_rows, resolved.w2_dtype, resolved.w2_memcfg, -2),
    )


def _never_minimal_matmul(seq_len: int):
    return None


class MLP1D(TTModule):
    """``MLP1D(w1, w2, w3)``: w1/w3 are [dim, hidden], w2 is [hidden, dim] (TT-NN's [in, out] layout)."""

    CONFIG_CLASS = MLP1DConfig
    HARDWARE = HardwareGroups(
        dtypes=HW_DTYPE_GROUPS,
        math=HW_MATH_GROUPS,
        placement={
            "w1_w3_memcfg": Placement("DRAM", "width_sharded"),
            "w2_memcfg": Placement("DRAM", "width_sharded"),
            "decode_input_memcfg": Placement("L1", "width_sharded"),
            "decode_residual_memcfg": Placement("L1", "width_sharded"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
            "prefill_output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, w1: LazyWeight, w2: LazyWeight, w3: LazyWeight) -> None:
        self._setup(MLP1DConfig(w1=w1, w2=w2, w3=w3))

    _resolve_config = staticmethod(_resolve_mlp1d_config)

    def _bind(self) -> None:
        cfg = self.config
        multi = num_devices(cfg.mesh_device) > 1
        self._reduce_decode = self._reduce_scatter_decode if multi else _ccl.unchanged
        self._reduce_prefill = self._reduce_scatter_prefill if multi else _ccl.unchanged
        self._spill_gate = _to_dram if cfg.decode_spill_w1_to_dram_before_w3 else _ccl.unchanged
        self._activations = [cfg.activation]

    # --- decode ------------------------------------------------------------------------------------------------

    def decode_forward(self, x):
        """[1, 1, rows, dim] (rows <= max_batch_size, padded to 32) → [1, 1, rows, dim / devices] per device."""
        cfg = self.config
        x = load_input(
            x, owner="MLP1D.decode_forward", device=cfg.mesh_device, memory_config=cfg.decode_input_memcfg
        )
        up_kwargs = dict(
            program_config=cfg.decode_w1_w3_prg_config,
            memory_config=cfg.decode_w1_w3_output_memcfg,
            compute_kernel_config=cfg.ff1_3_compute_kernel_config,
            dtype=cfg.linear_dtype,
            core_grid=None,
        )
        gate = self._spill_gate(ttnn.linear(x, cfg.w1.get_device_weight(), **up_kwargs))
        up = ttnn.linear(x, cfg.w3.get_device_weight(), **up_kwargs)
        ttnn.deallocate(x)
        hidden = ttnn.mul(
            gate,
            up,
            memory_config=up.memory_config(),
            dtype=cfg.mul_dtype,
            input_tensor_a_activations=self._activations,
        )
        # the down projection may shard over another core grid than the up projections
        hidden = ttnn.to_memory_config(hidden, cfg.decode_mlp2_input_memcfg)
        ttnn.deallocate(gate)
        ttnn.deallocate(up)
        out = ttnn.linear(
            hidden,
            cfg.w2.get_device_weight(),
            program_config=cfg.decode_w2_prg_config,
            memory_config=cfg.decode_w2_output_memcfg,
            compute_kernel_config=cfg.ff2_compute_kernel_config,
            dtype=cfg.linear_dtype,
            core_grid=None,
        )
        ttnn.deallocate(hidden)
        out = self._reduce_decode(_as_rows(out))
        return ttnn.to_memory_config(out, cfg.decode_residual_memcfg)

    # --- prefill -----------------------------------------------------------------------------------------------

    def prefill_forward(self, x):
        """[1, 1, seq_len, dim] → [1, 1, seq_len, dim / devices] per device."""
        cfg = self.config
        x = load_input(
            x, owner="MLP1D.prefill_forward", device=cfg.mesh_device, memory_config=cfg.prefill_input_memcfg
        )
        seq_len = x.shape[-2]
        if seq_len >= cfg.prefill_len_cutoff:
            if seq_len % cfg.prefill_len_cutoff:
                raise ValueError(
                    f"MLP1D.prefill_forward: seq_len {seq_len} must be a multiple of prefill_len_cutoff "
                    f"{cfg.prefill_len_cutoff} once it reaches it"
                )
            # long prompts are folded into rows of prefill_len_cutoff tokens
            x = ttnn.reshape(x, [1, seq_len // cfg.prefill_len_cutoff, cfg.prefill_len_cutoff, -1])
        up_kwargs = dict(
            program_config=cfg.prefill_w1_w3_prg_config(seq_len),
            memory_config=cfg.prefill_output_memcfg,
            compute_kernel_config=cfg.ff1_3_compute_kernel_config,
            dtype=cfg.linear_dtype,
            core_grid=None,
        )
        gate = ttnn.linear(x, cfg.w1.get_device_weight(), **up_kwargs)
        up = ttnn.linear(x, cfg.w3.get_device_weight(), **up_kwargs)
        ttnn.deallocate(x)
        hidden = ttnn.mul(
            gate,
            up,
            memory_config=gate.memory_config(),
            dtype=cfg.mul_dtype,
            input_tensor_a_activations=self._activations,
        )
        ttnn.deallocate(gate)
        ttnn.deallocate(up)
        out = self._down_prefill(hidden, seq_len)
        ttnn.deallocate(hidden)
        return self._reduce_prefill(_as_rows(out))

    def _down_prefill(self, hidden, seq_len: int):
        """The down projection; long sequences may use ``minimal_matmul`` (chosen per seq_len by the config)."""
        cfg = self.config
        minimal = cfg.prefill_w2_minimal_matmul_config(seq_len)
        if minimal is not None:
            return ttnn.experimental.minimal_matmul(
                hidden,
                cfg.w2.get_device_weight(),
                config=minimal,
                compute_kernel_config=cfg.ff2_compute_kernel_config,
                memory_config=cfg.prefill_output_memcfg,
                dtype=cfg.linear_dtype,
            )
        return ttnn.linear(
            hidden,
            cfg.w2.get_device_weight(),
            program_config=cfg.prefill_w2_prg_config(seq_len),
            memory_config=cfg.prefill_output_memcfg,
            compute_kernel_config=cfg.ff2_compute_kernel_config,
            dtype=cfg.linear_dtype,
            core_grid=None,
        )

    # --- collectives (bound in _bind: single device → unchanged) ----------------------------------------------

    def _reduce_scatter(self, x, memory_config):
        cfg = self.config
        out = _ccl.reduce_scatter(
            x,
            cfg,
            dim=3,
            cluster_axis=None,
            memory_config=memory_config,
            num_links=cfg.num_reduce_scatter_links,
        )
        x.deallocate(True)
        return out

    def _reduce_scatter_decode(self, x):
        return self._reduce_scatter(x, self.config.decode_residual_memcfg)

    def _reduce_scatter_prefill(self, x):
        return self._reduce_scatter(x, self.config.prefill_output_memcfg)

    # --- TTTv1 bridge ------------------------------------------------------------------------------------------

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num: int,
        dtype=None,
        model_config=None,
        state_dict_prefix: str | None = None,
    ) -> MLP1D:
        """The tttv1 ``MLP`` of ``layer_num`` as an MLP1D: the same weights, dtypes, fidelities, program and
        memory configs (read from ``args`` exactly where tttv1's MLP reads them). ``dtype`` is accepted for
        signature compatibility; the per-layer precision decides the weight dtypes, as in tttv1."""
        from tttv1.tt.common import Mode
        from tttv1.tt.model_config import OpGroup, TensorGroup

        if args.is_galaxy:
            raise ValueError("MLP1D cannot be used for Galaxy devices; use MLP2D instead")
        model_config = model_config or args.get_model_config()
        prefix = state_dict_prefix or args.get_state_dict_prefix("MLP", layer_num)
        layer = max(layer_num, 0)
        precision = args.decoders_optimizations
        up_dtype = precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.FF1_FF3)
        down_dtype = precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.FF2)
        activation_dtype = precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.ACTIVATION)
        hidden_pd = args.hidden_dim // args.num_devices
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path / prefix

        def checkpoint(name):
            return LazyWeight(
                host_array(state_dict[f"{prefix}.{name}.weight"]).T.copy(), cache_dir=cache_dir, name=name
            )

        def prefill_minimal(seq_len):
            return args.get_mlp_ff2_minimal_matmul_config(seq_len) if seq_len > 128 else None

        rs_config = model_config["MLP_RS_CONFIG"]
        config = MLP1DConfig(
            w1=checkpoint("w1"),
            w2=checkpoint("w2"),
            w3=checkpoint("w3"),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            topology=args.ccl_topology(),
            num_reduce_scatter_links=args.num_reduce_scatter_links,
            ccl_chunks_per_sync=rs_config["chunks_per_sync"],
            ccl_num_workers_per_link=rs_config["num_workers_per_link"],
            dim=args.dim,
            hidden_dim=args.hidden_dim,
            max_batch_size=args.max_batch_size,
            activation=getattr(args, "mlp_activation_type", ttnn.UnaryOpType.SILU),
            w1_w3_dtype=up_dtype,
            w2_dtype=down_dtype,
            activation_dtype=activation_dtype,
            ff1_3_compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF1_FF3, configuration=args
            ),
            ff2_compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF2, configuration=args
            ),
            w1_w3_memcfg=args.create_dram_sharded_mem_config(args.dim, hidden_pd),
            w2_memcfg=args.create_dram_sharded_mem_config(hidden_pd, args.dim),
            decode_input_memcfg=model_config["SHARDED_MLP_INPUT_MEMCFG"],
            decode_w1_w3_prg_config=args.get_mlp_ff1_3_prg_config(Mode.DECODE, 1, None),
            decode_w1_w3_output_memcfg=args.get_mlp_ff1_3_mem_config(Mode.DECODE, None),
            decode_mlp2_input_memcfg=args.get_mlp_binary_mult_mem_config(Mode.DECODE),
            decode_w2_prg_config=args.get_mlp_ff2_prg_config(Mode.DECODE, 1, None),
            decode_w2_output_memcfg=args.get_mlp_ff2_mem_config(Mode.DECODE, None),
            decode_residual_memcfg=args.get_mlp_output_mem_config(Mode.DECODE, None),
            prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
            prefill_len_cutoff=args.prefill_len_cutoff,
            prefill_w1_w3_prg_config=lambda seq_len: args.get_mlp_ff1_3_prg_config(
                Mode.PREFILL, seq_len, None
            ),
            prefill_w2_prg_config=lambda seq_len: args.get_mlp_ff2_prg_config(Mode.PREFILL, seq_len, None),
            prefill_w2_minimal_matmul_config=prefill_minimal,
            prefill_output_memcfg=args.get_mlp_ff2_all_reduce_mem_config(Mode.PREFILL, None),
        )
        return cls.from_config(config)


def _to_dram(x):
    return ttnn.to_memory_config(x, ttnn.DRAM_MEMORY_CONFIG)


def _as_rows(x):
    """[a, b, rows, width] → [1, 1, a·b·rows, width] (a view: the collectives want the outer dims folded)."""
    *outer, width = x.shape
    return ttnn.reshape(x, (1, 1, outer[-3] * outer[-2] * outer[-1], width))
