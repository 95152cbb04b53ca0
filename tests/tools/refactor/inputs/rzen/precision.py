"""Per-decoder precision settings kept by ModelArgs, queried by the modules at run time (in the style of
tt-metal's ``DecodersPrecision``: ``get_tensor_dtype(decoder_id=…, tensor=…)``, ``get_math_fidelity(…,
configuration=args)``)."""

import ttnn


class TensorKind:
    ACTIVATION = "activation"


class DecodersPrecision:
    def __init__(self, n_layers, dim):
        self.dtypes = {i: ttnn.bfloat16 if i % 2 == 0 else None for i in range(n_layers)}
        self.dim = dim

    def get_tensor_dtype(self, decoder_id, tensor):
        return self.dtypes[decoder_id] if tensor == TensorKind.ACTIVATION else None

    def get_scale(self, decoder_id, configuration):
        return 1.0 + configuration.dim / 256 + decoder_id
