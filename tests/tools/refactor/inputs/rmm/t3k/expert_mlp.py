"""A Mixture-of-Experts feed-forward of the tt_lib era, one expert per device (tt-metal's T3000 Mixtral MLP): the
experts' weights stacked on dim 0 and sharded over the mesh, program configs of
``ttnn.experimental.operations.primary`` built in ``__init__`` with the gate's SiLU fused as a ``FusibleActivation``,
and a forward of ``matmul_1d`` calls and ``ttnn.experimental.tensor.mul``, with the older keywords
(``output_mem_config``, ``output_dtype``). It has no mode: the configs hold one row tile of M (decode)."""

import torch
import ttnn
from ttnn import ShardTensorToMesh


def _mcast_1d(block_w, per_core_n, activation):
    return ttnn.experimental.operations.primary.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(6, 7),
        in0_block_w=block_w,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=per_core_n,
        fuse_batch=True,
        fused_activation=activation,
        mcast_in0=True,
    )


class TtExpertMLP(torch.nn.Module):
    def __init__(self, device_mesh, state_dict, args, layer_num):
        super().__init__()
        self.device_mesh = device_mesh
        self.model_args = args
        self.model_config = args.get_model_config()
        n_experts = device_mesh.get_num_devices()
        stacked = lambda name: torch.concat(  # noqa: E731 (tt-metal writes it so)
            [
                state_dict[f"layers.{layer_num}.experts.{e}.{name}.weight"]
                .permute(1, 0)
                .unsqueeze(0)
                .unsqueeze(0)
                for e in range(n_experts)
            ],
            dim=0,
        )
        upload = lambda name: ttnn.as_tensor(  # noqa: E731 (tt-metal writes it so)
            stacked(name),
            dtype=ttnn.bfloat8_b,
            device=device_mesh,
            mesh_mapper=ShardTensorToMesh(device_mesh, dim=0),
            layout=ttnn.TILE_LAYOUT,
            memory_config=self.model_config["EXPERT_WEIGHTS_MEMCFG"],
        )
        self.w1 = ttnn.to_device(upload("w1"), device_mesh)
        self.w2 = ttnn.to_device(upload("w2"), device_mesh)
        self.w3 = ttnn.to_device(upload("w3"), device_mesh)
        self.gate_cfg = _mcast_1d(2, 2, ttnn.experimental.tensor.FusibleActivation.SILU)
        self.up_cfg = _mcast_1d(2, 2, None)
        self.down_cfg = _mcast_1d(4, 1, None)

    def forward(self, x):
        gate = ttnn.experimental.operations.primary.matmul_1d(
            x,
            self.w1,
            program_config=self.gate_cfg,
            output_mem_config=self.model_config["EXPERT_FF1_MEMCFG"],
            compute_kernel_config=self.model_args.get_compute_kernel_config(),
            output_dtype=ttnn.bfloat8_b,
        )
        up = ttnn.experimental.operations.primary.matmul_1d(
            x,
            self.w3,
            program_config=self.up_cfg,
            output_mem_config=self.model_config["EXPERT_FF1_MEMCFG"],
            compute_kernel_config=self.model_args.get_compute_kernel_config(),
            output_dtype=ttnn.bfloat8_b,
        )
        hidden = ttnn.experimental.tensor.mul(gate, up)
        return ttnn.experimental.operations.primary.matmul_1d(
            hidden,
            self.w2,
            program_config=self.down_cfg,
            output_mem_config=self.model_config["EXPERT_FF2_MEMCFG"],
            compute_kernel_config=self.model_args.get_compute_kernel_config(),
            output_dtype=ttnn.bfloat8_b,
        )
