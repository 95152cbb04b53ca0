"""An output helper of an older commit, in the style of the ccl.py that tt_transformers' newer mlp.py no longer
matches: it does not take the ``out_memory_config=`` keyword the newer callers pass."""

import ttnn


def scaled_output(x, scale=None, memory_config=None, sharded=False):
    if scale is None:
        scale = 0.5
    if sharded and memory_config is not None:
        x = ttnn.to_memory_config(x, memory_config)
    return ttnn.mul(x, scale)
