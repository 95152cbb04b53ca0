"""Temporary files of atomic writes, and the clean-up of those a killed writer left behind.

One naming pattern and one staleness rule for every writer of the project (the ``as_tensor`` cache and
``dump_tensor`` in :mod:`tttv2.ttnn.distribution`, the tools' outputs in ``tools/_output.py``):

* a temporary file is ``.<target name>.<host>.<pid>.<8 hex digits>.tmp`` next to its target, so it says who
  writes it;
* it is stale, and a later write removes it, when its writer is gone: a process of this host whose pid no
  longer exists, or any file older than :data:`STALE_TEMP_SECONDS` (a writer on another host, which cannot be
  asked; or a pid that was reused). A live writer's file (this process's other threads included) is never
  touched, so a clean-up can run while other writes are in flight;
* files of the earlier pattern of ``tools/_output.py`` (``tempfile.mkstemp``: ``.<target name>.<8 of
  [a-z0-9_]>.tmp``, no writer recorded) are removed only when older than :data:`STALE_TEMP_SECONDS`.

Nothing else in a folder is ever removed. Kept free of heavy imports (no ``secrets``, which brings ``typing``;
no ``socket``: the host name comes from ``os.uname``): the tools' start-up path imports it.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

__all__ = ["STALE_TEMP_SECONDS", "remove_stale_temps", "temp_name", "writer_gone"]

STALE_TEMP_SECONDS = 24 * 3600  # a temporary file this old has no live writer, whatever host wrote it

_OURS = re.compile(r"\.(?P<target>.+)\.(?P<host>[^./]+)\.(?P<pid>[0-9]+)\.[0-9a-f]{8}\.tmp")
_LEGACY = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")


def _host() -> str:
    # os.uname's node name is what socket.gethostname returns on POSIX, without importing socket (~2.5 ms, a
    # tenth of trace-deps' own imports); socket only where os.uname does not exist (Windows)
    if hasattr(os, "uname"):
        name = os.uname().nodename
    else:  # pragma: no cover - not POSIX
        import socket

        name = socket.gethostname()
    return name.replace(".", "_") or "host"


def temp_name(path: Path) -> Path:
    """``.<name>.<host>.<pid>.<random>.tmp`` next to ``path``: who writes it, so a later writer can tell if that
    writer is gone."""
    return path.with_name(f".{path.name}.{_host()}.{os.getpid()}.{os.urandom(4).hex()}.tmp")


def writer_gone(host: str, pid: str) -> bool:
    """The writer ``host``/``pid`` is known to have ended: a process of this host that no longer exists."""
    if host != _host() or not pid.isdigit():
        return False  # another machine's writer: only its age tells
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by another user
        return False
    return False


def remove_stale_temps(folder: Path, target: str | None = None) -> list[Path]:
    """Remove the stale temporary files (see the module docstring) in ``folder``, of ``target`` only when it is
    given, else of any target. Returns the files removed; a folder that cannot be listed is left alone."""
    try:
        names = [entry.name for entry in os.scandir(folder)]
    except OSError:
        return []
    now = time.time()
    removed = []
    for name in names:
        ours = _OURS.fullmatch(name)
        match = ours or _LEGACY.fullmatch(name)
        if match is None or (target is not None and match["target"] != target):
            continue
        path = Path(folder) / name
        try:
            old = now - path.lstat().st_mtime > STALE_TEMP_SECONDS
            if old or (ours is not None and writer_gone(ours["host"], ours["pid"])):
                path.unlink()
                removed.append(path)
        except OSError:  # removed by another writer meanwhile, or not ours to remove
            continue
    return removed
