"""Values moved to construction whose field names used to mislead: an argument named after the local the call
is assigned to (``x``), a test named after the local of the conditional it decides (``big_2``), two values passed as the same keyword
of the same op (``add_memory_config`` / ``add_memory_config_2``)."""

import ttnn


class Names:
    def __init__(self, mesh_device, args):
        self.args = args
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        links = 2 if self.args.is_galaxy else 1
        scale = self.args.dim / 32
        steps = self.args.dim // 32
        x = ttnn.mul(x, float(links))
        x = ttnn.mul(x, scale + steps)
        rows = x.shape[-2]
        u = "a"
        big = rows >= self.model_config["BIG"] if u == "a" else False
        if big:
            x = ttnn.add(x, 1.0)
        wide = self.args.dim >= 64
        x = ttnn.add(x, 1.0, memory_config=ttnn.DRAM_MEMORY_CONFIG if wide else ttnn.L1_MEMORY_CONFIG)
        return ttnn.add(x, 2.0, memory_config=ttnn.L1_MEMORY_CONFIG if wide else ttnn.DRAM_MEMORY_CONFIG)
