"""Fuzz driver for the native kernels, run in a child process by tests/ttnn/test_native_safety.py.

``python native_fuzz.py raw SEED CASES`` calls every entry point of ``tttv2._native`` (and its ``training``
submodule) CASES times with random arguments built from the signature nanobind prints: arrays of random
shapes (often consistent with each other, sometimes empty with huge dims, sometimes of the wrong dtype or not
contiguous), extreme integers and floats, random optional ``None``. A call may only return or raise
``TypeError`` / ``ValueError`` / ``OverflowError`` / ``MemoryError``; a crash kills the child (the parent
reports the last case printed).

``python native_fuzz.py differential SEED CASES`` calls the public kernel wrappers with random valid shapes
on both backends (C++ and the numpy reference) and checks that they agree (or both raise ``ValueError``).

Each case is printed (and flushed) before it runs; ``-X faulthandler`` on the child adds the C-level
traceback of a crash.
"""

from __future__ import annotations

import json
import math
import re
import sys
import warnings

import numpy as np

ALLOWED = (TypeError, ValueError, OverflowError, MemoryError)
INTS = [0, 1, 2, 3, 7, 16, 33, -1, -(2**31), 2**31, 2**32 + 1, 2**61, 2**62, 2**63 - 1, 2**64 - 1, -(2**63)]
FLOATS = [0.0, 1.0, -1.0, 0.5, 1e-5, 1e30, -1e30, float("nan"), float("inf"), float("-inf")]
DIMS = [0, 1, 2, 3, 4, 5, 16, 17, 32]
HUGE = [2**31, 2**40, 2**62]
NP_DTYPES = {
    "float32": np.float32,
    "int64": np.int64,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
}
WRONG_DTYPES = [np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_]


# --- signatures ----------------------------------------------------------------------------------------------


