"""The math-fidelity truncation of a weight that cannot change is skipped when it would keep every bit (issue 24:
no full-tensor temporaries per op). Bit-identity is checked against the mask itself and against matmuls run with
the skip turned off, for bfloat8_b, bfloat4_b, bfloat16 and float32 weights at every math fidelity, including
weights whose blocks are so small that bfloat8_b stores them as float32 subnormals (where a truncation does cut)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from tttv2 import ttnn
from tttv2.ttnn import numerics

WEIGHT_DTYPES = [ttnn.bfloat8_b, ttnn.bfloat4_b, ttnn.bfloat16, ttnn.float32]
FIDELITIES = [
    ttnn.MathFidelity.LoFi,
    ttnn.MathFidelity.HiFi2,
    ttnn.MathFidelity.HiFi3,
    ttnn.MathFidelity.HiFi4,
]


def masked(values: np.ndarray, bits: int) -> np.ndarray:
    """The truncation written out: keep sign, exponent and the top ``bits`` mantissa bits."""
    keep = np.uint32((0xFFFFFFFF << (23 - bits)) & 0xFFFFFFFF)
    return (np.ascontiguousarray(values).view(np.uint32) & keep).view(np.float32)


def weights(kind: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    w = rng.standard_normal((96, 64)).astype(np.float32) * 0.02
    if kind == "tiny-blocks":
        w[:32, :16] *= np.float32(1e-36)  # blocks whose shared step is below 2^-126: stored as subnormals
    return w


@pytest.fixture(scope="module")
def device():
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    yield mesh
    ttnn.close_mesh_device(mesh)


@pytest.mark.parametrize("kind", ["normal", "tiny-blocks"])
@pytest.mark.parametrize("dtype", WEIGHT_DTYPES, ids=lambda d: d.name)
def test_truncation_of_a_stored_weight_is_the_mask(device, dtype, kind):
    shard = ttnn.from_numpy(weights(kind), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=device).shards()[0]
    used = numerics.explicit_bits_used(shard)
    assert (
        used == {"BFLOAT8_B": 6, "BFLOAT4_B": 2, "BFLOAT16": 7, "FLOAT32": 23}[dtype.name]
        or kind == "tiny-blocks"
    )
    for bits in (2, 4, 6, 7, 10, 22):
        out = numerics.truncate_mantissa(shard, bits)
        assert np.array_equal(out.view(np.uint32), masked(shard, bits).view(np.uint32)), bits
        assert (out is shard) == (used <= bits)


def test_subnormal_blocks_need_more_bits():
    """bfloat8_b's subnormal blocks use low mantissa fields: the count sees them, so the mask still runs."""
    w = np.full((1, 32), np.float32(3 * 2.0**-140))  # a subnormal with the lowest bits of its field set
    w.flags.writeable = False
    assert numerics.explicit_bits_used(w) == 23 - 9  # stored as field × 2^-149: field = 3 << 9
    assert numerics.truncate_mantissa(w, 6) is not w and np.array_equal(numerics.truncate_mantissa(w, 15), w)


def test_only_arrays_that_cannot_change_are_remembered():
    caller = np.ones((4, 4), np.float32)
    assert numerics.explicit_bits_used(caller) is None  # writeable
    view = caller[:2]
    view.flags.writeable = False
    assert numerics.explicit_bits_used(view) is None  # its base can still be written
    assert numerics.explicit_bits_used(np.zeros(3, np.float64)) is None
    sealed = np.full((2, 2), 1.5, np.float32)
    sealed.flags.writeable = False
    assert numerics.explicit_bits_used(sealed) == 1 and numerics.explicit_bits_used(sealed) == 1  # cached
    assert numerics.explicit_bits_used(np.zeros((0,), np.float32)[:].copy()) is None  # writeable copy
    empty = np.zeros((0,), np.float32)
    empty.flags.writeable = False
    assert numerics.explicit_bits_used(empty) == 0
    key = id(sealed)
    assert key in numerics._BITS_USED
    del sealed
    gc.collect()
    assert key not in numerics._BITS_USED  # forgotten with the array


def test_tensor_seals_only_what_quantising_made(device):
    host = np.ones((32, 32), np.float32)
    ttnn.from_numpy(host, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device)
    assert host.flags.writeable  # the caller's array is never sealed
    t = ttnn.from_numpy(host, dtype=ttnn.bfloat8_b, layout=ttnn.TILE_LAYOUT, device=device)
    assert numerics._read_only_throughout(t.shards()[0])


@pytest.mark.parametrize("fidelity", FIDELITIES, ids=lambda f: f.name)
@pytest.mark.parametrize("dtype", WEIGHT_DTYPES, ids=lambda d: d.name)
def test_matmul_bits_equal_with_and_without_the_skip(device, monkeypatch, dtype, fidelity):
    x = np.random.default_rng(3).standard_normal((32, 96)).astype(np.float32)
    tx = ttnn.from_numpy(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device)
    tw = ttnn.from_numpy(weights("tiny-blocks"), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=device)
    config = ttnn.WormholeComputeKernelConfig(math_fidelity=fidelity, fp32_dest_acc_en=False)
    fast = ttnn.to_numpy(ttnn.linear(tx, tw, compute_kernel_config=config, dtype=ttnn.float32))
    monkeypatch.setattr(numerics, "explicit_bits_used", lambda values: None)
    slow = ttnn.to_numpy(ttnn.linear(tx, tw, compute_kernel_config=config, dtype=ttnn.float32))
    assert np.array_equal(fast.view(np.uint32), slow.view(np.uint32))


def test_a_view_of_the_callers_data_is_never_sealed():
    from tttv2.ttnn.tensor import _sealed_if_private

    caller = np.ones((4, 4), np.float32)
    view = _sealed_if_private(caller[:2], caller)  # a quantisation that kept the caller's memory
    assert view.flags.writeable and caller.flags.writeable


def test_a_stale_forget_leaves_a_newer_entry():
    """The entry of a collected array is dropped only if it is still that array's (not a newer one's)."""
    old = np.ones(4, np.float32)
    old.flags.writeable = False
    numerics.explicit_bits_used(old)
    key = id(old)
    newer = (lambda: None, 5)  # stands for an entry another array registered under the same id
    numerics._BITS_USED[key] = newer
    del old
    gc.collect()
    assert numerics._BITS_USED.pop(key) is newer
