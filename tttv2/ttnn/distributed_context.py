"""tt-metal's distributed context, by its Python names, over MPI (``tttv2.distributed``).

``init_distributed_context()`` initialises MPI (the ``distributed`` extra); ``distributed_context_get_rank`` /
``_get_size`` / ``_barrier`` then answer for the world of ranks ``tttv2-run`` (or ``mpiexec``) started. A
process that was not launched as a rank is a world of one: rank 0, size 1, barriers return at once, without
MPI. ``using_distributed_env()`` is True when more than one rank runs.
"""

from __future__ import annotations

from ..distributed import _mpi

__all__ = [
    "Rank",
    "Size",
    "distributed_context_barrier",
    "distributed_context_get_rank",
    "distributed_context_get_size",
    "distributed_context_is_initialized",
    "init_distributed_context",
    "using_distributed_env",
]


class Rank(int):
    """A rank in the world (tt-metal's strong type; ``int(rank)`` gives the number)."""

    def __repr__(self) -> str:
        return f"Rank({int(self)})"

    __str__ = int.__repr__  # prints as the number


class Size(int):
    """The number of ranks in the world (``int(size)`` gives the number)."""

    def __repr__(self) -> str:
        return f"Size({int(self)})"

    __str__ = int.__repr__


def init_distributed_context() -> None:
    """Initialise the world of ranks (MPI); idempotent. Raises ``MPIUnavailableError`` without the extra."""
    _mpi.initialize()


def distributed_context_is_initialized() -> bool:
    return _mpi.world() is not None


def _comm():
    """The world, initialised on first use in a launched rank; None in a process of its own."""
    comm = _mpi.world()
    if comm is None and _mpi.launched():
        comm = _mpi.initialize()
    return comm


def distributed_context_get_rank() -> Rank:
    comm = _comm()
    return Rank(0 if comm is None else comm.Get_rank())


def distributed_context_get_size() -> Size:
    comm = _comm()
    return Size(1 if comm is None else comm.Get_size())


def distributed_context_barrier() -> None:
    """Wait for every rank (at most ``TTTV2_DISTRIBUTED_TIMEOUT`` seconds, then ``DistributedTimeoutError``)."""
    if _comm() is not None:
        _mpi.barrier("ttnn.distributed_context_barrier")


def using_distributed_env() -> bool:
    comm = _mpi.world()
    return (comm.Get_size() if comm is not None else _mpi.launched_size()) > 1
