"""What tests/distributed/test_run.py runs in every rank: ``python -m tests.distributed.rank_program MODE``."""

from __future__ import annotations

import os
import signal
import sys
import time

import numpy as np

from tttv2 import ttnn


def main(mode: str) -> int:
    if mode == "no-mpi":  # a rank that never initialises MPI
        print(f"plain rank {os.environ['PMI_RANK']} {os.environ.get('GREETING', '-')}", flush=True)
        if os.environ["PMI_RANK"] == "1":
            return 3
        time.sleep(60)  # rank 0 outlives rank 1: the launcher must end it
        return 0
    ttnn.init_distributed_context()
    rank = int(ttnn.distributed_context_get_rank())
    size = int(ttnn.distributed_context_get_size())
    print(f"hello from rank {rank} of {size} {os.environ.get('GREETING', '-')}", flush=True)
    if rank == 1 and mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if rank == 1 and mode == "raise":
        raise ValueError("rank 1 cannot go on")
    if rank == 1 and mode == "leave":
        sys.exit(3)  # leaves without telling anyone: rank 0's barrier times out
    if mode == "mismatch" and rank == 1:
        from tttv2.distributed._mpi import allgather_bytes

        allgather_bytes(np.arange(4, dtype=np.float32), "a four-float exchange")
    ttnn.distributed_context_barrier()
    print(f"rank {rank} passed the barrier", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
