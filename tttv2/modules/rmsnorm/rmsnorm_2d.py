"""RMSNorm2D: RMSNorm on a 2-D mesh (Galaxy 8x4).

``distributed=True`` (the residual stream): each row arrives split over the mesh columns along dim (replicated
over the mesh rows); each device computes its sum of squares, the statistics are all-gathered over the columns
(mesh axis 1) and each device normalises its slice with its slice of the weight — L1 width-sharded in decode,
interleaved in prefill. ``distributed=False`` (head-local norms such as q/k norm): every device holds whole
rows and normalises them locally. The choice is bound at construction.
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
from tttv2.modules._topology import mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.rmsnorm.rmsnorm_1d import TILE, tile_rows_weight, tttv1_norm_weight_name
from tttv2.modules.tt_ccl import (
    CCL_CHUNKS_PER_SYNC,
    CCL_NUM_BUFFERS_PER_CHANNEL,
    CCL_NUM_WORKERS_PER_LINK,
    get_tt_ccl,
)

__all__ = ["RMSNorm2D", "RMSNorm2DConfig"]

_COLUMNS = 1


@dataclass
class RMSNorm2DConfig:
    """Everything RMSNorm2D needs; ``None`` fields are resolved by ``RMSNorm2D``."""

    weight: LazyWeight  # (dim,) or (1, 1, dim / 32, 32)

    mesh_device: Any = None
    tt_ccl: Any = None
    topology: Any = None
    num_links: int | None = None
    ccl_chunks_per_sync: int = CCL_CHUNKS_PER_SYNC
    ccl_num_workers_per_link: int = CCL_NUM_WORKERS_PER_LINK
    ccl_num_buffers_per_channel: int = CCL_NUM_BUFFERS_PER_CHANNEL

    distributed: bool = True
    dim: int | None = None
    eps: float = 1e-5
    add_unit_offset: bool = False
    max_batch_size: int = 32
    compute_kernel_config: Any = None

    # decode (distributed): the local slice width-sharded on one row of cores, the gathered stats on one core
    decode_input_memcfg: Any = None
    decode_program_config: Any = None
    decode_stats_memcfg: Any = None

    prefill_input_memcfg: Any = None
    prefill_stats_memcfg: Any = None
    weight_distributed: LazyWeight | None = None  # each column's slice of the weight (resolved from weight)


def _resolve_rmsnorm2d_config(config: RMSNorm2DConfig) -> RMSNorm2DConfig:
    owner = "RMSNorm2D"
    mesh = resolve_mesh_device(owner, config.mesh_device, config.weight)
    require_2d_mesh(owner, mesh, "RMSNorm1D")
    _, cols = mesh_shape(mesh)
    weight = tile_rows_weight(owner, config.weight, config.add_unit_offset)
    dim = int(np.prod(weight.shape))
    if config.dim is not None and config.dim != dim:
        raise ValueError(f"{owner}: dim {config.dim} does not match the weight's {dim} elements")
    if config.distributed and (dim // TILE) % cols:
        raise ValueError(f"{owner}: dim / 32 = {dim // TILE} tiles must split over the {cols} mesh columns")
    rows = _grids.nearest_multiple(config.max_batch_size, TILE)
    tt_ccl = config.tt_ccl or get_tt_ccl(mesh)
    defaults = dict(
        mesh_device=mesh,
        tt_ccl=tt_ccl,
        topology=ttnn.Topology.Linear,
        num_links=tt_ccl.get_num_links(_COLUMNS),
        dim=dim,
        compute_kernel_config=_grids.compute_kernel_config(
            ttnn.MathFidelity.HiFi2, fp32_acc=False, l1_acc=False
        ),
        decode_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_input_memcfg=ttnn.DRAM_MEMORY_CONFIG,
        prefill_stats_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    if config.distributed:
        # decode: this device's slice width-sharded over one row of cores, the gathered stats on one core
        local = dim // cols
        cores = _grids.largest_divisor(local // TILE, 8)
        tiles_per_core = local // cores // TILE
        defaults.update(
            decode_input_memcfg=_grids.width_sharded(rows, local, ttnn.CoreGrid(y=1, x=cores)),
            decode_program_config=ttnn.LayerNormShardedMultiCoreProgramConfig(
                compute_with_storage_grid_size=(cores, 1),
                subblock_w=tiles_per_core,
                block_h=rows // TILE,
                block_w=tiles_per_core,
                inplace=False,
            ),
            decode_stats_memcfg=_grids.width_sharded(rows, TILE * cols, ttnn.CoreGrid(y=1, x=1)),
        )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
    weight = weight.with_defaults(
        device=mesh, dtype=ttnn.bfloat16, layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG
    )
    weight_distributed = resolved.weight_distributed
    if config.distributed and weight_distributed is None:
        weight_distributed = replace(
            weight,
            mesh_mapper_config=_columns_mapper(mesh, 2),
            name=f"{weight.name}_distributed" if weight.name else None,
        )
    return replace(resolved, weight=weight, weight_distributed=weight_distributed)


def _columns_mapper(mesh, dim: int):
    """Replicated over the mesh rows, ``dim`` split over the columns."""
    return ttnn.MeshMapperConfig(
        [ttnn.PlacementReplicate(), ttnn.PlacementShard(dim)], ttnn.MeshShape(*mesh_shape(mesh))
    )


class RMSNorm2D(TTModule):
    """``RMSNorm2D(weight, *, distributed=True)``: weight of shape (dim,) or (1, 1, dim / 32, 32)."""

    CONFIG_CLASS = RMSNorm2DConfig
    HARDWARE = HardwareGroups(
        math={
            "compute_kernel_config": MathSetting(
                ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=False, packer_l1_acc=False
            )
        },
        placement={
            "decode_input_memcfg": Placement("L1", "width_sharded"),
            "prefill_input_memcfg": Placement("DRAM", "interleaved"),
        },
    )

    def __init__(self, weight: LazyWeight, *, eps: float = 1e-5, distributed: bool = True) -> None:
        self._setup(RMSNorm2DConfig(weight=weight, eps=eps, distributed=distributed))

    _resolve_config = staticmethod(_resolve_rmsnorm2d_config)

    def _bind(self) -> None:
        cfg = self.config
        self._decode = self._decode_distributed if cfg.distributed else self._decode_local
        self._prefill = self._prefill_distributed if cfg.distributed else self._prefill_local
        self._input_mapper = _columns_mapper(cfg.mesh_device, -1) if cfg.distributed else None

    def decode_forward(self, x):
        """[1, 1, rows, dim / columns] per device (whole rows when not distributed) → the same shape."""
        return self._decode(x)

    def prefill_forward(self, x):
        """[1, 1, seq_len, dim / columns] per device (whole rows when not distributed) → the same shape."""
        return self._prefill(x)

    def _load(self, x, owner, memory_config):
        return load_input(
            x,
            owner=owner,
            device=self.config.mesh_device,
            memory_config=memory_config,
            mesh_mapper_config=self._input_mapper,
        )

    def _decode_distributed(self, x):
        cfg = self.config
        x = self._load(x, "RMSNorm2D.decode_forward", cfg.decode_input_memcfg)
        x = ttnn.to_memory_config(x, memory_config=cfg.decode_input_memcfg)
        stats = ttnn.rms_norm_pre_all_gather(x, program_config=cfg.decode_program_config)
        all_stats = self._gather_stats(stats, cfg.decode_stats_memcfg)
        out = ttnn.rms_norm_post_all_gather(
            x,
            epsilon=cfg.eps,
            weight=cfg.weight_distributed.get_device_weight(),
            program_config=cfg.decode_program_config,
            stats=all_stats,
        )
        all_stats.deallocate(True)
        return out

    def _prefill_distributed(self, x):
        cfg = self.config
        x = self._load(x, "RMSNorm2D.prefill_forward", cfg.prefill_input_memcfg)
        stats = ttnn.rms_norm_pre_all_gather(
            x, compute_kernel_config=cfg.compute_kernel_config, dtype=ttnn.bfloat16
        )
        # one 32-wide statistics tile per row before the exchange
        stats = ttnn.reshape(stats, ttnn.Shape((1, 1, x.shape[-2], TILE)))
        stats = ttnn.to_memory_config(stats, ttnn.DRAM_MEMORY_CONFIG)
        all_stats = self._gather_stats(stats, cfg.prefill_stats_memcfg)
        stats.deallocate(True)
        out = ttnn.rms_norm_post_all_gather(
            x,
            all_stats,
            epsilon=cfg.eps,
            weight=cfg.weight_distributed.get_device_weight(),
            compute_kernel_config=cfg.compute_kernel_config,
        )
        all_stats.deallocate(True)
        return out

    def _gather_stats(self, stats, memory_config):
        cfg = self.config
        return _ccl.all_gather(
            stats, cfg, dim=3, cluster_axis=_COLUMNS, memory_config=memory_config, num_links=cfg.num_links
        )

    def _decode_local(self, x):
        return self._local(self._load(x, "RMSNorm2D.decode_forward", self.config.decode_input_memcfg))

    def _prefill_local(self, x):
        return self._local(self._load(x, "RMSNorm2D.prefill_forward", self.config.prefill_input_memcfg))

    def _local(self, x):
        cfg = self.config
        return ttnn.rms_norm(
            x,
            epsilon=cfg.eps,
            weight=cfg.weight.get_device_weight(),
            compute_kernel_config=cfg.compute_kernel_config,
        )

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
        state_dict_prefix=None,
    ) -> RMSNorm2D:
        """tttv1's ``DistributedNorm`` on a Galaxy (its RMSNorm run distributed) as an RMSNorm2D."""
        if not args.is_galaxy:
            raise ValueError(
                f"RMSNorm2D requires a Galaxy (8x4), got cluster shape {args.cluster_shape}; use RMSNorm1D instead"
            )
        name = tttv1_norm_weight_name(weight_key, layer_num, state_dict_prefix)
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path
        config = RMSNorm2DConfig(
            weight=LazyWeight(host_array(state_dict[name]), cache_dir=cache_dir, name=name),
            mesh_device=mesh_device,
            tt_ccl=tt_ccl,
            topology=ttnn.Topology.Linear,
            num_links=tt_ccl.get_num_links(_COLUMNS),
            dim=args.dim,
            eps=args.norm_eps,
            add_unit_offset=args.rms_norm_add_unit_offset,
            max_batch_size=args.max_batch_size,
        )
        return cls.from_config(config)
