"""One config dict per mode, built by functions (the T3000 demos' style): ``get_model_config`` picks the mode's
builder and stamps the mode into the dict. The same keys hold different values per mode."""

import ttnn


def get_model_config(model_config_str, llm_mode, seq_len, num_devices):
    assert llm_mode in ("prefill", "decode")
    if llm_mode == "prefill":
        model_config = get_prefill_model_config(model_config_str, seq_len, num_devices)
    elif llm_mode == "decode":
        model_config = get_decode_model_config(model_config_str, seq_len, num_devices)
    model_config["LLM_MODE"] = llm_mode
    return model_config


def _shared(model_config_str):
    dtype = ttnn.bfloat16 if model_config_str == "BFLOAT16-DRAM" else ttnn.bfloat8_b
    return {
        "FF1_WEIGHTS_DTYPE": dtype,
        "FF2_WEIGHTS_DTYPE": dtype,
        "WEIGHTS_MEMCFG": ttnn.DRAM_MEMORY_CONFIG,
    }


def get_decode_model_config(model_config_str, seq_len, num_devices):
    model_config = _shared(model_config_str)
    model_config["LLM_MODE"] = "decode"
    model_config["OUTPUT_MEMCFG"] = ttnn.L1_MEMORY_CONFIG
    model_config["FF1_OUTPUT_DTYPE"] = ttnn.bfloat16
    model_config["ACT_SCALE"] = 0.5
    model_config["DECODE_SHIFT"] = 1.0 / num_devices
    return model_config


def get_prefill_model_config(model_config_str, seq_len, num_devices):
    model_config = _shared(model_config_str)
    model_config["LLM_MODE"] = "prefill"
    model_config["OUTPUT_MEMCFG"] = ttnn.DRAM_MEMORY_CONFIG
    model_config["FF1_OUTPUT_DTYPE"] = ttnn.bfloat8_b
    model_config["ACT_SCALE"] = 0.25
    model_config["PREFILL_SLICES"] = max(1, seq_len // 64)
    return model_config
