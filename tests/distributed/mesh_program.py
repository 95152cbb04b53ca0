"""What tests/distributed/test_mesh.py runs, in one process or in every rank of ``tttv2-run``:
``python -m tests.distributed.mesh_program MODE [ROWSxCOLS]``.

``ops``: opens the mesh, moves tensors to it and back with mesh mappers and composers, runs every collective
(sync, async, minimal, fused with a matmul, point to point between submeshes) and the TTTv1-style MLP, and
prints one line per result: its name and a digest of every device's bytes. One process and N ranks must print
the same lines. The other modes break the rules on purpose (a rank dies, leaves, opens another mesh, runs
another collective) and must end every rank with a clear error, never a hang.
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys

import numpy as np

from tttv2 import ttnn
from tttv2.ttnn.demo import tttv1_style_mlp


def digest(array) -> str:
    data = np.ascontiguousarray(np.asarray(array))
    return f"{data.dtype}{list(data.shape)}:{hashlib.sha256(data.tobytes()).hexdigest()[:20]}"


def semaphores(mesh, n):
    grid = mesh.compute_with_storage_grid_size()
    cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid.x - 1, grid.y - 1))})
    return [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(n)]


def say_now(line: str) -> None:
    print(line, flush=True)


def run_ops(mesh, rank: int, mode: str, say=say_now) -> None:
    rows, cols = mesh.shape.as_2d()
    every_device = ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 1), mesh_shape=(rows, cols))

    def show(name, tensor):
        say(f"{name} {digest(ttnn.to_numpy(tensor, mesh_composer=every_device))}")

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 1, 64 * rows, 256 * cols)).astype(np.float32)
    t = ttnn.from_numpy(
        x,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(2, 3), mesh_shape=(rows, cols)),
    )
    back = ttnn.to_numpy(
        t, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(2, 3), mesh_shape=(rows, cols))
    )
    say(f"round trip {digest(back)}")
    show("sharded", t)
    last = int(os.environ.get("PMI_SIZE", "1")) - 1
    if mode == "leave" and rank == last:
        sys.exit(0)  # leaves quietly in the middle: the others' next collective must time out
    if mode == "kill" and rank == last:
        os.kill(os.getpid(), signal.SIGKILL)  # dies in the middle: the others must end, not hang
    if mode == "other-collective" and rank == 1:  # a collective across the ranks, not the others' one
        show("all_gather instead", ttnn.all_gather(t, 2, cluster_axis=0))
    else:
        show("all_reduce axis 0", ttnn.all_reduce(t, cluster_axis=0))
    show("all_reduce axis 1", ttnn.all_reduce(t, cluster_axis=1))
    whole = ttnn.all_reduce(t)
    show("all_reduce mesh", whole)
    say(f"replicated to_numpy {digest(ttnn.to_numpy(whole))}")
    show("all_gather axis 0", ttnn.all_gather(t, 2, cluster_axis=0))
    gathered_rows = ttnn.all_gather(t, 3, cluster_axis=1)
    show("all_gather axis 1", gathered_rows)
    ttnn.all_gather(ttnn.multiply(t, 2.0), 3, cluster_axis=1, output_tensor=gathered_rows)
    show("all_gather into a buffer", gathered_rows)
    show("all_gather mesh", ttnn.all_gather(t, 3))
    show("reduce_scatter axis 0", ttnn.reduce_scatter(t, 3, cluster_axis=0))
    show("reduce_scatter axis 1", ttnn.reduce_scatter(t, 3, cluster_axis=1))
    show(
        "all_gather_async",
        ttnn.experimental.all_gather_async(
            t, 3, semaphores(mesh, 2), cluster_axis=1, topology=ttnn.Topology.Linear
        ),
    )
    show(
        "reduce_scatter_minimal_async",
        ttnn.experimental.reduce_scatter_minimal_async(t, None, 3, semaphores(mesh, 3), cluster_axis=0),
    )
    # the Galaxy demo's fused collectives (tttv2/ttnn/ops/llama_ccl.py): a buffer all-reduce down the columns, the
    # older async reduce-scatter along the rows, and the llama reduce-scatter of a 32-row width-sharded tensor
    interim = ttnn.from_numpy(
        np.zeros((rows * cols, 1, 32, 512), np.float32),
        dtype=ttnn.bfloat8_b,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=ttnn.create_sharded_memory_config(
            (32, 256),
            ttnn.CoreGrid(y=1, x=2),
            ttnn.ShardStrategy.WIDTH,
            use_height_and_width_as_shard_shape=True,
        ),
        mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0),
    )
    show(
        "all_reduce_async",
        ttnn.experimental.all_reduce_async(t, interim, 0, mesh, semaphores(mesh, 1)[0], dtype=ttnn.bfloat8_b),
    )
    show("reduce_scatter_async", ttnn.experimental.reduce_scatter_async(t, 3, 1, mesh, *semaphores(mesh, 2)))
    narrow = ttnn.to_memory_config(
        ttnn.from_numpy(
            x[:, :, : 32 * rows, :],
            dtype=ttnn.bfloat16,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(2, 3), mesh_shape=(rows, cols)),
        ),
        ttnn.create_sharded_memory_config(
            (32, 32),
            ttnn.CoreGrid(y=1, x=8),
            ttnn.ShardStrategy.WIDTH,
            use_height_and_width_as_shard_shape=True,
        ),
    )
    show(
        "llama_reduce_scatter",
        ttnn.experimental.llama_reduce_scatter(
            narrow, interim, 3, semaphores(mesh, 1)[0], None, cluster_axis=1
        ),
    )
    weights = [
        ttnn.from_numpy(
            rng.standard_normal((1, 1, 256, 256)).astype(np.float32) / 16,
            dtype=ttnn.bfloat8_b,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
        )
        for _ in range(2)
    ]
    *_, fused = ttnn.experimental.llama_rs_matmul(
        narrow,
        weights[0],
        interim,
        3,
        semaphores(mesh, 1)[0],
        1,
        mesh,
        1,
        None,
        second_weight_tensor=weights[1],
    )
    show("llama_rs_matmul", fused)
    heads = ttnn.from_numpy(
        x[:, :, :64, :128].reshape(1, 8, 8, 128), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh
    )
    concat = ttnn.experimental.all_gather_concat(
        heads, interim, 1, cluster_axis=1, multi_device_global_semaphore=semaphores(mesh, 1)[0], num_heads=8
    )
    show("all_gather_concat", concat)
    w = rng.standard_normal((1, 1, 256 * rows * cols, 64)).astype(np.float32)
    wt = ttnn.from_numpy(w, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=mesh)
    row = ttnn.from_numpy(
        x[:, :, :32, :256],
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
    )
    row = ttnn.multiply(row, float(rows * cols))  # per-device arithmetic on every rank's own devices
    gathered, out = ttnn.experimental.all_gather_matmul_async(
        row, wt, None, 3, semaphores(mesh, 2), ttnn.CoreCoord(0, 4)
    )
    show("all_gather_matmul_async gathered", gathered)
    show("all_gather_matmul_async matmul", out)
    top, bottom = mesh.create_submeshes(ttnn.MeshShape(rows // 2, cols))
    on_top = ttnn.from_numpy(
        x[:, :, : 32 * rows, : 64 * cols],
        dtype=ttnn.float32,
        layout=ttnn.TILE_LAYOUT,
        device=top,
        mesh_mapper=ttnn.ShardTensor2dMesh(top, dims=(2, 3), mesh_shape=(rows // 2, cols)),
    )
    sent = ttnn.experimental.send_recv(on_top, bottom)
    on_bottom = ttnn.ConcatMesh2dToTensor(bottom, dims=(2, 3), mesh_shape=(rows // 2, cols))
    say(f"send_recv {digest(ttnn.to_numpy(sent, mesh_composer=on_bottom))}")
    # arithmetic on a submesh: in a rank that owns none of its devices, every result is another rank's
    say(f"send_recv scaled {digest(ttnn.to_numpy(ttnn.multiply(sent, 0.5), mesh_composer=on_bottom))}")
    devices = ttnn.get_device_tensors(t)
    say(f"last device {digest(ttnn.to_numpy(devices[-1]))}")
    host = ttnn.from_device(ttnn.reduce_scatter(t, 3, cluster_axis=1))
    say(f"from_device {digest(ttnn.to_numpy(host, mesh_composer=every_device))}")
    mlp_rng = np.random.default_rng(3)
    dim, hidden = 32 * cols * 2, 32 * rows * 4
    mx = mlp_rng.standard_normal((32, dim)).astype(np.float32)
    w1, w3 = (mlp_rng.standard_normal((dim, hidden)).astype(np.float32) / np.sqrt(dim) for _ in range(2))
    w2 = mlp_rng.standard_normal((hidden, dim)).astype(np.float32) / np.sqrt(hidden)
    say(f"tttv1-style mlp {digest(tttv1_style_mlp(mesh, mx, w1, w2, w3).output)}")
    one = ttnn.from_numpy(np.full((1, 1), 3.25, np.float32), dtype=ttnn.float32, device=mesh)
    say(f"item {ttnn.nn.utils.item(one)} {one.item()}")


def main(mode: str, shape: str = "8x4") -> int:
    rows, cols = (int(v) for v in shape.split("x"))
    rank = int(os.environ.get("PMI_RANK", "0"))
    if mode == "other-mesh" and rank == 1:
        rows, cols = cols, rows  # this rank opens a 4x8 mesh where the others open 8x4
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(rows, cols))
    mine = mesh.local_device_ids()
    print(f"rank {rank}: devices {mine[0]}..{mine[-1]} of {mesh.get_num_devices()}", flush=True)
    try:
        run_ops(mesh, rank, mode)
    finally:
        ttnn.close_mesh_device(mesh)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
