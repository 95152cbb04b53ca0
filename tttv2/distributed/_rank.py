"""One rank under ``tttv2-run``: ``python -m tttv2.distributed._rank RUN_DIR COMMAND ...`` (started by mpiexec).

Applies the rank's environment (the rank binding), sends the output of ranks other than 0 to
``RUN_DIR/rank-R.log`` (unless every rank's output is shown), runs COMMAND as a child that dies with this
process, and records the child's exit status in ``RUN_DIR/rank-R.exit`` for the launcher. Standard library only:
it starts before anything else in the rank.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import threading

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _prefix_lines(source, sink, rank: int) -> None:
    """Copy the child's output line by line, each line prefixed with ``[rank] `` (whole lines, so the ranks'
    lines do not interleave mid-line)."""
    prefix = f"[{rank}] ".encode()
    for line in iter(source.readline, b""):
        sink.write(prefix + line if line.endswith(b"\n") else prefix + line + b"\n")
        sink.flush()
    source.close()


def main(argv: list[str]) -> int:
    run_dir, command = argv[0], argv[1:]
    rank = int(os.environ["PMI_RANK"])
    with open(os.path.join(run_dir, "plan.json")) as f:
        plan = json.load(f)
    env = dict(os.environ)
    env.update(plan["env"][rank])
    out = None
    if plan["all_output"]:
        out = subprocess.PIPE  # every line prefixed with the rank, by this process
    elif rank != 0:
        out = open(os.path.join(run_dir, f"rank-{rank}.log"), "wb")  # noqa: SIM115 - closed below
    pumps = []
    previous: dict = {}
    try:
        child = subprocess.Popen(
            command,
            env=env,
            stdout=out,
            stderr=out,
            close_fds=False,  # the MPI process manager's PMI_FD must reach the rank
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
        )
    except OSError as exc:
        print(f"tttv2-run: rank {rank}: cannot run {command[0]!r}: {exc.strerror}", file=sys.stderr)
        code = 127
    else:
        for sig in (signal.SIGTERM, signal.SIGINT):  # put back in `finally` (main also runs in-process)
            previous[sig] = signal.signal(sig, lambda s, _f: child.send_signal(s))
        if out is subprocess.PIPE:
            pumps = [
                threading.Thread(target=_prefix_lines, args=(child.stdout, sys.stdout.buffer, rank)),
                threading.Thread(target=_prefix_lines, args=(child.stderr, sys.stderr.buffer, rank)),
            ]
            for pump in pumps:
                pump.start()
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for pump in pumps:
            pump.join()
        if out not in (None, subprocess.PIPE):
            out.close()
    tmp = os.path.join(run_dir, f"rank-{rank}.exit.tmp")
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, os.path.join(run_dir, f"rank-{rank}.exit"))
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
