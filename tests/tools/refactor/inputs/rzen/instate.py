"""Modules whose forward keeps plain Python state on the instance, as tt-metal's do. ``CountingHead`` counts its
calls and picks the memory config of its output on the first call (from that call's rows), then reuses it;
after two calls it halves its output. ``GrowingPositions`` keeps a table of position offsets and makes it again,
longer, when a longer sequence than any before arrives (as tt_transformers' rotary embedding grows its cos/sin
cache); ``__init__`` leaves the cache empty, so the first call builds it. ``WarmupScale`` starts its position
from a constructor argument and advances it by each call's rows, scaling its input down until it passes the
warm-up length."""

import torch
import ttnn


class CountingHead:
    def __init__(self, mesh_device, state_dict, prefix):
        self.mesh_device = mesh_device
        self.weight = ttnn.as_tensor(
            state_dict[prefix + "head.weight"],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.calls = 0
        self.seen_rows = []
        self.output_memory_config = None

    def forward(self, x):
        self.calls += 1
        self.seen_rows.append(x.shape[-2])
        if self.output_memory_config is None:
            if x.shape[-2] <= 32:
                self.output_memory_config = ttnn.L1_MEMORY_CONFIG
            else:
                self.output_memory_config = ttnn.DRAM_MEMORY_CONFIG
        out = ttnn.matmul(x, self.weight, memory_config=self.output_memory_config)
        if self.calls > 2:
            out = ttnn.mul(out, 0.5)
        return out


class GrowingPositions:
    def __init__(self, mesh_device, width, scale=0.01):
        self.mesh_device = mesh_device
        self.width = width
        self.scale = scale
        self._build_table(32)
        self.rows_cached = None
        self.table = None

    def _build_table(self, rows):
        self.rows_cached = rows
        positions = torch.arange(rows, dtype=torch.float32).unsqueeze(-1) * self.scale
        offsets = positions * torch.ones(1, self.width)
        self.table = offsets.reshape(1, 1, rows, self.width)

    def forward(self, x):
        rows = x.shape[-2]
        if self.rows_cached is None or rows > self.rows_cached:
            self._build_table(rows)
        offsets = ttnn.from_torch(
            self.table[:, :, :rows, :],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )
        return ttnn.add(x, offsets)


class WarmupScale:
    def __init__(self, mesh_device, start_pos, warmup_rows=128):
        self.mesh_device = mesh_device
        self.warmup_rows = warmup_rows
        self.current_pos = start_pos

    def forward(self, x):
        self.current_pos = self.current_pos + x.shape[-2]
        if self.current_pos >= self.warmup_rows:
            return x
        return ttnn.mul(x, self.current_pos / self.warmup_rows)
