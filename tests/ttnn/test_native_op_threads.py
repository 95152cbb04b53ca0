"""The device-op kernels of tttv2._native give the same bits whatever the number of threads, on both sides of
the size below which a call stays on the calling thread (kOpMinElemsPerThread in native/src/kernels.hpp: a
second thread from 512K values, a third from 768K; layer_norm's own threshold in native/src/norms.cpp: a second
thread from 128K values, in chunks of four rows), and the number formats stay bit-exact with the numpy
reference above it, where the work is cut between threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

# the C++ kernels are built by every install (pip install -e .): a missing module is a failure, never a skip
from tttv2 import _native  # noqa: F401
from tttv2.ttnn import _kernels
from tttv2.ttnn._kernels import reference

# decode shapes (one thread; layer_norm: one at 32 × 2048, two at 32 × 4096 and 32 × 8192, three at 34 × 8192 with a
# ragged last chunk of two rows), then two threads (one shape with a ragged last chunk), then three
SHAPES = [(32, 2048), (32, 4096), (32, 8192), (34, 8192), (128, 4096), (161, 4096), (200, 4096)]

_OUTPUTS = r"""
import hashlib, json, sys
import numpy as np
from tttv2.ttnn import _kernels
from tttv2 import _native
shapes = json.loads(sys.argv[1])
digests = {"threads": _native.max_threads()}
for rows, d in shapes:
    rng = np.random.default_rng(rows * d)
    x = (rng.standard_normal((rows, d)) * 4).astype(np.float32)
    y = rng.standard_normal((rows, d)).astype(np.float32)
    w = rng.standard_normal(d).astype(np.float32)
    angles = rng.uniform(0, 6.3, size=(rows, d)).astype(np.float32)
    outs = [
        _kernels.round_bfloat16(x),
        *_kernels.bfp_pack(x, 7),
        _kernels.bfp_unpack(*_kernels.bfp_pack(x, 3), 3),
        _kernels.bfp_quantize(x, 7),
        _kernels.rms_norm(x, w, 1e-5),
        # a burst of calls: a call under kWakeFactor grains only wakes parked workers within a burst, and
        # layer_norm's decode shapes are such calls (the first of them may well run on the calling thread alone)
        *[_kernels.layer_norm(x, w, w, 1e-5) for _ in range(8)],
        _kernels.softmax(x),
        _kernels.silu_mul(x, y),
        _kernels.rotary_interleaved(x, np.cos(angles), np.sin(angles), 1),
    ]
    digests[f"{rows}x{d}"] = [hashlib.sha256(np.ascontiguousarray(o).tobytes()).hexdigest() for o in outs]
print(json.dumps(digests))
"""


def _digests(threads: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TTTV2_KERNELS"}  # the native kernels, whatever is set
    env["TTTV2_NUM_THREADS"] = str(threads)
    out = subprocess.run(
        [sys.executable, "-c", _OUTPUTS, json.dumps(SHAPES)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_device_op_kernels_give_the_same_bits_with_one_two_and_three_threads():
    runs = {threads: _digests(threads) for threads in (1, 2, 3)}
    assert [run.pop("threads") for run in runs.values()] == [1, 2, 3]
    assert runs[1] == runs[2] == runs[3]
    assert len(runs[1]) == len(SHAPES)


@pytest.mark.parametrize("shape", [(32, 8192), (161, 4096)])
def test_number_formats_stay_bit_exact_on_both_sides_of_the_threshold(shape):
    x = (np.random.default_rng(5).standard_normal(shape) * 3).astype(np.float32)
    np.testing.assert_array_equal(_kernels.round_bfloat16(x), reference.round_bfloat16(x))
    for bits in (7, 3):
        for got, want in zip(_kernels.bfp_pack(x, bits), reference.bfp_pack(x, bits), strict=True):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(_kernels.bfp_quantize(x, bits), reference.bfp_quantize(x, bits))
