"""The same two matmuls in a module built from weights already on the device (no device argument): the core
grid still comes from ``default_matmul_grid(x.device())``, the device of the input."""

import ttnn

from rwide.dense.grid_utils import default_matmul_grid
from rwide.lightweightmodule import LightweightModule


class TtDenseGridGiven(LightweightModule):
    def __init__(self, args, up_weight, down_weight):
        super().__init__()
        self.model_config = args.get_model_config()
        self.up_weight = up_weight
        self.down_weight = down_weight

    def forward(self, x: ttnn.Tensor) -> ttnn.Tensor:
        hidden = ttnn.linear(
            x,
            self.up_weight,
            memory_config=self.model_config["OUT_MEMCFG"],
            core_grid=default_matmul_grid(x.device()),
        )
        return ttnn.matmul(hidden, self.down_weight, memory_config=self.model_config["OUT_MEMCFG"])
