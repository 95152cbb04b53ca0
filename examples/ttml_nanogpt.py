"""Character-level NanoGPT in the old TTML spelling (deprecated; runs on tttv2.ttnn and warns with the new names).

    python -W default::DeprecationWarning examples/ttml_nanogpt.py [--steps 300]

The same program in the new API is examples/nanogpt.py; docs/migrating_from_ttml.md maps the names.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import ttml
from tttv2 import ttnn

DATA = Path(__file__).with_name("data") / "sonnets.txt"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--block-size", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--generate", type=int, default=100)
    args = p.parse_args(argv)

    text = DATA.read_text()
    tokenizer = ttml.common.data.CharTokenizer(text)
    vocab_size = (tokenizer.vocab_size + 31) // 32 * 32  # TTML padded the vocabulary to a multiple of 32
    ids = np.array(tokenizer.encode(text), dtype=np.uint32)

    ctx = ttml.autograd.AutoContext.get_instance()
    ctx.set_seed(0)
    ctx.open_device()
    try:
        config = ttml.models.nanogpt.NanoGPTConfig(
            vocab_size=vocab_size,
            block_size=args.block_size,
            n_embd=args.n_embd,
            n_layer=args.n_layer,
            n_head=args.n_head,
            dropout=0.1,
            bias=True,
        )
        model = ttml.models.nanogpt.create_nanogpt(config)
        adamw = ttml.optimizers.AdamWConfig.make(args.lr, 0.9, 0.999, 1e-8, 0.01)
        optimizer = ttml.optimizers.AdamW(model.parameters(), adamw)
        mask = ttml.autograd.Tensor.from_numpy(
            ttml.common.data.build_causal_mask(args.block_size),
            layout=ttnn.Layout.TILE,
            new_type=ttnn.DataType.BFLOAT16,
        )
        model.train()
        losses = []
        for step in range(args.steps):
            x, y = ttml.common.data.get_batch(ids, args.block_size, args.batch_size)
            tt_x = ttml.autograd.Tensor.from_numpy(
                x.reshape(args.batch_size, 1, 1, args.block_size),
                layout=ttnn.Layout.ROW_MAJOR,
                new_type=ttnn.DataType.UINT32,
            )
            tt_y = ttml.autograd.Tensor.from_numpy(
                y, layout=ttnn.Layout.ROW_MAJOR, new_type=ttnn.DataType.UINT32
            )
            optimizer.zero_grad()
            logits = model(tt_x, mask)
            loss = ttml.ops.loss.cross_entropy_loss(logits, tt_y, ttml.ops.ReduceType.MEAN)
            loss.backward(False)
            ctx.reset_graph()
            optimizer.step()
            losses.append(float(loss.to_numpy(ttnn.DataType.FLOAT32).reshape(-1)[0]))
            if step % 25 == 0 or step == args.steps - 1:
                print(f"step {step:4d}  loss {losses[-1]:.4f}")

        # greedy generation, the TTML way: run the full window, take the arg-max of the last position
        model.eval()
        prompt = tokenizer.encode("Shall I compare thee")
        generated = list(prompt)
        for _ in range(args.generate):
            window = np.zeros((1, args.block_size), dtype=np.uint32)
            context = generated[-args.block_size :]
            window[0, : len(context)] = context
            tt_x = ttml.autograd.Tensor.from_numpy(
                window.reshape(1, 1, 1, args.block_size),
                layout=ttnn.Layout.ROW_MAJOR,
                new_type=ttnn.DataType.UINT32,
            )
            logits = model(tt_x, mask).to_numpy(ttnn.DataType.FLOAT32)
            generated.append(int(logits[0, 0, len(context) - 1, : tokenizer.vocab_size].argmax()))
            ctx.reset_graph()
        sample = tokenizer.decode(generated)
        print(sample)
        return {"losses": losses, "sample": sample}
    finally:
        ctx.close_device()


if __name__ == "__main__":
    main()
