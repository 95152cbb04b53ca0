"""MLP2D: the gated feed-forward block on a 2-D mesh (Galaxy 8x4; any R×C with R, C > 1).

The weights are split both ways: w1/w3 [dim, hidden] put hidden over the mesh rows and dim over the columns, w2
[hidden, dim] the other way round. The activation arrives split over the columns along dim (replicated over
the rows), so the w1/w3 products are partial sums over the columns (mesh axis 1) and the w2 product a partial
sum over the rows (axis 0). How each sum is taken is chosen once at construction:

* hidden (axis 1): all-reduce each of gate/up (all-gather + local sum), or reduce-scatter them, multiply the
  slices and all-gather the product (always in prefill; in decode when ``decode_hidden_reduce_scatter``);
* output (axis 0): all-gather + local sum, or reduce-scatter + all-gather (``all_reduce_composite``).

The output is [1, 1, rows, dim / columns] per device, replicated over the rows: the fractured residual stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule
from tttv2.modules._topology import mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.mlp.mlp_1d import (
    HW_DTYPE_GROUPS,
    HW_MATH_GROUPS,
    _as_rows,
    _check_shape,
    _pad_columns,
    _pad_rows,
)
from tttv2.modules.tt_ccl import (
    CCL_CHUNKS_PER_SYNC,
    CCL_NUM_BUFFERS_PER_CHANNEL,
    CCL_NUM_WORKERS_PER_LINK,
    get_tt_ccl,
)

__all__ = ["MLP2D", "MLP2DConfig"]

_ROWS, _COLUMNS = 0, 1  # mesh axes


@dataclass
class MLP2DConfig:
    """Everything MLP2D needs; ``None`` fields are resolved by ``MLP2D`` (see docs/modules.md)."""

    w1: LazyWeight  # gate, [dim, hidden]
    w2: LazyWeight  # down, [hidden, dim]
    w3: LazyWeight  # up, [dim, hidden]

    # mesh and collectives
    mesh_device: Any = None
    tt_ccl: Any = None
    topology: Any = None
    num_reduce_scatter_links: int = 1
    num_all_gather_links: int = 2
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL
    # strategies (None: decided from dim — the 8192-wide models take the scatter/composite forms)
    decode_hidden_reduce_scatter: bool | None = None
    all_reduce_composite: bool | None = None

    # dims: hidden_dim is padded so every device of every row and column holds whole tiles
    dim: int | None = None
    hidden_dim: int | None = None
    max_batch_size: int = 32
    activation: Any = None

    # dtypes
    w1_w3_dtype: Any = None
    w2_dtype: Any = None
    activation_dtype: Any = None
    linear_dtype: Any = None  # output of w1/w3
    mul_dtype: Any = None
    hidden_ccl_dtype: Any = None  # gate/up travel in this dtype when all-reduced
    ccl_dtype: Any = None  # output of w2 and of its reduction

    # compute kernels
    ff1_3_compute_kernel_config: Any = None
    ff2_compute_kernel_config: Any = None

    # weight placement (interleaved DRAM)
    w1_w3_memcfg: Any = None
    w2_memcfg: Any = None

    # decode
    decode_input_memcfg: Any = None
    decode_w1_w3_prg_config: Any = None  # None: ttnn chooses
    decode_w2_prg_config: Any = None
    decode_activation_memcfg: Any = None  # w1/w3/w2 outputs
    decode_hidden_gathered_memcfg: Any = None  # landing of the gate/up all-gather
    decode_hidden_scattered_memcfg: Any = None  # landing of the gate/up reduce-scatter
    decode_output_gathered_memcfg: Any = None  # landing of the output reduction
    decode_output_memcfg: Any = None

    # prefill
    prefill_input_memcfg: Any = None
    prefill_len_cutoff: int | None = None
    prefill_w1_w3_prg_config: Callable[[int], Any] | None = None
    prefill_w2_prg_config: Callable[[int], Any] | None = None
    prefill_w2_minimal_matmul_config: Callable[[int], Any] | None = None
    prefill_output_memcfg: Any = None


def _resolve_mlp2d_config(config: MLP2DConfig) -> MLP2DConfig:
    owner = "MLP2D"
    mesh = resolve_mesh_device(owner, config.mesh_device, config.w1, config.w2, config.w3)
    require_2d_mesh(owner, mesh, "MLP1D")
    rows, cols = mesh_shape(mesh)

    _check_shape(owner, "w1", config.w1, config.w1.shape[-2:])
    dim = config.dim or config.w1.shape[-2]
    logical_hidden = config.w1.shape[-1]
    _check_shape(owner, "w1", config.w1, (dim, logical_hidden))
    _check_shape(owner, "w3", config.w3, (dim, logical_hidden))
    _check_shape(owner, "w2", config.w2, (logical_hidden, dim))
    if dim % (_grids.TILE * cols):
        raise ValueError(
            f"{owner}: dim must be a multiple of {_grids.TILE * cols} (32 × {cols} columns), got {dim}"
        )
    unit = _grids.TILE * rows * cols
    hidden = config.hidden_dim or _grids.nearest_multiple(logical_hidden, unit)
    if hidden < logical_hidden or hidden % unit:
        raise ValueError(
            f"{owner}: hidden_dim must be >= {logical_hidden} and a multiple of {unit} (32 × {rows}×{cols} "
            f"devices), got {hidden}"
        )
    wide = dim >= 8192
    activation_dtype = config.activation_dtype
    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh),
        topology=ttnn.Topology.Linear,
        decode_hidden_reduce_scatter=wide,
        all_reduce_composite=wide,
        dim=dim,
        hidden_dim=hidden,
        activation=ttnn.UnaryOpType.SILU,
        w1_w3_dtype=ttnn.bfloat8_b,
        w2_dtype=ttnn.bfloat8_b,
        linear_dtype=ttnn.bfloat8_b,
        mul_dtype=activation_dtype or ttnn.bfloat8_b,
        hidden_ccl_dtype=ttnn.bfloat16,
        ccl_dtype=ttnn.bfloat8_b,
        ff1_3_compute_kernel_config=_grids.default_matmul_compute_config(),
        ff2_compute_kernel_config=_grids.default_matmul_compute_config(),
        w1_w3_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        w2_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        decode_input_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_activation_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_hidden_gathered_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_hidden_scattered_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_output_gathered_memcfg=ttnn.L1_MEMORY_CONFIG,
        decode_output_memcfg=ttnn.L1_MEMORY_CONFIG,
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_len_cutoff=512 if mesh.arch() == ttnn.Arch.BLACKHOLE else 1024,
        prefill_w1_w3_prg_config=_ttnn_chooses,
        prefill_w2_prg_config=_ttnn_chooses,
        prefill_w2_minimal_matmul_config=_ttnn_chooses,
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})

    def weight(w: LazyWeight, pad, dtype, memcfg, placements):
        if w.shape[-1 if pad is _pad_columns else -2] != hidden:
            w = replace(w, source=pad(host_array(w.source), hidden))
        return w.with_defaults(
            device=mesh,
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=memcfg,
            mesh_mapper_config=ttnn.MeshMapperConfig(
                [ttnn.PlacementShard(d) for d in placements], ttnn.MeshShape(rows, cols)
            ),
        )

    # w1/w3: hidden over the rows, dim over the columns; w2: hidden over the rows, dim over the columns
    return replace(
        resolved,
        w1=weight(resolved.w1, _pad_columns, resolved.w1_w3_dtype, resolved.w1_w3_memcfg, (-1, -2)),
        w3=weight(resolved.w3, _pad_columns, resolved.w1_w3_dtype, resolved.w1_w3_memcfg, (-1, -2)),
        w2=weight(resolved.w2, _pad_rows, resolved.w2_dtype, resolved.w2_memcfg, (-2, -1)),
    )


def _ttnn_chooses(seq_len: int):
    return None


class MLP2D(TTModule):
    """``MLP2D(w1, w2, w3)``: w1/w3 are [dim, hidden], w2 is [hidden, dim] (TT-NN's [in, out] layout)."""

    CONFIG_CLASS = MLP2DConfig
    HARDWARE = HardwareGroups(
        dtypes=HW_DTYPE_GROUPS,
        math=HW_MATH_GROUPS,
        placement={
            "w1_w3_memcfg": Placement("DRAM", "interleaved"),
            "w2_memcfg": Placement("DRAM", "interleaved"),
            "decode_input_memcfg": Placement("L1", "interleaved"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
            "prefill_output_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, w1: LazyWeight, w2: LazyWeight, w3: LazyWeight) -> None:
        self._setup(MLP2DConfig(w1=w1, w2=w2, w3=w3))

    _resolve_config = staticmethod(_resolve_mlp2d_config)

    def _bind(self) -> None:
        cfg = self.config
        self._activations = [cfg.activation]
        self._decode_hidden = (
            self._hidden_scattered_decode if cfg.decode_hidden_reduce_scatter else self._hidden_all_reduced
        )
        if cfg.all_reduce_composite:
            self._reduce_output, self._output_gather_dim = self._reduce_output_composite, 3
        else:
            self._reduce_output, self._output_gather_dim = self._reduce_output_gather_sum, 0
        self._input_mapper = ttnn.MeshMapperConfig(
            [ttnn.PlacementReplicate(), ttnn.PlacementShard(-1)], ttnn.MeshShape(*mesh_shape(cfg.mesh_device))
        )

    # --- decode ------------------------------------------------------------------------------------------------

    def decode_forward(self, x):
        """[1, 1, rows, dim / columns] per device → the same shape, the rows' partial sums reduced."""
        cfg = self.config
        x = load_input(
            x,
            owner="MLP2D.decode_forward",
            device=cfg.mesh_device,
            memory_config=cfg.decode_input_memcfg,
            mesh_mapper_config=self._input_mapper,
        )
        up_kwargs = dict(
            program_config=cfg.decode_w1_w3_prg_config,
            memory_config=cfg.decode_activation_memcfg,
            compute_kernel_config=cfg.ff1_3_compute_kernel_config,
            dtype=cfg.linear_dtype,
            core_grid=None,
        )
        gate = ttnn.linear(x, cfg.w1.get_device_weight(), **up_kwargs)
        up = ttnn.linear(x, cfg.w3.get_device_weight(), **up_kwargs)
        ttnn.deallocate(x)
        hidden = self._decode_hidden(gate, up)
        out = ttnn.linear(
            hidden,
            cfg.w2.get_device_weight(),
            program_config=cfg.decode_w2_prg_config,
            memory_config=cfg.decode_activation_memcfg,
            compute_kernel_config=cfg.ff2_compute_kernel_config,
            dtype=cfg.ccl_dtype,
            core_grid=None,
        )
        ttnn.deallocate(hidden)
        out = self._reduce_output(
            _as_rows(out), cfg.decode_output_gathered_memcfg, cfg.decode_activation_memcfg
        )
        return ttnn.to_memory_config(out, cfg.decode_output_memcfg)

    def _hidden_all_reduced(self, gate, up):
        """Sum gate and up over the columns (each device keeps the whole hidden slice of its row), multiply."""
        gate = self._all_reduce_columns(gate)
        up = self._all_reduce_columns(up)
        return self._gated(gate, up)

    def _all_reduce_columns(self, x):
        cfg = self.config
        x = ttnn.to_memory_config(x, ttnn.L1_MEMORY_CONFIG, cfg.hidden_ccl_dtype)
        stacked = self._all_gather(x, 0, _COLUMNS, cfg.decode_hidden_gathered_memcfg)
        stacked = ttnn.to_memory_config(stacked, ttnn.L1_MEMORY_CONFIG)
        summed = ttnn.experimental.fast_reduce_nc(
            stacked, dims=[0], output=None, compute_kernel_config=None, memory_config=ttnn.L1_MEMORY_CONFIG
        )
        stacked.deallocate(True)
        return summed

    def _hidden_scattered_decode(self, gate, up):
        hidden = self._hidden_scattered(gate, up, self.config.decode_hidden_scattered_memcfg)
        return ttnn.to_memory_config(hidden, ttnn.L1_MEMORY_CONFIG)

    def _hidden_scattered(self, gate, up, scattered_memcfg):
        """Reduce-scatter gate and up over the columns, multiply the slices, gather the product back."""
        cfg = self.config
        layout = gate.memory_config()
        gate = self._reduce_scatter(gate, 3, _COLUMNS, scattered_memcfg, cfg.num_reduce_scatter_links)
        up = self._reduce_scatter(up, 3, _COLUMNS, scattered_memcfg, 1)
        hidden = self._gated(gate, up)
        return self._all_gather(hidden, 3, _COLUMNS, layout)

    def _gated(self, gate, up):
        hidden = ttnn.mul(
            gate,
            up,
            memory_config=gate.memory_config(),
            dtype=self.config.mul_dtype,
            input_tensor_a_activations=self._activations,
        )
        ttnn.deallocate(gate)
        ttnn.deallocate(up)
        return hidden

    # --- prefill -----------------------------------------------------------------------------------------------

    def prefill_forward(self, x):
        """[1, 1, seq_len, dim / columns] per device → the same shape."""
        cfg = self.config
        x = load_input(
            x,
            owner="MLP2D.prefill_forward",
            device=cfg.mesh_device,
            memory_config=cfg.prefill_input_memcfg,
            mesh_mapper_config=self._input_mapper,
        )
        seq_len = x.shape[-2]
        if seq_len >= cfg.prefill_len_cutoff:
            if seq_len % cfg.prefill_len_cutoff:
                raise ValueError(
                    f"MLP2D.prefill_forward: seq_len {seq_len} must be a multiple of prefill_len_cutoff "
                    f"{cfg.prefill_len_cutoff} once it reaches it"
                )
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
        hidden = self._hidden_scattered(gate, up, None)
        out = self._down_prefill(hidden, seq_len)
        ttnn.deallocate(hidden)
        out = ttnn.to_memory_config(_as_rows(out), cfg.prefill_output_memcfg)
        return self._reduce_output(out, cfg.prefill_output_memcfg, cfg.prefill_output_memcfg)

    def _down_prefill(self, hidden, seq_len: int):
        cfg = self.config
        minimal = cfg.prefill_w2_minimal_matmul_config(seq_len)
        if minimal is not None:
            return ttnn.experimental.minimal_matmul(
                hidden,
                cfg.w2.get_device_weight(),
                config=minimal,
                compute_kernel_config=cfg.ff2_compute_kernel_config,
                memory_config=cfg.prefill_output_memcfg,
                dtype=cfg.ccl_dtype,
            )
        return ttnn.linear(
            hidden,
            cfg.w2.get_device_weight(),
            program_config=cfg.prefill_w2_prg_config(seq_len),
            memory_config=cfg.prefill_output_memcfg,
            compute_kernel_config=cfg.ff2_compute_kernel_config,
            dtype=cfg.ccl_dtype,
            core_grid=None,
        )

    # --- output reduction over the rows (bound in _bind) ------------------------------------------------------

    def _reduce_output_gather_sum(self, x, landing, summed_memcfg):
        stacked = self._all_gather(x, self._output_gather_dim, _ROWS, landing)
        stacked = ttnn.to_memory_config(stacked, summed_memcfg)
        summed = ttnn.experimental.fast_reduce_nc(
            stacked, dims=[0], output=None, compute_kernel_config=None, memory_config=summed_memcfg
        )
        stacked.deallocate(True)
        return summed

    def _reduce_output_composite(self, x, landing, summed_memcfg):
        layout = x.memory_config()
        partial = self._reduce_scatter(
            x, self._output_gather_dim, _ROWS, landing, self.config.num_reduce_scatter_links
        )
        return self._all_gather(partial, self._output_gather_dim, _ROWS, layout)

    # --- collectives ---------------------------------------------------------------------------------------------

    def _reduce_scatter(self, x, dim, axis, memory_config, num_links):
        return _ccl.reduce_scatter(
            x, self.config, dim=dim, cluster_axis=axis, memory_config=memory_config, num_links=num_links
        )

    def _all_gather(self, x, dim, axis, memory_config):
        cfg = self.config
        return _ccl.all_gather(
            x,
            cfg,
            dim=dim,
            cluster_axis=axis,
            memory_config=memory_config,
            num_links=cfg.num_all_gather_links,
        )

    # --- TTTv1 bridge ------------------------------------------------------------------------------------------

    @classmethod
    def from_model_args(
        cls, mesh_device, tt_ccl, args, state_dict, weight_cache_path, layer_num: int, state_dict_prefix=None
    ) -> MLP2D:
        """The tttv1 ``MLP`` of ``layer_num`` on a Galaxy as an MLP2D (the mesh is checked before anything else)."""
        if not args.is_galaxy or tuple(args.cluster_shape) not in ((8, 4), (4, 8)):
            raise ValueError(
                f"MLP2D requires Galaxy topology (8x4 or 4x8), got cluster shape {args.cluster_shape}; use MLP1D instead"
            )
        from tttv1.tt.common import Mode
        from tttv1.tt.model_config import OpGroup, TensorGroup

        model_config = args.get_model_config()
        prefix = state_dict_prefix or args.get_state_dict_prefix("MLP", layer_num)
        layer = max(layer_num, 0)
        precision = args.decoders_optimizations
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path / prefix

        def checkpoint(name):
            return LazyWeight(
                host_array(state_dict[f"{prefix}.{name}.weight"]).T.copy(), cache_dir=cache_dir, name=name
            )

        def prefill_minimal(seq_len):
            return args.get_mlp_ff2_minimal_matmul_config(seq_len) if seq_len > 128 else None

        rs_config = model_config["MLP_RS_CONFIG"]
        config = MLP2DConfig(
            w1=checkpoint("w1"),
            w2=checkpoint("w2"),
            w3=checkpoint("w3"),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            topology=args.ccl_topology(),
            num_reduce_scatter_links=args.num_reduce_scatter_links,
            num_all_gather_links=args.num_all_gather_links,
            ccl_chunks_per_sync=rs_config["chunks_per_sync"],
            ccl_num_workers_per_link=rs_config["num_workers_per_link"],
            decode_hidden_reduce_scatter=args.dim == 8192,
            all_reduce_composite=args.dim == 8192,
            dim=args.dim,
            hidden_dim=args.hidden_dim,
            max_batch_size=args.max_batch_size,
            activation=getattr(args, "mlp_activation_type", ttnn.UnaryOpType.SILU),
            w1_w3_dtype=precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.FF1_FF3),
            w2_dtype=precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.FF2),
            activation_dtype=precision.get_tensor_dtype(decoder_id=layer, tensor=TensorGroup.ACTIVATION),
            ccl_dtype=args.ccl_dtype,
            ff1_3_compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF1_FF3, configuration=args
            ),
            ff2_compute_kernel_config=precision.get_math_fidelity(
                decoder_id=layer, op=OpGroup.LI_FF2, configuration=args
            ),
            decode_input_memcfg=model_config["MLP_ACT_MEMCFG"],
            decode_w1_w3_prg_config=args.get_mlp_ff1_3_prg_config(Mode.DECODE, 1, None),
            decode_w2_prg_config=args.get_mlp_ff2_prg_config(Mode.DECODE, 1, None),
            decode_activation_memcfg=args.get_mlp_ff1_3_mem_config(Mode.DECODE, None),
            decode_hidden_gathered_memcfg=model_config["FF1_OUT_GATHERED_MEMCFG"],
            decode_hidden_scattered_memcfg=model_config["FF1_OUT_REDUCE_SCATTER_MEMCFG"],
            decode_output_gathered_memcfg=args.get_mlp_ff2_all_reduce_mem_config(Mode.DECODE, None),
            decode_output_memcfg=args.get_mlp_output_mem_config(Mode.DECODE, None),
            prefill_len_cutoff=args.prefill_len_cutoff,
            prefill_w1_w3_prg_config=lambda seq_len: args.get_mlp_ff1_3_prg_config(
                Mode.PREFILL, seq_len, None
            ),
            prefill_w2_prg_config=lambda seq_len: args.get_mlp_ff2_prg_config(Mode.PREFILL, seq_len, None),
            prefill_w2_minimal_matmul_config=prefill_minimal,
        )
        return cls.from_config(config)
