"""The mesh-over-ranks code paths inside pytest (and its coverage): ranks are threads of this process, each with a
stand-in COMM_WORLD whose all-gather really exchanges the threads' buffers. The real ranks run under tttv2-run
in test_mesh.py; this drives the same code (span_ranks, exchange_shards, remote shards in ops) in process."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from tests.distributed import mesh_program
from tttv2 import ttnn
from tttv2.distributed import DistributedError, _mesh, _mpi
from tttv2.ttnn import _remote


class _Exchange:
    """What the ranks deposit, per collective (the n-th collective of every rank meets the others' n-th)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.lock = threading.Lock()
        self.rounds: dict[int, list] = {}
        self.subgroups: dict[tuple, _Exchange] = {}


class _RankComm:
    BYTE = "byte"

    def __init__(self, exchange: _Exchange, rank: int) -> None:
        self.exchange, self.rank, self.count = exchange, rank, 0

    def Get_size(self):
        return self.exchange.size

    def Get_rank(self):
        return self.rank

    def Iallgather(self, send, recv):
        ex = self.exchange
        with ex.lock:
            slots = ex.rounds.setdefault(self.count, [None] * ex.size)
            slots[self.rank] = np.array(send[0], copy=True)
        self.count += 1

        class Request:
            def Test(_):
                with ex.lock:
                    if any(s is None for s in slots):
                        return False
                recv[0][...] = np.stack(slots).reshape(recv[0].shape)
                return True

        return Request()

    def Split(self, color, key):
        colors = np.empty(self.exchange.size, dtype=np.int64)
        request = self.Iallgather([np.array([color], dtype=np.int64), None], [colors, None])
        while not request.Test():
            time.sleep(0.0005)
        members = [r for r in range(self.exchange.size) if colors[r] == color]
        with self.exchange.lock:
            sub = self.exchange.subgroups.setdefault((self.count, color), _Exchange(len(members)))
        return _RankComm(sub, members.index(self.rank))

    def Abort(self, code):  # pragma: no cover - the tests below never abort
        raise AssertionError("aborted")


@pytest.fixture
def thread_ranks(monkeypatch):
    """``run(size, fn)``: fn(rank) in ``size`` threads, each its own rank; returns their results by rank (the
    first exception of any rank is raised)."""
    local = threading.local()

    class _MPI:
        BYTE = "byte"

    monkeypatch.setattr(_mpi, "_import_mpi", lambda: _MPI)
    monkeypatch.setattr(_mpi, "initialize", lambda: local.comm)
    monkeypatch.setattr(_mpi, "world", lambda: getattr(local, "comm", None))
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "30")

    def run(size: int, fn, env: dict | None = None):
        exchange = _Exchange(size)
        results: list = [None] * size
        errors: list = [None] * size

        def body(rank):
            local.comm = _RankComm(exchange, rank)
            try:
                results[rank] = fn(rank)
            except BaseException as exc:
                errors[rank] = exc

        if env is not None:  # per-rank environment: read by span_ranks through os.environ, so serialised
            monkeypatch.setattr(_mesh.os, "environ", _PerRankEnviron(env, local))
        threads = [threading.Thread(target=body, args=(r,)) for r in range(size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return results, errors

    return run


class _PerRankEnviron(dict):
    """os.environ as each thread-rank sees it: ``env[rank]``."""

    def __init__(self, env: dict, local) -> None:
        super().__init__()
        self.env, self.local = env, local

    def get(self, key, default=None):
        return self.env.get(self.local.comm.Get_rank(), {}).get(key, default)


def _ops(rank: int) -> list[str]:
    lines: list[str] = []
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(2, 2))
    try:
        lines.append(f"devices {mesh.local_device_ids()} ranks {mesh.device_ranks()}")
        mesh_program.run_ops(mesh, rank, "ops", say=lines.append)
    finally:
        ttnn.close_mesh_device(mesh)
    return lines


def test_two_thread_ranks_compute_what_one_process_computes(thread_ranks, capsys):
    mesh_program.main("ops", "2x2")
    one = capsys.readouterr().out.splitlines()[1:]
    results, errors = thread_ranks(2, _ops)
    assert errors == [None, None]
    assert results[0][0] == "devices [0, 1] ranks [0, 0, 1, 1]"
    assert results[1][0] == "devices [2, 3] ranks [0, 0, 1, 1]"
    assert results[0][1:] == one and results[1][1:] == one


def test_a_rank_binding_names_each_ranks_devices(thread_ranks):
    def owners(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 4))
        try:
            assert [d.rank() for d in mesh.get_devices()] == mesh.device_ranks()
            return mesh.device_ranks(), mesh.local_device_ids()
        finally:
            ttnn.close_mesh_device(mesh)

    env = {0: {"TTTV2_MESH_DEVICES": "3"}, 1: {"TTTV2_MESH_DEVICES": "0,1,2"}}
    results, errors = thread_ranks(2, owners, env)
    assert errors == [None, None]
    assert results == [([1, 1, 1, 0], [3]), ([1, 1, 1, 0], [0, 1, 2])]


