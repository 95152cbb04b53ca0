"""The emulator's results do not depend on threads: BLAS runs single-threaded inside emulator compute, and the
pieces that products and elementwise maps are cut into depend on the shapes only, not on the worker count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from tttv2 import ttnn
from tttv2.ttnn import _threads, numerics
from tttv2.ttnn.ops._common import ttnn_op


def _blas_threads() -> list[int]:
    return [lib.num_threads for lib in _threads.single_threaded_blas.libraries()]


@pytest.fixture
def small_pieces(monkeypatch):
    """Cut even tiny products and maps into pieces (the real thresholds need large shapes)."""
    monkeypatch.setattr(numerics, "_MATMUL_MIN_WORK", 1)
    monkeypatch.setattr(numerics, "_MATMUL_ROW_BLOCK", 16)
    monkeypatch.setattr(numerics, "_ELEMENTWISE_BLOCK", 16)


def _under(workers: int, blas: int, monkeypatch, fn):
    """``fn()`` with ``workers`` emulator workers while the caller's BLAS uses ``blas`` threads."""
    monkeypatch.setattr(_threads, "WORKERS", workers)
    with threadpool_limits(limits=blas, user_api="blas"):
        return fn()


SHAPES = [
    ((128, 64), (64, 48)),  # one matrix: 8 row blocks
    ((100, 33), (33, 7)),  # rows that do not divide into whole blocks
    ((2, 3, 40, 64), (1, 1, 64, 32)),  # broadcast weight: the rows of all batches are flattened, then cut
    ((4, 2, 16, 32), (4, 2, 32, 8)),  # matching batches: per leading batch index
    ((1, 16, 32), (1, 32, 8)),  # one batch of one: a single piece
    ((3, 16, 32), (2, 3, 32, 8)),  # batches that only broadcast: one numpy call
    ((7, 1), (1, 5)),  # an outer product
]


@pytest.mark.parametrize(("a_shape", "b_shape"), SHAPES)
def test_matmul_f32_bits_do_not_depend_on_workers_or_blas_threads(
    small_pieces, monkeypatch, a_shape, b_shape
):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    runs = [
        _under(workers, blas, monkeypatch, lambda: numerics.matmul_f32(a, b))
        for workers, blas in [(1, 1), (2, 1), (3, 2), (8, 2)]
    ]
    expected = np.matmul(a.astype(np.float64), b.astype(np.float64))
    for got in runs:
        assert got.shape == expected.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, runs[0])
    np.testing.assert_allclose(runs[0], expected, rtol=1e-5, atol=1e-4)


def test_matmul_f32_row_blocks_are_fixed_by_the_shape(monkeypatch):
    """The real thresholds: a 600-row product above the work threshold is cut into 3 blocks of 200 rows (at
    most 256 each), the same ones whatever the worker count."""
    seen = []
    real_matmul = np.matmul

    def spy(x, y, *args, **kwargs):
        seen.append(x.shape[0])
        return real_matmul(x, y, *args, **kwargs)

    a = np.ones((600, 128), np.float32)
    b = np.ones((128, 128), np.float32)
    assert numerics._MATMUL_MIN_WORK <= 600 * 128 * 128
    monkeypatch.setattr(np, "matmul", spy)
    for workers in (1, 2, 4):
        seen.clear()
        monkeypatch.setattr(_threads, "WORKERS", workers)
        out = numerics.matmul_f32(a, b)
        assert sorted(seen) == [200, 200, 200]
        assert np.all(out == 128)
    seen.clear()
    numerics.matmul_f32(a[:200], b)  # below the threshold: one call
    assert seen == [200]


def test_map_row_blocks_bits_do_not_depend_on_workers(small_pieces, monkeypatch):
    x = np.linspace(-4, 4, 8 * 33, dtype=np.float32).reshape(8, 33)
    runs = [_under(w, 1, monkeypatch, lambda: numerics.map_row_blocks(np.tanh, x)) for w in (1, 2, 3)]
    for got in runs:
        np.testing.assert_array_equal(got, np.tanh(x))
    one_row = x[:1]
    np.testing.assert_array_equal(numerics.map_row_blocks(np.tanh, one_row), np.tanh(one_row))
    assert numerics.map_row_blocks(np.tanh, np.float32(0.5)) == np.tanh(np.float32(0.5))


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_matmul_f32_each_is_each_product_bit_for_bit(small_pieces, monkeypatch, workers):
    """A backward's products in one share-out (matmul_f32_each): every product has matmul_f32's bits, alone or
    with others, whatever the worker count; the side work runs once, on the caller, also with no product."""
    rng = np.random.default_rng(3)
    products = [
        (rng.standard_normal(a).astype(np.float32), rng.standard_normal(b).astype(np.float32))
        for a, b in [((100, 33), (33, 7)), ((4, 2, 16, 32), (4, 2, 32, 8)), ((3, 16, 32), (2, 3, 32, 8))]
    ]
    products.append((products[0][0].T, rng.standard_normal((100, 9)).astype(np.float32)))  # a transposed view
    alone = [_under(1, 1, monkeypatch, lambda a=a, b=b: numerics.matmul_f32(a, b)) for a, b in products]
    sides = []
    together = _under(
        workers,
        1,
        monkeypatch,
        lambda: numerics.matmul_f32_each(
            products, side=lambda: sides.append(threading.current_thread().name)
        ),
    )
    assert len(together) == len(alone)
    for got, want in zip(together, alone, strict=True):
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got, want)
    assert sides == [threading.current_thread().name]
    assert (
        _under(workers, 1, monkeypatch, lambda: numerics.matmul_f32_each([], side=lambda: sides.append(1)))
        == []
    )
    assert sides[-1] == 1


