"""MeshSocket / SocketConfig and ttnn.experimental.send_async / recv_async: between two ranks over MPI (the
fixture tests/distributed/fixtures/socket_relay.py, in tt-metal's socket-demo style, under tttv2-run), and in
process (create_socket_pair; the rank path on a loopback stand-in for MPI, for coverage and the bad input)."""

from __future__ import annotations

import sys
from collections import defaultdict, deque
from pathlib import Path

import numpy as np
import pytest

from tests.distributed.test_run import tttv2_run
from tttv2 import ttnn
from tttv2.distributed import DistributedError, DistributedTimeoutError, _mpi
from tttv2.ttnn.ops import sockets

RELAY = (sys.executable, "-m", "tests.distributed.fixtures.socket_relay")
# each rank keeps its own 1x2 mesh (a mesh id per rank), as tt-metal's socket demos bind their ranks
OWN_MESHES = ("--rank-binding", str(Path(__file__).parent / "fixtures" / "own_meshes.yaml"))


def config(shape=(1, 2), sender_rank=None, receiver_rank=None, fifo=4096, flip=False):
    coords = list(ttnn.MeshCoordinateRange(ttnn.MeshShape(*shape)))
    links = [
        ttnn.SocketConnection(
            ttnn.MeshCoreCoord(a, ttnn.CoreCoord(0, 0)), ttnn.MeshCoreCoord(b, ttnn.CoreCoord(0, 0))
        )
        for a, b in zip(coords, coords[::-1] if flip else coords)
    ]
    memory = ttnn.SocketMemoryConfig(ttnn.BufferType.L1, fifo)
    return ttnn.SocketConfig(links, memory, sender_rank=sender_rank, receiver_rank=receiver_rank)


def sharded(mesh, seed=0, dtype=ttnn.bfloat16):
    x = np.random.default_rng(seed).standard_normal((1, 1, 32, 128)).astype(np.float32)
    mapper = ttnn.ShardTensorToMesh(mesh, dim=3)
    return ttnn.from_numpy(x, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh, mesh_mapper=mapper)


# --- two ranks ---------------------------------------------------------------------------------------------------


def test_two_ranks_relay_tensors_bit_for_bit_and_pass_them_round_a_ring(tmp_path):
    done = tttv2_run("--np", "2", *OWN_MESHES, "--", *RELAY, "relay", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("relay: done in ")
    sent, received = dict(np.load(tmp_path / "rank0.npz")), dict(np.load(tmp_path / "rank1.npz"))
    names = ("bf16_sharded", "bfp8", "ids_row_major", "l1_width_sharded")
    for name in names:  # every shard, its numpy dtype, and the spec (shape, dtype, layout, memory config)
        for key in (f"{name}/0", f"{name}/1", f"{name}/spec"):
            a, b = sent[f"sent/{key}"], received[f"received/{key}"]
            assert a.dtype == b.dtype and np.array_equal(a, b), key
    assert received["received/ids_row_major/0"].dtype == np.uint32
    assert "WIDTH_SHARDED" in str(received["received/l1_width_sharded/spec"][3])
    assert not np.array_equal(sent["sent/bf16_sharded/0"], sent["sent/bf16_sharded/1"])  # really sharded
    assert received["exp"].shape == (1, 1, 32, 256)  # the receiver computed on what it got
    for d in (0, 1):  # the ring: each rank ends with the tensor the other started with
        assert np.array_equal(sent[f"ring/end/{d}"], received[f"ring/start/{d}"])
        assert np.array_equal(received[f"ring/end/{d}"], sent[f"ring/start/{d}"])


def test_a_spec_mismatch_fails_on_both_ranks():
    done = tttv2_run("--np", "2", *OWN_MESHES, "--all-output", "--", *RELAY, "spec")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "[1] rank 1: ValidationError: ttnn.experimental.recv_async: output_tensor: expected the sent tensor's spec "
        "[1, 1, 64, 128] BFLOAT16 TILE, got [1, 1, 64, 64] BFLOAT8_B TILE"
    ) in lines
    assert (
        "[0] rank 0: DistributedError: rank 0: ttnn.experimental.send_async #0 on MeshSocket(SENDER, rank 0 -> rank "
        "1, 2 connections): rank 1 refused it: its output_tensor is [1, 1, 64, 64] BFLOAT8_B TILE, the sent tensor "
        "[1, 1, 64, 128] BFLOAT16 TILE"
    ) in lines


