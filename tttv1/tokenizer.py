"""A byte-level tokenizer for the catalogue models (no tokenizer files are shipped or downloaded).

Ids 0..2 are special (pad, bos, eos); byte b maps to id b + 3. Ids beyond the byte range (vocab > 259) never
come out of ``encode`` and decode modulo 256; with a vocab smaller than 259 bytes wrap so every byte has an id.
A checkpoint directory with ``tokenizer.json`` uses the Hugging Face tokenizer instead (``load_tokenizer``).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ByteTokenizer", "load_tokenizer"]


class ByteTokenizer:
    PAD, BOS, EOS = 0, 1, 2
    OFFSET = 3

    def __init__(self, vocab_size: int):
        if vocab_size < 4:
            raise ValueError(f"ByteTokenizer needs a vocab of at least 4 ids, got {vocab_size}")
        self.vocab_size = vocab_size
        self.pad_id, self.bos_id, self.eos_id = self.PAD, self.BOS, self.EOS
        self.stop_tokens = {self.EOS}

    def encode(self, text: str, bos: bool = True, eos: bool = False) -> list[int]:
        span = self.vocab_size - self.OFFSET
        ids = [self.OFFSET + (b % span) for b in text.encode("utf-8")]
        return ([self.BOS] if bos else []) + ids + ([self.EOS] if eos else [])

    def encode_chat(self, text: str) -> list[int]:
        """The 'instruct' form: the prompt framed as a user turn."""
        return self.encode(f"<|user|>{text}<|assistant|>", bos=True)

    def decode(self, ids) -> str:
        """Special ids are dropped; ids past the byte range wrap around it (so random models print something)."""
        data = bytes((int(i) - self.OFFSET) % 256 for i in ids if int(i) >= self.OFFSET)
        return data.decode("utf-8", errors="replace")


class _HFTokenizer:
    """Adapter giving a Hugging Face tokenizer the encode/decode/pad_id interface the demo uses."""

    def __init__(self, tok):
        self.tok = tok
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else (tok.eos_token_id or 0)
        self.eos_id = tok.eos_token_id
        self.stop_tokens = {tok.eos_token_id} if tok.eos_token_id is not None else set()

    def encode(self, text: str, bos: bool = True, eos: bool = False) -> list[int]:
        ids = self.tok.encode(text, add_special_tokens=bos)
        return ids + ([self.eos_id] if eos and self.eos_id is not None else [])

    def encode_chat(self, text: str) -> list[int]:
        return self.tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


def load_tokenizer(model_args):
    """The checkpoint's own tokenizer when its files are present locally and ``transformers`` is installed (the
    ``test`` extra), else the byte-level one."""
    ckpt = getattr(model_args, "CKPT_DIR", None)
    if ckpt is not None and (Path(ckpt) / "tokenizer.json").is_file():
        try:
            from transformers import AutoTokenizer
        except ImportError:
            return ByteTokenizer(model_args.vocab_size)
        return _HFTokenizer(AutoTokenizer.from_pretrained(ckpt, local_files_only=True))
    return ByteTokenizer(model_args.vocab_size)