def test_side_work_runs_while_a_worker_takes_pieces(monkeypatch):
    """The caller's side work runs after the pieces are handed out: a piece that waits for the side work to
    start can only finish if a worker took it meanwhile."""
    monkeypatch.setattr(_threads, "WORKERS", 2)
    monkeypatch.setattr(_threads, "_pool", None)
    side_started = threading.Event()
    pieces_started = threading.Event()

    def piece(lo, hi):
        pieces_started.set()
        assert side_started.wait(timeout=120)  # a hang guard, not a timing check
        return threading.current_thread().name

    def side():
        side_started.set()
        assert pieces_started.wait(timeout=120)

    names = numerics._run_pieces(piece, [0, 1, 2], side)
    assert len(names) == 2 and any(name != threading.current_thread().name for name in names)


def test_pieces_are_shared_and_a_busy_worker_leaves_them_to_the_caller(monkeypatch):
    """The caller takes pieces like the workers do: with the only worker held by another task, the caller computes
    every piece itself, each once and in its place in the result, instead of waiting for the worker (released
    once the last piece is done, so the helper task finds nothing left)."""
    monkeypatch.setattr(_threads, "WORKERS", 2)
    monkeypatch.setattr(_threads, "_pool", None)  # a pool of this test's own: one worker
    release = threading.Event()
    held = _threads.submit(release.wait)
    calls = []

    def piece(lo, hi):
        calls.append((lo, hi, threading.current_thread().name))
        if len(calls) == 6:
            release.set()
        return hi - lo

    try:
        results = numerics._run_pieces(piece, [0, 3, 5, 9, 10, 16, 20])
    finally:
        release.set()
        held.result()
    assert results == [3, 2, 4, 1, 6, 4]
    assert sorted((lo, hi) for lo, hi, _ in calls) == [(0, 3), (3, 5), (5, 9), (9, 10), (10, 16), (16, 20)]
    assert {name for *_, name in calls} == {threading.current_thread().name}


def test_pieces_run_on_the_workers_too(monkeypatch):
    """With a free worker, the pieces are shared: a piece that waits for another thread to take a piece can only
    finish if a worker runs alongside the caller."""
    monkeypatch.setattr(_threads, "WORKERS", 2)
    monkeypatch.setattr(_threads, "_pool", None)
    started = threading.Barrier(2, timeout=120)  # a hang guard, not a timing check

    def piece(lo, hi):
        started.wait()  # both threads must be inside a piece at once: two pieces, two threads
        return threading.current_thread().name

    names = numerics._run_pieces(piece, [0, 1, 2])
    assert len(set(names)) == 2 and threading.current_thread().name in names


def test_single_threaded_blas_restores_the_callers_setting():
    with threadpool_limits(limits=2, user_api="blas"):
        assert set(_blas_threads()) == {2}
        with _threads.single_threaded_blas:
            assert set(_blas_threads()) == {1}
            with _threads.single_threaded_blas:  # nested: still one thread, nothing restored yet
                assert set(_blas_threads()) == {1}
            assert set(_blas_threads()) == {1} and _threads.single_threaded_blas.active
        assert set(_blas_threads()) == {2} and not _threads.single_threaded_blas.active


def test_ops_and_backward_run_blas_single_threaded():
    seen = []

    @ttnn_op("ttnn.test_blas_probe")
    def probe(x):
        seen.append(_blas_threads())
        return x

    with threadpool_limits(limits=2, user_api="blas"):
        probe(None)
        assert seen == [[1] * len(seen[0])]
        assert set(_blas_threads()) == {2}  # the user's setting is back after the op