def test_different_socket_configs_fail_the_handshake_on_both_ranks():
    done = tttv2_run("--np", "2", *OWN_MESHES, "--all-output", "--", *RELAY, "handshake")
    assert done.returncode == 0, done.stderr
    for rank, mine, theirs in ((0, 4096, 8192), (1, 8192, 4096)):
        assert (
            f"[{rank}] rank {rank}: DistributedError: rank {rank}: ttnn.MeshSocket: the two ends' memory config "
            f"differ: rank {rank} has ['L1', {mine}], rank {1 - rank} has ['L1', {theirs}]"
        ) in done.stdout


@pytest.mark.parametrize(
    ("case", "line"),
    [
        (
            "receiver-gone",
            "[0] rank 0: DistributedTimeoutError: rank 0: ttnn.experimental.send_async #0 on MeshSocket(SENDER, rank "
            "0 -> rank 1, 2 connections) (waiting for rank 1 to take it) did not complete within 1.5 s",
        ),
        (
            "sender-gone",
            "[1] rank 1: DistributedTimeoutError: rank 1: ttnn.experimental.recv_async #0 on MeshSocket(RECEIVER, "
            "rank 0 -> rank 1, 2 connections) (waiting for rank 0 to send) did not complete within 1.5 s",
        ),
    ],
)
def test_a_peer_that_left_is_a_timeout_not_a_hang(case, line):
    done = tttv2_run("--np", "2", *OWN_MESHES, "--all-output", "--timeout", "1.5", "--", *RELAY, case)
    assert done.returncode == 0, done.stderr
    assert any(text.startswith(line) for text in done.stdout.splitlines()), done.stdout


# --- one process: create_socket_pair ---------------------------------------------------------------------------


@pytest.fixture
def halves():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 4))
    try:
        yield mesh.create_submeshes(ttnn.MeshShape(1, 2))
    finally:
        ttnn.close_mesh_device(mesh)


def test_a_socket_pair_moves_shards_between_submeshes(halves):
    a, b = halves
    send, recv = ttnn.create_socket_pair(a, b, config())
    assert send.get_socket_endpoint_type() is ttnn.SocketEndpoint.SENDER
    assert recv.get_socket_endpoint_type() is ttnn.SocketEndpoint.RECEIVER
    assert recv.get_mesh_device() is b and len(recv.get_connection_config()) == 2
    assert [c.device_coord for c in recv.get_active_cores()] == [
        ttnn.MeshCoordinate(0, 0),
        ttnn.MeshCoordinate(0, 1),
    ]
    assert repr(send) == "MeshSocket(SENDER, in process, 2 connections)"
    t = sharded(a, dtype=ttnn.bfloat8_b)
    out = ttnn.allocate_tensor_on_device(t.spec, b)
    assert ttnn.experimental.send_async(t, send) == []
    assert ttnn.experimental.recv_async(out, recv) == [out]
    assert all(np.array_equal(x, y) for x, y in zip(t.shards(), out.shards()))
    assert out.tensor_topology() == t.tensor_topology() and out.spec == t.spec
    whole = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(b, dim=3))
    assert np.array_equal(whole, ttnn.to_numpy(t, mesh_composer=ttnn.ConcatMeshToTensor(a, dim=3)))
    ttnn.synchronize_device(a)


def test_crossed_connections_swap_the_shards_and_keep_the_receivers_distribution(halves):
    a, b = halves
    send, recv = ttnn.create_socket_pair(a, b, config(flip=True))
    t = sharded(a, seed=1)
    out = ttnn.allocate_tensor_on_device(t.spec, b)
    ttnn.experimental.send_async(t, send)
    ttnn.experimental.recv_async(out, recv)
    assert np.array_equal(out.shards()[0], t.shards()[1]) and np.array_equal(out.shards()[1], t.shards()[0])
    assert out.tensor_topology() != t.tensor_topology()  # the devices' data no longer follow the sender's map


