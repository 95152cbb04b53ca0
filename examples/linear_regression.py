"""Fit a linear model ``y = x·W + b`` by SGD with ``ttnn.nn.Linear``, ``ttnn.mse_loss`` and ``ttnn.optim.SGD``.

python examples/linear_regression.py [--steps 200] [--batch-size 64] [--lr 0.1]
"""

from __future__ import annotations

import argparse

import numpy as np

from tttv2 import ttnn


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--in-features", type=int, default=16)
    p.add_argument("--out-features", type=int, default=4)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--log-every", type=int, default=25)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    true_w = rng.standard_normal((args.in_features, args.out_features)).astype(np.float32)
    true_b = rng.standard_normal((1, args.out_features)).astype(np.float32)

    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        ttnn.nn.manual_seed(args.seed)
        model = ttnn.nn.Linear(args.in_features, args.out_features, device=mesh)
        opt = ttnn.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

        def tensor(a: np.ndarray) -> ttnn.Tensor:
            # activations are 4-D [1, 1, rows, features], TILE layout
            return ttnn.from_numpy(a[None, None], dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh)

        losses = []
        for step in range(args.steps):
            x = rng.standard_normal((args.batch_size, args.in_features)).astype(np.float32)
            y = (
                x @ true_w
                + true_b
                + 0.01 * rng.standard_normal((args.batch_size, args.out_features)).astype(np.float32)
            )
            loss = ttnn.mse_loss(model(tensor(x)), tensor(y))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(ttnn.nn.utils.item(loss))
            if step % args.log_every == 0 or step == args.steps - 1:
                print(f"step {step:4d}  mse {losses[-1]:.5f}")

        w_err = float(np.abs(ttnn.to_numpy(model.weight) - true_w).max())
        b_err = float(np.abs(ttnn.to_numpy(model.bias) - true_b).max())
        print(f"max |W - W_true| = {w_err:.4f}, max |b - b_true| = {b_err:.4f}")
        return {"losses": losses, "weight_error": w_err, "bias_error": b_err}
    finally:
        ttnn.close_mesh_device(mesh)


if __name__ == "__main__":
    main()
