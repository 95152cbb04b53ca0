"""The random stream of ``ttnn.nn``: parameter initialisation and dropout seeds come from one seeded generator.

``manual_seed`` makes model construction and dropout masks reproducible; ``get_rng_state`` /
``set_rng_state`` snapshot and restore it (gradient checkpointing replays a block's dropout masks this way).
Dropout masks themselves are generated on the device from an integer seed drawn here, so a seed captured at
forward time is all a recomputation needs.
"""

from __future__ import annotations

import numpy as np

__all__ = ["get_rng_state", "manual_seed", "next_seed", "rng", "set_rng_state"]

_SEED_LIMIT = 2**31 - 1


class _Stream:
    generator = np.random.Generator(np.random.PCG64(0))


def manual_seed(seed: int) -> None:
    """Reseed the stream used for parameter initialisation and dropout seeds."""
    _Stream.generator = np.random.Generator(np.random.PCG64(int(seed)))


def rng() -> np.random.Generator:
    """The generator itself (for initialisers)."""
    return _Stream.generator


def next_seed() -> int:
    """A fresh integer seed for one dropout mask (or one attention-dropout call)."""
    return int(_Stream.generator.integers(0, _SEED_LIMIT))


def get_rng_state() -> dict:
    """A copy of the stream's state."""
    return _Stream.generator.bit_generator.state


def set_rng_state(state: dict) -> None:
    """Restore a state returned by :func:`get_rng_state`."""
    bit_generator = np.random.PCG64()
    bit_generator.state = state
    _Stream.generator = np.random.Generator(bit_generator)