def test_tensor_specs_and_coordinate_ranges():
    spec = ttnn.TensorSpec((1, 32), ttnn.bfloat16, ttnn.TILE_LAYOUT, ttnn.BufferType.L1)
    assert spec.memory_config.buffer_type is ttnn.BufferType.L1 and list(spec.shape) == [1, 32]
    assert repr(spec) == "TensorSpec(shape=[1, 32], dtype=BFLOAT16, layout=TILE)"
    assert spec != ttnn.TensorSpec((1, 32), ttnn.bfloat16, ttnn.TILE_LAYOUT) and spec != "spec"
    box = ttnn.MeshCoordinateRange(ttnn.MeshCoordinate(1, 1), ttnn.MeshCoordinate(2, 2))
    assert len(box) == 4 and [tuple(c) for c in box] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert repr(box) == "MeshCoordinateRange(start=(1, 1), end=(2, 2))"
    assert list(ttnn.MeshCoordinateRange((0, 0), (0, 1))) == [
        ttnn.MeshCoordinate(0, 0),
        ttnn.MeshCoordinate(0, 1),
    ]
    assert repr(config(sender_rank=0, receiver_rank=1)) == (
        "SocketConfig(2 connections, fifo 4096 B L1, sender_rank=0, receiver_rank=1)"
    )
    host = ttnn.from_numpy(np.zeros((2, 3), np.float32), dtype=ttnn.float32)
    assert host.spec.shape == ttnn.Shape((2, 3))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ttnn.MeshCoordinateRange(3), "expected a ttnn.MeshShape or (start, end), got 3"),
        (lambda: ttnn.MeshCoordinateRange((1, 1), (0, 0)), "start (1, 1) is after end (0, 0)"),
        (
            lambda: ttnn.MeshCoreCoord("x", ttnn.CoreCoord(0, 0)),
            "device_coord: expected a ttnn.MeshCoordinate",
        ),
        (lambda: ttnn.MeshCoreCoord((0, 0), (0, 0)), "core_coord: expected a ttnn.CoreCoord"),
        (lambda: ttnn.SocketConnection(1, 2), "sender_core: expected a ttnn.MeshCoreCoord"),
        (lambda: ttnn.SocketMemoryConfig("L1", 4096), "socket_storage_type: expected a ttnn.BufferType"),
        (lambda: ttnn.SocketMemoryConfig(ttnn.BufferType.L1, 0), "fifo_size: expected a positive number"),
        (lambda: ttnn.SocketConfig([], None), "connections: expected a non-empty list"),
        (lambda: ttnn.SocketConfig([1], None), "connections: expected ttnn.SocketConnection items, got 1"),
        (
            lambda: ttnn.SocketConfig(config().socket_connection_config, 4096),
            "memory_config: expected a ttnn.",
        ),
        (lambda: config(sender_rank=-1), "sender_rank: expected a rank (an int >= 0), got -1"),
        (lambda: ttnn.TensorSpec((1,), "bf16", ttnn.TILE_LAYOUT), "dtype: expected a ttnn.DataType"),
        (lambda: ttnn.TensorSpec((1,), ttnn.bfloat16, "tile"), "layout: expected a ttnn.Layout"),
        (
            lambda: ttnn.TensorSpec("ab", ttnn.bfloat16, ttnn.TILE_LAYOUT),
            "shape: expected a sequence of ints",
        ),
        (
            lambda: ttnn.allocate_tensor_on_device((1, 32), None),
            "tensor_spec: expected a ttnn.TensorSpec, got tuple",
        ),
    ],
)
def test_bad_socket_objects_are_named(build, message):
    with pytest.raises(ttnn.ValidationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


def test_two_links_from_one_device_are_refused():
    link = config().socket_connection_config[0]
    with pytest.raises(ttnn.ValidationError, match=r"device \[0, 0\] has two sender connections"):
        ttnn.SocketConfig([link, link], ttnn.SocketMemoryConfig(ttnn.BufferType.L1, 4096))


def test_bad_transfers_are_named(halves):
    a, b = halves
    send, recv = ttnn.create_socket_pair(a, b, config())
    t = sharded(a)
    with pytest.raises(ttnn.ValidationError, match="nothing was sent on MeshSocket"):
        ttnn.experimental.recv_async(ttnn.allocate_tensor_on_device(t.spec, b), recv)
    with pytest.raises(ttnn.ValidationError, match="expected a SENDER socket, got the RECEIVER end"):
        ttnn.experimental.send_async(t, recv)
    with pytest.raises(ttnn.ValidationError, match="input_tensor: expected a tensor on the socket's mesh"):
        ttnn.experimental.send_async(ttnn.allocate_tensor_on_device(t.spec, b), send)
    with pytest.raises(ttnn.ValidationError, match=r"mesh_socket: expected a ttnn.MeshSocket, got str"):
        ttnn.experimental.send_async(t, "socket")
    small, _ = ttnn.create_socket_pair(a, b, config(fifo=1024))
    with pytest.raises(
        ttnn.ValidationError, match=r"a FIFO of at least one page of the tensor \(2048 bytes\)"
    ):
        ttnn.experimental.send_async(t, small)
    rows = ttnn.from_numpy(np.zeros((1, 100), np.float32), dtype=ttnn.bfloat16, device=a)
    with pytest.raises(
        ttnn.ValidationError, match=r"\(224 bytes\), got fifo_size 200"
    ):  # 100 x 2 B, 32-aligned
        ttnn.experimental.send_async(rows, ttnn.create_socket_pair(a, b, config(fifo=200))[0])
    ttnn.experimental.send_async(t, send)
    padded = ttnn.from_numpy(
        np.zeros((1, 1, 32, 64), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=b
    )
    padded._padded_shape = ttnn.Shape((1, 1, 64, 64))
    with pytest.raises(ttnn.ValidationError, match=r"padded to None, got .* padded to"):
        ttnn.experimental.recv_async(padded, recv)
    with pytest.raises(ttnn.ValidationError, match=r"outside the receiver's 1x1 mesh"):
        ttnn.create_socket_pair(a, b.create_submeshes(ttnn.MeshShape(1, 1))[0], config())
    with pytest.raises(ttnn.ValidationError, match=r"device: expected a ttnn.MeshDevice"):
        ttnn.create_socket_pair("mesh", b, config())
    with pytest.raises(ttnn.ValidationError, match=r"config: expected a ttnn.SocketConfig"):
        ttnn.create_socket_pair(a, b, "config")


def test_a_socket_between_ranks_needs_two_ranks_that_exist(halves):
    a, _ = halves
    with pytest.raises(ttnn.ValidationError, match="needs sender_rank and receiver_rank"):
        ttnn.MeshSocket(a, config())
    with pytest.raises(ttnn.ValidationError, match="are both 0; a MeshSocket joins two ranks"):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=0))
    with pytest.raises(ttnn.ValidationError, match=r"rank 1 does not exist: this world has 1 rank\(s\)"):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=1))
    closed = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    ttnn.close_mesh_device(closed)
    with pytest.raises(ttnn.ValidationError, match="is closed"):
        ttnn.MeshSocket(closed, config())


