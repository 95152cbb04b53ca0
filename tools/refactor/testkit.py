"""Which module kinds have a Hugging Face counterpart, so that their generated tests also get a reference test.

The generated tests need nothing else from the tool: how to build and feed a TTTv1 module is the user's
``conftest.py`` (fixtures named after the constructor's and the forward's parameters; ``tttv1.testing`` for the
built-in model), and what the tests run is the library's ``tttv2.testing.generated``.
"""

from __future__ import annotations

from pathlib import Path

#: (file stem, class) of a TTTv1 module → the kind its conftest's ``hf_reference`` fixture checks.
HF_KINDS: dict[tuple[str, str], str] = {
    ("mlp", "MLP"): "mlp",
    ("mlp_legacy", "MLP"): "mlp",
    ("rmsnorm", "RMSNorm"): "rmsnorm",
    ("distributed_norm", "DistributedNorm"): "distributed_norm",
    ("embedding", "Embedding"): "embedding",
    ("lm_head", "LMHead"): "lm_head",
    ("attention", "Attention"): "attention",
}


def hf_kind_of(module_path: Path, class_name: str) -> str | None:
    """The Hugging Face kind of a TTTv1 module, from its file stem and class (None: the module gets the
    equivalence and topology tests only)."""
    return HF_KINDS.get((module_path.stem, class_name))


__all__ = ["HF_KINDS", "hf_kind_of"]
