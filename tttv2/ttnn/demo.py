"""A tour of the emulator: a TTTv1-style SwiGLU MLP written with raw ttnn calls, on 1-D and 2-D meshes.

Run ``python -m tttv2.ttnn.demo``. It prints, per mesh, the PCC against a float64 numpy reference, the time
taken and the emulated device memory in use. :func:`tttv1_style_mlp` is also what the tests run.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from tttv2 import ttnn
from tttv2.testing import pcc

__all__ = ["MLPResult", "main", "reference_mlp", "tttv1_style_mlp"]


@dataclass
class MLPResult:
    mesh_shape: tuple[int, int]
    output: np.ndarray
    seconds: float
    dram_bytes_per_device: int


def reference_mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray, w3: np.ndarray) -> np.ndarray:
    """w2(silu(x @ w1) * (x @ w3)) in float64."""
    x, w1, w2, w3 = (a.astype(np.float64) for a in (x, w1, w2, w3))
    h1 = x @ w1
    return ((h1 / (1.0 + np.exp(-h1))) * (x @ w3)) @ w2


def tttv1_style_mlp(
    mesh: ttnn.MeshDevice,
    x: np.ndarray,
    w1: np.ndarray,
    w2: np.ndarray,
    w3: np.ndarray,
    weight_dtype: ttnn.DataType = ttnn.bfloat8_b,
    w2_dtype: ttnn.DataType | None = None,
) -> MLPResult:
    """Run the MLP the way TTTv1 shards it and return the full output gathered back to the host.

    1-D meshes (1×N): w1/w3 column-parallel, w2 row-parallel, then a reduce-scatter of the partial sums
    (TTTv1's "all-reduce" on 1-D meshes leaves each device with its slice of the sum).
    2-D meshes (R×C, the Galaxy layout): activations are split over the C columns; w1/w3 split hidden over rows
    and dim over columns, so their outputs are reduce-scattered along the row (cluster_axis=1), multiplied,
    all-gathered back; w2 splits hidden over rows and dim over columns, and its partial sums are all-reduced
    down the columns (cluster_axis=0).
    ``w2_dtype`` defaults to ``weight_dtype``; TTTv1's "mixed" precision is bfloat4_b w1/w3 with bfloat8_b w2.
    """
    w2_dtype = weight_dtype if w2_dtype is None else w2_dtype
    rows, cols = mesh.shape.as_2d()
    is_2d = rows > 1 and cols > 1
    compute = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    start = time.perf_counter()

    def put(array, dims, dtype):
        return ttnn.from_numpy(
            array.astype(np.float32),
            dtype=dtype,
            layout=ttnn.TILE_LAYOUT,
            device=mesh,
            mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=dims, mesh_shape=(rows, cols)),
        )

    x4 = x.reshape(1, 1, *x.shape[-2:])
    if is_2d:
        tx = put(x4, (None, 3), ttnn.bfloat16)
        tw1, tw3 = put(w1, (-1, -2), weight_dtype), put(w3, (-1, -2), weight_dtype)
        tw2 = put(w2, (-2, -1), w2_dtype)
        h1 = ttnn.linear(tx, tw1, compute_kernel_config=compute)
        h3 = ttnn.linear(tx, tw3, compute_kernel_config=compute)
        h1 = ttnn.reduce_scatter(h1, 3, cluster_axis=1, topology=ttnn.Topology.Linear)
        h3 = ttnn.reduce_scatter(h3, 3, cluster_axis=1, topology=ttnn.Topology.Linear)
        gated = ttnn.mul(h1, h3, input_tensor_a_activations=[ttnn.UnaryOpType.SILU], dtype=ttnn.bfloat16)
        gated = ttnn.all_gather(gated, 3, cluster_axis=1, topology=ttnn.Topology.Linear)
        out = ttnn.linear(gated, tw2, compute_kernel_config=compute)
        out = ttnn.all_reduce(out, cluster_axis=0, topology=ttnn.Topology.Linear)
        # device (r, c) holds columns c·dim/C … of the full output, identical down each column
        full = ttnn.to_numpy(
            out, mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(0, 3), mesh_shape=(rows, cols))
        )
        full = full[:1]
    else:
        tx = put(x4, (None, None), ttnn.bfloat16)
        tw1, tw3 = put(w1, (None, -1), weight_dtype), put(w3, (None, -1), weight_dtype)
        tw2 = put(w2, (None, -2), w2_dtype)
        h1 = ttnn.linear(tx, tw1, compute_kernel_config=compute)
        h3 = ttnn.linear(tx, tw3, compute_kernel_config=compute)
        gated = ttnn.mul(h1, h3, input_tensor_a_activations=[ttnn.UnaryOpType.SILU], dtype=ttnn.bfloat16)
        out = ttnn.linear(gated, tw2, compute_kernel_config=compute)
        out = ttnn.reduce_scatter(out, 3, topology=ttnn.Topology.Linear)
        full = ttnn.to_numpy(out, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=3))
    seconds = time.perf_counter() - start
    dram = mesh.memory_report()[0]["dram_used"]
    return MLPResult((rows, cols), full.reshape((*x.shape[:-1], w2.shape[1])), seconds, dram)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=1024, help="model width (default 1024)")
    parser.add_argument("--hidden", type=int, default=4096, help="MLP hidden width (default 4096)")
    parser.add_argument("--seq", type=int, default=128, help="rows of activations (default 128)")
    parser.add_argument(
        "--meshes", default="1x1,1x2,1x8,8x4", help="comma-separated mesh shapes (default 1x1,1x2,1x8,8x4)"
    )
    parser.add_argument(
        "--weights",
        choices=["bfloat8_b", "mixed", "bfloat4_b", "bfloat16"],
        default="bfloat8_b",
        help="weight dtype; mixed = TTTv1's bfloat4_b w1/w3 with bfloat8_b w2 (default bfloat8_b)",
    )
    args = parser.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    console = Console()
    try:
        meshes = [tuple(int(v) for v in m.lower().split("x")) for m in args.meshes.split(",")]
        if any(len(m) != 2 for m in meshes):
            raise ValueError
    except ValueError:
        parser.error(f"--meshes: expected shapes like 1x8,8x4, got {args.meshes!r}")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((args.seq, args.dim)).astype(np.float32)
    w1 = (rng.standard_normal((args.dim, args.hidden)) / np.sqrt(args.dim)).astype(np.float32)
    w3 = (rng.standard_normal((args.dim, args.hidden)) / np.sqrt(args.dim)).astype(np.float32)
    w2 = (rng.standard_normal((args.hidden, args.dim)) / np.sqrt(args.hidden)).astype(np.float32)
    ref = reference_mlp(x, w1, w2, w3)
    table = Table(
        title=f"TTTv1-style MLP on the ttnn emulator (dim {args.dim}, hidden {args.hidden}, {args.seq} rows, {args.weights} weights)"
    )
    for column in ("mesh", "devices", "PCC vs float64", "max |error|", "time", "DRAM / device"):
        table.add_column(column, justify="right")
    for shape in meshes:
        console.print(f"running on a {shape[0]}x{shape[1]} mesh …")
        mesh = ttnn.open_mesh_device(ttnn.MeshShape(*shape))
        try:
            if args.weights == "mixed":
                result = tttv1_style_mlp(mesh, x, w1, w2, w3, ttnn.bfloat4_b, ttnn.bfloat8_b)
            else:
                result = tttv1_style_mlp(mesh, x, w1, w2, w3, getattr(ttnn, args.weights))
        finally:
            ttnn.close_mesh_device(mesh)
        table.add_row(
            f"{shape[0]}x{shape[1]}",
            str(shape[0] * shape[1]),
            f"{pcc(ref, result.output):.5f}",
            f"{np.abs(ref - result.output).max():.4f}",
            f"{result.seconds * 1e3:.0f} ms",
            f"{result.dram_bytes_per_device / 1024:.0f} KiB",
        )
    console.print(table)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
