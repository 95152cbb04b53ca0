"""Data parallelism across ranks: the gradient all-reduce over MPI.

Each rank trains the same model on its slice of the batch on its own (local) mesh; after ``backward``,
:func:`all_reduce_gradients_` replaces every gradient by its mean over the ranks. The sum is the emulator's own
(``ttnn.all_reduce``'s float32 ring-order sum, rank 0 first), quantised to the gradient's dtype and then scaled
by ``1 / size`` with ``ttnn.multiply``, so N ranks of one device each give bit for bit the gradients of one
process whose N-device mesh runs ``ttnn.nn.utils.all_reduce_gradients_`` (docs/distributed.md).
"""

from __future__ import annotations

import zlib

import numpy as np

from .. import ttnn
from ..ttnn.autograd import no_grad
from ..ttnn.ops._common import output_like
from ..ttnn.ops.ccl import _ring_sum
from . import _mpi

__all__ = ["all_reduce_gradients_"]

_OWNER = "tttv2.distributed.all_reduce_gradients_"


def _as_list(parameters) -> list:
    if isinstance(parameters, dict):
        return list(parameters.values())
    if isinstance(parameters, ttnn.Tensor):
        return [parameters]
    return list(parameters)


def reduce_gathered(shards: list[np.ndarray], gathered: list[np.ndarray]) -> list[np.ndarray]:
    """Each of this rank's ``shards``, summed over the ranks' byte buffers ``gathered`` (rank order) with the
    emulator's float32 ring-order sum."""
    offset = 0
    summed: list[np.ndarray] = []
    for s in shards:
        n = s.nbytes
        summed.append(_ring_sum([g[offset : offset + n].view(s.dtype).reshape(s.shape) for g in gathered]))
        offset += n
    return summed


def all_reduce_gradients_(parameters, *, average: bool = True) -> None:
    """Replace each gradient of ``parameters`` (an iterable, or a name → tensor map) by its sum over the ranks
    (``average``: the mean), in place. Every rank must pass the same parameters in the same order; parameters
    without a gradient are skipped (on every rank: a rank that has one where another has none is an error).
    Each local device's shard is reduced with the same device's shard on the other ranks. One MPI all-gather
    carries every gradient; it waits at most ``TTTV2_DISTRIBUTED_TIMEOUT`` seconds."""
    comm = _mpi.initialize()
    size = comm.Get_size()
    params = _as_list(parameters)
    wrong = next((p for p in params if not isinstance(p, ttnn.Tensor)), None)
    if wrong is not None:
        raise _mpi.DistributedError(
            f"{_OWNER}: parameters: expected ttnn tensors, got a {type(wrong).__name__}"
        )
    with_grad = [p for p in params if p.grad is not None]
    if size == 1:
        return
    spread = next(
        (p.grad.device() for p in with_grad if p.grad.device() is not None and p.grad.device().spans_ranks()),
        None,
    )
    if spread is not None:
        raise _mpi.DistributedError(
            f"{_OWNER}: a gradient lives on {spread}, one logical mesh spread over the ranks: its devices are "
            "already every rank's; average over its axes with ttnn.nn.utils.all_reduce_gradients_ (or "
            "ttnn.nn.parallel.DistributedDataParallel) instead"
        )
    shards = [np.ascontiguousarray(s) for p in with_grad for s in p.grad.shards(_OWNER)]
    layout = ";".join(f"{s.dtype}{list(s.shape)}" for s in shards)
    # the description carries a digest of the layout: ranks with different gradients disagree loudly
    what = f"{_OWNER} of {len(with_grad)} gradients (layout {zlib.crc32(layout.encode()):08x})"
    flat = np.concatenate([s.reshape(-1).view(np.uint8) for s in shards]) if shards else np.zeros(0, np.uint8)
    summed = reduce_gathered(shards, _mpi.allgather_bytes(flat, what))
    with no_grad():
        k = 0
        for p in with_grad:
            count = len(p.grad.shards(_OWNER))
            total = output_like(_OWNER, summed[k : k + count], p.grad, topology=p.grad.tensor_topology())
            k += count
            p.grad = ttnn.multiply(total, 1.0 / size) if average else total
