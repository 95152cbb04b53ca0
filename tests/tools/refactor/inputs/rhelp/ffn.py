"""A feed-forward block in tt-metal's style, reading helpers and constants from files the analysis does not
read: a core-range helper and a tensor-group enum from model_config.py, ``nearest_32`` from a utilities module, a
collective from another demo's ``*_ccl.py`` (called without its ``num_links``), ``math`` from the standard
library; a ``zip`` of its weights and gains and an ``enumerate`` of its gains, which are static; and a dict keyed
by the enum's members, looked up at run time."""

import math

import ttnn

from .demo.demo_ccl import gather_rows
from .model_config import TensorGroup, num_to_corerange
from .utils import nearest_32


class FFN:
    def __init__(self, mesh_device, args, state_dict):
        self.mesh_device = mesh_device
        self.args = args
        self.model_config = args.get_model_config()
        self.ws = [self._weight(state_dict[name]) for name in ("w1", "w2")]
        self.gains = [0.5, 2.0]
        self.group_gains = {TensorGroup.FF1: 1.0, TensorGroup.FF2: 4.0}

    def _weight(self, tensor):
        return ttnn.as_tensor(
            tensor,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def forward(self, x, mode):
        rows = x.shape[-2]
        padded = nearest_32(rows + 1)
        grid = ttnn.CoreRangeSet({num_to_corerange(self.args.max_batch_size)})
        dtype = self.args.decoders_optimizations.get_tensor_dtype(decoder_id=0, tensor=TensorGroup.FF1)
        for w, gain in zip(self.ws, self.gains):
            x = ttnn.multiply(ttnn.linear(x, w, dtype=dtype), gain)
        if mode == "decode" and padded > rows and grid.num_cores() > 0:
            x = ttnn.multiply(x, math.sqrt(4.0))
        group = TensorGroup.FF2 if rows > 32 else TensorGroup.FF1
        steps = enumerate(self.gains)
        for i, gain in steps:
            if i == 0:
                x = ttnn.multiply(x, gain * self.group_gains[group])
        x = gather_rows(x, self.mesh_device)
        return ttnn.to_memory_config(x, self.model_config["OUT_MEMCFG"])
