"""A module that keeps a part of ModelArgs (``self.decoders_optimizations = self.args.decoders_optimizations``)
and queries it in forward, passing ModelArgs itself along (``configuration=self.args``), as tt-metal's MLP does."""

import ttnn

from rzen.precision import TensorKind


class Tuned:
    def __init__(self, mesh_device, args, layer_num=0):
        self.args = args
        self.layer_num = layer_num
        self.decoders_optimizations = self.args.decoders_optimizations

    def forward(self, x, mode):
        activation_dtype = self.decoders_optimizations.get_tensor_dtype(
            decoder_id=self.layer_num, tensor=TensorKind.ACTIVATION
        )
        scale = self.decoders_optimizations.get_scale(decoder_id=self.layer_num, configuration=self.args)
        x = ttnn.mul(x, scale)
        return ttnn.typecast(x, activation_dtype or ttnn.bfloat8_b)


class Eps:
    """``self.eps`` from a ModelArgs member set by name (``setattr``), read in forward."""

    def __init__(self, mesh_device, args):
        self.eps = args.rope_eps

    def forward(self, x, mode):
        return ttnn.rms_norm(x, epsilon=self.eps)
