"""The emulator's ops, one module per family. Each module lists its public names in ``__all__`` (the ``ttnn``
namespace), ``__experimental__`` (``ttnn.experimental``) and ``__transformer__`` (``ttnn.transformer``)."""

from . import (
    attention,
    ccl,
    creation,
    data_movement,
    eltwise,
    embedding,
    kv_cache,
    matmul,
    normalization,
    p2p,
    reduction,
    rng,
    sdpa,
    sockets,
    training,
)

OP_MODULES = (
    eltwise,
    matmul,
    normalization,
    data_movement,
    embedding,
    reduction,
    creation,
    attention,
    kv_cache,
    sdpa,
    ccl,
    training,
    p2p,
    rng,
    sockets,
)

__all__ = ["OP_MODULES"]
