"""RMSNorm1D: ``x / sqrt(mean(x²) + eps) · weight`` on a 1-D mesh.

Decode normalises the whole row on each device, L1 width-sharded (``decode_in_sharded``) or interleaved;
the sharded output can be unsharded (``decode_out_sharded=False``). Prefill normalises whole rows locally, or,
when the activations arrive fractured over the devices along dim (``prefill_distributed``), computes the local
sum of squares, all-gathers those statistics and normalises each device's slice with its slice of the weight.
All four choices are bound once, at construction.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl, _grids
from tttv2.modules._hardware import HardwareGroups, MathSetting, Placement
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

__all__ = ["RMSNorm1D", "RMSNorm1DConfig"]


@dataclass
class RMSNorm1DConfig:
    """Everything RMSNorm1D needs; ``None`` fields are resolved by ``RMSNorm1D``."""

    weight: LazyWeight  # (dim,) or (1, 1, dim / 32, 32)

    mesh_device: Any = None
    tt_ccl: Any = None  # only the distributed prefill uses collectives
    topology: Any = None
    num_links: int = 1
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL

    dim: int | None = None
    eps: float = 1e-5
    add_unit_offset: bool = False  # checkpoints that store (weight - 1), as Gemma's
    max_batch_size: int = 32
    compute_kernel_config: Any = None

    # decode
    decode_in_sharded: bool = True
    decode_out_sharded: bool = True
    decode_program_config: Any = None
    decode_memory_config: Any = None  # the width-sharded layout of the input and output
    decode_input_memcfg: Any = None  # where LazyWeight inputs are placed

    # prefill
    prefill_distributed: bool = False
    prefill_input_memcfg: Any = None
    prefill_stats_memcfg: Any = None
    weight_distributed: LazyWeight | None = None  # each device's slice of the weight (resolved from weight)


TILE = _grids.TILE


def tile_rows_weight(owner: str, weight: LazyWeight, add_unit_offset: bool) -> LazyWeight:
    """The weight as [1, 1, dim / 32, 32] (the layout the norm kernels read), plus 1 with ``add_unit_offset``."""
    if not isinstance(weight, LazyWeight):
        raise TypeError(f"{owner}: weight must be a LazyWeight, got {type(weight).__name__}")
    dim = int(np.prod(weight.shape))
    if dim % TILE or weight.shape[-1] not in (dim, TILE):
        raise ValueError(
            f"{owner}: weight must have shape (dim,) or (1, 1, dim / 32, 32) with dim a multiple of 32, "
            f"got {weight.shape}"
        )
    if weight.shape == (1, 1, dim // TILE, TILE) and not add_unit_offset:
        return weight
    source = host_array(weight.source).reshape(1, 1, dim // TILE, TILE)
    return replace(weight, source=source + 1.0 if add_unit_offset else source)


def sharded_norm_program_config(rows: int, width: int, grid) -> Any:
    """LayerNorm sharded program config for a [rows, width] input width-sharded over ``grid``."""
    block_w = width // grid.num_cores // TILE
    return ttnn.LayerNormShardedMultiCoreProgramConfig(
        compute_with_storage_grid_size=(grid.x, grid.y),
        subblock_w=_grids.largest_divisor(block_w, 4),
        block_h=rows // TILE,
        block_w=block_w,
        inplace=False,
    )


def tttv1_norm_weight_name(weight_key: str, layer_num, state_dict_prefix) -> str:
    """The state-dict key tttv1's RMSNorm reads."""
    if state_dict_prefix:
        return f"{state_dict_prefix}{weight_key}.weight"
    if layer_num is not None:
        return f"layers.{layer_num}.{weight_key}.weight"
    return f"{weight_key}.weight"


