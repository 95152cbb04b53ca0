"""Scripts written for Tenstorrent's TTML Python API run unmodified on the installed package.

Each script is written the way TTML's guides and examples write them: ``import numpy as np``, ``import ttnn``,
``import ttml``, a device opened through ``AutoContext``, losses read with ``float(loss.get_value().item())``,
and, for NanoGPT, a greedy generation loop that uploads the context with ``ttnn.from_buffer``, wraps it with
``ttml.autograd.Tensor(tensor, False)``, slices the last position's logits with ``ttnn.slice`` and picks the next
token with ``int(ttnn.argmax(last_logits, dim=-1).item())``. They run as plain ``python script.py`` in a fresh
process from an empty folder, so ``import ttnn`` resolves through the package's import hook. Shapes are tiny.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

LINEAR_REGRESSION = textwrap.dedent(
    """
    import json

    import numpy as np
    import ttnn
    import ttml


    def main():
        ctx = ttml.autograd.AutoContext.get_instance()
        ctx.set_seed(42)
        ctx.open_device()

        batch_size, in_features, out_features = 32, 8, 2
        rng = np.random.default_rng(0)
        true_weight = rng.standard_normal((in_features, out_features)).astype(np.float32)

        model = ttml.models.linear_regression.create_linear_regression_model(in_features, out_features)
        sgd_config = ttml.optimizers.SGDConfig.make(0.1, 0.0, 0.0, 0.0, False)
        optimizer = ttml.optimizers.SGD(model.parameters(), sgd_config)

        model.train()
        losses = []
        for step in range(30):
            x = rng.standard_normal((batch_size, in_features)).astype(np.float32)
            y = x @ true_weight
            tt_x = ttml.autograd.Tensor.from_numpy(
                x.reshape(batch_size, 1, 1, in_features), ttnn.Layout.TILE, ttnn.DataType.BFLOAT16
            )
            tt_y = ttml.autograd.Tensor.from_numpy(
                y.reshape(batch_size, 1, 1, out_features), ttnn.Layout.TILE, ttnn.DataType.BFLOAT16
            )
            optimizer.zero_grad()
            prediction = model(tt_x)
            loss = ttml.ops.loss.mse_loss(prediction, tt_y, ttml.ops.ReduceType.MEAN)
            loss.backward(False)
            ctx.reset_graph()
            optimizer.step()
            losses.append(float(loss.get_value().item()))
            if step % 10 == 0:
                print(f"step {step:3d}  loss {losses[-1]:.5f}")
        same = losses[-1] == float(loss.to_numpy(ttnn.DataType.FLOAT32).reshape(-1)[0])
        ctx.close_device()
        print(json.dumps({"losses": losses, "item_matches_to_numpy": same}))


    if __name__ == "__main__":
        main()
    """
)

NANOGPT = textwrap.dedent(
    """
    import json

    import numpy as np
    import ttnn
    import ttml
    from ttml.common.data import CharTokenizer, build_causal_mask, get_batch


    def sample_greedy(model, tokenizer, prompt, max_new_tokens, sequence_length, mask):
        model.eval()
        ctx = ttml.autograd.AutoContext.get_instance()
        ctx.reset_graph()
        device = ctx.get_device()
        running = tokenizer.encode(prompt)[-sequence_length:]
        running = [tokenizer.stoi[" "]] * (sequence_length - len(running)) + running
        generated = []
        for _ in range(max_new_tokens):
            input_ttnn = ttnn.from_buffer(
                buffer=running[-sequence_length:],
                shape=[1, 1, 1, sequence_length],
                dtype=ttnn.uint32,
                device=device,
                layout=ttnn.ROW_MAJOR_LAYOUT,
            )
            input_tensor = ttml.autograd.Tensor(input_ttnn, False)
            logits = model(input_tensor, mask)
            shape = logits.shape()
            last = ttnn.slice(
                logits.get_value(), [0, 0, shape[2] - 1, 0], [shape[0], shape[1], shape[2], shape[3]]
            )
            last_logits = ttnn.reshape(last, [shape[0], 1, 1, shape[3]])
            next_id = int(ttnn.argmax(last_logits, dim=-1).item())
            next_id = min(next_id, tokenizer.vocab_size - 1)
            running.append(next_id)
            generated.append(next_id)
            ctx.reset_graph()
        return tokenizer.decode(generated)


    def main():
        text = "to be or not to be, that is the question. " * 20
        tokenizer = CharTokenizer(text)
        vocab_size = (tokenizer.vocab_size + 31) // 32 * 32
        ids = np.array(tokenizer.encode(text), dtype=np.uint32)

        ctx = ttml.autograd.AutoContext.get_instance()
        ctx.set_seed(0)
        ctx.open_device()

        sequence_length, batch_size = 32, 4
        config = ttml.models.nanogpt.NanoGPTConfig(
            vocab_size=vocab_size, block_size=sequence_length, n_embd=64, n_layer=1, n_head=2, dropout=0.0, bias=True
        )
        model = ttml.models.nanogpt.create_nanogpt(config)
        adamw = ttml.optimizers.AdamWConfig.make(3e-3, 0.9, 0.999, 1e-8, 0.0)
        optimizer = ttml.optimizers.AdamW(model.parameters(), adamw)
        mask = ttml.autograd.Tensor.from_numpy(
            build_causal_mask(sequence_length), ttnn.Layout.TILE, ttnn.DataType.BFLOAT16
        )

        model.train()
        losses = []
        for _ in range(25):
            x, y = get_batch(ids, sequence_length, batch_size)
            tt_x = ttml.autograd.Tensor.from_numpy(
                x.reshape(batch_size, 1, 1, sequence_length), ttnn.Layout.ROW_MAJOR, ttnn.DataType.UINT32
            )
            tt_y = ttml.autograd.Tensor.from_numpy(y, ttnn.Layout.ROW_MAJOR, ttnn.DataType.UINT32)
            optimizer.zero_grad()
            logits = model(tt_x, mask)
            loss = ttml.ops.loss.cross_entropy_loss(logits, tt_y, ttml.ops.ReduceType.MEAN)
            losses.append(float(loss.get_value().item()))
            loss.backward(False)
            ctx.reset_graph()
            optimizer.step()

        generated = sample_greedy(model, tokenizer, "to be or ", 12, sequence_length, mask)
        ctx.close_device()
        print(json.dumps({"losses": losses, "generated": generated, "vocab": tokenizer.itos}))


    if __name__ == "__main__":
        main()
    """
)


def _run_script(tmp_path, name: str, source: str) -> dict:
    script = tmp_path / name
    script.write_text(source)
    env = {k: v for k, v in os.environ.items() if k not in ("TTTV2_BACKEND", "PYTHONPATH")}
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr
    assert source.lstrip().startswith("import json\n\nimport numpy as np\nimport ttnn\nimport ttml")
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_ttml_linear_regression_script(tmp_path):
    result = _run_script(tmp_path, "linear_regression.py", LINEAR_REGRESSION)
    losses = result["losses"]
    assert all(isinstance(v, float) for v in losses) and len(losses) == 30
    assert losses[-1] < 0.1 * losses[0]  # it learns the linear map
    assert result["item_matches_to_numpy"]


def test_ttml_nanogpt_script_with_greedy_argmax_loop(tmp_path):
    result = _run_script(tmp_path, "nanogpt.py", NANOGPT)
    losses = result["losses"]
    assert losses[-1] < losses[0] - 0.5  # training moves
    generated = result["generated"]
    assert len(generated) == 12 and set(generated) <= set(result["vocab"])
