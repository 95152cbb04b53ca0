"""The native kernels never crash the interpreter: bad sizes, strides, ids and concurrent writers raise or are
harmless. Every call that could crash runs in a child process (with faulthandler), so a crash fails the test
instead of killing pytest; the fuzz driver is tests/ttnn/native_fuzz.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

FUZZ = Path(__file__).with_name("native_fuzz.py")
# a hang guard, not a speed check: the children finish in seconds; a kernel looping over 2**40 rows would not
HANG = 300


def run_child(args: list[str]) -> str:
    """Run ``python -X faulthandler *args``; fail with the last case printed if the child crashes or fails."""
    try:
        proc = subprocess.run(
            [sys.executable, "-X", "faulthandler", *args], capture_output=True, text=True, timeout=HANG
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        pytest.fail(f"the child hung; last output: {out.strip().splitlines()[-1:]}")
    if proc.returncode != 0:
        cases = [line for line in proc.stdout.splitlines() if line.startswith("case ")]
        pytest.fail(
            f"the child exited with {proc.returncode} (negative: killed by that signal)\n"
            f"last case: {cases[-1] if cases else None}\n{proc.stderr[-4000:]}"
        )
    return proc.stdout


def run_snippet(code: str) -> str:
    return run_child(["-c", textwrap.dedent(code)])


def test_sdpa_mask_strides_and_offsets_that_wrap_around_raise():
    out = run_snippet(
        """
        import numpy as np
        from tttv2._native import training as t
        raw = np.zeros((1, 1, 1, 2), np.float32)
        mask = np.zeros(2, np.float32)

        def forward(strides, b0, total_b):
            t.sdpa_row_forward(raw, mask, strides, 1.0, False, 0, 1.0, 0, b0, total_b,
                               np.empty_like(raw), np.empty(1, np.float32))

        def backward(strides, b0, total_b):
            t.sdpa_row_backward(raw, raw.copy(), mask, strides, None, None, 1.0, False, 0, 1.0, 0, b0, total_b,
                                np.empty_like(raw), np.empty_like(raw))

        cases = [
            ((2**61, 0, 0), 1, 9),          # 8 · 2**61 wraps to 0: the old check passed, row 1 read 2**63 bytes away
            ((0, 2**63 - 1, 0), 0, 1),      # not reachable with one head: accepted
            ((1, 1, 1), 2**64 - 1, 0),      # b0 + B wraps around
        ]
        for call in (forward, backward):
            for strides, b0, total_b in cases:
                try:
                    call(strides, b0, total_b)
                    print(call.__name__, "ok")
                except ValueError as exc:
                    print(call.__name__, "ValueError", exc)
        """
    )
    lines = out.splitlines()
    assert len(lines) == 6, out
    for line in (lines[0], lines[3]):
        assert "ValueError" in line and "mask batch offset overflows" in line, line
    assert lines[1].endswith("ok") and lines[4].endswith("ok"), out
    for line in (lines[2], lines[5]):
        assert "ValueError" in line and "batch offset + batch overflows" in line, line


def test_ids_written_by_another_thread_are_read_once():
    """A thread flips one id between valid and 2**40 while the kernels run with the GIL released: each call
    either rejects the id (read while it was bad) or runs on a valid copy; it never writes out of bounds."""
    out = run_snippet(
        """
        import threading
        import numpy as np
        from tttv2._native import training as t

        n, d, num = 1 << 15, 4, 8
        ids = np.zeros(n, np.int64)
        grad = np.ones((n, d), np.float32)
        logits = np.zeros((n, num), np.float32)
        stop = False

        def flip():
            while not stop:
                ids[n // 2] = 1 << 40
                ids[n // 2] = 0

        calls = [
            lambda: t.embedding_backward(ids, grad, np.empty((num, d), np.float32)),
            lambda: t.cross_entropy_forward(logits, ids, np.empty(n, np.float32)),
            lambda: t.cross_entropy_backward(logits, ids, np.ones(1, np.float32), np.empty_like(logits)),
        ]
        writer = threading.Thread(target=flip)
        writer.start()
        done = 0
        try:
            for _ in range(60):
                for call in calls:
                    try:
                        call()
                    except ValueError as exc:
                        assert "out of range" in str(exc), exc
                    done += 1
        finally:
            stop = True
            writer.join()
        print("calls", done)
        """
    )
    assert out.strip() == "calls 180"


def test_empty_arrays_with_huge_dims_do_no_work():
    """An empty [2**40, 0] array has 2**40 rows: the row kernels used to loop over all of them."""
    out = run_snippet(
        """
        import numpy as np
        from tttv2 import _native
        from tttv2._native import training as t
        e = np.empty((2**40, 0), np.float32)
        o = np.empty((2**40, 0), np.float32)
        z = np.empty(0, np.float32)
        u8 = np.empty((2**40, 0), np.uint8)
        _native.softmax(e, o)
        _native.rms_norm(e, None, 1e-5, o)
        _native.layer_norm(e, None, None, 1e-5, o)
        _native.rotary_interleaved(e, e, e, 1, o)
        _native.bfp_quantize(e, 7, o)
        _native.bfp_pack(e, 7, u8, u8)
        _native.bfp_unpack(u8, u8, 7, o)
        t.log_softmax(e, o)
        t.log_softmax_backward(e, e, o)
        t.softmax_backward(e, e, o)
        t.rms_norm_backward(e, None, None, 1e-5, e, o, z)
        t.layer_norm_backward(e, None, None, None, 1e-5, e, o, z, z)
        s = np.empty((2**20, 2**20, 1, 0), np.float32)
        t.sdpa_row_backward(s, s, None, None, None, None, 1.0, False, 0, 1.0, 0, 0, 2**20, s, s.copy())
        x = np.empty((0, 2**40), np.float32)  # zero rows of 2**40 classes: no per-row scratch of that size
        t.cross_entropy_forward(x, np.empty(0, np.int64), z)
        t.cross_entropy_backward(x, np.empty(0, np.int64), np.ones(1, np.float32), x.copy())
        print("returned")
        """
    )
    assert out.strip() == "returned"


@pytest.mark.parametrize("seed", [0, 1])
def test_fuzz_native_entry_points_never_crash(seed):
    out = run_child([str(FUZZ), "raw", str(seed), "40"])
    last = out.strip().splitlines()[-1]
    assert last.startswith("done: "), last
    # the fuzz reaches the kernels, not only their argument checks
    returned = json.loads(last.split("returned normally: ", 1)[1])
    assert len(returned) >= 25, returned


def test_fuzz_native_kernels_match_their_numpy_reference():
    out = run_child([str(FUZZ), "differential", "0", "20"])
    last = out.strip().splitlines()[-1]
    assert last.startswith("done: ") and int(last.split()[1]) > 300, last


def test_empty_rows_give_empty_results_on_both_backends():
    """In-process check of the cases the differential fuzz found (references used to raise on empty rows)."""
    import numpy as np

    from tttv2.ttnn import _kernels
    from tttv2.ttnn._kernels import training

    e = np.empty((3, 0), np.float32)
    for backend in ("native", "reference"):
        with _kernels.use_backend(backend):
            assert _kernels.softmax(e).shape == (3, 0)
            assert training.log_softmax(e).shape == (3, 0)
            assert training.embedding_backward(np.zeros(3, np.int64), e, 4).shape == (4, 0)
            dx, dw = training.rms_norm_backward(e, None, None, e, 1e-5)
            assert dx.shape == (3, 0) and dw.shape == (0,)
            q = np.ones((1, 1, 2, 4), np.float32)
            kv = np.ones((1, 1, 0, 4), np.float32)  # no keys: dead rows, zero output
            out, lse = training.sdpa_forward(
                q, kv, kv, None, scale=1.0, is_causal=False, dropout_p=0.0, seed=0
            )
            assert (out == 0).all() and np.isneginf(lse).all()
