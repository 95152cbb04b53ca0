"""RotarySetup1D: the rotary-embedding tables on a 1-D mesh and the lookups attention needs.

The cos / sin tables are [1, 1, positions, head_dim] in the interleaved ("Meta") layout, each frequency
repeated for the two members of its pair; they live on every device (replicated, row-major). Decode looks one
row up per user with ``ttnn.embedding`` on uint32 positions and height-shards the rows one user per core, as
``rotary_embedding_llama`` wants; prefill slices the rows of a run of positions (optionally zero-padded to a
length). The transformation matrices (one 32×32 pair-swap tile, per user in decode) are built here too.
``rope_tables`` computes the tables in numpy, with Llama-3 frequency scaling.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _grids
from tttv2.modules._hardware import HardwareGroups, Placement
from tttv2.modules._inputs import load_input
from tttv2.modules._module import TTModule, mode_name
from tttv2.modules._topology import require_1d_mesh, resolve_mesh_device
from tttv2.modules.lazy_weight import LazyWeight

__all__ = ["RotarySetup1D", "RotarySetup1DConfig", "rope_tables", "rotation_tile"]

TILE = _grids.TILE


def _llama3_scaled(freqs: np.ndarray, scaling: dict) -> np.ndarray:
    """Llama-3 long-context scaling: a frequency with fewer than ``low_freq_factor`` periods in the original
    context is divided by ``factor``, one with more than ``high_freq_factor`` is kept, and in between the
    divisor moves linearly with the number of periods."""
    factor = float(scaling["factor"])
    low, high = float(scaling.get("low_freq_factor", 1.0)), float(scaling.get("high_freq_factor", 4.0))
    context = float(scaling.get("original_max_position_embeddings", 8192))
    periods = freqs * context / (2 * math.pi)
    keep = np.clip((periods - low) / (high - low), 0.0, 1.0)
    return freqs * (keep + (1.0 - keep) / factor)


def rope_tables(head_dim: int, positions: int, theta: float, rope_scaling: dict | None = None):
    """cos and sin [1, 1, positions, head_dim] float32, interleaved layout. ``rope_scaling`` is a Hugging Face
    ``rope_scaling`` dict; "default" (or None) and "llama3" are supported."""
    if head_dim % 2:
        raise ValueError(f"rope_tables: head_dim must be even, got {head_dim}")
    rope_type = (rope_scaling or {}).get("rope_type", (rope_scaling or {}).get("type", "default"))
    if rope_type not in ("default", "llama3"):
        raise ValueError(f"rope_tables: rope_scaling type must be 'default' or 'llama3', got {rope_type!r}")
    freqs = float(theta) ** -(np.arange(head_dim // 2, dtype=np.float64) * 2 / head_dim)
    if rope_type == "llama3":
        freqs = _llama3_scaled(freqs, rope_scaling)
    angles = np.arange(positions, dtype=np.float64)[:, None] * freqs[None, :]
    cos = np.repeat(np.cos(angles).astype(np.float32), 2, axis=-1)
    sin = np.repeat(np.sin(angles).astype(np.float32), 2, axis=-1)
    return cos[None, None], sin[None, None]


def rotation_tile() -> np.ndarray:
    """The 32×32 tile ``rotary_embedding_llama`` multiplies each head tile by: x @ M maps each interleaved pair
    (x0, x1) to (-x1, x0). One tile serves every head_dim. Shape [1, 1, 32, 32]."""
    pair = np.array([[0.0, 1.0], [-1.0, 0.0]], dtype=np.float32)
    return np.kron(np.eye(TILE // 2, dtype=np.float32), pair)[None, None]


def lookup_rows(idxs, table: LazyWeight, users: int, memory_config):
    """The table row of each user's position: [1, users, 1, head_dim] (users on dim 1, so each is its own padded
    tile), height-sharded one user per core as ``rotary_embedding_llama`` wants."""
    rows = ttnn.embedding(idxs, table.get_device_weight(), layout=ttnn.TILE_LAYOUT)  # [1, padded users, hd]
    rows = ttnn.transpose(ttnn.unsqueeze_to_4D(rows), 1, 2)
    rows = rows[:, :users, :, :]
    return ttnn.interleaved_to_sharded(rows, memory_config)


def prefill_rows(owner: str, config, start_pos: int, seq_len: int, pad_to: int | None):
    """[cos, sin] rows start_pos .. start_pos + seq_len - 1 of a rotary config's tables, zero-padded to
    ``pad_to`` rows, tiled into ``config.prefill_output_memcfg``."""
    positions = config.cos_matrix.shape[-2]
    if start_pos < 0 or seq_len < 1 or start_pos + seq_len > positions:
        raise ValueError(
            f"{owner}.prefill_forward: positions [{start_pos}, {start_pos + seq_len}) are outside the "
            f"tables' [0, {positions})"
        )
    rows = seq_len if pad_to is None else pad_to
    if rows < seq_len:
        raise ValueError(f"{owner}.prefill_forward: pad_to {pad_to} is shorter than seq_len {seq_len}")
    out = []
    for table in (config.cos_matrix, config.sin_matrix):
        piece = ttnn.slice(
            table.get_device_weight(), (0, 0, start_pos, 0), (1, 1, start_pos + seq_len, config.head_dim)
        )
        piece = ttnn.pad(piece, padding=[(0, 0), (0, 0), (0, rows - seq_len), (0, 0)], value=0.0)
        out.append(ttnn.to_layout(piece, ttnn.TILE_LAYOUT, memory_config=config.prefill_output_memcfg))
    return out


@dataclass
class RotarySetup1DConfig:
    """Everything RotarySetup1D needs; ``None`` fields are resolved by ``RotarySetup1D``."""

    cos_matrix: LazyWeight  # [1, 1, positions, head_dim] (or [positions, head_dim]), interleaved layout
    sin_matrix: LazyWeight
    max_batch_size: int = 32
    mesh_device: Any = None
    head_dim: int | None = None
    datatype: Any = None
    batch_grid: Any = None  # one core per user in decode
    decode_cos_sin_memcfg: Any = None
    decode_trans_mat: LazyWeight | None = None  # one rotation tile per user, height-sharded
    prefill_trans_mat: LazyWeight | None = None
    prefill_output_memcfg: Any = None


# the same for RotarySetup2D
HARDWARE_GROUPS = HardwareGroups(
    dtypes={"datatype": ttnn.bfloat16},
    placement={
        "decode_cos_sin_memcfg": Placement("L1", "height_sharded"),
        "prefill_output_memcfg": Placement("DRAM", "interleaved"),
    },
)


def placed_tables(config, cos: LazyWeight, sin: LazyWeight, mesh, per_user):
    """``config`` with the tables (row-major, DRAM) and the rotation matrices (tiled; one tile per user in decode,
    ``per_user(width)`` the height-sharded layout) placed on ``mesh`` in ``config.datatype``."""

    def on_mesh(weight, layout, memory_config):
        return weight.with_defaults(
            device=mesh, dtype=config.datatype, layout=layout, memory_config=memory_config
        )

    return replace(
        config,
        cos_matrix=on_mesh(cos, ttnn.ROW_MAJOR_LAYOUT, ttnn.DRAM_MEMORY_CONFIG),
        sin_matrix=on_mesh(sin, ttnn.ROW_MAJOR_LAYOUT, ttnn.DRAM_MEMORY_CONFIG),
        decode_trans_mat=on_mesh(config.decode_trans_mat, ttnn.TILE_LAYOUT, per_user(TILE)),
        prefill_trans_mat=on_mesh(config.prefill_trans_mat, ttnn.TILE_LAYOUT, ttnn.DRAM_MEMORY_CONFIG),
    )


def table_weight(owner: str, name: str, weight) -> LazyWeight:
    if not isinstance(weight, LazyWeight):
        raise TypeError(f"{owner}: {name} must be a LazyWeight, got {type(weight).__name__}")
    shape = weight.shape
    if len(shape) == 2:
        return replace(weight, source=weight.source.reshape(1, 1, *shape))
    if len(shape) != 4 or shape[:2] != (1, 1):
        raise ValueError(
            f"{owner}: {name} must have shape (positions, head_dim) or (1, 1, positions, head_dim), got {shape}"
        )
    return weight


def _resolve_rope_config(config: RotarySetup1DConfig) -> RotarySetup1DConfig:
    owner = "RotarySetup1D"
    cos = table_weight(owner, "cos_matrix", config.cos_matrix)
    sin = table_weight(owner, "sin_matrix", config.sin_matrix)
    if cos.shape != sin.shape:
        raise ValueError(
            f"{owner}: cos_matrix {cos.shape} and sin_matrix {sin.shape} must have the same shape"
        )
    mesh = resolve_mesh_device(owner, config.mesh_device, cos, sin)
    require_1d_mesh(owner, mesh, "RotarySetup2D")
    head_dim = cos.shape[-1]
    if config.head_dim is not None and config.head_dim != head_dim:
        raise ValueError(f"{owner}: head_dim {config.head_dim} does not match the tables' {head_dim}")
    grid = mesh.compute_with_storage_grid_size()
    if not 1 <= config.max_batch_size <= grid.x * grid.y:
        raise ValueError(
            f"{owner}: max_batch_size must be 1..{grid.x * grid.y} (one core per user), got {config.max_batch_size}"
        )
    batch = config.max_batch_size
    batch_grid = config.batch_grid or ttnn.num_cores_to_corerangeset(batch, grid, row_wise=True)
    datatype = config.datatype or ttnn.bfloat16

    def per_user(width):
        return ttnn.create_sharded_memory_config(
            shape=(TILE, width),
            core_grid=batch_grid,
            strategy=ttnn.ShardStrategy.HEIGHT,
            orientation=ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True,
        )

    defaults = dict(
        mesh_device=mesh,
        head_dim=head_dim,
        datatype=datatype,
        batch_grid=batch_grid,
        decode_cos_sin_memcfg=per_user(head_dim),
        decode_trans_mat=LazyWeight(
            np.concatenate([rotation_tile()] * batch, axis=2), name="rope_decode_trans_mat"
        ),
        prefill_trans_mat=LazyWeight(rotation_tile(), name="rope_prefill_trans_mat"),
        prefill_output_memcfg=ttnn.DRAM_MEMORY_CONFIG,
    )
    resolved = replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})

    return placed_tables(resolved, cos, sin, mesh, per_user)


class RotarySetup1D(TTModule):
    """``RotarySetup1D(cos_matrix, sin_matrix, max_batch_size)``: tables as LazyWeights (see ``rope_tables``)."""

    CONFIG_CLASS = RotarySetup1DConfig
    HARDWARE = HARDWARE_GROUPS

    def __init__(self, cos_matrix: LazyWeight, sin_matrix: LazyWeight, max_batch_size: int = 32) -> None:
        self._setup(
            RotarySetup1DConfig(cos_matrix=cos_matrix, sin_matrix=sin_matrix, max_batch_size=max_batch_size)
        )

    _resolve_config = staticmethod(_resolve_rope_config)

    def _bind(self) -> None:
        self._users = self.config.max_batch_size
        self._padded_users = _grids.nearest_multiple(self._users, TILE)

    def forward(self, mode, *args, **kwargs):
        """``forward("decode", rot_idxs)`` or ``forward("prefill", start_pos, seq_len, pad_to=None)``."""
        step = self.decode_forward if mode_name("RotarySetup1D", mode) == "decode" else self.prefill_forward
        return step(*args, **kwargs)

    @property
    def transformation_mats(self) -> dict:
        """{"decode": per-user rotation tiles (height-sharded), "prefill": one rotation tile in DRAM}."""
        cfg = self.config
        return {
            "decode": cfg.decode_trans_mat.get_device_weight(),
            "prefill": cfg.prefill_trans_mat.get_device_weight(),
        }

    def get_rot_idxs(self, positions, on_host: bool = False):
        """Positions (one per user, a sequence or 1-D array) → uint32 [1, users padded to 32] on the mesh
        (``on_host``: a host tensor for trace inputs)."""
        array = np.asarray(positions)
        if array.ndim != 1 or array.size > self._users or (array.size and array.min() < 0):
            raise ValueError(
                f"RotarySetup1D.get_rot_idxs: positions must be a 1-D array of at most {self._users} non-negative "
                f"ints, got shape {array.shape}"
            )
        row = np.zeros((1, self._padded_users), dtype=np.uint32)
        row[0, : array.size] = array
        placement = (
            {} if on_host else {"device": self.config.mesh_device, "memory_config": ttnn.DRAM_MEMORY_CONFIG}
        )
        return ttnn.from_numpy(
            row,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.config.mesh_device),
            **placement,
        )

    def decode_forward(self, rot_idxs):
        """uint32 [1, users padded to 32] (a ttnn.Tensor, e.g. from ``get_rot_idxs``, or a LazyWeight of that
        shape) → [cos, sin], each [1, users, 1, head_dim] height-sharded one user per core."""
        cfg = self.config
        idxs = load_input(
            rot_idxs,
            owner="RotarySetup1D.decode_forward",
            device=cfg.mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            arg="rot_idxs",
        )
        if idxs.device() is None:  # a host tensor (e.g. get_rot_idxs(on_host=True), a trace input)
            idxs = ttnn.to_device(idxs, cfg.mesh_device, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return [self._rows_per_user(idxs, table) for table in (cfg.cos_matrix, cfg.sin_matrix)]

    def _rows_per_user(self, idxs, table):
        return lookup_rows(idxs, table, self._users, self.config.decode_cos_sin_memcfg)

    def prefill_forward(self, start_pos: int, seq_len: int, pad_to: int | None = None):
        """[cos, sin] rows start_pos .. start_pos + seq_len - 1, each [1, 1, seq_len (or pad_to), head_dim],
        tiled; rows past seq_len are zero."""
        return prefill_rows("RotarySetup1D", self.config, start_pos, seq_len, pad_to)

    @classmethod
    def from_model_args(cls, device, args, model_name: str = "unknown") -> RotarySetup1D:
        """tttv1's ``RotarySetup`` as a RotarySetup1D: the same tables (tttv1's ``compute_gather_cos_sin`` over
        2 × max_seq_len positions), the same batch."""
        if args.is_galaxy:
            raise ValueError("RotarySetup1D cannot be used for Galaxy devices; use RotarySetup2D instead")
        from tttv1.tt.common import compute_gather_cos_sin

        cos, sin = compute_gather_cos_sin(
            dhead=args.head_dim,
            end=2 * args.max_seq_len,
            theta=args.rope_theta,
            rope_scaling=args.rope_scaling,
        )
        config = RotarySetup1DConfig(
            cos_matrix=LazyWeight(cos, name=f"{model_name}.rope_cos"),
            sin_matrix=LazyWeight(sin, name=f"{model_name}.rope_sin"),
            max_batch_size=args.max_batch_size,
            mesh_device=device,
        )
        return cls.from_config(config)
