"""The T3000 demo's config of the rmm package: one dict per mode, as ``get_model_config(llm_mode, ...)`` builds
them, with the ``LLM_MODE`` entry the module reads its mode from and the program configs of the fixed lengths;
and a memory config whose shard shape the module sets in place (``SliceMemoryConfig``), as tt_lib's could be."""

import ttnn


class SliceMemoryConfig:
    """An L1 memory config whose shard shape is a list the caller may set in place, as the tt_lib configs of the
    Falcon-40B demo were (``kv_cache_memcfg.shard_spec.shape = …`` on every decode call); ``memory_config()``
    gives the ttnn config of its current shape."""

    def __init__(self, sharded, shard_shape=(64, 64)):
        self.memory_layout = (
            ttnn.TensorMemoryLayout.HEIGHT_SHARDED if sharded else ttnn.TensorMemoryLayout.INTERLEAVED
        )
        self.shard_spec = _ShardShape(list(shard_shape)) if sharded else None

    def is_sharded(self):
        return self.memory_layout != ttnn.TensorMemoryLayout.INTERLEAVED

    def memory_config(self):
        if not self.is_sharded():
            return ttnn.L1_MEMORY_CONFIG
        core = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 0))})
        spec = ttnn.ShardSpec(core, tuple(self.shard_spec.shape), ttnn.ShardOrientation.ROW_MAJOR)
        return ttnn.MemoryConfig(self.memory_layout, ttnn.BufferType.L1, spec)


class _ShardShape:
    def __init__(self, shape):
        self.shape = shape


def get_slice_config(sharded):
    return {"KV_SLICE_MEMCFG": SliceMemoryConfig(sharded), "OUT_SCALE": 0.5}


def _config_128(n_tiles):
    return ttnn.MatmulMultiCoreReuseMultiCastProgramConfig(
        compute_with_storage_grid_size=(8, 4),
        in0_block_w=1,
        out_subblock_h=1,
        out_subblock_w=1,
        per_core_M=1,
        per_core_N=n_tiles,
        transpose_mcast=False,
        fused_activation=None,
        fuse_batch=True,
    )


def get_model_config(llm_mode, max_mm_seq_len=1024):
    return {
        "LLM_MODE": llm_mode,
        "MAX_MM_SEQ_LEN": max_mm_seq_len,
        "DECODE_QKV_PROGCFG": None,
        "PREFILL_QKV_PROGCFG_128": _config_128(1),
        "PREFILL_WO_PROGCFG_128": _config_128(1),
        "OUT_MEMCFG": ttnn.L1_MEMORY_CONFIG if llm_mode == "decode" else ttnn.DRAM_MEMORY_CONFIG,
    }


class ExpertArgs:
    """The tt_lib-era model args of ``expert_mlp.py`` (Mixtral T3000 style): a dict of memory configs, weights in
    DRAM and activations in L1, and a LoFi kernel config with fp32 accumulation."""

    def __init__(self):
        self.model_config = {
            "EXPERT_WEIGHTS_MEMCFG": ttnn.DRAM_MEMORY_CONFIG,
            "EXPERT_FF1_MEMCFG": ttnn.L1_MEMORY_CONFIG,
            "EXPERT_FF2_MEMCFG": ttnn.L1_MEMORY_CONFIG,
        }
        self.compute_kernel_config = ttnn.experimental.tensor.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.LoFi, fp32_dest_acc_en=True, packer_l1_acc=True
        )

    def get_model_config(self):
        return self.model_config

    def get_compute_kernel_config(self):
        return self.compute_kernel_config