# --- the rank path in process: a loopback stand-in for MPI ---------------------------------------------------------


class _Loopback:
    """COMM_WORLD of rank 0 in a world of 3 whose peers are mirrors: a message sent to rank R with tag T is the
    next message received from rank R with tag T (so one process holds both ends of a socket)."""

    BYTE = "byte"

    def __init__(self):
        self.COMM_WORLD = self
        self.queues = defaultdict(deque)

    def Get_size(self):
        return 3

    def Get_rank(self):
        return 0

    class _Done:
        def Test(self):
            return True

    class Status:
        def Get_count(self, _kind):
            return self.count

    def Isend(self, buf, dest, tag):
        self.queues[(dest, tag)].append(np.array(buf[0], copy=True))
        return self._Done()

    def Iprobe(self, source, tag):
        return bool(self.queues[(source, tag)])

    def Improbe(self, source, tag, status):
        if not self.queues[(source, tag)]:
            return None
        data = self.queues[(source, tag)].popleft()
        status.count = data.size
        world = self

        class Message:
            def Irecv(self, buf):
                buf[0][...] = data
                return world._Done()

        return Message()


@pytest.fixture
def loopback(halves, monkeypatch):  # halves first: its 1x4 mesh opens in a world of one
    world = _Loopback()
    monkeypatch.setattr(_mpi, "_state", {"comm": None})
    monkeypatch.setattr(_mpi, "_import_mpi", lambda: world)
    monkeypatch.setattr(sys, "excepthook", lambda *a: None)
    monkeypatch.setattr(sockets, "_pair_counts", {})
    monkeypatch.setattr(sockets, "_live", sockets.weakref.WeakSet())
    monkeypatch.setattr(sockets, "_exit_hook", [True])
    monkeypatch.setenv("TTTV2_DISTRIBUTED_TIMEOUT", "0.2")
    ttnn.init_distributed_context()
    return world


