"""The emulator's hot kernels: C++ (``tttv2._native``) by default, numpy (:mod:`.reference`) on request.

Every public function has the signature and semantics of its twin in :mod:`.reference`: it takes array
likes and returns new C-contiguous float32 arrays (or uint8 arrays for packed block floats). The native
path converts inputs to C-contiguous float32 and allocates the outputs with ``np.empty``.

Backend selection: ``TTTV2_KERNELS=reference`` in the environment picks the numpy implementations at
import time; :func:`use_backend` switches at run time, permanently or, used as a context manager, for a
``with`` block. :data:`BACKEND` names the active backend.

The native kernels use up to ``TTTV2_NUM_THREADS`` threads (default: the core count, at most 8) on large
inputs, and the best SIMD level of the CPU (``TTTV2_SIMD=baseline|avx2|avx512`` caps it;
``tttv2._native.set_simd_level`` switches it, e.g. in tests).
"""

from __future__ import annotations

import functools
import math
import operator
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import reference

__all__ = [
    "BACKEND",
    "BACKENDS",
    "bf16_unpack",
    "bfp_pack",
    "bfp_quantize",
    "bfp_unpack",
    "bfp_unpack_codes",
    "layer_norm",
    "rms_norm",
    "rotary_interleaved",
    "round_bfloat16",
    "silu_mul",
    "softmax",
    "use_backend",
]

BACKENDS = ("native", "reference")
ENV_VAR = "TTTV2_KERNELS"

try:
    from tttv2 import _native
except ImportError as exc:  # pragma: no cover - depends on how the package was installed
    _native = None
    _native_import_error: ImportError | None = exc
else:
    _native_import_error = None

BACKEND: str = "native"


class use_backend:
    """Switch the kernel backend to ``name`` ("native" or "reference").

    Takes effect immediately; when used as ``with use_backend(name): ...`` the previous backend is
    restored on exit.
    """

    def __init__(self, name: str) -> None:
        global BACKEND
        if name not in BACKENDS:
            raise ValueError(f"unknown kernel backend {name!r}; expected one of {BACKENDS}")
        if name == "native" and _native is None:
            raise ImportError(
                "the C++ kernels (tttv2._native) are not built or failed to import "
                f"({_native_import_error}); run `pip install -e .` from the project root, "
                f"or set {ENV_VAR}=reference to use the numpy kernels"
            ) from _native_import_error
        self.previous = BACKEND
        BACKEND = name

    def __enter__(self) -> str:
        return BACKEND

    def __exit__(self, *exc_info: object) -> None:
        global BACKEND
        BACKEND = self.previous


use_backend(os.environ.get(ENV_VAR, "").strip().lower() or "native")

F = TypeVar("F", bound=Callable[..., Any])


def _dispatch(native_impl: F) -> F:
    """Route calls to ``native_impl`` or to the reference function of the same name."""
    ref = getattr(reference, native_impl.__name__)

    @functools.wraps(ref)
    def kernel(*args: Any, **kwargs: Any) -> Any:
        if BACKEND == "reference":
            return ref(*args, **kwargs)
        return native_impl(*args, **kwargs)

    return kernel  # type: ignore[return-value]


def _f32(a: Any) -> np.ndarray:
    return np.asarray(a, dtype=np.float32, order="C")


def _rows(a: Any) -> np.ndarray:
    """[..., d] → [rows, d] view (0-d arrays are passed on for the kernel to reject)."""
    a = _f32(a)
    if a.ndim in (0, 2):
        return a
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _vector(v: Any) -> np.ndarray | None:
    """An optional per-column parameter: None, [d] or [1, ..., 1, d]."""
    if v is None:
        return None
    v = _f32(v)
    return v.reshape(-1) if v.ndim > 1 and v.size == v.shape[-1] else v


def _packed(kernel: str, name: str, a: Any) -> np.ndarray:
    a = np.asarray(a, order="C")
    if a.dtype != np.uint8:
        raise ValueError(f"{kernel}: {name} must be uint8, got {a.dtype}")
    return a


@_dispatch
def round_bfloat16(x: np.ndarray) -> np.ndarray:
    x = _f32(x)
    out = np.empty_like(x)
    _native.round_bfloat16(x, out)
    return out


