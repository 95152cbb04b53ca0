"""A two-matmul MLP whose module-level matmul helpers pick their compute kernel config by the hardware query of
each architecture (``if is_grayskull(): cfg = … elif is_wormhole_b0(): cfg = … else: cfg = None``), as
Falcon-7B's ``falcon_dense_h_to_4h_matmul`` / ``falcon_dense_4h_to_h_matmul`` do; the first also asserts on its
``fused_activation`` past a sequence length. The queries are imported from a file above the module's folder
(``models/utility_functions.py`` from ``models/demos/falcon7b_common/tt/``)."""

import torch
import ttnn

from rwide.lightweightmodule import LightweightModule
from rwide.utility_functions import is_grayskull, is_wormhole_b0


def dense_down(a, b, core_grid, out_memcfg=ttnn.DRAM_MEMORY_CONFIG):
    if is_grayskull():
        compute_kernel_config = ttnn.GrayskullComputeKernelConfig(math_fidelity=ttnn.MathFidelity.LoFi)
    elif is_wormhole_b0():
        compute_kernel_config = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=False, packer_l1_acc=True
        )
    else:
        compute_kernel_config = None
    return ttnn.matmul(
        a, b, memory_config=out_memcfg, core_grid=core_grid, compute_kernel_config=compute_kernel_config
    )


def dense_up(a, b, core_grid, fused_activation=None, out_memcfg=ttnn.DRAM_MEMORY_CONFIG):
    rows = a.shape[-2]
    if rows > 1024:
        assert fused_activation is None
        return ttnn.matmul(a, b, memory_config=out_memcfg)
    if is_grayskull():
        compute_kernel_config = ttnn.GrayskullComputeKernelConfig(math_fidelity=ttnn.MathFidelity.LoFi)
    elif is_wormhole_b0():
        compute_kernel_config = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=False, packer_l1_acc=True
        )
    else:
        compute_kernel_config = None
    return ttnn.matmul(
        a,
        b,
        memory_config=out_memcfg,
        core_grid=core_grid,
        activation=fused_activation,
        compute_kernel_config=compute_kernel_config,
    )


class TtDenseGelu(LightweightModule):
    def __init__(self, mesh_device, args, state_dict, dtype=ttnn.bfloat16):
        super().__init__()
        self.mesh_device = mesh_device
        self.model_config = args.get_model_config()
        as_weight = lambda name: ttnn.as_tensor(  # noqa: E731 (tt-metal writes it so)
            torch.transpose(state_dict[name], -2, -1),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh_device,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )
        self.up = as_weight("mlp.up.weight")
        self.down = as_weight("mlp.down.weight")

    def forward(self, x):
        grid = ttnn.CoreGrid(y=4, x=8)
        h = dense_up(x, self.up, grid, fused_activation="gelu", out_memcfg=self.model_config["OUT_MEMCFG"])
        return dense_down(h, self.down, grid, out_memcfg=self.model_config["OUT_MEMCFG"])