def test_ops_give_the_same_bits_with_any_thread_setting(monkeypatch, open_mesh):
    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(3)
    x = ttnn.from_numpy(
        rng.standard_normal((1, 1, 192, 256)).astype(np.float32), layout=ttnn.TILE_LAYOUT, device=mesh
    )
    w = ttnn.from_numpy(
        rng.standard_normal((256, 160)).astype(np.float32), layout=ttnn.TILE_LAYOUT, device=mesh
    )
    for t in (x, w):
        t.requires_grad = True

    def step():
        y = ttnn.linear(x, w, dtype=ttnn.float32)
        loss = ttnn.sum(ttnn.gelu(y))
        x.grad = w.grad = None
        loss.backward()
        return [ttnn.to_numpy(t) for t in (y, x.grad, w.grad)]

    monkeypatch.setattr(numerics, "_MATMUL_MIN_WORK", 1)  # make the products split
    runs = [_under(workers, blas, monkeypatch, step) for workers, blas in [(1, 1), (2, 2)]]
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)


def test_worker_count_from_environment():
    assert _threads.worker_count({"TTTV2_NUM_THREADS": "3"}) == 3
    assert _threads.worker_count({"TTTV2_NUM_THREADS": " 100 "}) == 8
    assert 1 <= _threads.worker_count({}) <= 8
    for bad in ("0", "-2", "two"):
        with pytest.raises(ValueError, match=rf"TTTV2_NUM_THREADS must be a positive integer .*got '{bad}'"):
            _threads.worker_count({"TTTV2_NUM_THREADS": bad})


def test_pool_is_rebuilt_after_fork_reset(small_pieces, monkeypatch):
    monkeypatch.setattr(_threads, "WORKERS", 2)
    a = np.ones((64, 8), np.float32)
    numerics.matmul_f32(a, np.ones((8, 8), np.float32))
    _threads._forget_pool()
    assert _threads._pool is None
    np.testing.assert_array_equal(
        numerics.matmul_f32(a, np.ones((8, 8), np.float32)), np.full((64, 8), 8, np.float32)
    )
    names = []
    _threads.submit(lambda: names.append(threading.current_thread().name)).result()
    assert names[0].startswith("tttv2-worker")


_TRAIN = """
import hashlib, json, numpy as np
from tttv2 import ttnn
mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
ttnn.nn.manual_seed(0)
model = ttnn.nn.GPT(ttnn.nn.GPTConfig(vocab_size=64, block_size=64, n_layer=1, n_head=2, n_embd=128, dropout=0.1), device=mesh)
opt = ttnn.optim.AdamW(model.parameters(), lr=1e-3)
rng = np.random.default_rng(0)
losses = []
for _ in range(2):
    ids = rng.integers(0, 64, (4, 65)).astype(np.uint32)
    x = ttnn.from_numpy(ids[:, :-1], dtype=ttnn.uint32, device=mesh)
    y = ttnn.from_numpy(ids[:, 1:], dtype=ttnn.uint32, device=mesh)
    loss = ttnn.cross_entropy_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    losses.append(ttnn.to_numpy(loss).tobytes().hex())
digest = hashlib.sha256(b"".join(ttnn.to_numpy(p).tobytes() for p in model.parameters())).hexdigest()
print(json.dumps({"losses": losses, "params": digest}))
"""


def test_training_steps_are_bit_identical_across_thread_settings():
    """Two NanoGPT steps in fresh interpreters: with no thread variables, and with one BLAS thread and one
    worker (the C++ kernels' pool included). Losses and every parameter after the steps must agree bit for
    bit."""
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    base.pop("TTTV2_NUM_THREADS", None)
    single = {**base, "OPENBLAS_NUM_THREADS": "1", "TTTV2_NUM_THREADS": "1"}
    results = []
    for env in (base, single):
        out = subprocess.run(
            [sys.executable, "-c", _TRAIN], capture_output=True, text=True, env=env, timeout=300
        )
        assert out.returncode == 0, out.stderr
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert results[0] == results[1]


def _in_thread(fn):
    """``fn()`` run in a new (non-main) thread; its result or its exception."""
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as exc:  # pragma: no cover - re-raised below
            out["error"] = exc

    worker = threading.Thread(target=run, name="caller-thread")
    worker.start()
    worker.join()
    if "error" in out:  # pragma: no cover - only when the test fails
        raise out["error"]
    return out["value"]


