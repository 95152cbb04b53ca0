"""tt-metal's distributed-context names on the emulator's ttnn, in a process of its own (no launcher) and the
collective machinery's checks (docs/distributed.md)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.distributed import DistributedError, DistributedTimeoutError, _mpi


def test_a_process_of_its_own_is_a_world_of_one_without_mpi(monkeypatch):
    for var in ("PMI_RANK", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert not ttnn.distributed_context_is_initialized()
    assert ttnn.distributed_context_get_rank() == 0 and repr(ttnn.distributed_context_get_rank()) == "Rank(0)"
    assert ttnn.distributed_context_get_size() == 1 and repr(ttnn.distributed_context_get_size()) == "Size(1)"
    ttnn.distributed_context_barrier()  # returns at once
    assert not ttnn.using_distributed_env()
    assert not ttnn.distributed_context_is_initialized()
    monkeypatch.setenv("PMI_SIZE", "4")  # what mpiexec tells each of its ranks
    assert ttnn.using_distributed_env()


def test_initialising_in_a_process_of_its_own_gives_rank_0_of_1():
    code = (
        "from tttv2 import ttnn; ttnn.init_distributed_context(); ttnn.init_distributed_context(); "
        "ttnn.distributed_context_barrier(); "
        "print(ttnn.distributed_context_is_initialized(), ttnn.distributed_context_get_rank(), "
        "ttnn.distributed_context_get_size(), ttnn.using_distributed_env())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "True 0 1 False\n"


def test_mpi_missing_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # `from mpi4py import MPI` raises ImportError
    monkeypatch.setattr(_mpi, "_state", {"comm": None})
    with pytest.raises(ImportError, match=r"^MPI is not installed: pip install 'tttv2\[distributed\]'"):
        ttnn.init_distributed_context()


def test_a_collective_that_never_completes_times_out(monkeypatch):
    class Never:
        def Test(self):
            return False

    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "0.05")
    with pytest.raises(
        DistributedTimeoutError, match=r"rank 0: the test exchange did not complete within 0.05 s"
    ):
        _mpi.wait(Never(), "the test exchange")


@pytest.mark.parametrize("value", ["0", "-1", "soon"])
def test_a_bad_timeout_is_named(monkeypatch, value):
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", value)
    with pytest.raises(
        DistributedError,
        match=f"TTTV2_DISTRIBUTED_TIMEOUT: expected a positive number of seconds, got '{value}'",
    ):
        _mpi.timeout()


def test_the_timeout_defaults_and_the_launch_size_tolerates_junk(monkeypatch):
    monkeypatch.delenv("TTTV2_DISTRIBUTED_TIMEOUT", raising=False)
    assert _mpi.timeout() == _mpi.DEFAULT_TIMEOUT
    monkeypatch.setenv("PMI_SIZE", "many")
    assert _mpi.launched_size() == 1


def test_headers_that_differ_name_both_collectives():
    mine = _mpi.header(16, "ttnn.distributed_context_barrier")
    same = np.stack([mine, mine])
    _mpi.check_headers(0, mine, same)
    other = np.stack([mine, _mpi.header(0, "a gradient exchange")])
    with pytest.raises(DistributedError) as info:
        _mpi.check_headers(0, mine, other)
    assert str(info.value) == (
        "rank 0: ranks disagree: this rank runs ttnn.distributed_context_barrier on 16 bytes, rank 1 runs a "
        "gradient exchange on 0 bytes (every rank must run the same collectives in the same order)"
    )


def test_the_error_record_is_left_only_under_the_launcher(tmp_path, monkeypatch):
    monkeypatch.delenv("TTTV2_RUN_DIR", raising=False)
    _mpi._record_error(1, "ValueError: x")
    monkeypatch.setenv("TTTV2_RUN_DIR", str(tmp_path))
    _mpi._record_error(1, "Traceback\nValueError: x")
    _mpi._record_error(2, "")
    assert (tmp_path / "rank-1.error").read_text() == "ValueError: x"
    assert (tmp_path / "rank-2.error").read_text() == "an unhandled exception"


class _TwinWorld:
    """In process, a stand-in for COMM_WORLD of two ranks that pass identical buffers (the real collectives run
    under tttv2-run in test_run.py / test_ddp.py; this drives the same code paths inside pytest's coverage)."""

    BYTE = "byte"

    def __init__(self):
        self.COMM_WORLD = self
        self.aborted = []

    def Get_size(self):
        return 2

    def Get_rank(self):
        return 0

    def Iallgather(self, send, recv):
        recv[0][...] = send[0]  # every rank sent what this one did

        class Done:
            def Test(self):
                return True

        return Done()

    def Abort(self, code):
        self.aborted.append(code)


@pytest.fixture
def twin_world(monkeypatch):
    world = _TwinWorld()
    monkeypatch.setattr(_mpi, "_state", {"comm": None})
    monkeypatch.setattr(_mpi, "_import_mpi", lambda: world)
    monkeypatch.setattr(sys, "excepthook", lambda *a: None)
    return world


def test_an_unhandled_exception_in_a_rank_aborts_the_job(twin_world, tmp_path, monkeypatch):
    monkeypatch.setenv("TTTV2_RUN_DIR", str(tmp_path))
    assert ttnn.init_distributed_context() is None and ttnn.distributed_context_is_initialized()
    assert ttnn.using_distributed_env() and ttnn.distributed_context_get_size() == 2
    sys.excepthook(ValueError, ValueError("rank 0 gives up"), None)
    assert twin_world.aborted == [1]
    assert (tmp_path / "rank-0.error").read_text() == "ValueError: rank 0 gives up"


def test_an_error_every_rank_raises_meets_the_other_ranks_before_the_abort(twin_world, capsys):
    from tttv2.distributed import DistributedError

    ttnn.init_distributed_context()
    error = _mpi.every_rank(DistributedError("rank 0: ranks disagree: ..."))
    sys.excepthook(DistributedError, error, None)
    assert twin_world.aborted == [1]  # after the meeting (which the stand-in world completes at once)


def test_collectives_exchange_headers_then_bytes(twin_world):
    ttnn.distributed_context_barrier()
    parts = _mpi.allgather_bytes(np.arange(3, dtype=np.float32), "three floats")
    assert [p.view(np.float32).tolist() for p in parts] == [[0.0, 1.0, 2.0]] * 2


def test_gradients_of_identical_replicas_average_to_themselves(twin_world):
    from tttv2.distributed import all_reduce_gradients_

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        ttnn.nn.manual_seed(1)
        layer = ttnn.nn.Linear(32, 64, device=mesh, dtype=ttnn.bfloat16)
        x = ttnn.from_numpy(
            np.ones((32, 32), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
        )
        ttnn.sum(layer(x)).backward()
        before = {n: np.array(p.grad.shards()[0]) for n, p in layer.named_parameters()}
        all_reduce_gradients_(dict(layer.named_parameters()))
        for name, p in layer.named_parameters():
            assert np.array_equal(p.grad.shards()[0], before[name]), name
        all_reduce_gradients_(layer.parameters(), average=False)
        for name, p in layer.named_parameters():
            assert np.array_equal(p.grad.shards()[0], 2 * before[name]), name
    finally:
        ttnn.close_mesh_device(mesh)
