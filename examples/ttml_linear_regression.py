"""Linear regression in the old TTML spelling (deprecated; runs on tttv2.ttnn and warns with the new names).

    python -W default::DeprecationWarning examples/ttml_linear_regression.py [--steps 200]

The same program in the new API is examples/linear_regression.py; docs/migrating_from_ttml.md maps the names.
"""

from __future__ import annotations

import argparse

import numpy as np

import ttml
from tttv2 import ttnn


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.1)
    args = p.parse_args(argv)

    in_features, out_features = 16, 4
    rng = np.random.default_rng(0)
    true_w = rng.standard_normal((in_features, out_features)).astype(np.float32)

    ctx = ttml.autograd.AutoContext.get_instance()
    ctx.set_seed(0)
    ctx.open_device()
    try:
        model = ttml.models.linear_regression.create_linear_regression_model(in_features, out_features)
        config = ttml.optimizers.SGDConfig.make(args.lr, 0.9, 0.0, 0.0, False)
        optimizer = ttml.optimizers.SGD(model.parameters(), config)
        model.train()
        losses = []
        for step in range(args.steps):
            x = rng.standard_normal((args.batch_size, in_features)).astype(np.float32)
            y = x @ true_w
            tt_x = ttml.autograd.Tensor.from_numpy(
                x.reshape(args.batch_size, 1, 1, in_features),
                layout=ttnn.Layout.TILE,
                new_type=ttnn.DataType.BFLOAT16,
            )
            tt_y = ttml.autograd.Tensor.from_numpy(
                y.reshape(args.batch_size, 1, 1, out_features),
                layout=ttnn.Layout.TILE,
                new_type=ttnn.DataType.BFLOAT16,
            )
            optimizer.zero_grad()
            prediction = model(tt_x)
            loss = ttml.ops.loss.mse_loss(prediction, tt_y, ttml.ops.ReduceType.MEAN)
            loss.backward(False)
            ctx.reset_graph()
            optimizer.step()
            losses.append(float(loss.to_numpy(ttnn.DataType.FLOAT32).reshape(-1)[0]))
            if step % 25 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  mse {losses[-1]:.5f}")
        return {"losses": losses}
    finally:
        ctx.close_device()


if __name__ == "__main__":
    main()