@pytest.mark.parametrize(
    ("shape", "env", "messages"),
    [
        ((1, 3), None, ["the 1x3 mesh (3 devices) does not divide over the 2 ranks of tttv2-run --np 2"]),
        (
            (1, 4),
            {0: {"TTTV2_MESH_DEVICES": "0,1"}},
            ["ranks [0] name their mesh_devices and ranks [1] do not"],
        ),
        (
            (1, 4),
            {0: {"TTTV2_MESH_DEVICES": "0,9"}, 1: {"TTTV2_MESH_DEVICES": "2,3"}},
            [
                "rank 0: TTTV2_MESH_DEVICES='0,9' (mesh_devices of the rank binding): expected distinct device ids "
                "in 0..3",
                "rank 1: ttnn.open_mesh_device: the mesh_devices of rank 0 (TTTV2_MESH_DEVICES) are not valid",
            ],
        ),
        (
            (1, 4),
            {0: {"TTTV2_MESH_DEVICES": "0,x"}, 1: {"TTTV2_MESH_DEVICES": "2,3"}},
            ["expected distinct device ids", "the mesh_devices of rank 0"],
        ),
        (
            (1, 4),
            {0: {"TTTV2_MESH_DEVICES": "0,1,2"}, 1: {"TTTV2_MESH_DEVICES": "2,3"}},
            ["device 2 of the 1x4 mesh is claimed by ranks [0, 1]"],
        ),
        (
            (1, 4),
            {0: {"TTTV2_MESH_DEVICES": "0,1"}, 1: {"TTTV2_MESH_DEVICES": "2"}},
            ["device 3 of the 1x4 mesh is claimed by ranks []"],
        ),
    ],
)
def test_meshes_that_do_not_split_over_the_ranks_are_refused_on_every_rank(
    thread_ranks, shape, env, messages
):
    def open_it(rank):
        ttnn.open_mesh_device(ttnn.MeshShape(*shape))

    _, errors = thread_ranks(2, open_it, env)
    assert all(isinstance(e, DistributedError) and getattr(e, "on_every_rank", False) for e in errors)
    for rank, error in enumerate(errors):
        assert str(error).startswith(f"rank {rank}: ")
    text = " | ".join(str(e) for e in errors)
    for message in messages:
        assert message in text


def test_ranks_that_open_different_meshes_are_refused(thread_ranks):
    _, errors = thread_ranks(2, lambda rank: ttnn.open_mesh_device(ttnn.MeshShape(1, 2 + 2 * rank)))
    assert "this rank runs ttnn.open_mesh_device(MeshShape([1, 2]), WORMHOLE_B0)" in str(errors[0])
    assert "rank 0 runs ttnn.open_mesh_device(MeshShape([1, 2]), WORMHOLE_B0)" in str(errors[1])


