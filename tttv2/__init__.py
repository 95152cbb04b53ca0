"""TTTv2: transformer building blocks for Tenstorrent hardware (``tttv2.modules`` and the seed-style namespaces
``attention``, ``ffn``, ``normalization``, ``embeddings``), model interfaces (``interfaces``), patterns, reference
models, testing tools, and ``ttnn`` (the ttnn API, on a CPU mesh emulator unless Tenstorrent's ttnn is selected).

The public API is ``__all__`` here and in every public package (docs/api.md, with the version policy). The
subpackages and convenience names are imported on first use, so ``import tttv2`` stays light.
"""

from __future__ import annotations

import importlib

__version__ = "0.2.0"

_SUBPACKAGES = (
    "attention",
    "distributed",
    "embeddings",
    "ffn",
    "interfaces",
    "models",
    "modules",
    "normalization",
    "patterns",
    "testing",
    "ttnn",
)
# convenience names → the package that defines them
_CONVENIENCE = {
    "CausalLM": "tttv2.patterns",
    "DecoderLayer": "tttv2.patterns",
    "ModelFactory": "tttv2.interfaces",
    "ModelSpec": "tttv2.interfaces",
    "TestSuite": "tttv2.testing",
}

__all__ = ["__version__", *_SUBPACKAGES, *sorted(_CONVENIENCE)]


def __getattr__(name: str):
    if name in _SUBPACKAGES:
        return importlib.import_module(f"tttv2.{name}")
    if name in _CONVENIENCE:
        return getattr(importlib.import_module(_CONVENIENCE[name]), name)
    raise AttributeError(f"module 'tttv2' has no attribute {name!r}")