def test_ops_pin_blas_in_any_calling_thread(open_mesh):
    """Promise 54: an op run in a non-main thread runs its BLAS on one thread (checked with threadpoolctl
    inside the op) and gives the main thread's bits. threadpoolctl >= 3.7 lets only one "controlling" thread
    change a pthreads OpenBLAS; the main thread takes that role on its first op, after which another thread's
    ``set_num_threads`` used to be a silent no-op."""
    from threadpoolctl import threadpool_info

    seen = []

    pinned = {lib.filepath for lib in _threads.single_threaded_blas.libraries()}

    @ttnn_op("ttnn.test_blas_thread_probe")
    def probe(x):
        # the BLAS libraries loaded when the emulator first ran an op (numpy's, which ops call); one another
        # package loads later (scipy's own OpenBLAS, through an import of another test) is not the ops' BLAS
        seen.append([info["num_threads"] for info in threadpool_info() if info["filepath"] in pinned])
        return x

    mesh = open_mesh((1, 1))
    rng = np.random.default_rng(5)
    a = rng.standard_normal((1, 1, 64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)

    def matmul():
        x = ttnn.from_numpy(a, layout=ttnn.TILE_LAYOUT, device=mesh)
        w = ttnn.from_numpy(b, layout=ttnn.TILE_LAYOUT, device=mesh)
        return ttnn.to_numpy(ttnn.matmul(x, w, dtype=ttnn.float32))

    with threadpool_limits(limits=2, user_api="blas"):  # the user's own setting outside ops
        probe(None)  # the main thread runs an op first
        main = matmul()
        _in_thread(lambda: probe(None))
        other = _in_thread(matmul)
        nested = _in_thread(lambda: _in_thread(lambda: probe(None)))
        assert set(_blas_threads()) == {2}  # restored after the ops, in every thread
    assert seen == [[1] * len(seen[0])] * 3
    np.testing.assert_array_equal(main, other)
    assert nested is None


def test_two_meshes_trained_in_two_threads_match_the_sequential_run():
    """Issue 22's second probe: two models trained at the same time in two threads (each on its own mesh) end
    with exactly the parameters of the same training run one after the other (was: no bit in common)."""
    import hashlib

    def build():
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
        ttnn.nn.manual_seed(0)
        config = ttnn.nn.GPTConfig(vocab_size=64, block_size=32, n_layer=1, n_head=2, n_embd=128, dropout=0.0)
        model = ttnn.nn.GPT(config, device=mesh)
        return mesh, model, ttnn.optim.AdamW(model.parameters(), lr=1e-3)

    def train(mesh, model, opt) -> str:
        rng = np.random.default_rng(1)
        for _ in range(2):
            ids = rng.integers(0, 64, (2, 33)).astype(np.uint32)
            x = ttnn.from_numpy(ids[:, :-1], dtype=ttnn.uint32, device=mesh)
            y = ttnn.from_numpy(ids[:, 1:], dtype=ttnn.uint32, device=mesh)
            loss = ttnn.cross_entropy_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return hashlib.sha256(b"".join(ttnn.to_numpy(p).tobytes() for p in model.parameters())).hexdigest()

    runs = [build() for _ in range(4)]  # built one after the other: the same seed gives the same weights
    try:
        with threadpool_limits(limits=2, user_api="blas"):  # the user's setting outside ops: 2 BLAS threads
            sequential = [train(*runs[0]), train(*runs[1])]
            digests = {}
            workers = [
                threading.Thread(target=lambda i=i: digests.__setitem__(i, train(*runs[i]))) for i in (2, 3)
            ]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
    finally:
        for mesh, _, _ in runs:
            ttnn.close_mesh_device(mesh)
    assert sequential[0] == sequential[1] == digests[2] == digests[3]


def test_module_calls_and_optimizer_steps_hold_blas_single_threaded_once(open_mesh):
    """A module's forward and an optimizer step pin BLAS once for all their ops; the user's setting is back after."""
    mesh = open_mesh((1, 1))
    seen = []

    class Probe(ttnn.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = ttnn.nn.Linear(32, 32, device=mesh)

        def forward(self, x):
            seen.append((_blas_threads(), _threads.single_threaded_blas.active))
            return self.lin(x)

    model = Probe()
    opt = ttnn.optim.SGD(model.parameters(), lr=0.1)
    x = ttnn.from_numpy(np.ones((1, 1, 32, 32), np.float32), layout=ttnn.TILE_LAYOUT, device=mesh)
    with threadpool_limits(limits=2, user_api="blas"):
        ttnn.sum(model(x)).backward()
        assert seen == [([1] * len(seen[0][0]), True)]
        assert set(_blas_threads()) == {2} and not _threads.single_threaded_blas.active
        entered = []
        real_enter = type(_threads.single_threaded_blas).__enter__

        def counting_enter(self):
            entered.append(self._depth)
            return real_enter(self)

        type(_threads.single_threaded_blas).__enter__ = counting_enter
        try:
            opt.step()
        finally:
            type(_threads.single_threaded_blas).__enter__ = real_enter
        assert entered and entered[0] == 0 and all(depth >= 1 for depth in entered[1:])
        assert set(_blas_threads()) == {2}
