"""The ``ttnn.as_tensor`` weight cache: file modes follow the umask, a vanished file is recomputed, and
temporary files of killed writers are cleaned up by the next writer."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
import time
import zipfile

import numpy as np
import pytest
import torch

from tttv2 import ttnn
from tttv2.ttnn import distribution
from tttv2.ttnn.errors import ValidationError


def _cache_path(base) -> str:
    return f"{base}_dtype_FLOAT32_layout_ROW_MAJOR.tensorbin"


def _temps(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_cache_files_get_the_umask_mode(tmp_path, umask):
    previous = os.umask(umask)
    try:
        ttnn.as_tensor(torch.ones(2, 3), ttnn.float32, cache_file_name=tmp_path / "w")
        ttnn.dump_tensor(tmp_path / "dumped.tensorbin", ttnn.from_torch(torch.ones(2)))
    finally:
        os.umask(previous)
    for name in (_cache_path(tmp_path / "w"), tmp_path / "dumped.tensorbin"):
        assert stat.S_IMODE(os.stat(name).st_mode) == 0o666 & ~umask


def test_a_cache_file_deleted_during_the_call_is_recomputed(tmp_path, monkeypatch):
    base = tmp_path / "w"
    ttnn.as_tensor(torch.full((2, 3), 2.0), ttnn.float32, cache_file_name=base)
    real_zipfile = zipfile.ZipFile

    def deleting_zipfile(file, *args, **kwargs):  # someone deletes the cache right before it is read
        if os.path.exists(_cache_path(base)):
            os.unlink(_cache_path(base))
        return real_zipfile(file, *args, **kwargs)

    monkeypatch.setattr(distribution.zipfile, "ZipFile", deleting_zipfile)
    got = ttnn.as_tensor(torch.full((2, 3), 2.0), ttnn.float32, cache_file_name=base)
    np.testing.assert_array_equal(ttnn.to_numpy(got), np.full((2, 3), 2.0))
    monkeypatch.setattr(distribution.zipfile, "ZipFile", real_zipfile)
    assert not os.path.exists(_cache_path(base))  # gone before the next call: computed and written again
    got = ttnn.as_tensor(torch.full((2, 3), 5.0), ttnn.float32, cache_file_name=base)
    np.testing.assert_array_equal(ttnn.to_numpy(got), np.full((2, 3), 5.0))
    assert os.path.isfile(_cache_path(base))


def test_unreadable_cache_files_raise_naming_the_file(tmp_path):
    base = tmp_path / "w"
    os.mkdir(_cache_path(base))  # a directory where the cache file should be
    with pytest.raises(ValidationError, match="cannot read the cache file"):
        ttnn.as_tensor(torch.ones(2), ttnn.float32, cache_file_name=base)
    base2 = tmp_path / "v"
    with open(_cache_path(base2), "wb") as f:
        f.write(b"not a zip file")
    with pytest.raises(ValidationError, match="is not a readable tensor file"):
        ttnn.as_tensor(torch.ones(2), ttnn.float32, cache_file_name=base2)


def test_temporary_file_of_a_killed_writer_is_removed_by_the_next_write(tmp_path):
    base = tmp_path / "w"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                """
                import sys, time
                import numpy as np
                from tttv2 import ttnn

                def stuck(*args, **kwargs):  # the writer is killed in the middle of writing the cache
                    print("writing", flush=True)
                    time.sleep(120)

                np.lib.format.write_array = stuck
                # the file as_tensor writes for this cache name, by the writer it uses (no torch import: faster)
                ttnn.dump_tensor(sys.argv[1], ttnn.from_numpy(np.ones((2, 2), np.float32)))
                """
            ),
            _cache_path(base),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout.readline().strip() == "writing"
    finally:
        child.kill()
        child.wait()
    left = _temps(tmp_path)
    assert len(left) == 1 and left[0].startswith(".w_dtype_FLOAT32"), left
    # temp files of this process (a live writer) and of another host's recent writer stay
    mine = (
        tmp_path
        / f".{os.path.basename(_cache_path(base))}.{socket.gethostname().replace('.', '_')}.{os.getpid()}.ab.tmp"
    )
    mine.write_bytes(b"")
    remote = tmp_path / f".{os.path.basename(_cache_path(base))}.otherhost.123.cd.tmp"
    remote.write_bytes(b"")
    ancient = tmp_path / f".{os.path.basename(_cache_path(base))}.otherhost.456.ef.tmp"
    ancient.write_bytes(b"")
    two_days_ago = time.time() - 2 * 24 * 3600
    os.utime(ancient, (two_days_ago, two_days_ago))

    got = ttnn.as_tensor(torch.ones(2, 2), ttnn.float32, cache_file_name=base)
    np.testing.assert_array_equal(ttnn.to_numpy(got), np.ones((2, 2)))
    assert _temps(tmp_path) == sorted([mine.name, remote.name])


def test_stale_temp_detection_edges(tmp_path, monkeypatch):
    host = socket.gethostname().replace(".", "_")
    assert not distribution._writer_gone(host, "not-a-pid")
    assert not distribution._writer_gone("otherhost", str(os.getpid()))

    def denied(pid, signal):  # a live process of another user
        raise PermissionError(pid)

    monkeypatch.setattr(distribution.os, "kill", denied)
    assert not distribution._writer_gone(host, "12345")
    distribution._remove_stale_temps(tmp_path / "missing-dir" / "x.tensorbin")  # nothing to scan: no error
