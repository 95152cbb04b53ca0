"""A stack of layers in the style of tt_transformers' Transformer.forward: per layer, a dtype the precision
object gives (a choice per iteration, known at construction for each layer), a first test on the mode and the
topology, and an ``elif`` that ANDs that dtype with the dtype of the tensor the previous layer returned."""

import ttnn

from rcon.gated_ffn import TtGatedFFN
from rcon.lightweightmodule import LightweightModule


class TtStack(LightweightModule):
    def __init__(self, mesh_device, args, state_dict):
        self.args = args
        self.model_config = args.get_model_config()
        self.layers = [TtGatedFFN(mesh_device, args, state_dict, layer_num=i) for i in range(args.n_layers)]

    def forward(self, x, mode="decode"):
        for i, layer in enumerate(self.layers):
            activation_dtype = self.model_config["DECODERS_OPTIMIZATIONS"].get_tensor_dtype(
                decoder_id=i, tensor="activation"
            )
            if mode == "decode" and not self.args.is_galaxy:
                x = ttnn.to_memory_config(x, self.model_config["DECODE_RESIDUAL_MEMCFG"], activation_dtype)
            elif activation_dtype is not None and x.dtype != activation_dtype:
                x = ttnn.typecast(x, activation_dtype)
            x = layer(x, mode)
        return x
