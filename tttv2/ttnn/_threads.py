"""How the emulator uses the CPU's threads: its worker pool and its BLAS threading policy.

Results must not depend on how many threads compute them (equivalence tests compare modules bit for bit),
so the policy is:

* Every BLAS call the emulator makes runs on one BLAS thread, whichever thread calls the op.
  :data:`single_threaded_blas` limits the BLAS libraries of the process (through ``threadpoolctl``) for the
  duration of an op and restores their previous thread count afterwards, so a user's own numpy code keeps the
  ``OPENBLAS_NUM_THREADS`` (or default) it had. Environment variables are never read or changed. A
  ``ttnn.nn`` module's call, a backward and an optimizer step hold the limit once for all the ops they run
  (setting and restoring it cost ~10 µs an op, ~3 ms a NanoGPT training step), so numpy code a user runs
  inside a module's ``forward`` runs on one BLAS thread too.
* threadpoolctl (3.7 and later) lets only one "controlling" Python thread change a pthreads OpenBLAS: the
  first thread to set a limit keeps that role while it lives, and ``set_num_threads`` from any other thread
  does nothing. The main thread never ends, so an op run in a worker thread used to keep the default thread
  count and gave different bits. :func:`_set_threads` calls the library's own setter instead; the
  process-wide count and lock here already do the coordination that guard exists for.
* Parallelism comes from the emulator's own pool instead: the callers split work into pieces whose bounds
  depend on the shapes only (:mod:`.numerics`), and the pool computes them; one worker computes the very
  same pieces one after the other.

``TTTV2_NUM_THREADS`` sets the worker count (default: the number of CPUs, at most 8), as it does for the C++
kernels.
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["WORKERS", "single_threaded_blas", "submit", "worker_count"]

ENV_VAR = "TTTV2_NUM_THREADS"
_MAX_WORKERS = 8


def worker_count(environ=os.environ) -> int:
    """The number of threads the emulator computes with: ``TTTV2_NUM_THREADS``, else the CPU count (1..8)."""
    raw = environ.get(ENV_VAR, "").strip()
    if not raw:
        return max(1, min(_MAX_WORKERS, os.cpu_count() or 1))
    try:
        wanted = int(raw)
    except ValueError:
        wanted = 0
    if wanted < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer (the emulator's worker threads), got {raw!r}")
    return min(_MAX_WORKERS, wanted)


WORKERS = worker_count()


def _set_threads(lib, count: int) -> None:
    """Set a BLAS library's thread count from any thread (see the module docstring for why not
    ``lib.set_num_threads``, which threadpoolctl ignores off its controlling thread)."""
    setter = getattr(lib, "_real_set_num_threads", None) or lib.set_num_threads
    setter(count)


class _SingleThreadedBlas:
    """Context manager: inside, every BLAS library loaded when it is first used (numpy's, the one the ops call)
    runs on one thread; a BLAS another package loads later (scipy's own OpenBLAS) is not the ops' and is left
    alone.

    Re-entrant and shared by all threads: the outermost entry lowers the thread counts, the matching last exit
    puts back the counts it found. The libraries are looked up once, on first use (numpy's BLAS is loaded when
    numpy is imported, long before).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._restore: list[tuple[object, int]] = []
        self._libraries: list | None = None

    def libraries(self) -> list:
        """threadpoolctl's controllers of the BLAS libraries loaded in this process."""
        if self._libraries is None:
            from threadpoolctl import ThreadpoolController

            self._libraries = list(ThreadpoolController().select(user_api="blas").lib_controllers)
        return self._libraries

    def __enter__(self) -> _SingleThreadedBlas:
        with self._lock:
            self._depth += 1
            if self._depth == 1:
                for lib in self.libraries():
                    threads = lib.num_threads
                    if threads is not None and threads != 1:
                        _set_threads(lib, 1)
                        self._restore.append((lib, threads))
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth == 0:
                for lib, threads in self._restore:
                    _set_threads(lib, threads)
                self._restore.clear()

    @property
    def active(self) -> bool:
        return self._depth > 0


single_threaded_blas = _SingleThreadedBlas()

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _init_worker() -> None:
    """BLAS libraries that limit threads per calling thread (OpenMP builds) need the limit in each worker too;
    the workers only ever run emulator compute, so it stays for their lifetime."""
    for lib in single_threaded_blas.libraries():
        if getattr(lib, "threading_layer", None) == "openmp":
            _set_threads(lib, 1)


def submit(fn, *args) -> Future:
    """Run ``fn(*args)`` on a pool thread in a copy of the caller's context (numpy's errstate is a contextvar)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(
                max(1, WORKERS - 1), thread_name_prefix="tttv2-worker", initializer=_init_worker
            )
    return _pool.submit(contextvars.copy_context().run, fn, *args)


def _forget_pool() -> None:  # a forked child has none of the parent's threads
    global _pool, _pool_lock
    _pool, _pool_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)
