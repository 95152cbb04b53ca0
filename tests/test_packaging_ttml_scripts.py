"""Scripts written for Tenstorrent's TTML Python API run unmodified on the installed package.

Each script is written the way TTML's guides and examples write them: ``import numpy as np``, ``import ttnn``,
``import ttml``, a device opened through ``AutoContext``, losses read with ``float(loss.get_value().item())``,
and, for NanoGPT, a greedy generation loop that uploads the context with ``ttnn.from_buffer``, wraps it with
``ttml.autograd.Tensor(tensor, False)``, slices the last position's logits with ``ttnn.slice`` and picks the next
token with ``int(ttnn.argmax(last_logits, dim=-1).item())``; a third defines its own ``ttml.modules`` model,
splits it with TTML's ``parallelize_module`` and samples with ``ttml.ops.sample.sample_op``. They run as plain
``python script.py`` in a fresh process from an empty folder, so ``import ttnn`` resolves through the package's
import hook. Shapes are tiny.
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


CUSTOM_MODULE_TP = textwrap.dedent(
    """
    import json

    import numpy as np
    import ttnn
    import ttml
    from ttml.common.utils import build_logits_mask, create_optimizer, no_grad, round_up_to_tile, set_seed


    class TwoLayerLM(ttml.modules.AbstractModuleBase):
        def __init__(self, vocab_size, hidden):
            super().__init__()
            self.up = ttml.modules.LinearLayer(vocab_size, hidden)
            self.down = ttml.modules.LinearLayer(hidden, vocab_size)

        def forward(self, x):
            return self.down(self.up(x))


    def main():
        yaml_config = {
            "device_config": {"mesh_shape": [1, 2]},
            "training_config": {"learning_rate": 0.05, "weight_decay": 0.0},
        }
        set_seed(0)
        ttml.common.utils.initialize_device(yaml_config)
        ctx = ttml.autograd.AutoContext.get_instance()
        vocab, padded = 30, round_up_to_tile(30)
        model = TwoLayerLM(padded, 64)
        model = ttml.distributed.parallelize_module(
            model,
            ctx.get_device(),
            {r"up": ttml.distributed.ColwiseParallel(), r"down": ttml.distributed.RowwiseParallel()},
            tp_axis=1,
        )
        optimizer = create_optimizer(model, yaml_config)
        rng = np.random.default_rng(0)
        ids = rng.integers(0, vocab, 16)
        one_hot = np.eye(padded, dtype=np.float32)[ids].reshape(16, 1, 1, padded)
        nxt = np.eye(padded, dtype=np.float32)[(ids + 1) % vocab].reshape(16, 1, 1, padded)
        x = ttml.autograd.Tensor.from_numpy(one_hot, ttml.Layout.TILE, ttml.autograd.DataType.BFLOAT16)
        y = ttml.autograd.Tensor.from_numpy(nxt, ttml.Layout.TILE, ttml.autograd.DataType.BFLOAT16)
        losses = []
        for _ in range(20):
            optimizer.zero_grad()
            loss = ttml.ops.loss.mse_loss(model(x), y)
            loss.backward(False)
            optimizer.step()
            losses.append(float(loss.get_value().item()))
        mask = build_logits_mask(vocab, padded)
        with no_grad():
            logits = model(x)
            tokens = ttml.ops.sample.sample_op(logits, 0.0, 1, mask)
        sampled = tokens.to_numpy().reshape(-1).tolist()
        ctx.close_device()
        print(json.dumps({"losses": losses, "sampled": sampled, "ids": ids.tolist(), "vocab": vocab}))


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


def test_ttml_custom_module_script_with_tensor_parallel_and_sampling(tmp_path):
    """A TTML-style script with its own ``ttml.modules`` model, ``ttml.common.utils`` helpers, TTML's
    ``parallelize_module`` on a 1x2 mesh and ``sample_op`` with a padding mask."""
    result = _run_script(tmp_path, "custom_tp.py", CUSTOM_MODULE_TP)
    losses = result["losses"]
    assert losses[-1] < 0.5 * losses[0]  # training moves through the split layers
    # the model learnt "next id": greedy sampling (padding masked) reads it back for every position
    assert result["sampled"] == [(i + 1) % result["vocab"] for i in result["ids"]]