def test_a_one_device_mesh_stays_each_ranks_own(thread_ranks):
    def open_one(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
        return mesh.spans_ranks(), mesh.device_ranks()

    results, errors = thread_ranks(2, open_one)
    assert errors == [None, None] and results == [(False, [None])] * 2


def test_local_shards_are_this_ranks_devices(thread_ranks):
    def values(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
        t = ttnn.from_numpy(
            np.arange(2, dtype=np.int32).reshape(2, 1),
            dtype=ttnn.int32,
            device=mesh,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        )
        remote = [_remote.is_remote(s) for s in t.shards()]
        return [int(s[0, 0]) for s in _remote.local_shards(t, "test")], remote

    results, errors = thread_ranks(2, values)
    assert errors == [None, None]
    assert results == [([0], [False, True]), ([1], [True, False])]


def test_remote_shards_take_no_memory_and_are_recognised():
    stand_in = _remote.remote_shard((4096, 4096), np.float32)
    assert stand_in.shape == (4096, 4096) and not stand_in.flags.writeable and _remote.is_remote(stand_in)
    assert not _remote.is_remote(np.zeros((2, 2), np.float32)) and not _remote.is_remote([0.0])
    assert not _remote.is_remote(np.broadcast_to(np.zeros(1, np.int8), (3,)))  # zero strides, not ours
    assert _remote.remote_like(7) == 7
    assert _remote.skipped(None, 3) == frozenset()  # host tensors: nothing is another rank's
    pair = _remote.remote_like((np.ones(3, np.float32), [np.ones(2, np.int32)]))
    assert _remote.is_remote(pair[0]) and _remote.is_remote(pair[1][0]) and isinstance(pair[1], list)


def test_the_meeting_before_an_abort_gives_up_when_a_rank_is_missing(thread_ranks):
    results, errors = thread_ranks(1, lambda rank: _mpi.meet(_Lonely(), 0.05))
    assert results == [False] and errors == [None]


class _Lonely(_RankComm):
    """A world of two whose other rank never comes."""

    def __init__(self) -> None:
        super().__init__(_Exchange(2), 0)


def test_a_world_of_one_keeps_the_whole_mesh(thread_ranks):
    results, errors = thread_ranks(1, lambda rank: ttnn.open_mesh_device(ttnn.MeshShape(1, 2)).spans_ranks())
    assert results == [False] and errors == [None]


def test_gradients_on_a_spread_mesh_are_averaged_by_ttnn_not_over_the_ranks_again(thread_ranks):
    import warnings

    import ttml
    from tttv2.distributed import all_reduce_gradients_

    def train(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
        ttnn.nn.manual_seed(1)
        layer = ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.bfloat16)
        x = ttnn.from_numpy(
            np.arange(64 * 32, dtype=np.float32).reshape(64, 32) / 1000,
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
        )
        ttnn.sum(layer(x)).backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ttml.core.distributed.synchronize_gradients(dict(layer.named_parameters()))
        grads = [mesh_program.digest(ttnn.to_numpy(p.grad)) for p in layer.parameters()]
        if mesh.spans_ranks():
            with pytest.raises(DistributedError, match="one logical mesh spread over the ranks"):
                all_reduce_gradients_(layer.parameters())
        return grads

    results, errors = thread_ranks(2, train)
    assert errors == [None, None] and results[0] == results[1]
    reference, errors = thread_ranks(1, train)  # a world of one: the whole mesh in one process
    assert errors == [None] and results[0] == reference[0]


def _gather_rows(shape):
    def run(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        try:
            x = np.arange(32 * mesh.get_num_devices() * 32, dtype=np.float32).reshape(1, 1, 32, -1)
            t = ttnn.from_numpy(
                x, dtype=ttnn.float32, device=mesh, mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=3)
            )
            out = ttnn.to_numpy(ttnn.all_gather(t, 2), mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=0))
            return mesh.device_ranks(), mesh_program.digest(out)
        finally:
            ttnn.close_mesh_device(mesh)

    return run


def test_ranks_with_one_mesh_id_share_a_mesh_and_other_ids_open_their_own(thread_ranks):
    reference, _ = thread_ranks(1, _gather_rows((1, 2)))
    env = {r: {"TTTV2_MESH_ID": str(r // 2)} for r in range(4)}  # ranks 0-1: mesh 0, ranks 2-3: mesh 1

    def twice(rank):  # the second mesh reuses the ranks' split communicator
        return [_gather_rows((1, 2))(rank) for _ in range(2)][1]

    results, errors = thread_ranks(4, twice, env)
    assert errors == [None] * 4
    assert [r[0] for r in results] == [[0, 1], [0, 1], [2, 3], [2, 3]]
    assert {r[1] for r in results} == {reference[0][1]}


def test_ranks_with_mesh_ids_of_their_own_keep_whole_meshes_of_any_shape(thread_ranks):
    def run(rank):
        return _gather_rows((1, 2 + 2 * rank))(rank)

    env = {0: {"TTTV2_MESH_ID": "0"}, 1: {"TTTV2_MESH_ID": "7"}}
    results, errors = thread_ranks(2, run, env)
    assert errors == [None, None]
    assert results[0][0] == [None, None] and results[1][0] == [None] * 4


def test_a_bad_mesh_id_is_named(thread_ranks):
    env = {0: {"TTTV2_MESH_ID": "-3"}, 1: {"TTTV2_MESH_ID": "x"}}
    _, errors = thread_ranks(2, lambda rank: ttnn.open_mesh_device(ttnn.MeshShape(1, 2)), env)
    assert str(errors[0]).startswith(
        "rank 0: TTTV2_MESH_ID='-3' (mesh_id of the rank binding): expected a non-"
    )
    assert str(errors[1]).startswith("rank 1: TTTV2_MESH_ID='x'")


def test_ttml_sync_over_ranks_of_one_device_each_averages_over_the_ranks(thread_ranks):
    import warnings

    import ttml

    def grads(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))  # each rank's own device
        ttnn.nn.manual_seed(1)
        layer = ttnn.nn.Linear(32, 32, device=mesh, dtype=ttnn.float32)
        x = ttnn.from_numpy(
            np.full((32, 32), rank + 1.0, np.float32),
            dtype=ttnn.float32,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
        )
        ttnn.sum(layer(x)).backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            ttml.core.distributed.synchronize_gradients(dict(layer.named_parameters()))
        return float(ttnn.to_numpy(layer.weight.grad).reshape(-1)[0])

    results, errors = thread_ranks(2, grads)
    assert errors == [None, None] and results[0] == results[1] == 32 * 1.5  # the mean of 32*1 and 32*2


@pytest.mark.parametrize("paged", [False, True])
def test_the_tttv1_demo_on_a_mesh_spread_over_thread_ranks_generates_the_same_tokens(thread_ranks, paged):
    """Attention, SDPA (prefill and decode) and KV-cache updates on a spread 1x2 mesh: each rank computes only
    its device; the tokens equal a world of one's."""
    from tttv1.demo.simple_text_demo import make_prompts, run_demo

    def generate(rank):
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
        try:
            result = run_demo(
                mesh,
                prompts=make_prompts(1, None, None),
                max_new_tokens=3,
                max_seq_len=256,
                paged_attention=paged,
                verbose=False,
            )
            return mesh.device_ranks(), result.tokens
        finally:
            ttnn.close_mesh_device(mesh)

    reference, errors = thread_ranks(1, generate)
    assert errors == [None] and reference[0][0] == [None, None]
    results, errors = thread_ranks(2, generate)
    assert errors == [None, None]
    assert [r[0] for r in results] == [[0, 1], [0, 1]]
    assert results[0][1] == results[1][1] == reference[0][1] and len(reference[0][1][0]) == 3
