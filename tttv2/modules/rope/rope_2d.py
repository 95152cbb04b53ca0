"""RotarySetup2D: the rotary-embedding tables on a Galaxy (2-D mesh) and the lookups Attention2D needs.

The cos / sin tables ([1, 1, positions, head_dim], interleaved layout, see ``rope_tables``) are replicated on
every device. In decode each mesh column serves ``max_batch_size / columns`` users (Attention2D's split), so the
positions are split over the columns and each column looks up the rows of its own users, one user per core; a
single user is the same user on every column. Prefill slices the rows of a run of positions, as
``RotarySetup1D`` does. The transformation matrices (one rotation tile, per user of a column in decode) are here
too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _grids
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, mode_name
from tttv2.modules._topology import mesh_shape, require_2d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight
from tttv2.modules.rope.rope_1d import (
    HARDWARE_GROUPS,
    lookup_rows,
    placed_tables,
    prefill_rows,
    rotation_tile,
    table_weight,
)

__all__ = ["RotarySetup2D", "RotarySetup2DConfig"]

TILE = _grids.TILE
_OWNER = "RotarySetup2D"


@dataclass
class RotarySetup2DConfig:
    """Everything RotarySetup2D needs; ``None`` fields are resolved by ``RotarySetup2D``."""

    cos_matrix: LazyWeight  # [1, 1, positions, head_dim] (or [positions, head_dim]), interleaved layout
    sin_matrix: LazyWeight
    max_batch_size: int = 32
    mesh_device: Any = None
    head_dim: int | None = None
    users_per_column: int | None = None  # max_batch_size / columns (at least 1)
    datatype: Any = None
    decode_cos_sin_memcfg: Any = None  # one user per core, height-sharded
    decode_trans_mat: LazyWeight | None = None  # one rotation tile per user of a column
    prefill_trans_mat: LazyWeight | None = None
    prefill_output_memcfg: Any = None


def _resolve_rope2d_config(config: RotarySetup2DConfig) -> RotarySetup2DConfig:
    cos = table_weight(_OWNER, "cos_matrix", config.cos_matrix)
    sin = table_weight(_OWNER, "sin_matrix", config.sin_matrix)
    if cos.shape != sin.shape:
        raise ValueError(
            f"{_OWNER}: cos_matrix {cos.shape} and sin_matrix {sin.shape} must have the same shape"
        )
    mesh = resolve_mesh_device(_OWNER, config.mesh_device, cos, sin)
    require_2d_mesh(_OWNER, mesh, "RotarySetup1D")
    _, cols = mesh_shape(mesh)
    head_dim = cos.shape[-1]
    if config.head_dim is not None and config.head_dim != head_dim:
        raise ValueError(f"{_OWNER}: head_dim {config.head_dim} does not match the tables' {head_dim}")
    batch = config.max_batch_size
    if batch < 1 or (batch > 1 and batch % cols):
        raise ValueError(
            f"{_OWNER}: max_batch_size must be 1 or a multiple of the {cols} mesh columns, got {batch}"
        )
    users = max(batch // cols, 1)
    grid = ttnn.num_cores_to_corerangeset(users, mesh.compute_with_storage_grid_size(), row_wise=True)

    def per_user(width):
        return ttnn.create_sharded_memory_config(
            shape=(TILE, width),
            core_grid=grid,
            strategy=ttnn.ShardStrategy.HEIGHT,
            orientation=ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True,
        )

    defaults = dict(
        mesh_device=mesh,
        head_dim=head_dim,
        users_per_column=users,
        datatype=ttnn.bfloat16,
        decode_cos_sin_memcfg=per_user(head_dim),
        decode_trans_mat=LazyWeight(
            np.concatenate([rotation_tile()] * users, axis=2), name="rope2d_decode_trans_mat"
        ),
        prefill_trans_mat=LazyWeight(rotation_tile(), name="rope2d_prefill_trans_mat"),
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})

    return placed_tables(resolved, cos, sin, mesh, per_user)


class RotarySetup2D(TTModule):
    """``RotarySetup2D(cos_matrix, sin_matrix, max_batch_size)`` on an R×C mesh (tables from ``rope_tables``)."""

    CONFIG_CLASS = RotarySetup2DConfig
    HARDWARE = HARDWARE_GROUPS

    def __init__(self, cos_matrix: LazyWeight, sin_matrix: LazyWeight, max_batch_size: int = 32) -> None:
        self._setup(
            RotarySetup2DConfig(cos_matrix=cos_matrix, sin_matrix=sin_matrix, max_batch_size=max_batch_size)
        )

    _resolve_config = staticmethod(_resolve_rope2d_config)

    def _bind(self) -> None:
        cfg = self.config
        rows, cols = mesh_shape(cfg.mesh_device)
        self._users = cfg.users_per_column
        # several users: each column gets its run of positions; one user: padded to a tile and replicated
        self._positions = self._split_positions if cfg.max_batch_size > 1 else self._replicated_positions
        self._columns = ttnn.MeshMapperConfig(
            [ttnn.PlacementReplicate(), ttnn.PlacementShard(1)], ttnn.MeshShape(rows, cols)
        )

    def forward(self, mode, *args, **kwargs):
        """``forward("decode", rot_idxs)`` or ``forward("prefill", start_pos, seq_len, pad_to=None)``."""
        step = self.decode_forward if mode_name(_OWNER, mode) == "decode" else self.prefill_forward
        return step(*args, **kwargs)

    @property
    def transformation_mats(self) -> dict:
        """{"decode": per-user rotation tiles (height-sharded), "prefill": one rotation tile in DRAM}."""
        cfg = self.config
        return {
            "decode": cfg.decode_trans_mat.get_device_weight(),
            "prefill": cfg.prefill_trans_mat.get_device_weight(),
        }

    def get_rot_idxs(self, positions):
        """Positions (one per user, ``max_batch_size`` of them) → uint32 [1, users per column] on each column
        (one user: [1, 32], replicated)."""
        array = np.asarray(positions)
        if array.ndim != 1 or array.size != self.config.max_batch_size or (array.size and array.min() < 0):
            raise ValueError(
                f"{_OWNER}.get_rot_idxs: positions must be a 1-D array of {self.config.max_batch_size} "
                f"non-negative ints, got shape {array.shape}"
            )
        return self._positions(array.astype(np.uint32).reshape(1, -1))

    def _split_positions(self, row):
        return self._device_ids(row, self._columns)

    def _replicated_positions(self, row):
        return self._device_ids(np.pad(row, ((0, 0), (0, TILE - row.shape[1]))), None)

    def _device_ids(self, row, mapper):
        return LazyWeight(
            row,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            mesh_mapper_config=mapper,
            device=self.config.mesh_device,
        ).get_device_weight()

    def decode_forward(self, rot_idxs):
        """uint32 positions per column (from ``get_rot_idxs``) → [cos, sin], each [1, users per column, 1,
        head_dim] height-sharded one user per core."""
        cfg = self.config
        idxs = load_input(
            rot_idxs,
            owner=f"{_OWNER}.decode_forward",
            device=cfg.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            arg="rot_idxs",
        )
        return [
            lookup_rows(idxs, table, self._users, cfg.decode_cos_sin_memcfg)
            for table in (cfg.cos_matrix, cfg.sin_matrix)
        ]

    def prefill_forward(self, start_pos: int, seq_len: int, pad_to: int | None = None):
        """[cos, sin] rows start_pos .. start_pos + seq_len - 1, each [1, 1, seq_len (or pad_to), head_dim],
        tiled; rows past seq_len are zero."""
        return prefill_rows(_OWNER, self.config, start_pos, seq_len, pad_to)
