"""Deprecated ``ttml.common.data``: a character tokenizer and batching helpers for the NanoGPT example."""

from __future__ import annotations

import numpy as np

from .._deprecation import deprecated

__all__ = ["BEGIN_TOKEN", "END_TOKEN", "PAD_TOKEN", "CharTokenizer", "build_causal_mask", "get_batch"]

PAD_TOKEN = "<PAD>"
BEGIN_TOKEN = "<BEG>"
END_TOKEN = "<END>"


class CharTokenizer:
    """Ids: the padding token (optional) first, then the text's characters in sorted order, then begin/end
    tokens (optional). Use a plain ``{char: id}`` map in new code (see examples/nanogpt.py)."""

    def __init__(self, text: str, add_padding_token: bool = True, add_begin_end_tokens: bool = True) -> None:
        deprecated(
            "ttml.common.data.CharTokenizer",
            "a {char: id} table built from sorted(set(text)) (examples/nanogpt.py)",
        )
        if not isinstance(text, str):
            raise TypeError(
                f"CharTokenizer: text: expected a str (its characters are the vocabulary), got {type(text).__name__}"
            )
        if not text:
            raise ValueError(
                "CharTokenizer: text: expected a non-empty str (its characters are the vocabulary), got ''"
            )
        self.itos: list[str] = [PAD_TOKEN] if add_padding_token else []
        self.itos.extend(sorted(set(text) - set(self.itos)))
        if add_begin_end_tokens:
            self.itos.extend([BEGIN_TOKEN, END_TOKEN])
        self.stoi = {s: i for i, s in enumerate(self.itos)}

    @property
    def vocab_size(self) -> int:
        return len(self.itos)

    def encode(self, s: str) -> list[int]:
        """Ids of the characters of ``s``; a character the tokenizer was not built with raises ValueError."""
        try:
            return [self.stoi[c] for c in s]
        except KeyError:
            position, char = next((i, c) for i, c in enumerate(s) if c not in self.stoi)
            raise ValueError(
                f"CharTokenizer.encode: s: character {char!r} at index {position} is not in the vocabulary "
                f"({self.vocab_size} tokens built from the text given to CharTokenizer)"
            ) from None

    def decode(self, ids) -> str:
        return "".join(self.itos[int(i)] for i in ids)


def get_batch(split_ids: np.ndarray, seq_len: int, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Random windows ``x [B, T]`` and next-token targets ``y [B, T]`` (uint32)."""
    deprecated("ttml.common.data.get_batch", "your own batching (examples/nanogpt.py)")
    ix = np.random.randint(0, len(split_ids) - seq_len - 1, size=(batch_size,))
    x = np.stack([split_ids[i : i + seq_len] for i in ix])
    y = np.stack([split_ids[i + 1 : i + seq_len + 1] for i in ix])
    return x.astype(np.uint32), y.astype(np.uint32)


def build_causal_mask(size: int) -> np.ndarray:
    """TTML's 0/1 lower-triangular mask ``[1, 1, T, T]``; ``ttnn.nn`` attention is causal by default."""
    deprecated("ttml.common.data.build_causal_mask", "nothing: ttnn.nn attention is causal by default")
    return np.tril(np.ones((size, size), dtype=np.float32)).reshape(1, 1, size, size)
