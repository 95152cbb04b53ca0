"""The MPI world of this process: mpi4py imported on first use, collectives that wait with a deadline.

Nothing here imports mpi4py until a rank asks for its world, so ``tttv2.ttnn`` loads without the
``distributed`` extra. Every collective is started non-blocking and polled until it completes or the deadline
(``TTTV2_DISTRIBUTED_TIMEOUT`` seconds, 60 by default; ``tttv2-run --timeout`` sets it) passes: a rank whose
peer died or never arrives raises :class:`DistributedTimeoutError` instead of waiting forever.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import numpy as np

__all__ = [
    "DEFAULT_TIMEOUT",
    "INSTALL_HINT",
    "DistributedError",
    "DistributedTimeoutError",
    "MPIUnavailableError",
]

DEFAULT_TIMEOUT = 60.0
EVERY_RANK_GRACE = 10.0  # at most this long a rank waits for the others before MPI_Abort (see every_rank)
INSTALL_HINT = "pip install 'tttv2[distributed]' (mpi4py and the mpich wheel)"
# set by the MPICH launcher (hydra) in every rank it starts
LAUNCH_VARIABLES = ("PMI_RANK", "PMI_SIZE")


class DistributedError(RuntimeError):
    """Ranks that disagree (different collectives, different buffers) or a distributed API used wrongly."""


class DistributedTimeoutError(DistributedError):
    """A collective did not complete before the deadline: a peer rank died, hangs, or never called it."""


class MPIUnavailableError(DistributedError, ImportError):
    """mpi4py (or the MPI library it needs) is not installed."""


for _cls in (DistributedError, DistributedTimeoutError, MPIUnavailableError):
    _cls.__module__ = "tttv2.distributed"  # where users import them from (and what tracebacks show)


_state: dict = {"comm": None}


def launched_size() -> int:
    """How many ranks the launcher started (1 outside ``tttv2-run`` / ``mpiexec``)."""
    try:
        return max(1, int(os.environ.get("PMI_SIZE", "1")))
    except ValueError:
        return 1


def launched() -> bool:
    return all(v in os.environ for v in LAUNCH_VARIABLES)


def timeout() -> float:
    """The deadline of one collective, in seconds (``TTTV2_DISTRIBUTED_TIMEOUT``)."""
    raw = os.environ.get("TTTV2_DISTRIBUTED_TIMEOUT", "")
    if not raw.strip():
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise DistributedError(
            f"TTTV2_DISTRIBUTED_TIMEOUT: expected a positive number of seconds, got {raw!r}"
        )
    return value


def _import_mpi():
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise MPIUnavailableError(f"MPI is not installed: {INSTALL_HINT}") from exc
    return MPI


def initialize():
    """Initialise MPI once (idempotent) and return COMM_WORLD. An unhandled exception in any rank then aborts
    the whole job (after printing its traceback) instead of leaving the other ranks waiting."""
    if _state["comm"] is None:
        mpi = _import_mpi()
        comm = mpi.COMM_WORLD
        _state["comm"] = comm
        if comm.Get_size() > 1:
            _install_abort_on_error(comm)
    return _state["comm"]


def world():
    """COMM_WORLD if the context is initialised, else None."""
    return _state["comm"]


def _install_abort_on_error(comm) -> None:
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        _record_error(comm.Get_rank(), "".join(traceback.format_exception_only(kind, value)).strip())
        if getattr(value, "on_every_rank", False):
            # every rank found the same fault at the same point: let each say so before the first one aborts
            meet(comm, EVERY_RANK_GRACE)
        comm.Abort(1)

    sys.excepthook = hook


def _record_error(rank: int, message: str) -> None:
    """Under ``tttv2-run``: leave the error for the launcher's report (MPI_Abort kills every rank at once)."""
    run_dir = os.environ.get("TTTV2_RUN_DIR")
    if run_dir and os.path.isdir(run_dir):
        tmp = os.path.join(run_dir, f"rank-{rank}.error.tmp")
        with open(tmp, "w") as f:
            f.write(message.splitlines()[-1] if message else "an unhandled exception")
        os.replace(tmp, os.path.join(run_dir, f"rank-{rank}.error"))


def every_rank(error: DistributedError) -> DistributedError:
    """Mark ``error`` as one that every rank raises at the same point (ranks that disagree, a mesh that does not
    divide): a rank that dies of it meets the other ranks (at most ``EVERY_RANK_GRACE`` seconds) before aborting
    the job, so every rank's error shows, not only the first one's."""
    error.on_every_rank = True
    return error


def meet(comm, seconds: float) -> bool:
    """Wait at most ``seconds`` for every rank to reach this point (a one-byte all-gather); False if one did not."""
    mpi = _import_mpi()
    got = np.empty(comm.Get_size(), dtype=np.uint8)
    request = comm.Iallgather([np.zeros(1, dtype=np.uint8), mpi.BYTE], [got, mpi.BYTE])
    start = time.monotonic()
    while not request.Test():
        if time.monotonic() - start > seconds:
            return False
        time.sleep(0.001)
    return True


def wait(request, what: str) -> None:
    """Poll a non-blocking MPI request until it completes; raise :class:`DistributedTimeoutError` at the
    deadline. Sleeps between polls (a rank waiting for a slow peer does not spin a core)."""
    limit = timeout()
    start = time.monotonic()
    pause = 0.0001
    while not request.Test():
        if time.monotonic() - start > limit:
            rank = _state["comm"].Get_rank() if _state["comm"] is not None else 0
            raise DistributedTimeoutError(
                f"rank {rank}: {what} did not complete within {limit:g} s: another rank died, hangs, or never "
                "reached it (TTTV2_DISTRIBUTED_TIMEOUT sets the deadline)"
            )
        time.sleep(pause)
        pause = min(pause * 2, 0.005)


