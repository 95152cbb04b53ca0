"""The ``ttnn.as_tensor`` weight cache: file modes follow the umask, a vanished file is recomputed, and
temporary files of killed writers are cleaned up by the next writer."""

from __future__ import annotations

import io
import json
import os
import re
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
    with pytest.raises(ValidationError, match=r"cache_file_name: .*w_dtype.* is not a regular file"):
        ttnn.as_tensor(torch.ones(2), ttnn.float32, cache_file_name=base)
    (tmp_path / "plain").write_bytes(b"")  # a file where the cache's folder should be
    with pytest.raises(ValidationError, match=r"cannot read the file .*plain/w_dtype"):
        ttnn.as_tensor(torch.ones(2), ttnn.float32, cache_file_name=tmp_path / "plain" / "w")
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
        / f".{os.path.basename(_cache_path(base))}.{socket.gethostname().replace('.', '_')}.{os.getpid()}.000000ab.tmp"
    )
    mine.write_bytes(b"")
    remote = tmp_path / f".{os.path.basename(_cache_path(base))}.otherhost.123.000000cd.tmp"
    remote.write_bytes(b"")
    ancient = tmp_path / f".{os.path.basename(_cache_path(base))}.otherhost.456.000000ef.tmp"
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


def _flips_and_truncations(data: bytes, data_stride: int):
    """Every single-bit flip of the bytes that describe the data (meta.json, each member's zip header and
    .npy header, the central directory), one flip every ``data_stride`` bytes of array data, and truncations
    (every 5th length in the described parts, every ``data_stride``-th in the data)."""
    described = set(range(min(300, len(data)))) | set(range(max(0, len(data) - 250), len(data)))
    start = data.find(b"\x93NUMPY")
    while start >= 0:
        described |= set(range(max(0, start - 60), min(len(data), start + 128)))
        start = data.find(b"\x93NUMPY", start + 1)
    sample = sorted(described | set(range(0, len(data), data_stride)))
    for i in sample:
        for bit in range(8):
            yield data[:i] + bytes([data[i] ^ (1 << bit)]) + data[i + 1 :]
    for end in sample[::5]:
        yield data[:end]


@pytest.mark.parametrize(
    ("dtype", "shape", "mapper"),
    [(ttnn.float32, (64, 128), False), (ttnn.bfloat8_b, (32, 64), False), (ttnn.bfloat16, (2, 32, 32), True)],
)
def test_corrupt_tensor_files_never_load_silently(tmp_path, open_mesh, dtype, shape, mapper):
    """Promises 21 and 53, fuzzed: of single-bit flips and truncations of a cache file, none loads a tensor other
    than the one written, and every failure is a ValidationError naming the file."""
    rng = np.random.default_rng(0)
    values = rng.standard_normal(shape).astype(np.float32)
    kwargs = {}
    if mapper:
        mesh = open_mesh((1, 2))
        kwargs = {"device": mesh, "mesh_mapper": ttnn.ShardTensorToMesh(mesh, dim=0)}
    base = tmp_path / "w"
    written = ttnn.as_tensor(
        torch.from_numpy(values), dtype, layout=ttnn.TILE_LAYOUT, cache_file_name=base, **kwargs
    )
    (path,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tensorbin")]
    good = path.read_bytes()
    want = [np.asarray(s).tobytes() for s in ttnn.from_device(written).shards("test")]
    corrupt = tmp_path / "corrupt.tensorbin"
    outcomes = {"same": 0, "refused": 0}
    for n, variant in enumerate(_flips_and_truncations(good, data_stride=397)):
        try:
            if n % 50 == 0:  # the public reader, from disk
                corrupt.write_bytes(variant)
                got = ttnn.load_tensor(corrupt)
            else:  # the same reader, from memory (faster)
                got = distribution._read_tensor("ttnn.load_tensor", io.BytesIO(variant), corrupt)
        except ValidationError as exc:
            assert str(corrupt) in str(exc), exc
            outcomes["refused"] += 1
            continue
        assert (got.dtype, got.layout, tuple(got.shape)) == (
            written.dtype,
            written.layout,
            tuple(written.shape),
        )
        assert [np.asarray(s).tobytes() for s in got.shards("test")] == want
        outcomes["same"] += 1
    assert outcomes["refused"] > 1000
    # the cache path of as_tensor reads through the same check
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(ValidationError, match=f"{re.escape(path.name)} is not a readable tensor file"):
        ttnn.as_tensor(
            torch.from_numpy(values), dtype, layout=ttnn.TILE_LAYOUT, cache_file_name=base, **kwargs
        )


def test_a_fifo_as_cache_or_tensor_file_is_refused_at_once(tmp_path):
    base = tmp_path / "w"
    os.mkfifo(_cache_path(base))  # nobody writes into it: opening it for reading would wait forever
    with pytest.raises(ValidationError, match=r"cache_file_name: .*is not a regular file"):
        ttnn.as_tensor(torch.ones(2), ttnn.float32, cache_file_name=base)
    with pytest.raises(ValidationError, match=r"file_name: .*is not a regular file"):
        ttnn.load_tensor(_cache_path(base))


def test_tensor_files_with_arrays_we_never_write_are_refused(tmp_path):
    """A well-formed zip whose .npy member is an object array (a pickle), or whose header claims other data
    than the member holds, is refused naming the file before anything is unpickled or allocated."""
    path = tmp_path / "crafted.tensorbin"
    meta = {
        "format": distribution._FORMAT,
        "dtype": "FLOAT32",
        "layout": "ROW_MAJOR",
        "shape": [2],
        "num_shards": 1,
        "distribution_shape": None,
        "placements": None,
    }
    for array, message in [
        (np.array([{"a": 1}, None], dtype=object), "object arrays are never written"),
        (np.ones(3, np.float32), r"the header describes 12 bytes of data, the member holds 8"),
    ]:
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr("meta.json", json.dumps(meta))
            with zf.open("shard0.npy", "w") as out:
                np.lib.format.write_array(out, array, allow_pickle=True)
        if array.dtype != object:  # keep the header, drop the last element's bytes
            data = path.read_bytes()
            with zipfile.ZipFile(path, "w") as zf:
                zf.writestr("meta.json", json.dumps(meta))
                with zipfile.ZipFile(io.BytesIO(data)) as old:
                    zf.writestr("shard0.npy", old.read("shard0.npy")[:-4])
        with pytest.raises(ValidationError, match=f"{re.escape(str(path))} is not a readable.*{message}"):
            ttnn.load_tensor(path)


def test_stale_temporary_files_are_removed_per_target_or_per_folder(tmp_path):
    """tttv2/_tempfiles.py, shared by the cache and the tools: a clean-up for one target leaves another
    target's stale file (the tools' folder-wide clean-up takes both); a folder that cannot be listed is left."""
    from tttv2 import _tempfiles

    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    host = socket.gethostname().replace(".", "_")
    mine = tmp_path / f".a.tensorbin.{host}.{dead.stdout.strip()}.0000aaaa.tmp"
    other = tmp_path / f".b.py.{host}.{dead.stdout.strip()}.0000bbbb.tmp"
    for path in (mine, other):
        path.write_bytes(b"")
    assert _tempfiles.remove_stale_temps(tmp_path, "a.tensorbin") == [mine]
    assert _tempfiles.remove_stale_temps(tmp_path) == [other]
    assert _tempfiles.remove_stale_temps(tmp_path / "missing") == []
    name = _tempfiles.temp_name(tmp_path / "c.json").name
    assert name.startswith(f".c.json.{host}.{os.getpid()}.") and name.endswith(".tmp")
