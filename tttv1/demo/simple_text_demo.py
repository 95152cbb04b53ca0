"""Simple text demo of the TTTv1-style model on the emulated mesh: prefill a prompt, decode greedily, print speed.

CLI (any combination)::

    python -m tttv1.demo.simple_text_demo --model Llama-3.1-8B-tiny --mesh T3K --batch 32 --max-new-tokens 16

A representative subset of the sweep runs as a test (``pytest tests/tttv1/test_demo.py``); the demo itself needs
torch but not pytest (the ``torch`` extra), as the README says.

Meshes are given as ``RxC`` or by TTTv1 system name (N150 1×1, N300 1×2, N150x4 1×4, T3K 1×8, TG 8×4). Models
come from the built-in catalogue (``tttv1.catalogue``) with seeded random weights, or from a local checkpoint
directory (``--checkpoint``), or from a Hugging Face ``config.json`` alone
(``--config``: seeded random weights at the real size, made and moved to the devices one tensor at a time, after a
check that the weights fit the devices' DRAM). Like TTTv1's demo, the numbers printed are the measured wall-clock speeds, here
of the CPU emulator.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import ttnn

import tttv1  # noqa: F401 - makes `import ttnn` resolve to the emulator
from tttv1 import catalogue
from tttv1.tokenizer import load_tokenizer
from tttv1.tt.common import (
    PagedAttentionConfig,
    get_padded_prefill_len,
    preprocess_inputs_prefill,
    sample_host,
)
from tttv1.tt.generator import Generator
from tttv1.tt.model import Transformer
from tttv1.tt.model_config import DecodersPrecision, ModelArgs

MESH_NAMES = {"N150": (1, 1), "N300": (1, 2), "N150x4": (1, 4), "T3K": (1, 8), "TG": (8, 4)}

DEFAULT_PROMPTS = [
    "Tell me a story about a tensor that wanted to live in L1.",
    "What is the capital of France?",
    "Explain ring all-reduce to a five year old.",
    "Write a haiku about matrix multiplication.",
]


class DemoArgumentError(ValueError):
    """A run_demo argument that cannot work; ``argument`` names the CLI option it comes from."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def _check_prompt_lengths(prompts, tokenizer, instruct: bool, max_new_tokens: int, max_seq_len: int) -> None:
    """Each prompt and its generated tokens must fit the KV cache, and its padded prefill one prefill chunk."""
    for user, prompt in enumerate(prompts):
        n = len(tokenizer.encode(prompt, bos=True) if instruct is False else tokenizer.encode_chat(prompt))
        padded = get_padded_prefill_len(n)
        need = max(n + max_new_tokens, padded)
        if need > max_seq_len:
            why = f" (prefill pads the prompt to {padded} positions)" if padded >= n + max_new_tokens else ""
            raise DemoArgumentError(
                "--max-seq-len",
                f"the prompt of user {user} is {n} tokens long: with --max-new-tokens {max_new_tokens} it needs "
                f"--max-seq-len {need} or more{why}, got {max_seq_len}",
            )


def _read_config(path: str) -> dict:
    """A Hugging Face ``config.json`` (a file, or a directory holding one) as a dict, or a DemoArgumentError."""
    file = Path(path) / "config.json" if Path(path).is_dir() else Path(path)
    try:
        config = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DemoArgumentError("--config", f"cannot read {file}: {exc}") from None
    if not isinstance(config, dict):
        raise DemoArgumentError("--config", f"{file} is not a JSON object")
    config.setdefault("_name_or_path", file.parent.name if file.name == "config.json" else file.stem)
    return config


