"""``tttv2-run``: start N ranks of a program through MPI, like tt-metal's ``tt-run`` (docs/distributed.md).

    tttv2-run --np N [--rank-binding FILE] [--all-output] [--timeout S] [--grace S] -- COMMAND ...

The ranks are started by the ``mpiexec`` of the mpich wheel (the ``distributed`` extra), each through
``tttv2.distributed._rank``. Only rank 0's output is shown unless ``--all-output`` (then every line carries its
rank); a failed rank's own output is printed after the run. A rank that fails stops the job: MPI's process
manager ends the others, and if some are still running ``--grace`` seconds later the launcher kills them.
Collectives wait at most ``--timeout`` seconds (``TTTV2_DISTRIBUTED_TIMEOUT`` in every rank).

Exit codes: 0 every rank succeeded; 2 bad arguments, a bad rank binding or MPI not installed; otherwise the
exit code of the first rank that failed (128 + N for a rank killed by signal N), or 1; 130 on Ctrl-C and
128 + N when the launcher itself gets SIGTERM or SIGHUP (N): in both cases it stops every rank before it exits.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ._mpi import DEFAULT_TIMEOUT, INSTALL_HINT

__all__ = ["RunError", "find_mpiexec", "load_rank_binding", "main"]

_LOG_TAIL = 40  # lines of a failed rank's output shown
DEFAULT_GRACE = 5.0  # seconds the other ranks get after one failed
# the least a rank takes: its wrapper and a Python with tttv2 imported (~30-50 MiB RSS each, measured)
RANK_BYTES = 64 * 2**20


class RunError(Exception):
    """Bad input to the launcher: one line, exit code 2."""


def find_mpiexec() -> str:
    """The ``mpiexec`` (hydra) of the installed mpich wheel, found from the package's files, not PATH."""
    if importlib.util.find_spec("mpi4py") is None:
        raise RunError(f"MPI is not installed: {INSTALL_HINT}")
    try:
        files = importlib.metadata.distribution("mpich").files or []
    except importlib.metadata.PackageNotFoundError:
        raise RunError(f"MPI is not installed: {INSTALL_HINT}") from None
    by_name = {Path(str(f)).name: f for f in files if Path(str(f)).parent.name == "bin"}
    for name in ("mpiexec.hydra", "mpiexec"):
        if name in by_name:
            path = Path(by_name[name].locate()).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    raise RunError(f"the mpich package is installed without its mpiexec: reinstall it ({INSTALL_HINT})")