def _ends(mesh, **kwargs):
    """Both ends of socket #0 between ranks 0 and 1, in this process (the counter is reset in between)."""
    send = ttnn.MeshSocket(mesh, config(sender_rank=0, receiver_rank=1, **kwargs))
    sockets._pair_counts.clear()
    recv = ttnn.MeshSocket(mesh, config(sender_rank=1, receiver_rank=0, **kwargs))
    recv._config = send._config  # the mirror: this end plays rank 1's receiver of rank 0's socket
    return send, recv


def test_the_rank_path_sends_headers_and_bytes_and_confirms_receipt(loopback, halves):
    a, _ = halves
    send, recv = _ends(a)
    assert repr(send) == "MeshSocket(SENDER, rank 0 -> rank 1, 2 connections)"
    t = sharded(a, seed=3, dtype=ttnn.bfloat8_b)
    ttnn.experimental.send_async(t, send)
    assert len(send._pending) == 1
    out = ttnn.allocate_tensor_on_device(t.spec, a)
    ttnn.experimental.recv_async(out, recv)
    assert all(np.array_equal(x, y) for x, y in zip(t.shards(), out.shards()))
    ttnn.experimental.send_async(t, send)  # checks the first receipt on the way, without waiting
    assert [p.number for p in send._pending] == [1]
    assert recv._receive_new("pipeline").spec == t.spec
    ttnn.synchronize_device(a)
    assert not send._pending


def test_the_rank_path_reports_a_refusal_to_the_sender(loopback, halves):
    a, _ = halves
    send, recv = _ends(a)
    ttnn.experimental.send_async(sharded(a), send)
    wrong = ttnn.allocate_tensor_on_device(
        ttnn.TensorSpec([1, 1, 32, 32], ttnn.bfloat16, ttnn.TILE_LAYOUT), a
    )
    with pytest.raises(ttnn.ValidationError, match="expected the sent tensor's spec"):
        ttnn.experimental.recv_async(wrong, recv)
    with pytest.raises(
        DistributedError, match=r"send_async #0 on .* rank 1 refused it: its output_tensor is \[1, 1"
    ):
        ttnn.synchronize_device()


def test_the_rank_path_times_out_when_nobody_answers(loopback, halves):
    a, _ = halves
    send, recv = _ends(a)
    out = ttnn.allocate_tensor_on_device(sharded(a).spec, a)
    with pytest.raises(
        DistributedTimeoutError, match=r"recv_async #0 .* \(waiting for rank 1 to send\) did not"
    ):
        ttnn.experimental.recv_async(out, recv)
    ttnn.experimental.send_async(sharded(a), send)
    ttnn.experimental.send_async(
        sharded(a), send
    )  # the first is not taken yet: the send goes on without waiting
    assert len(send._pending) == 2
    loopback.queues.clear()  # the tensors are lost on the way: no receipt will come
    with pytest.raises(
        DistributedTimeoutError, match=r"\(waiting for rank 1 to take it\) did not complete within"
    ):
        send.synchronize()


def test_the_handshake_refuses_another_config_or_order(loopback, halves):
    a, _ = halves
    theirs = {**config(fifo=8192, sender_rank=0, receiver_rank=1)._describe(), "index": 0, "mesh": [1, 2]}
    loopback.queues[(1, sockets._TAG_BASE)].append(
        np.frombuffer(sockets.json.dumps(theirs).encode(), np.uint8)
    )
    with pytest.raises(
        DistributedError, match=r"memory config differ: rank 0 has \['L1', 4096\], rank 1 has"
    ):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=1))
    loopback.queues.clear()
    theirs = {**theirs, "fifo": ["L1", 4096], "ranks": [1, 0], "index": 1}
    loopback.queues[(1, sockets._TAG_BASE + 4)].append(
        np.frombuffer(sockets.json.dumps(theirs).encode(), np.uint8)
    )
    with pytest.raises(
        DistributedError, match=r"built its socket #1 with this rank for ranks 1->0, this rank for 0->1"
    ):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=1))
    loopback.queues.clear()
    theirs = {**theirs, "ranks": [0, 1], "index": 2, "mesh": [1, 1]}
    loopback.queues[(1, sockets._TAG_BASE + 8)].append(
        np.frombuffer(sockets.json.dumps(theirs).encode(), np.uint8)
    )
    with pytest.raises(
        ttnn.ValidationError, match=r"receiver device \[0, 1\] is outside the receiver's 1x1 mesh"
    ):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=1))


