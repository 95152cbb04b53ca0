"""The T3000 demo's config of the rmm package: one dict per mode, as ``get_model_config(llm_mode, ...)`` builds
them, with the ``LLM_MODE`` entry the module reads its mode from and the program configs of the fixed lengths."""

import ttnn


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