def _resolve_rmsnorm1d_config(config: RMSNorm1DConfig) -> RMSNorm1DConfig:
    owner = "RMSNorm1D"
    mesh = resolve_mesh_device(owner, config.mesh_device, config.weight)
    require_1d_mesh(owner, mesh, "RMSNorm2D")
    n = num_devices(mesh)
    weight = tile_rows_weight(owner, config.weight, config.add_unit_offset)
    dim = int(np.prod(weight.shape))
    if config.dim is not None and config.dim != dim:
        raise ValueError(f"{owner}: dim {config.dim} does not match the weight's {dim} elements")
    distributed = config.prefill_distributed and n > 1
    if distributed and (dim // TILE) % n:
        raise ValueError(
            f"{owner}: prefill_distributed needs dim / 32 = {dim // TILE} tiles to split over {n} devices"
        )
    rows = _grids.nearest_multiple(config.max_batch_size, TILE)
    grid = _grids.grid_near_32_cores(dim // TILE)
    decode_memory = config.decode_memory_config or _grids.width_sharded(rows, dim, grid)
    grid = _grids.shard_grid(decode_memory) or grid  # the sharded program runs on the cores the layout names
    defaults = dict(
        mesh_device=mesh,
        tt_ccl=get_tt_ccl(mesh) if distributed else None,
        topology=default_topology(mesh),
        dim=dim,
        compute_kernel_config=_grids.compute_kernel_config(
            ttnn.MathFidelity.HiFi2, fp32_acc=True, l1_acc=True
        ),
        decode_program_config=sharded_norm_program_config(rows, dim, grid),
        decode_memory_config=decode_memory,
        decode_input_memcfg=decode_memory if config.decode_in_sharded else ttnn.DRAM_MEMORY_CONFIG,
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_stats_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    weight = weight.with_defaults(
        device=mesh,
        dtype=ttnn.bfloat16,
        layout=ttnn.ROW_MAJOR_LAYOUT,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
    )
    weight_distributed = resolved.weight_distributed
    if distributed and weight_distributed is None:
        name = f"{weight.name}_distributed" if weight.name else None
        weight_distributed = replace(weight, mesh_mapper_config=_FRACTURED(n, 2), name=name)
    return replace(
        resolved, weight=weight, prefill_distributed=distributed, weight_distributed=weight_distributed
    )


def _FRACTURED(n: int, dim: int):
    """Split ``dim`` over all the devices of the mesh, in order."""
    return ttnn.MeshMapperConfig([ttnn.PlacementShard(dim)], ttnn.MeshShape(n))


class RMSNorm1D(TTModule):
    """``RMSNorm1D(weight)``: weight of shape (dim,) or (1, 1, dim / 32, 32)."""

    CONFIG_CLASS = RMSNorm1DConfig
    HARDWARE = HardwareGroups(
        math={
            "compute_kernel_config": MathSetting(
                ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True, packer_l1_acc=True
            )
        },
        placement={
            "decode_memory_config": Placement("L1", "width_sharded"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, weight: LazyWeight, *, eps: float = 1e-5) -> None:
        self._setup(RMSNorm1DConfig(weight=weight, eps=eps))

    _resolve_config = staticmethod(_resolve_rmsnorm1d_config)

    def _bind(self) -> None:
        cfg = self.config
        self._decode = self._decode_sharded if cfg.decode_in_sharded else self._decode_interleaved
        self._prefill = self._prefill_distributed if cfg.prefill_distributed else self._prefill_local
        self._unshard = _ccl.unchanged if cfg.decode_out_sharded else ttnn.sharded_to_interleaved
        n = num_devices(cfg.mesh_device)
        self._prefill_mapper = _FRACTURED(n, -1) if cfg.prefill_distributed else None

    def decode_forward(self, x):
        """[1, 1, rows, dim] → the same shape (``_decode_sharded`` or ``_decode_interleaved``, bound in _bind)."""
        return self._decode(x)

    def prefill_forward(self, x):
        """[1, 1, seq_len, dim] (dim / devices when distributed) → the same shape (``_prefill_local`` or
        ``_prefill_distributed``)."""
        return self._prefill(x)

    def _decode_sharded(self, x):
        cfg = self.config
        x = load_input(
            x, owner="RMSNorm1D.decode_forward", device=cfg.mesh_device, memory_config=cfg.decode_input_memcfg
        )
        out = ttnn.rms_norm(
            x,
            epsilon=cfg.eps,
            weight=cfg.weight.get_device_weight(),
            program_config=cfg.decode_program_config,
            memory_config=cfg.decode_memory_config,
            compute_kernel_config=cfg.compute_kernel_config,
        )
        return self._unshard(out)

    def _decode_interleaved(self, x):
        cfg = self.config
        x = load_input(
            x, owner="RMSNorm1D.decode_forward", device=cfg.mesh_device, memory_config=cfg.decode_input_memcfg
        )
        return self._local(x)

    def _prefill_local(self, x):
        cfg = self.config
        x = load_input(
            x,
            owner="RMSNorm1D.prefill_forward",
            device=cfg.mesh_device,
            memory_config=cfg.prefill_input_memcfg,
        )
        return self._local(x)

    def _local(self, x):
        cfg = self.config
        return ttnn.rms_norm(
            x,
            epsilon=cfg.eps,
            weight=cfg.weight.get_device_weight(),
            program_config=None,
            memory_config=None,
            compute_kernel_config=cfg.compute_kernel_config,
        )

    def _prefill_distributed(self, x):
        """Local sum of squares → all-gather of the statistics → normalise this device's slice."""
        cfg = self.config
        x = load_input(
            x,
            owner="RMSNorm1D.prefill_forward",
            device=cfg.mesh_device,
            memory_config=cfg.prefill_input_memcfg,
            mesh_mapper_config=self._prefill_mapper,
        )
        stats = ttnn.rms_norm_pre_all_gather(
            x, compute_kernel_config=cfg.compute_kernel_config, dtype=ttnn.bfloat16
        )
        all_stats = _ccl.all_gather(
            stats,
            cfg,
            dim=3,
            cluster_axis=None,
            memory_config=cfg.prefill_stats_memcfg,
            num_links=cfg.num_links,
        )
        out = ttnn.rms_norm_post_all_gather(
            x,
            all_stats,
            epsilon=cfg.eps,
            weight=cfg.weight_distributed.get_device_weight(),
            compute_kernel_config=cfg.compute_kernel_config,
        )
        all_stats.deallocate(True)
        return out

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num,
        weight_key: str,
        state_dict_prefix: str | None = None,
        sharded_program_config=None,
        sharded_output_config=None,
        fp32_dest_acc_en: bool | None = None,
    ) -> RMSNorm1D:
        """tttv1's ``RMSNorm`` (as its decoder / model builds it) as an RMSNorm1D. ``fp32_dest_acc_en=None``
        applies tttv1's rule: the layer norms of Qwen2.5-7B / Qwen2.5-VL-7B accumulate in 16 bits."""
        if args.is_galaxy:
            raise ValueError("RMSNorm1D cannot be used for Galaxy devices; use RMSNorm2D instead")
        name = tttv1_norm_weight_name(weight_key, layer_num, state_dict_prefix)
        if fp32_dest_acc_en is None:
            fp32_dest_acc_en = not (
                args.base_model_name in ("Qwen2.5-7B", "Qwen2.5-VL-7B")
                and weight_key in ("attention_norm", "ffn_norm")
            )
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path
        config = RMSNorm1DConfig(
            weight=LazyWeight(host_array(state_dict[name]), cache_dir=cache_dir, name=name),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            topology=args.ccl_topology(),
            dim=args.dim,
            eps=args.norm_eps,
            add_unit_offset=args.rms_norm_add_unit_offset,
            max_batch_size=args.max_batch_size,
            compute_kernel_config=_grids.compute_kernel_config(
                ttnn.MathFidelity.HiFi2, fp32_acc=fp32_dest_acc_en, l1_acc=True
            ),
            decode_program_config=sharded_program_config,
            decode_memory_config=sharded_output_config,
            prefill_distributed=args.is_distributed_norm("prefill"),
        )
        return cls.from_config(config)