@_dispatch
def bfp_pack(x: np.ndarray, mantissa_bits: int) -> tuple[np.ndarray, np.ndarray]:
    x = _f32(x)
    rows, cols = x.shape if x.ndim == 2 else (0, 0)
    exps = np.empty((rows, cols // reference.BFP_BLOCK), dtype=np.uint8)
    mants = np.empty((rows, cols), dtype=np.uint8)
    _native.bfp_pack(x, operator.index(mantissa_bits), exps, mants)  # validates x first
    return exps, mants


@_dispatch
def bfp_unpack(
    exponents: np.ndarray, mantissas: np.ndarray, mantissa_bits: int, out: np.ndarray | None = None
) -> np.ndarray:
    exponents = _packed("bfp_unpack", "exponents", exponents)
    mantissas = _packed("bfp_unpack", "mantissas", mantissas)
    if out is None:
        out = np.empty(mantissas.shape, dtype=np.float32)
    _native.bfp_unpack(exponents, mantissas, operator.index(mantissa_bits), out)
    return out


@_dispatch
def bf16_unpack(
    bits: np.ndarray, keep_mask: int = reference.ALL_BITS, out: np.ndarray | None = None
) -> np.ndarray:
    bits = np.asarray(bits, dtype=np.uint16, order="C")
    if out is None:
        out = np.empty(bits.shape, dtype=np.float32)
    _native.bf16_unpack(bits, operator.index(keep_mask), out)
    return out


@_dispatch
def bfp_unpack_codes(
    exponents: np.ndarray,
    codes: np.ndarray,
    mantissa_bits: int,
    nibbles: bool,
    keep_mask: int = reference.ALL_BITS,
    out: np.ndarray | None = None,
) -> np.ndarray:
    exponents = _packed("bfp_unpack_codes", "exponents", exponents)
    codes = _packed("bfp_unpack_codes", "codes", codes)
    if out is None:
        cols = codes.shape[1] * (2 if nibbles else 1) if codes.ndim == 2 else 0
        out = np.empty((codes.shape[0] if codes.ndim else 0, cols), dtype=np.float32)
    _native.bfp_unpack_codes(
        exponents, codes, operator.index(mantissa_bits), bool(nibbles), operator.index(keep_mask), out
    )
    return out


@_dispatch
def small_matmul(
    a: np.ndarray, kind: str, parts: tuple, k_block: int, keep_mask: int = reference.ALL_BITS
) -> np.ndarray:
    a = _f32(a)
    if kind not in ("float32", "bfloat16", "bfloat8_b", "bfloat4_b"):
        return reference.small_matmul(a, kind, parts, k_block, keep_mask)  # raises the reference's error
    if kind == "float32":
        w0, w1 = _f32(parts[0]), None
    elif kind == "bfloat16":
        w0, w1 = np.asarray(parts[0], order="C"), None  # uint16 patterns (the kernel checks the dtype)
    else:
        w0 = _packed("small_matmul", "exponents", parts[0])
        w1 = _packed("small_matmul", "codes", parts[1]) if len(parts) > 1 else None
    cols = w0.shape[1] * (reference.BFP_BLOCK if w1 is not None else 1) if w0.ndim == 2 else 0
    out = np.empty((a.shape[0] if a.ndim == 2 else 0, cols), dtype=np.float32)
    _native.small_matmul(a, kind, w0, w1, operator.index(k_block), operator.index(keep_mask), out)
    return out


@_dispatch
def bfp_quantize(x: np.ndarray, mantissa_bits: int) -> np.ndarray:
    x = _f32(x)
    out = np.empty_like(x)
    _native.bfp_quantize(x, operator.index(mantissa_bits), out)
    return out


@_dispatch
def rms_norm(x: np.ndarray, weight: np.ndarray | None, eps: float) -> np.ndarray:
    x2 = _rows(x)
    out = np.empty_like(x2)
    _native.rms_norm(x2, _vector(weight), float(eps), out)
    return out if x2 is x else out.reshape(np.shape(x))  # x2 is x: x was [rows, d] float32 already


@_dispatch
def layer_norm(x: np.ndarray, weight: np.ndarray | None, bias: np.ndarray | None, eps: float) -> np.ndarray:
    x2 = _rows(x)
    out = np.empty_like(x2)
    _native.layer_norm(x2, _vector(weight), _vector(bias), float(eps), out)
    return out if x2 is x else out.reshape(np.shape(x))  # x2 is x: x was [rows, d] float32 already


@_dispatch
def softmax(x: np.ndarray) -> np.ndarray:
    x2 = _rows(x)
    out = np.empty_like(x2)
    _native.softmax(x2, out)
    return out if x2 is x else out.reshape(np.shape(x))  # x2 is x: x was [rows, d] float32 already


@_dispatch
def rotary_interleaved(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, inner: int) -> np.ndarray:
    x = _f32(x)
    out = np.empty_like(x)
    _native.rotary_interleaved(x, _f32(cos), _f32(sin), operator.index(inner), out)
    return out


@_dispatch
def silu_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = _f32(a), _f32(b)
    if a.shape != b.shape:
        try:
            a, b = (_f32(v) for v in np.broadcast_arrays(a, b))
        except ValueError:
            raise ValueError(f"silu_mul: shapes of a {a.shape} and b {b.shape} do not broadcast") from None
    out = np.empty_like(a)
    _native.silu_mul(a, b, out)
    return out
