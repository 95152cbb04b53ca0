"""Concurrent use: grad mode is per thread; tensor files written by several writers at once are never seen
half written."""

from __future__ import annotations

import threading

import numpy as np

from tttv2 import ttnn
from tttv2.ttnn import distribution


def test_no_grad_in_one_thread_does_not_switch_off_another():
    inside, seen = threading.Event(), []
    release = threading.Event()

    def worker():
        with ttnn.autograd.no_grad():
            inside.set()
            release.wait(30)
            seen.append(ttnn.autograd.is_grad_enabled())

    thread = threading.Thread(target=worker)
    thread.start()
    assert inside.wait(30)
    assert ttnn.autograd.is_grad_enabled()  # the main thread still records
    release.set()
    thread.join()
    assert seen == [False]


def test_concurrent_writers_and_readers_of_one_tensor_file(tmp_path):
    """Eight threads write the same file (different values) while a reader loads it: every load sees one
    whole file, and no temporary file is left."""
    path = tmp_path / "shared.tensorbin"
    tensors = [ttnn.from_numpy(np.full((64, 64), float(i), np.float32)) for i in range(8)]
    ttnn.dump_tensor(path, tensors[0])
    stop = threading.Event()
    loaded, errors = [], []

    def read():
        while not stop.is_set():
            try:
                values = ttnn.to_numpy(ttnn.load_tensor(path))
            except Exception as exc:  # any failure is the finding
                errors.append(exc)
                return
            loaded.append(values)

    def write(t):
        for _ in range(5):
            ttnn.dump_tensor(path, t)

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=write, args=(t,)) for t in tensors]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert not errors, errors
    assert loaded and all(v.shape == (64, 64) and (v == v[0, 0]).all() for v in loaded)
    assert ttnn.to_numpy(ttnn.load_tensor(path))[0, 0] in range(8)
    assert [p.name for p in tmp_path.iterdir()] == ["shared.tensorbin"]
    assert distribution._STALE_TEMP_SECONDS > 3600  # a slow live writer's temporary file is not removed
