"""The same output helper one commit later: it takes ``out_memory_config=`` too."""

import ttnn


def scaled_output(x, scale=None, memory_config=None, sharded=False, out_memory_config=None):
    if scale is None:
        scale = 0.5
    if sharded and memory_config is not None:
        x = ttnn.to_memory_config(x, memory_config)
    return ttnn.mul(x, scale, memory_config=out_memory_config)