def _split_top(text: str) -> list[str]:
    """Split a parameter list on the commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    return [*parts, tail] if tail else parts


def parameters(fn) -> list[tuple[str, str, bool]]:
    """``[(name, kind, optional)]`` from the first line of a nanobind docstring, kind being ``ndarray:<dtype>``,
    ``int``, ``float``, ``bool``, ``str`` or ``tuple3``."""
    head = (fn.__doc__ or "").split("\n")[0]
    match = re.match(r"\w+\((.*)\) ->", head)
    if match is None:
        raise AssertionError(f"cannot parse the signature of {fn!r}: {head!r}")
    out = []
    for part in _split_top(match.group(1)):
        name, _, annotation = part.partition(": ")
        optional = annotation.endswith("| None")
        annotation = annotation.removesuffix("| None").strip()
        if annotation.startswith("ndarray["):
            dtype = re.search(r"dtype=(\w+)", annotation)  # none: the kernel takes several dtypes
            kind = "ndarray:" + (dtype.group(1) if dtype else "any")
        elif annotation.startswith("tuple[int, int, int]"):
            kind = "tuple3"
        elif annotation in ("int", "float", "bool", "str"):
            kind = annotation
        else:
            raise AssertionError(f"{fn.__name__}: unknown parameter type {annotation!r}")
        out.append((name, kind, optional))
    return out


def entry_points():
    from tttv2 import _native

    for module, prefix in ((_native, ""), (_native.training, "training.")):
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("_") or not callable(fn) or not (fn.__doc__ or "").startswith(f"{name}("):
                continue
            yield prefix + name, fn


# --- random arguments ----------------------------------------------------------------------------------------


# shapes by parameter name (index into _shape_family); any other array takes the family's main shape
_SHAPE_HINTS = {
    **dict.fromkeys(("weight", "bias", "dweight", "dbias"), 3),
    **dict.fromkeys(("rms", "mean", "rstd", "lse", "grad_lse", "target", "ids"), 2),
    "exponents": 5,
    "mask": 8,
    "scale": 4,
    **dict.fromkeys(("w0", "w1"), 9),  # small_matmul's weight: [K, N] for an a of [M, K]
}
# arrays of a kernel that takes several dtypes (small_matmul's weight parts), by parameter name
_ANY_DTYPES = {"w0": ["float32", "uint16", "uint8"], "w1": ["uint8"]}
_INT_HINTS = {
    "mantissa_bits": [3, 7],
    "inner": [1, 2, 3],
    "kind": [0, 1],
    "threshold": [0, 1 << 23, (1 << 24) - 1],
    "b0": [0, 0, 1, 2],
    "k_block": [0, 1, 32],
    "keep_mask": [0xFFFFFFFF, 0xFFFF0000],
}
_WRAPPING_STRIDES = [
    2**60,
    2**61,
    2**62,
]  # with total_b = 1 + 2**64 / stride, (total_b − 1) · stride wraps to 0


def _shape_family(rng, ndim: int | None = None) -> list[tuple[int, ...]]:
    """Shapes that fit together the way kernel arguments do: [.., d], its rows, its last dim, its blocks."""
    ndim = ndim or int(rng.choice([1, 2, 2, 2, 3, 4, 4]))
    shape = [int(rng.choice(DIMS)) for _ in range(ndim)]
    if rng.random() < 0.1:  # an empty array with a huge dim: only its size is real
        shape[int(rng.integers(ndim))] = int(rng.choice(HUGE))
        shape[int(rng.integers(ndim))] = 0
    rows = math.prod(shape[:-1]) if ndim > 1 else 1
    d = shape[-1]
    return [
        tuple(shape),
        (rows, d),
        (rows,),
        (d,),
        (1,),
        (rows, max(d // 16, 0)),
        tuple(shape[:-1]) or (1,),
        (int(rng.choice(DIMS)),),
        (math.prod(shape),),
        (d, d),
    ]


def _array(rng, name: str, dtype_name: str, shapes: list[tuple[int, ...]]):
    dtype = NP_DTYPES[dtype_name]
    if rng.random() < 0.15:
        shape = shapes[int(rng.integers(len(shapes)))]
    elif dtype_name == "uint32" or (name == "dst" and rng.random() < 0.2):
        shape = shapes[2]  # per-row outputs (gumbel_argmax, cross_entropy_forward)
    else:
        shape = shapes[_SHAPE_HINTS.get(name, 0)]
    if rng.random() < 0.05:
        dtype = WRONG_DTYPES[int(rng.integers(len(WRONG_DTYPES)))]
    size = math.prod(shape)
    if size > 1 << 16:  # a huge dim with no zero dim: keep it allocatable by using a zero-size array
        shape = (0, *shape[1:])
        size = 0
    if np.issubdtype(dtype, np.floating):
        data = rng.standard_normal(size).astype(dtype) * dtype(rng.choice([1.0, 100.0]))
        if size and rng.random() < 0.1:
            data[int(rng.integers(size))] = rng.choice([np.inf, -np.inf, np.nan])
    elif dtype is np.bool_:
        data = rng.random(size) < 0.5
    else:
        info = np.iinfo(dtype)
        if rng.random() < 0.8:  # small ids, mostly in range
            data = rng.integers(0, 4, size=size).astype(dtype)
        else:
            data = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
    try:
        a = data.reshape(shape)
    except ValueError:  # numpy refuses dims whose product overflows, even with a zero dim
        a = data.reshape(tuple(0 if dim >= HUGE[0] else dim for dim in shape))
    roll = rng.random()
    if roll < 0.04 and a.ndim and a.shape[-1] > 1:
        a = a[..., ::2]  # not contiguous
    elif roll < 0.08:
        a.flags.writeable = False
    return a


def _value(rng, name: str, kind: str, shapes, context: dict):
    """A random argument; ``context`` carries choices that later arguments of the same call follow."""
    if kind == "ndarray:any":
        return _array(rng, name, str(rng.choice(_ANY_DTYPES.get(name, list(NP_DTYPES)))), shapes)
    if kind.startswith("ndarray:"):
        return _array(rng, name, kind.split(":", 1)[1], shapes)
    if kind == "int":
        if name == "total_b" and rng.random() < 0.8:
            return context.get("total_b", shapes[0][0] + int(rng.integers(0, 2)))
        if name in _INT_HINTS and rng.random() < 0.7:
            return int(rng.choice(_INT_HINTS[name]))
        return int(rng.choice(INTS)) if rng.random() < 0.6 else int(rng.integers(0, 40))
    if kind == "float":
        return float(rng.choice(FLOATS))
    if kind == "bool":
        return bool(rng.random() < 0.5)
    if kind == "str" and name == "kind" and rng.random() < 0.9:  # small_matmul's weight format
        return str(rng.choice(["float32", "bfloat16", "bfloat8_b", "bfloat4_b"]))
    if kind == "str":
        return str(rng.choice(["baseline", "avx2", "avx512", "", "x" * 300, "AVX2"]))
    if kind == "tuple3":
        roll = rng.random()
        if roll < 0.4:
            return tuple(int(rng.choice([0, 1, 2, 16, 32, 64])) for _ in range(3))
        if roll < 0.7:  # a batch stride whose product with the batch wraps around
            stride = int(rng.choice(_WRAPPING_STRIDES))
            context["total_b"] = 1 + 2**64 // stride
            return (stride, 0, 0)
        return tuple(int(rng.choice(INTS)) for _ in range(3))
    raise AssertionError(kind)


def fuzz_raw(seed: int, cases: int) -> None:
    from tttv2 import _native

    rng = np.random.default_rng(seed)
    level = _native.simd_level()
    calls, returned = 0, {}
    try:
        for name, fn in entry_points():
            params = parameters(fn)
            for case in range(cases):
                shapes = _shape_family(rng, 4 if any(p[0] == "scores" for p in params) else None)
                context: dict = {}
                args = [
                    None if optional and rng.random() < 0.3 else _value(rng, pname, kind, shapes, context)
                    for pname, kind, optional in params
                ]
                summary = ", ".join(f"{p[0]}={_describe(a)}" for p, a in zip(params, args))
                print(f"case {name}#{case}: {summary}", flush=True)
                try:
                    fn(*args)
                    returned[name] = returned.get(name, 0) + 1
                except ALLOWED:
                    pass
                calls += 1
    finally:
        _native.set_simd_level(level)
    print(f"done: {calls} calls, returned normally: {json.dumps(returned)}", flush=True)


def _describe(a) -> str:
    if isinstance(a, np.ndarray):
        extra = "" if a.flags.c_contiguous else " non-contiguous"
        extra += "" if a.flags.writeable else " read-only"
        return f"array{a.shape} {a.dtype}{extra}"
    return repr(a)


# --- native vs reference -------------------------------------------------------------------------------------


def _rows_shape(rng) -> tuple[int, ...]:
    ndim = int(rng.integers(1, 4))
    return tuple(int(rng.choice([0, 1, 2, 3, 5, 16, 33])) for _ in range(ndim))


def _differential_cases(rng):
    """(name, call(kernels, training)) with random valid shapes for the public wrappers."""
    shape = _rows_shape(rng)
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.choice([1.0, 50.0]))
    dy = rng.standard_normal(shape).astype(np.float32)
    d = shape[-1]
    w = rng.standard_normal(d).astype(np.float32) if rng.random() < 0.7 else None
    b = rng.standard_normal(d).astype(np.float32) if rng.random() < 0.7 else None
    rows = math.prod(shape[:-1])
    bfp = rng.standard_normal((rows, 16 * int(rng.integers(0, 3)))).astype(np.float32)
    bits = int(rng.choice([3, 7]))
    ids = rng.integers(0, 6, size=rows)
    classes = rng.integers(0, max(d, 1), size=rows)
    kind = int(rng.integers(0, 2))
    bq, hkv, sq, sk, hd = (int(rng.integers(0, 3)), int(rng.integers(1, 3)), *rng.integers(0, 6, size=3))
    hq = hkv * int(rng.integers(1, 3))
    q = rng.standard_normal((bq, hq, sq, hd)).astype(np.float32)
    kv = rng.standard_normal((bq, hkv, sk, hd)).astype(np.float32)
    go = rng.standard_normal((bq, hq, sq, hd)).astype(np.float32)
    mask = [
        None,
        np.zeros((1, 1, sq, sk), np.float32),
        rng.standard_normal((bq, 1, 1, sk)).astype(np.float32),
    ][int(rng.integers(0, 3))]
    attn = {
        "scale": float(rng.choice([0.5, 1.0])),
        "is_causal": bool(rng.random() < 0.5),
        "dropout_p": float(rng.choice([0.0, 0.3])),
        "seed": int(rng.integers(0, 1000)),
    }
    temperature = float(rng.choice([0.0, 1.0]))
    codes = rng.integers(0, 256, size=bfp.shape, dtype=np.uint8)
    exps = rng.integers(0, 255, size=(rows, bfp.shape[1] // 16), dtype=np.uint8)
    keep = int(rng.choice([0xFFFFFFFF, 0xFFF80000, 0xFFFE0000]))
    bf16_bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    # small_matmul: up to 33 rows (33 must raise on both sides), some repeated; K >= 1 (0 raises on both)
    sm_rows, sm_k, sm_n = int(rng.integers(0, 34)), int(rng.integers(0, 40)), 16 * int(rng.integers(0, 4))
    sm_a = rng.standard_normal((sm_rows, sm_k)).astype(np.float32)
    sm_a[1::2] = sm_a[:1] if sm_rows else sm_a[1::2]
    sm_w = rng.standard_normal((sm_k, sm_n)).astype(np.float32)
    sm_bits = rng.integers(0, 1 << 16, size=(sm_k, sm_n), dtype=np.uint16)
    sm_exps = rng.integers(0, 255, size=(sm_k, sm_n // 16), dtype=np.uint8)
    sm_codes = rng.integers(0, 256, size=(sm_k, sm_n), dtype=np.uint8)
    sm_block = int(rng.choice([0, 1, 4, 16, 64]))
    return [
        ("small_matmul", lambda k, t: k.small_matmul(sm_a, "float32", (sm_w,), sm_block, keep)),
        ("small_matmul", lambda k, t: k.small_matmul(sm_a, "bfloat16", (sm_bits,), sm_block, keep)),
        ("small_matmul", lambda k, t: k.small_matmul(sm_a, "bfloat8_b", (sm_exps, sm_codes), sm_block, keep)),
        (
            "small_matmul",
            lambda k, t: k.small_matmul(
                sm_a, "bfloat4_b", (sm_exps, sm_codes[:, : sm_n // 2].copy()), sm_block, keep
            ),
        ),
        ("bf16_unpack", lambda k, t: k.bf16_unpack(bf16_bits, keep)),
        ("bfp_unpack_codes", lambda k, t: k.bfp_unpack_codes(exps, codes, 7, False, keep)),
        (
            "bfp_unpack_codes",
            lambda k, t: k.bfp_unpack_codes(np.repeat(exps, 2, axis=1), codes, 3, True, keep),
        ),
        ("round_bfloat16", lambda k, t: k.round_bfloat16(x)),
        ("bfp_quantize", lambda k, t: k.bfp_quantize(bfp, bits)),
        ("softmax", lambda k, t: k.softmax(x)),
        ("rms_norm", lambda k, t: k.rms_norm(x, w, 1e-5)),
        ("layer_norm", lambda k, t: k.layer_norm(x, w, b, 1e-5)),
        ("silu_mul", lambda k, t: k.silu_mul(x, dy)),
        ("log_softmax", lambda k, t: t.log_softmax(x)),
        ("log_softmax_backward", lambda k, t: t.log_softmax_backward(t.log_softmax(x), dy)),
        ("softmax_backward", lambda k, t: t.softmax_backward(k.softmax(x), dy)),
        ("rms_norm_forward", lambda k, t: t.rms_norm_forward(x, w, 1e-5)),
        ("layer_norm_forward", lambda k, t: t.layer_norm_forward(x, w, b, 1e-5)),
        ("silu_backward", lambda k, t: t.silu_backward(x, dy)),
        ("pointwise_loss", lambda k, t: t.pointwise_loss(x, dy, kind)),
        ("cross_entropy_forward", lambda k, t: t.cross_entropy_forward(x, classes)),
        ("embedding_backward", lambda k, t: t.embedding_backward(ids, dy.reshape(rows, d), 6)),
        ("cross_entropy_backward", lambda k, t: t.cross_entropy_backward(x, classes, 0.5)),
        ("rms_norm_backward", lambda k, t: t.rms_norm_backward(x, w, None, dy, 1e-5)),
        ("layer_norm_backward", lambda k, t: t.layer_norm_backward(x, w, None, None, dy, 1e-5)),
        ("pointwise_loss_backward", lambda k, t: t.pointwise_loss_backward(x, dy, None, 0.25, kind)),
        ("gumbel_argmax", lambda k, t: t.gumbel_argmax(x, temperature, 7)),
        ("dropout_mask", lambda k, t: t.dropout_mask(shape, 0.25, 3)),
        ("sdpa_forward", lambda k, t: t.sdpa_forward(q, kv, kv, mask, **attn)),
        ("sdpa_backward", lambda k, t: t.sdpa_backward(q, kv, kv, go, mask, None, **attn)),
    ]


def _compare(name: str, native, reference) -> None:
    native = native if isinstance(native, tuple) else (native,)
    reference = reference if isinstance(reference, tuple) else (reference,)
    assert len(native) == len(reference), name
    exact = name in (
        "round_bfloat16",
        "bfp_quantize",
        "bf16_unpack",
        "bfp_unpack_codes",
        "small_matmul",
        "gumbel_argmax",
        "dropout_mask",
    )
    for got, want in zip(native, reference):
        got, want = np.asarray(got), np.asarray(want)
        assert got.shape == want.shape, f"{name}: shape {got.shape} != reference {want.shape}"
        if exact:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5, equal_nan=True, err_msg=name)


def fuzz_differential(seed: int, cases: int) -> None:
    from tttv2.ttnn import _kernels
    from tttv2.ttnn._kernels import training

    rng = np.random.default_rng(seed)
    compared = 0
    for case in range(cases):
        for name, call in _differential_cases(rng):
            print(f"case {name}#{case}", flush=True)
            outcomes = []
            for backend in ("native", "reference"):
                with _kernels.use_backend(backend), warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    try:
                        outcomes.append(("ok", call(_kernels, training)))
                    except ValueError as exc:
                        outcomes.append(("ValueError", str(exc)))
            (n_kind, n_value), (r_kind, r_value) = outcomes
            assert n_kind == r_kind, (
                f"{name}: native gave {n_kind} ({n_value}), reference {r_kind} ({r_value})"
            )
            if n_kind == "ok":
                _compare(name, n_value, r_value)
                compared += 1
    print(f"done: {compared} comparisons", flush=True)


if __name__ == "__main__":
    mode, seed, cases = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    {"raw": fuzz_raw, "differential": fuzz_differential}[mode](seed, cases)
