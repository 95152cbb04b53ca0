"""``tttv2.distributed``: the emulator beyond one process, on MPI (docs/distributed.md).

* ``tttv2-run --np N -- COMMAND`` (:mod:`tttv2.distributed.run`) starts N ranks through the mpich wheel's
  ``mpiexec``;
* ``ttnn.init_distributed_context`` / ``distributed_context_get_rank`` / ... are tt-metal's names for the
  world of ranks (``tttv2.ttnn.distributed_context``);
* :func:`all_reduce_gradients_` averages gradients over the ranks (data parallelism across processes).

Needs the ``distributed`` extra (``pip install 'tttv2[distributed]'``); importing this package does not.
"""

from __future__ import annotations

from ._mpi import DistributedError, DistributedTimeoutError, MPIUnavailableError

__all__ = ["DistributedError", "DistributedTimeoutError", "MPIUnavailableError", "all_reduce_gradients_"]


def __getattr__(name: str):
    # all_reduce_gradients_ works on ttnn tensors, so _training sits above tttv2.ttnn, whose device layer imports
    # _mpi and _mesh from this package: loading _training with the package would close a circle. It loads on
    # first use of the name instead (tests/ttnn/test_layers.py).
    if name == "all_reduce_gradients_":
        from ._training import all_reduce_gradients_

        return all_reduce_gradients_
    raise AttributeError(f"module 'tttv2.distributed' has no attribute {name!r}")
