"""A config built per mode by functions (no ModelArgs): each mode's builder defines its own keys."""

import ttnn


def get_model_config(model_config_str, llm_mode):
    if llm_mode == "decode":
        model_config = get_decode_model_config(model_config_str)
    else:
        model_config = get_prefill_model_config(model_config_str)
    return model_config


def get_decode_model_config(model_config_str):
    model_config = {"OUT_MEMCFG": ttnn.L1_MEMORY_CONFIG}
    model_config["SCALE"] = 0.5
    return model_config


def get_prefill_model_config(model_config_str):
    model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG}
    model_config["SCALE"] = 0.25
    return model_config