def _resident_bytes() -> int:
    """The process's resident memory now, from /proc/self/statm (0 where there is none)."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:  # pragma: no cover - not Linux
        return 0


def parse_mesh(text: str) -> tuple[int, int]:
    """'1x8', '8x4' or a TTTv1 system name → (rows, cols)."""
    if text.upper() in {k.upper() for k in MESH_NAMES}:
        return next(v for k, v in MESH_NAMES.items() if k.upper() == text.upper())
    try:
        rows, cols = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"mesh must be RxC or one of {', '.join(MESH_NAMES)}, got {text!r}"
        ) from None
    return rows, cols


def make_prompts(batch_size: int, prompt: str | None, prompt_len: int | None) -> list[str]:
    """``batch_size`` prompts: the given one repeated, or the defaults cycled; ``prompt_len`` repeats the text
    until it has that many bytes (the byte tokenizer makes bytes = tokens - 1)."""
    base = [prompt] if prompt else DEFAULT_PROMPTS
    prompts = [base[i % len(base)] for i in range(batch_size)]
    if prompt_len:
        prompts = [(p + " ") * (prompt_len // (len(p) + 1) + 1) for p in prompts]
        prompts = [p[: max(prompt_len - 1, 1)] for p in prompts]
    return prompts


@dataclass
class DemoResult:
    """What one run produced and how fast."""

    texts: list[str]
    tokens: list[list[int]]
    prefill_seconds: float
    decode_seconds: list[float] = field(default_factory=list)
    prompt_tokens: int = 0
    batch_size: int = 1
    build_seconds: float = 0.0
    build_rss_bytes: int = (
        0  # growth of the process's resident memory while the model was built (Linux; else 0)
    )

    @property
    def prefill_tokens_per_second(self) -> float:
        return self.prompt_tokens / self.prefill_seconds if self.prefill_seconds > 0 else float("inf")

    @property
    def decode_tokens_per_second_per_user(self) -> float:
        steps = self.decode_seconds[1:] or self.decode_seconds  # the first step includes warm-up, as in TTTv1
        return len(steps) / sum(steps) if steps and sum(steps) > 0 else float("inf")

    @property
    def decode_tokens_per_second(self) -> float:
        return self.decode_tokens_per_second_per_user * self.batch_size


def random_weights(model_args) -> bool:
    """Whether the model runs on seeded random weights (no checkpoint, or a config alone): its text is noise."""
    return bool(model_args.streamed_weights or model_args.dummy_weights or model_args.CKPT_DIR is None)


SHOWN_USERS = 4  # users whose prompt and output are printed; the rest are counted


def run_demo(
    mesh_device,
    model_name: str = catalogue.DEFAULT_MODEL,
    batch_size: int = 1,
    prompts: list[str] | None = None,
    max_new_tokens: int = 16,
    max_seq_len: int = 1024,
    paged_attention: bool = False,
    page_block_size: int = 32,
    optimizations: str = "performance",
    instruct: bool = False,
    checkpoint: str | None = None,
    config: str | None = None,
    seed: int = 0,
    stop_at_eos: bool = False,
    verbose: bool = True,
) -> DemoResult:
    """Build the model on ``mesh_device``, prefill ``prompts`` and decode ``max_new_tokens`` greedily."""
    say = print if verbose else (lambda *a, **k: None)
    prompts = prompts or make_prompts(batch_size, None, None)
    if len(prompts) != batch_size:
        raise DemoArgumentError(
            "--batch", f"expected {batch_size} prompts (one per user), got {len(prompts)}"
        )
    for flag, value in (("--max-new-tokens", max_new_tokens), ("--max-seq-len", max_seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DemoArgumentError(flag, f"expected an integer >= 1, got {value!r}")

    # optimizations is passed as a lambda: ModelArgs evaluates it once the model is known
    precision = {"performance": DecodersPrecision.performance, "accuracy": DecodersPrecision.accuracy}[
        optimizations
    ]
    hf_config = None if config is None else _read_config(config)
    try:
        model_args = ModelArgs(
            mesh_device,
            instruct=instruct,
            max_batch_size=batch_size,
            max_seq_len=max_seq_len,
            optimizations=lambda args: precision(args.n_layers, args.model_name),
            model_name=checkpoint or model_name,
            hf_config=hf_config,
            dummy_weights=hf_config is not None,  # a config alone: seeded random weights, streamed
            seed=seed,
        )
    except (KeyError, ValueError) as exc:
        if config is None:
            raise
        raise DemoArgumentError("--config", f"{config}: {exc}") from None
    tokenizer = load_tokenizer(model_args)
    _check_prompt_lengths(prompts, tokenizer, instruct, max_new_tokens, max_seq_len)  # before the slow build
    weight_dtype = ttnn.bfloat8_b  # the dtype of weights with no per-layer precision override
    model_args.check_device_memory(
        weight_dtype
    )  # a model too large for the mesh fails before any weight is made
    state_dict = model_args.load_state_dict()

    paged_attention_config = None
    page_table = None
    if paged_attention:
        blocks_per_user = max_seq_len // page_block_size
        paged_attention_config = PagedAttentionConfig(
            block_size=page_block_size, max_num_blocks=blocks_per_user * batch_size
        )
        # hand the cache blocks out in a random order (seeded), so no user's pages are contiguous
        shuffled_blocks = torch.randperm(
            paged_attention_config.max_num_blocks, generator=torch.Generator().manual_seed(seed)
        )
        page_table = shuffled_blocks.to(torch.int32).view(batch_size, blocks_per_user)

    t0, rss0 = time.perf_counter(), _resident_bytes()
    model = Transformer(
        mesh_device=mesh_device,
        args=model_args,
        state_dict=state_dict,
        dtype=weight_dtype,
        paged_attention_config=paged_attention_config,
        weight_cache_path=model_args.weight_cache_path(weight_dtype),
    )
    generator = Generator(model, model_args, mesh_device, tokenizer=tokenizer)
    build_seconds, build_rss_bytes = time.perf_counter() - t0, _resident_bytes() - rss0
    say(f"Built {model_args} in {build_seconds:.2f} s ({model_args.optimizations.__name__} precision)")
    if random_weights(model_args):
        # a newcomer reads '................' as a broken model: say why the text is noise
        say(
            f"Weights: seeded random (seed {seed}), so the generated text is noise; --checkpoint DIR loads real "
            "weights (the speeds are real either way)"
        )

    input_tokens, _token_ids, decoding_pos, prefill_lens = preprocess_inputs_prefill(
        prompts, tokenizer, model_args, instruct, max_new_tokens
    )

    t0 = time.perf_counter()
    logits = generator.prefill_forward_text(input_tokens, page_table=page_table, prompt_lens=prefill_lens)
    prefill_seconds = time.perf_counter() - t0
    next_tokens = sample_host(logits[:, -1, :])

    generated = [[int(t)] for t in next_tokens]
    current_pos = torch.tensor(decoding_pos, dtype=torch.int64)
    decode_seconds = []
    finished = [False] * batch_size
    for _ in range(max_new_tokens - 1):
        t0 = time.perf_counter()
        logits = generator.decode_forward_text(next_tokens, current_pos, page_table=page_table)
        decode_seconds.append(time.perf_counter() - t0)
        next_tokens = sample_host(logits[:, -1, :])
        current_pos = current_pos + 1
        for user, token in enumerate(next_tokens.tolist()):
            if not finished[user]:
                generated[user].append(token)
                if stop_at_eos and token in tokenizer.stop_tokens:
                    finished[user] = True
        if stop_at_eos and all(finished):
            break

    texts = [tokenizer.decode(tokens) for tokens in generated]
    result = DemoResult(
        texts=texts,
        tokens=generated,
        prefill_seconds=prefill_seconds,
        decode_seconds=decode_seconds,
        prompt_tokens=sum(prefill_lens),
        batch_size=batch_size,
        build_seconds=build_seconds,
        build_rss_bytes=build_rss_bytes,
    )
    for user in range(min(batch_size, SHOWN_USERS)):
        say(f"[user {user}] prompt: {prompts[user][:60]!r}")
        say(f"[user {user}] output: {texts[user]!r}")
    if batch_size > SHOWN_USERS:
        say(
            f"[users {SHOWN_USERS}-{batch_size - 1}] {batch_size - SHOWN_USERS} more users not shown (their texts are in the result)"
        )
    say(
        f"prefill: {result.prompt_tokens} tokens in {prefill_seconds:.3f} s = {result.prefill_tokens_per_second:.1f} tok/s | "
        f"decode: {result.decode_tokens_per_second_per_user:.2f} tok/s/user, {result.decode_tokens_per_second:.1f} tok/s "
        f"(batch {batch_size}, {len(decode_seconds)} steps)"
    )
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tttv1.demo.simple_text_demo",
        description="Generate text with the TTTv1-style model on the ttnn emulator and report its speed.",
    )
    parser.add_argument(
        "--model",
        default=catalogue.DEFAULT_MODEL,
        choices=catalogue.catalogue_names(),
        help="catalogue model",
    )
    parser.add_argument(
        "--checkpoint",
        default=None,
        help="local HF checkpoint dir (config.json + safetensors); overrides --model",
    )
    parser.add_argument(
        "--config",
        default=None,
        help="a Hugging Face config.json (or its directory) alone: seeded random weights at its real size, made "
        "and moved to the devices one tensor at a time; overrides --model and --checkpoint",
    )
    parser.add_argument(
        "--mesh", type=parse_mesh, default=(1, 1), help="RxC or N150/N300/N150x4/T3K/TG (default 1x1)"
    )
    parser.add_argument(
        "--batch", type=int, default=1, choices=[1, 2, 4, 8, 16, 32], help="users decoded together"
    )
    parser.add_argument(
        "--prompt", default=None, help="prompt text (repeated for every user); default: built-in prompts"
    )
    parser.add_argument(
        "--prompt-len", type=positive_int, default=None, help="stretch prompts to about this many tokens"
    )
    parser.add_argument("--max-new-tokens", type=positive_int, default=16)
    parser.add_argument(
        "--max-seq-len",
        type=positive_int,
        default=1024,
        help="KV cache positions per user: the prompt (padded to 128, a power of two or a multiple of 2048 for "
        "prefill) and the new tokens must fit",
    )
    parser.add_argument(
        "--paged-attention", action="store_true", help="use a paged KV cache with a shuffled page table"
    )
    parser.add_argument("--page-block-size", type=positive_int, default=32)
    parser.add_argument("--optimizations", choices=["performance", "accuracy"], default="performance")
    parser.add_argument("--instruct", action="store_true", help="frame prompts as a chat turn")
    parser.add_argument("--stop-at-eos", action="store_true")
    parser.add_argument("--seed", type=int, default=0, help="seed of the catalogue model's random weights")
    args = parser.parse_args(argv)

    mesh_device = ttnn.open_mesh_device(ttnn.MeshShape(*args.mesh))
    try:
        run_demo(
            mesh_device,
            model_name=args.model,
            batch_size=args.batch,
            prompts=make_prompts(args.batch, args.prompt, args.prompt_len),
            max_new_tokens=args.max_new_tokens,
            max_seq_len=args.max_seq_len,
            paged_attention=args.paged_attention,
            page_block_size=args.page_block_size,
            optimizations=args.optimizations,
            instruct=args.instruct,
            checkpoint=args.checkpoint,
            config=args.config,
            seed=args.seed,
            stop_at_eos=args.stop_at_eos,
        )
    except DemoArgumentError as exc:
        parser.error(f"argument {exc.argument}: {exc}")  # exits with status 2, like any argparse error
    except ttnn.DeviceMemoryError as exc:  # the model does not fit the mesh: the emulator's one-line message
        parser.exit(1, f"{parser.prog}: error: {exc}\n")
    finally:
        ttnn.close_mesh_device(mesh_device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