def barrier(what: str = "barrier") -> None:
    """Wait for every rank: an all-gather of no data, so a rank that runs another collective is detected."""
    allgather_bytes(np.zeros(0, dtype=np.uint8), what)


_LABEL = 200  # bytes of a collective's description in its header


def header(nbytes: int, what: str) -> np.ndarray:
    """What a rank announces before a collective: the payload's size and the collective's description."""
    return np.frombuffer(np.int64(nbytes).tobytes() + what.encode()[:_LABEL].ljust(_LABEL), dtype=np.uint8)


def check_headers(rank: int, mine: np.ndarray, headers: np.ndarray) -> None:
    """Raise on every rank if any rank announced another collective or another payload size than ``mine``."""
    check_headers_of(rank, mine, headers, list(range(headers.shape[0])))


def check_headers_of(rank: int, mine: np.ndarray, headers: np.ndarray, ranks: list[int]) -> None:
    """:func:`check_headers` for a group of ranks: ``headers[k]`` came from world rank ``ranks[k]``."""
    for k in range(headers.shape[0]):
        if bytes(headers[k]) != bytes(mine):

            def describe(h):
                label = bytes(h[8:]).decode(errors="replace").rstrip()
                return f"{label} on {int(h[:8].view(np.int64)[0])} bytes"

            raise every_rank(
                DistributedError(
                    f"rank {rank}: ranks disagree: this rank runs {describe(mine)}, rank {ranks[k]} runs "
                    f"{describe(headers[k])} (every rank must run the same collectives in the same order)"
                )
            )


def allgather_bytes(payload: np.ndarray, what: str) -> list[np.ndarray]:
    """Every rank's ``payload`` (a contiguous array, viewed as bytes), in rank order. The ranks first exchange
    the payload's size and a description (``what``), so ranks that run different collectives or pass different
    buffers raise a :class:`DistributedError` on every rank, naming both, instead of corrupting or hanging."""
    comm = initialize()
    return allgather_bytes_on(comm, payload, what, list(range(comm.Get_size())))


def allgather_bytes_on(comm, payload: np.ndarray, what: str, ranks: list[int]) -> list[np.ndarray]:
    """:func:`allgather_bytes` over ``comm``, a communicator of some of the ranks (world rank ``ranks[k]`` is its
    rank ``k``; errors name world ranks)."""
    size = comm.Get_size()
    data = np.ascontiguousarray(payload).reshape(-1).view(np.uint8)
    if size == 1:
        return [data.copy()]
    mpi = _import_mpi()
    mine = header(data.size, what)
    headers = np.empty((size, mine.size), dtype=np.uint8)
    wait(comm.Iallgather([mine, mpi.BYTE], [headers, mpi.BYTE]), what)
    check_headers_of(ranks[comm.Get_rank()], mine, headers, ranks)
    if data.size == 0:
        return [data.copy() for _ in range(size)]
    gathered = np.empty((size, data.size), dtype=np.uint8)
    wait(comm.Iallgather([data, mpi.BYTE], [gathered, mpi.BYTE]), what)
    return list(gathered)


# --- point to point (sockets, the sweep's coordinator): added for MeshSocket and `collect-cases sweep` ----------


def _deadline_error(what: str, limit: float) -> DistributedTimeoutError:
    rank = _state["comm"].Get_rank() if _state["comm"] is not None else 0
    return DistributedTimeoutError(
        f"rank {rank}: {what} did not complete within {limit:g} s: another rank died, hangs, or never reached it "
        "(TTTV2_DISTRIBUTED_TIMEOUT sets the deadline)"
    )


def isend_bytes(payload: np.ndarray, dest: int, tag: int):
    """Start sending ``payload`` (a contiguous array, as bytes) to rank ``dest``; returns the MPI request. The
    caller keeps ``payload`` alive until the request completes (:func:`wait`)."""
    comm = initialize()
    mpi = _import_mpi()
    data = np.ascontiguousarray(payload).reshape(-1).view(np.uint8)
    return comm.Isend([data, mpi.BYTE], dest=dest, tag=tag)


def poll_message(source: int, tag: int):
    """The next message from ``source`` with ``tag`` if one has arrived (matched: no other receive can take it),
    else None; never waits."""
    comm = initialize()
    mpi = _import_mpi()
    status = mpi.Status()
    message = comm.Improbe(source=source, tag=tag, status=status)
    if message is None:
        return None
    return message, status.Get_count(mpi.BYTE)


def recv_bytes(source: int, tag: int, what: str, limit: float | None = None) -> np.ndarray:
    """The next message from rank ``source`` with ``tag``, as bytes; waits at most ``limit`` seconds (default:
    the collectives' deadline) and raises :class:`DistributedTimeoutError` after that."""
    limit = timeout() if limit is None else limit
    start = time.monotonic()
    pause = 0.0001
    while True:
        found = poll_message(source, tag)
        if found is not None:
            break
        if time.monotonic() - start > limit:
            raise _deadline_error(what, limit)
        time.sleep(pause)
        pause = min(pause * 2, 0.005)
    message, nbytes = found
    buffer = np.empty(nbytes, dtype=np.uint8)
    wait(message.Irecv([buffer, _import_mpi().BYTE]), what)
    return buffer


def has_message(source: int, tag: int) -> bool:
    """Whether a message from ``source`` with ``tag`` has arrived (it stays for the next receive); never waits."""
    return bool(initialize().Iprobe(source=source, tag=tag))
