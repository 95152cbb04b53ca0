"""Test helpers shared by the library's tests and the codemod's generated tests.

Here: PCC and allclose reports that work on numpy and torch tensors, and ``TestSuite`` (testing a model's building
blocks against a reference, with parameter coverage: ``CoverageRecorder``, ``coverage_report``; imported on
first use, so importing this package stays light). Submodules (import them explicitly):
``meshes`` (mesh shapes, ``MeshPool``), ``cases`` (upstream-style case lists, PCC thresholds), ``host``
(device tensors back to numpy), ``references`` (Hugging Face reference modules with random weights; torch and
transformers are imported lazily), ``equivalence`` (TTTv1 module vs twin, bit for bit), ``generated`` (what the
codemod's generated tests run: arguments from fixtures named after parameters). The pytest plugin
``pytest_plugin`` provides the mesh fixtures.
"""

from __future__ import annotations

import importlib

import numpy as np

__all__ = [
    "CheckResult",
    "CoverageRecord",
    "CoverageRecorder",
    "CoverageReport",
    "ModuleTest",
    "TestSuite",
    "assert_pcc",
    "comp_allclose",
    "comp_pcc",
    "coverage_report",
    "pcc",
]

# names served from submodules on first use (they import the module library)
_LAZY = {
    "CheckResult": "tttv2.testing._suite",
    "ModuleTest": "tttv2.testing._suite",
    "TestSuite": "tttv2.testing._suite",
    "CoverageRecord": "tttv2.testing._coverage",
    "CoverageRecorder": "tttv2.testing._coverage",
    "CoverageReport": "tttv2.testing._coverage",
    "coverage_report": "tttv2.testing._coverage",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tttv2.testing' has no attribute {name!r}")


def _as_float64(x) -> np.ndarray:
    if hasattr(x, "detach"):  # torch tensor, imported lazily by whoever made it
        x = x.detach().float().cpu().numpy()
    return np.asarray(x, dtype=np.float64)


def pcc(expected, actual) -> float:
    """Pearson correlation coefficient of two same-shaped arrays.

    Identical arrays give 1.0 (also when constant); NaN/inf must be in the same places in both and are
    masked out; two constant but different arrays give 0.0.
    """
    a = _as_float64(expected).ravel()
    b = _as_float64(actual).ravel()
    if a.shape != b.shape:
        raise ValueError(f"pcc: shapes differ: expected {a.shape}, actual {b.shape}")
    if np.array_equal(a, b, equal_nan=True):
        return 1.0
    bad_a, bad_b = ~np.isfinite(a), ~np.isfinite(b)
    if not np.array_equal(bad_a, bad_b) or not np.array_equal(a[bad_a], b[bad_b], equal_nan=True):
        return 0.0
    a, b = a[~bad_a], b[~bad_b]
    if a.size == 0:
        return 1.0
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return 1.0 if np.allclose(a, b) else 0.0
    return float(np.clip(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb), -1.0, 1.0))


def comp_pcc(expected, actual, threshold: float = 0.99) -> tuple[bool, float]:
    """(passed, pcc) in the style of tt-metal's helper."""
    value = pcc(expected, actual)
    return value >= threshold, value


def comp_allclose(expected, actual, rtol: float = 1e-5, atol: float = 1e-8) -> tuple[bool, str]:
    a, b = _as_float64(expected), _as_float64(actual)
    diff = np.abs(a - b)
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(a), np.finfo(np.float64).tiny)
    max_rel = float(rel.max()) if rel.size else 0.0
    return bool(
        np.allclose(a, b, rtol=rtol, atol=atol)
    ), f"max abs diff {max_abs:.3g}, max rel diff {max_rel:.3g}"


def assert_pcc(expected, actual, threshold: float = 0.99) -> float:
    """Assert PCC ≥ threshold; the message carries PCC and the largest absolute error."""
    passed, value = comp_pcc(expected, actual, threshold)
    if not passed:
        _, detail = comp_allclose(expected, actual)
        raise AssertionError(f"PCC {value:.6f} < {threshold} ({detail})")
    return value
