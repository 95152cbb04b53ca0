"""Per-module hardware defaults: every block declares them; the performance and accuracy modes differ exactly where
TTTv1's precision presets differ (checked against tttv1's own tables); the declared placements are what the
resolvers produce; a field the user set wins; architectures by mesh, enum or name."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tttv2 import modules as M
from tttv2 import ttnn
from tttv2.modules import LazyWeight, MLP1DConfig
from tttv2.modules._hardware import MathSetting
from tttv2.modules._module import TTModule

BLOCKS = [
    getattr(M, name)
    for name in M.__all__
    if isinstance(getattr(M, name), type) and issubclass(getattr(M, name), TTModule)
]


def test_every_block_declares_defaults():
    names = {cls.__name__ for cls in BLOCKS}
    assert names >= {
        "MLP1D",
        "MLP2D",
        "Attention1D",
        "Attention2D",
        "RMSNorm1D",
        "RMSNorm2D",
        "Embedding1D",
        "Embedding2D",
        "LMHead1D",
        "LMHead2D",
        "RotarySetup1D",
        "RotarySetup2D",
    }
    for cls in BLOCKS:
        fields = {f.name for f in dataclasses.fields(cls.CONFIG_CLASS)}
        for mode in ("performance", "accuracy"):
            hw = cls.get_default_hw_config("wormhole_b0", mode)
            assert (hw.module, hw.mode, hw.arch) == (cls.__name__, mode, "wormhole_b0")
            assert set(hw.config_values()) | set(hw.placement) <= fields, cls.__name__
            assert hw.dtypes or hw.math, cls.__name__
            assert all(isinstance(s, MathSetting) for s in hw.math.values())


def test_modes_differ_as_tttv1_presets_do():
    from tttv1.tt.model_config import (
        _DTYPE_OF_PRECISION,
        MathFidelitySetting,
        ModelOptimizations,
        OpGroup,
        TensorGroup,
    )

    fidelity = {
        MathFidelitySetting.LOFI: (ttnn.MathFidelity.LoFi, False),
        MathFidelitySetting.HIFI2: (ttnn.MathFidelity.HiFi2, True),
        MathFidelitySetting.HIFI4: (ttnn.MathFidelity.HiFi4, True),
    }
    presets = {
        "performance": ModelOptimizations.performance("Llama-3.1-8B"),
        "accuracy": ModelOptimizations.accuracy("Llama-3.1-8B"),
    }
    groups_seen = set()
    for cls in BLOCKS:
        for mode, preset in presets.items():
            hw = cls.get_default_hw_config(ttnn.Arch.WORMHOLE_B0, mode)
            for name, dtype in hw.dtypes.items():
                group = hw.groups[name]
                if group != "fixed":
                    groups_seen.add(group)
                    assert dtype == _DTYPE_OF_PRECISION[preset.tensor_dtype_settings[TensorGroup(group)]], (
                        cls,
                        name,
                    )
            for name, setting in hw.math.items():
                group = hw.groups[name]
                if group != "fixed":
                    groups_seen.add(group)
                    expected = fidelity[preset.op_fidelity_settings[OpGroup(group)]]
                    assert (setting.math_fidelity, setting.fp32_dest_acc_en) == expected, (cls, name)
        fast, precise = (cls.get_default_hw_config("N150", mode) for mode in ("performance", "accuracy"))
        changed = {n for n in fast.config_values() if fast.config_values()[n] != precise.config_values()[n]}
        assert all(fast.groups[n] != "fixed" for n in changed)  # fixed groups are equal in both modes
    assert groups_seen == {
        "ff1_3",
        "ff2",
        "wqkv",
        "wo",
        "kv_cache",
        "li_ff1_3",
        "li_ff2",
        "li_qkv_decode",
        "li_o_decode",
        "sdpa_decode",
        "li_qkv_prefill",
        "li_o_prefill",
        "sdpa_prefill",
    }
    mlp = M.MLP1D.get_default_hw_config("T3K", "performance")
    assert mlp.dtypes == {"w1_w3_dtype": ttnn.bfloat4_b, "w2_dtype": ttnn.bfloat8_b}
    assert M.MLP1D.get_default_hw_config("T3K", "accuracy").dtypes["w1_w3_dtype"] == ttnn.bfloat8_b


def _weights(shape, mesh, seed=0):
    return LazyWeight(np.random.default_rng(seed).standard_normal(shape).astype(np.float32) / 16, device=mesh)


@pytest.mark.parametrize("mesh_shape", [(1, 2), (8, 4)], ids=["1x2", "8x4"])
def test_declared_placements_are_what_the_blocks_resolve(mesh_shape, ttnn_mesh_pool):
    mesh = ttnn_mesh_pool(mesh_shape)
    two_d = min(mesh_shape) > 1
    suffix = "2D" if two_d else "1D"
    cos, sin = M.rope_tables(32, 256, 10000.0)
    blocks = [
        getattr(M, f"MLP{suffix}")(
            _weights((256, 512), mesh), _weights((512, 256), mesh), _weights((256, 512), mesh)
        ),
        getattr(M, f"Attention{suffix}")(
            _weights((256, 384), mesh), _weights((256, 256), mesh), 8, 2, 32, 1, 256
        ),
        getattr(M, f"RMSNorm{suffix}")(_weights((256,), mesh)),
        getattr(M, f"Embedding{suffix}")(_weights((512, 256), mesh)),
        getattr(M, f"LMHead{suffix}")(_weights((256, 512), mesh)),
        getattr(M, f"RotarySetup{suffix}")(LazyWeight(cos, device=mesh), LazyWeight(sin), 4),
    ]
    for block in blocks:
        hw = type(block).get_default_hw_config(mesh, "performance")
        assert hw.placement and hw.placement_mismatches(block.config) == [], type(block).__name__


def test_hw_mode_fills_only_what_the_user_left_unset(ttnn_mesh_pool):
    mesh = ttnn_mesh_pool((1, 1))
    w1, w2 = _weights((256, 512), mesh), _weights((512, 256), mesh)
    mine = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi3)
    config = MLP1DConfig(w1=w1, w2=w2, w3=w1, w1_w3_dtype=ttnn.bfloat8_b, ff2_compute_kernel_config=mine)
    mlp = M.MLP1D.from_config(config, hw_mode="performance")
    assert mlp.config.w1_w3_dtype == ttnn.bfloat8_b and mlp.config.w1.dtype == ttnn.bfloat8_b  # the user's
    assert mlp.config.ff2_compute_kernel_config is mine
    assert mlp.config.ff1_3_compute_kernel_config.math_fidelity == ttnn.MathFidelity.LoFi  # the mode's
    assert mlp.hw_config.mode == "performance" and config.w1_w3_dtype == ttnn.bfloat8_b  # input untouched
    plain = M.MLP1D(w1, w2, w1)  # no mode: the block's own defaults, no hardware config applied
    assert plain.hw_config is None and plain.config.w1_w3_dtype == ttnn.bfloat8_b
    given = M.MLP1D.get_default_hw_config("N300", "accuracy")
    assert (
        M.MLP1D.from_config(
            MLP1DConfig(w1=w1, w2=w2, w3=w1), hw_mode=given
        ).config.ff1_3_compute_kernel_config.math_fidelity
        == ttnn.MathFidelity.HiFi4
    )


def test_architectures_and_rejections():
    assert M.Attention1D.get_default_hw_config("P150").arch == "blackhole"
    blackhole = M.MLP1D.get_default_hw_config(ttnn.Arch.BLACKHOLE).config_values()
    assert isinstance(blackhole["ff2_compute_kernel_config"], ttnn.BlackholeComputeKernelConfig)
    wormhole = M.MLP1D.get_default_hw_config("tg").config_values()
    assert type(wormhole["ff2_compute_kernel_config"]) is ttnn.WormholeComputeKernelConfig
    with pytest.raises(
        ValueError,
        match=r"arch_or_mesh must be a ttnn.MeshDevice, a ttnn.Arch or one of .*t3k.*, got 'grayskull'",
    ):
        M.MLP1D.get_default_hw_config("grayskull")
    with pytest.raises(
        ValueError,
        match=r"MLP1D.get_default_hw_config: mode must be one of performance, accuracy, got 'balanced'",
    ):
        M.MLP1D.get_default_hw_config("T3K", "balanced")

    class Bare(TTModule):
        CONFIG_CLASS = MLP1DConfig

    with pytest.raises(TypeError, match=r"Bare declares no hardware defaults"):
        Bare.get_default_hw_config("T3K")
    hw = M.RMSNorm1D.get_default_hw_config("N150")
    with pytest.raises(TypeError, match=r"config must be a RMSNorm1DConfig, got MLP1DConfig"):
        hw.apply(MLP1DConfig(w1=None, w2=None, w3=None))
    assert (
        "compute_kernel_config" in str(hw)
        and "fp32 accumulation" in str(hw)
        and "L1 width-sharded" in str(hw)
    )
    ttnn.SetDefaultDevice(None)
    loose = LazyWeight(np.zeros((256, 512), np.float32))
    with pytest.raises(ValueError, match=r"MLP1D: hw_mode needs the mesh"):
        M.MLP1D.from_config(MLP1DConfig(w1=loose, w2=loose, w3=loose), hw_mode="accuracy")
