"""A decoder-style block whose static branches nest (the Llama-3 70B Galaxy decoder's last-layer / qk-norm
tests): the inner arm reads a run-time local of the forward that only the outer arm's method receives."""

import ttnn


class Block:
    def __init__(self, mesh_device, args, layer_num=0, n_layers=1):
        self.mesh_device = mesh_device
        self.args = args
        self.layer_num = layer_num
        self.n_layers = n_layers
        self.qk_norm = args.dim > 32

    def forward(self, x, mode):
        skip_mem_cfg = ttnn.DRAM_MEMORY_CONFIG if x.shape[-2] > 32 else ttnn.L1_MEMORY_CONFIG
        h = ttnn.add(x, x)
        if self.layer_num == self.n_layers - 1:
            if self.qk_norm:
                h = ttnn.to_memory_config(h, skip_mem_cfg)
            h = ttnn.add(h, x, memory_config=skip_mem_cfg)
        return h
