"""A SwiGLU MLP with tt-metal's constructor signature: (mesh_device, tt_ccl, args, state_dict, weight_cache_path,
layer_num, dtype, model_config, state_dict_prefix=None); the forward takes a Mode member."""

import torch
import ttnn

from tmx.tt.common import LightweightModule, Mode


class MLP(LightweightModule):
    def __init__(
        self,
        mesh_device,
        tt_ccl,
        args,
        state_dict,
        weight_cache_path,
        layer_num,
        dtype,
        model_config,
        state_dict_prefix=None,
    ):
        super().__init__()
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.args = args
        self.model_config = model_config
        prefix = state_dict_prefix or args.get_state_dict_prefix("feed_forward", layer_num)
        if args.is_galaxy:
            up_mapper = ttnn.ShardTensor2dMesh(mesh_device, dims=(None, -1), mesh_shape=args.cluster_shape)
            down_mapper = ttnn.ShardTensor2dMesh(mesh_device, dims=(None, -2), mesh_shape=args.cluster_shape)
        else:
            up_mapper = ttnn.ShardTensorToMesh(mesh_device, dim=-1)
            down_mapper = ttnn.ShardTensorToMesh(mesh_device, dim=-2)

        def as_weight(name, mapper):
            return ttnn.as_tensor(
                torch.transpose(state_dict[f"{prefix}{name}.weight"], -2, -1),
                dtype=dtype,
                device=mesh_device,
                layout=ttnn.TILE_LAYOUT,
                mesh_mapper=mapper,
                memory_config=ttnn.DRAM_MEMORY_CONFIG,
            )

        self.w1 = as_weight("w1", up_mapper)
        self.w3 = as_weight("w3", up_mapper)
        self.w2 = as_weight("w2", down_mapper)

    def forward(self, x: ttnn.Tensor, mode: Mode) -> ttnn.Tensor:
        gate = ttnn.silu(ttnn.linear(x, self.w1))
        up = ttnn.linear(x, self.w3)
        hidden = ttnn.mul(gate, up)
        out = ttnn.linear(hidden, self.w2)
        if self.args.num_devices > 1:
            out = self.tt_ccl.line_all_reduce(out, memory_config=self.model_config["MLP_OUT_MEMCFG"])
        if mode == Mode.DECODE:
            out = ttnn.to_memory_config(out, self.args.mlp_output_memory_config("decode"))
        return out