def test_a_rank_outside_the_pair_holds_a_null_socket(loopback, halves):
    a, _ = halves
    null = ttnn.MeshSocket(a, config(sender_rank=1, receiver_rank=2))
    assert repr(null) == "MeshSocket(null, rank 1 -> rank 2, 2 connections)"
    with pytest.raises(
        ttnn.ValidationError, match=r"rank 0 is neither the sender \(1\) nor the receiver \(2\)"
    ):
        ttnn.experimental.send_async(sharded(a), null)
    with pytest.raises(ttnn.ValidationError, match="rank 0 holds neither end"):
        null.get_socket_endpoint_type()


def test_the_first_socket_between_ranks_registers_the_exit_check(loopback, halves, monkeypatch):
    registered = []
    monkeypatch.setattr(sockets, "_exit_hook", [])
    monkeypatch.setattr(sockets.atexit, "register", registered.append)
    _ends(halves[0])
    assert registered == [sockets._complete_at_exit]  # once, however many sockets


def test_a_tensor_received_without_an_allocation_keeps_the_padded_shape(halves):
    a, b = halves
    send, recv = ttnn.create_socket_pair(a, b, config())
    t = ttnn.from_numpy(
        np.ones((1, 1, 32, 64), np.float32), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=a
    )
    t._padded_shape = ttnn.Shape((1, 1, 64, 64))
    ttnn.experimental.send_async(t, send)
    got = recv._receive_new("test")
    assert got.padded_shape == t.padded_shape and got.device() is b


def test_a_receiving_tensor_too_big_for_the_fifo_is_refused_as_the_wrong_spec(halves):
    """The sender checks the FIFO; a receiver of another spec hears the spec error (the sender hears it too)."""
    a, b = halves
    send, recv = ttnn.create_socket_pair(a, b, config(fifo=2048))  # one bfloat16 tile
    t = sharded(a)
    ttnn.experimental.send_async(t, send)
    wider = ttnn.allocate_tensor_on_device(ttnn.TensorSpec(list(t.shape), ttnn.float32, ttnn.TILE_LAYOUT), b)
    with pytest.raises(
        ttnn.ValidationError, match=r"expected the sent tensor's spec \[1, 1, 32, 64\] BFLOAT16"
    ):
        ttnn.experimental.recv_async(wider, recv)


def test_a_tensor_nobody_received_ends_the_job_at_exit_with_the_error():
    """Rank 0 sends, rank 1 never receives, both end: rank 1 says so at exit (not MPI_Finalize failing on the
    message it never took), and the job ends."""
    done = tttv2_run("--np", "2", *OWN_MESHES, "--all-output", "--timeout", "1.5", "--", *RELAY, "unsynced")
    assert done.returncode == 1, done.stdout
    assert "[0] rank 0: no error" in done.stdout and "[1] rank 1: no error" in done.stdout
    assert (
        "tttv2-run: rank 1 failed: rank 1: MeshSocket(RECEIVER, rank 0 -> rank 1, 2 connections): rank 0 sent tensor "
        "#0 on it, which this rank never received (recv_async)"
    ) in done.stderr


def test_the_exit_check_names_a_tensor_that_arrived_unreceived(loopback, halves):
    a, _ = halves
    send, _receiver = _ends(a)  # the receiving end stays open: only open sockets are checked
    sockets.check_unreceived()  # nothing sent yet
    ttnn.experimental.send_async(sharded(a), send)
    with pytest.raises(
        DistributedError, match=r"rank 1 sent tensor #0 on it, which this rank never received"
    ):
        sockets.check_unreceived()


def test_a_socket_on_a_mesh_spread_over_the_ranks_is_refused_before_the_handshake(loopback, halves):
    a, _ = halves
    a._spans_ranks = True  # what open_mesh_device sets in every rank of a shared mesh_id
    with pytest.raises(ttnn.ValidationError, match=r"is one mesh spread over the ranks; .*own mesh_id"):
        ttnn.MeshSocket(a, config(sender_rank=0, receiver_rank=1))
    assert not any(loopback.queues.values())  # no handshake message left this rank
