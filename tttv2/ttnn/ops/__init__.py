"""The emulator's ops, one module per family. Each module lists its public names in ``__all__`` (the ``ttnn``
namespace), ``__experimental__`` (``ttnn.experimental``) and ``__transformer__`` (``ttnn.transformer``)."""

from .._upcalls import provide
from . import (
    _common,
    attention,
    ccl,
    creation,
    data_movement,
    eltwise,
    embedding,
    kv_cache,
    llama_ccl,
    matmul,
    normalization,
    p2p,
    pool,
    prefetch,
    reduction,
    rng,
    sdpa,
    sharded_partial,
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
    llama_ccl,
    training,
    p2p,
    prefetch,
    rng,
    sockets,
    pool,
    sharded_partial,
)

__all__ = ["OP_MODULES"]

# what the layers below call up into (Tensor's methods, the autograd engine, synchronize_device)
provide(
    add=eltwise.add,
    subtract=eltwise.subtract,
    rsub=eltwise.rsub,
    multiply=eltwise.multiply,
    neg=eltwise.neg,
    matmul=matmul.matmul,
    ones_like=creation.ones_like,
    to_layout=data_movement.to_layout,
    reshape=data_movement.reshape,
    getitem=data_movement.getitem,
    output_like=_common.output_like,
    TensorSpec=sockets.TensorSpec,
    complete_sends=sockets.complete_sends,
)