def _env_map(value, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RunError(f"{where}: expected a map of environment variables, got {type(value).__name__}")
    out = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key:
            raise RunError(f"{where}: {key!r} is not an environment variable name")
        if isinstance(item, (dict, list)) or item is None:
            raise RunError(f"{where}.{key}: expected a string or number, got {item!r}")
        out[key] = str(item).lower() if isinstance(item, bool) else str(item)
    return out


_RANK_KEYS = {"rank", "mesh_id", "mesh_host_rank", "mesh_devices", "env_overrides"}
_TOP_KEYS = {"rank_bindings", "global_env"}


def load_rank_binding(path: str, size: int) -> list[dict[str, str]]:
    """The environment of each rank from a tt-run style rank binding file (YAML)::

        rank_bindings:
          - rank: 0
            env_overrides: {VAR: value}
          - rank: 1
            ...
        global_env: {VAR: value}

    Every rank 0..N-1 is bound exactly once. ``mesh_id`` / ``mesh_host_rank`` are passed to the rank as
    ``TTTV2_MESH_ID`` (ranks with one mesh id share a mesh) / ``TTTV2_MESH_HOST_RANK``; ``mesh_devices`` (a list of device ids) as
    ``TTTV2_MESH_DEVICES``: the devices of a mesh spread over the ranks that this rank emulates. A mesh graph
    descriptor is refused (docs/distributed.md)."""
    try:
        import yaml
    except ImportError:
        raise RunError(f"--rank-binding needs pyyaml: {INSTALL_HINT}") from None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise RunError(f"--rank-binding {path}: cannot read it: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise RunError(
            f"--rank-binding {path}: not UTF-8 text (byte {exc.start}): is it a YAML file?"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RunError(f"--rank-binding {path}: not valid YAML{where}: {what}") from None
    if not isinstance(data, dict):
        raise RunError(f"--rank-binding {path}: expected a map with rank_bindings, got {type(data).__name__}")
    if "mesh_graph_desc_path" in data:
        raise RunError(
            f"--rank-binding {path}: mesh_graph_desc_path: mesh graph descriptors are not read; a mesh spreads "
            "over the ranks by itself, and mesh_devices says which devices a rank emulates (docs/distributed.md)"
        )
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise RunError(f"--rank-binding {path}: unknown keys {unknown} (expected {sorted(_TOP_KEYS)})")
    common = _env_map(data.get("global_env"), f"--rank-binding {path}: global_env")
    bindings = data.get("rank_bindings")
    if not isinstance(bindings, list):
        raise RunError(f"--rank-binding {path}: rank_bindings: expected a list of ranks")
    envs: dict[int, dict[str, str]] = {}
    for i, entry in enumerate(bindings):
        where = f"--rank-binding {path}: rank_bindings[{i}]"
        if not isinstance(entry, dict):
            raise RunError(f"{where}: expected a map with a rank, got {entry!r}")
        unknown = sorted(set(entry) - _RANK_KEYS)
        if unknown:
            raise RunError(f"{where}: unknown keys {unknown} (expected {sorted(_RANK_KEYS)})")
        rank = entry.get("rank")
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < size:
            raise RunError(f"{where}: rank: expected an integer in 0..{size - 1} (--np {size}), got {rank!r}")
        if rank in envs:
            raise RunError(f"{where}: rank {rank} is bound twice")
        env = dict(common)
        for key, var in (("mesh_id", "TTTV2_MESH_ID"), ("mesh_host_rank", "TTTV2_MESH_HOST_RANK")):
            if key in entry:
                if isinstance(entry[key], bool) or not isinstance(entry[key], int) or entry[key] < 0:
                    raise RunError(f"{where}: {key}: expected a non-negative integer, got {entry[key]!r}")
                env[var] = str(entry[key])
        if "mesh_devices" in entry:
            devices = entry["mesh_devices"]
            if (
                not isinstance(devices, list)
                or not devices
                or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in devices)
            ):
                raise RunError(
                    f"{where}: mesh_devices: expected a list of device ids (non-negative integers), got {devices!r}"
                )
            env["TTTV2_MESH_DEVICES"] = ",".join(str(d) for d in devices)
        env.update(_env_map(entry.get("env_overrides"), f"{where}: env_overrides"))
        envs[rank] = env
    missing = [r for r in range(size) if r not in envs]
    if missing:
        raise RunError(f"--rank-binding {path}: ranks {missing} of --np {size} have no binding")
    return [envs[r] for r in range(size)]


def _parser() -> argparse.ArgumentParser:
    from tttv2_tools._cli import ArgumentParser  # the toolkit's one-line usage errors (docs/cli.md)
    from tttv2_tools._output import OnlyOnce  # an option given twice is an error, never "the last one wins"

    p = ArgumentParser(
        prog="tttv2-run",
        description="Start N ranks of COMMAND through MPI (the mpich wheel's mpiexec); see docs/distributed.md.",
        usage="tttv2-run --np N [--rank-binding FILE] [--all-output] [--timeout S] [--grace S] -- COMMAND ...",
    )
    p.add_argument("--np", type=int, required=True, action=OnlyOnce, help="number of ranks")
    p.add_argument(
        "--version", action="version", version=f"tttv2-run {_version()}", help="print the version and exit"
    )
    p.add_argument(
        "--debug", action="store_true", help="a traceback instead of one line on an internal error"
    )
    p.add_argument(
        "--rank-binding", action=OnlyOnce, metavar="FILE", help="tt-run style YAML: environment per rank"
    )
    p.add_argument("--all-output", action="store_true", help="show every rank's output (prefixed by rank)")
    p.add_argument(
        "--timeout",
        type=float,
        action=OnlyOnce,
        help=f"seconds a collective waits for the other ranks (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument(
        "--grace",
        type=float,
        action=OnlyOnce,
        help=f"seconds after a rank fails before the rest are killed ({DEFAULT_GRACE:g})",
    )
    p.add_argument("command", nargs=argparse.REMAINDER)
    return p


def _version() -> str:
    try:
        return importlib.metadata.version("tttv2")
    except (
        importlib.metadata.PackageNotFoundError
    ):  # pragma: no cover - a source tree that was never installed
        return "unknown (not installed)"


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = _parser()
    for word in argv[: argv.index("--")] if "--" in argv else argv:
        if word.split("=")[0] in ("-n", "-np"):  # mpirun's spellings: argparse would only say --np is missing
            raise RunError(f"{word}: the number of ranks is spelled --np N (tttv2-run --np N -- COMMAND)")
    if "--" not in argv:
        parser.parse_args(argv)  # --help / --version print and exit 0; an unknown option is named (exit 2)
        raise RunError("expected `-- COMMAND ...` after the options (tttv2-run --np N -- python script.py)")
    cut = argv.index("--")
    args = parser.parse_args(argv[:cut])
    args.command = argv[cut + 1 :]
    if args.command and args.command[0] == "--":
        args.command = args.command[1:]
    if not args.command:
        raise RunError("no COMMAND after `--`")
    if args.np < 1:
        raise RunError(f"--np: expected at least 1 rank, got {args.np}")
    available = _available_memory()
    if available is not None and args.np * RANK_BYTES > available:
        raise RunError(
            f"--np {args.np}: {args.np} ranks need at least {args.np * RANK_BYTES / 2**30:.1f} GiB "
            f"({RANK_BYTES // 2**20} MiB each, before the program's own), and this machine has "
            f"{available / 2**30:.1f} GiB available"
        )
    for name, default in (("timeout", DEFAULT_TIMEOUT), ("grace", DEFAULT_GRACE)):
        if getattr(args, name) is None:
            setattr(args, name, default)
        seconds = getattr(args, name)
        if not (0 < seconds < math.inf):
            raise RunError(f"--{name}: expected a positive, finite number of seconds, got {seconds}")
    return args


def _available_memory() -> int | None:
    """``MemAvailable`` of /proc/meminfo in bytes (None where there is none): a --np that cannot fit is refused
    before mpiexec starts it (``--np 100000`` once started ranks until the machine ground to a halt)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _exit_codes(run_dir: Path, size: int) -> dict[int, int]:
    """Rank → the exit status its wrapper recorded (negative: killed by that signal)."""
    codes = {}
    for rank in range(size):
        path = run_dir / f"rank-{rank}.exit"
        if path.is_file():
            codes[rank] = int(path.read_text())
    return codes


def _errors(run_dir: Path, size: int) -> dict[int, str]:
    """Rank → the unhandled exception it reported before aborting the job (tttv2.distributed._mpi)."""
    return {
        rank: (run_dir / f"rank-{rank}.error").read_text()
        for rank in range(size)
        if (run_dir / f"rank-{rank}.error").is_file()
    }


def _failed_at(run_dir: Path, rank: int) -> int:
    """When the rank's failure was recorded (its exception, else its exit status), in ns."""
    for kind in ("error", "exit"):
        path = run_dir / f"rank-{rank}.{kind}"
        if path.is_file():
            return path.stat().st_mtime_ns
    return 0  # pragma: no cover - a failed rank has one of the two files


def _describe(code: int) -> str:
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def _supervise(proc: subprocess.Popen, run_dir: Path, size: int, grace: float) -> tuple[int, bool]:
    """Wait for mpiexec; once a rank has failed, give the others ``grace`` seconds, then kill the job.
    Returns (mpiexec's exit code, whether the launcher killed the job)."""
    failed_at = None
    while True:
        try:
            return proc.wait(0.05), False
        except subprocess.TimeoutExpired:
            pass
        failed = any(c != 0 for c in _exit_codes(run_dir, size).values()) or _errors(run_dir, size)
        if failed_at is None and failed:
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > grace:
            _kill_group(proc)
            return proc.wait(), True


def _report(run_dir: Path, size: int, mpiexec_code: int, killed: bool, all_output: bool) -> int:
    codes = _exit_codes(run_dir, size)
    errors = _errors(run_dir, size)
    failed = [r for r in range(size) if codes.get(r, 0) != 0 or r in errors]
    # the cause is the first to fail; a rank ended by SIGTERM is MPI's (or this launcher's) cleanup of the others
    # and comes after any other failure, whatever the order the files were written in
    failed.sort(key=lambda r: (r not in errors and codes.get(r) == -signal.SIGTERM, _failed_at(run_dir, r)))
    unfinished = [r for r in range(size) if r not in codes and r not in errors]
    if not failed and not unfinished and mpiexec_code == 0:
        return 0
    lines = []
    for rank in failed:
        if rank in errors:
            lines.append(f"tttv2-run: rank {rank} failed: {errors[rank]}")
        else:
            lines.append(f"tttv2-run: rank {rank} {_describe(codes[rank])}")
    for rank in range(1, size):  # what the ranks whose output was hidden printed
        log = run_dir / f"rank-{rank}.log"
        if rank not in failed or all_output or not log.is_file() or not log.stat().st_size:
            continue
        tail = log.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
        lines += [f"[rank {rank}] {line}" for line in tail]
    if unfinished:
        why = "killed by tttv2-run" if killed else "stopped by MPI"
        cause = f" after rank {failed[0]} failed" if failed else ""
        lines.append(f"tttv2-run: ranks {unfinished} did not finish ({why}{cause})")
    if not failed and not unfinished:
        lines.append(f"tttv2-run: every rank succeeded but mpiexec exited with code {mpiexec_code}")
    print("\n".join(lines), file=sys.stderr)
    if not failed or failed[0] in errors:  # an exception: the rank was then ended by MPI_Abort
        return 1
    code = codes[failed[0]]
    return 128 - code if code < 0 else code


def run(args: argparse.Namespace) -> int:
    mpiexec = find_mpiexec()
    envs = load_rank_binding(args.rank_binding, args.np) if args.rank_binding else [{}] * args.np
    run_dir = Path(tempfile.mkdtemp(prefix="tttv2-run-"))
    envs = [
        {**env, "TTTV2_DISTRIBUTED_TIMEOUT": f"{args.timeout:g}", "TTTV2_RUN_DIR": str(run_dir)}
        for env in envs
    ]
    try:
        plan = run_dir / "plan.json"
        plan.write_text(json.dumps({"env": envs, "all_output": args.all_output}))
        cmd = [mpiexec, "-n", str(args.np), sys.executable, "-m", "tttv2.distributed._rank", str(run_dir)]
        cmd += args.command
        with _stop_signals():
            proc = subprocess.Popen(cmd, start_new_session=True)
            try:
                code, killed = _supervise(proc, run_dir, args.np, args.grace)
            except KeyboardInterrupt:
                _kill_group(proc)
                print("tttv2-run: interrupted; the ranks were stopped", file=sys.stderr)
                return 130
            except _Stopped as stop:
                _kill_group(proc)
                name = signal.Signals(stop.signum).name
                print(f"tttv2-run: stopped by {name}; the ranks were stopped", file=sys.stderr)
                return 128 + stop.signum
        return _report(run_dir, args.np, code, killed, args.all_output)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


class _Stopped(Exception):
    """The launcher got SIGTERM or SIGHUP: the job runs in its own session (so that Ctrl-C reaches the launcher
    first), so the launcher must stop it, or the ranks would outlive it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _raise_stopped(signum, frame):
    raise _Stopped(signum)


def _stop_signals():
    """While the job runs, SIGTERM / SIGHUP raise :class:`_Stopped` in the launcher (main thread only: Python
    runs signal handlers there; elsewhere the default action stays)."""
    from tttv2_tools._cli import (
        on_stop_signals,  # the tools' one stop-signal scope (tttv2 loads without them)
    )

    return on_stop_signals(_raise_stopped)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    options = argv[: argv.index("--")] if "--" in argv else argv
    try:
        return run(_parse(argv))
    except RunError as exc:
        print(f"tttv2-run: error: {exc}", file=sys.stderr)
        return 2
    # the other tools' promise (docs/cli.md): one line, exit 3; --debug: the traceback
    except Exception as exc:
        from tttv2_tools._cli import internal_error

        return internal_error("tttv2-run", exc, "--debug" in options)


if __name__ == "__main__":
    sys.exit(main())
