"""Deprecated ``ttml.ops.sample``: use ``ttnn.sample(logits, temperature=..., seed=...)``."""

from __future__ import annotations

from tttv2 import ttnn

from .._deprecation import deprecated
from ..autograd import Tensor, _value

__all__ = ["sample_op"]


def sample_op(logits, temperature: float, seed: int, logits_padding_mask=None, seed_axes=None) -> Tensor:
    """TTML's Gumbel-max sampling: ``argmax(logits / T + g - mask)`` over the last dim (``T = 0``: greedy
    ``argmax(logits - mask)``), ids ``[..., 1]`` uint32. ``logits_padding_mask`` holds large values at the
    vocabulary entries to exclude (padding); it is subtracted after the temperature scaling, as TTML did.
    Every device draws the same noise from ``seed`` (TTML's default); per-device noise (``seed_axes``) is not
    emulated and raises."""
    deprecated("ttml.ops.sample.sample_op", "ttnn.sample(logits, temperature=..., seed=...)")
    if seed_axes:
        raise NotImplementedError(
            f"ttml.ops.sample.sample_op: seed_axes: per-device noise is not emulated (every device draws from "
            f"seed); expected None or [], got {seed_axes!r}"
        )
    x = _value(logits)
    temperature = float(temperature)
    if logits_padding_mask is not None:
        mask = _value(logits_padding_mask)
        # (x - T·mask) / T = x / T - mask: the mask lands after the scaling, as in TTML
        scale = temperature if temperature > 0 else 1.0
        x = ttnn.subtract(x, ttnn.multiply(mask, scale) if scale != 1.0 else mask)
    return Tensor(ttnn.sample(x, temperature=temperature, seed=int(seed)))
