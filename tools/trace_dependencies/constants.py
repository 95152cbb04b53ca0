"""Names the tracer recognises. Kept in one place so the heuristics are easy to review."""

from __future__ import annotations

#: Parameter names that carry the ModelArgs object (the same object may arrive as several of them).
ARGS_NAMES = frozenset({"args", "configuration", "model_args", "margs", "config_args", "modelargs"})
#: Parameter names that carry the mesh device.
MESH_NAMES = frozenset({"mesh_device", "device", "mesh", "mesh_dev", "submesh", "submesh_device"})
#: Parameter names that carry the model_config dict itself.
MC_NAMES = frozenset({"model_config"})
#: Parameter names that carry the weights.
WEIGHT_NAMES = frozenset({"state_dict", "weights", "state_dict_weights"})
#: Parameter names that carry the mode.
MODE_NAMES = frozenset({"mode", "llm_mode"})
MODE_KEY = (
    "LLM_MODE"  # the model-config entry that carries the mode a dict was built for (Llama-2-70B, Falcon-40B)
)
#: Constructor parameters that spell "galaxy" directly.
GALAXY_NAMES = frozenset({"TG", "tg", "is_galaxy", "galaxy", "is_tg"})
#: The device count that means "galaxy" (8x4 / 4x8 meshes).
GALAXY_DEVICES = 32

#: Functions (by their last name) that query the hardware, and the root they stand for.
HW_FUNCS = {
    "is_blackhole": "arch",
    "is_wormhole_b0": "arch",
    "is_wormhole": "arch",
    "is_grayskull": "arch",
    "get_arch_name": "arch",
    "get_cluster_type": "cluster_type",
    "GetNumAvailableDevices": "num_devices",
    "get_num_devices": "num_devices",
}
#: Members of the mesh device, and the hardware root each stands for.
MESH_MEMBERS = {
    "get_num_devices": "num_devices",
    "shape": "mesh_shape",
    "dram_grid_size": "dram_grid",
    "compute_with_storage_grid_size": "compute_grid",
    "arch": "arch",
    "get_devices": "mesh_device",
}
HW_LABELS = {
    "num_devices": "number of devices (mesh_device.get_num_devices())",
    "mesh_shape": "mesh shape (mesh_device.shape)",
    "dram_grid": "DRAM grid (mesh_device.dram_grid_size())",
    "compute_grid": "compute grid (mesh_device.compute_with_storage_grid_size())",
    "arch": "architecture (is_blackhole / is_wormhole_b0 / get_arch_name)",
    "cluster_type": "cluster type (ttnn.cluster.get_cluster_type())",
    "device_present": "a device is present (mesh_device is not None)",
    "mesh_device": "the mesh device object",
}

#: Calls on ``ttnn.*`` that build configuration objects or query, rather than run a device op.
TTNN_NON_OPS = frozenset(
    {
        "create_sharded_memory_config",
        "create_sharded_memory_config_",
        "num_cores_to_corerangeset",
        "num_cores_to_corerangeset_in_subcoregrids",
        "create_global_semaphore",
        "replicate_tensor_to_mesh_mapper",
        "shard_tensor_to_mesh_mapper",
        "concat_mesh_to_tensor_composer",
        "get_arch_name",
        "get_cluster_type",
        "open_mesh_device",
        "close_mesh_device",
        "SetDefaultDevice",
        "GetDefaultDevice",
        "is_blackhole",
        "is_wormhole_b0",
        "get_device_tensors",
        "combine_device_tensors",
        "synchronize_device",
        "begin_trace_capture",
        "end_trace_capture",
        "execute_trace",
        "release_trace",
        "record_event",
        "wait_for_event",
        "to_torch",
    }
)
#: Tensor methods that are device ops (called on a tensor value, not on ttnn).
TENSOR_METHOD_OPS = frozenset({"deallocate", "cpu"})
#: Strings and enum members that name the two modes.
MODE_VALUES = {"decode": "decode", "prefill": "prefill", "DECODE": "decode", "PREFILL": "prefill"}
#: Attribute names on ModelArgs that are clearly model-name facts.
MODEL_NAME_HINTS = ("model_name", "base_model_name", "CKPT_DIR", "checkpoint_dir", "hf_model", "HF_MODEL")
#: Per-call entry methods tried in order when none is given (TTTv1 modules define forward; older T3000-style
#: ones define __call__).
ENTRY_METHODS = ("forward", "__call__")
#: Builtins that run code chosen at run time: every call is an explicit unknown.
DYNAMIC_CODE = frozenset({"exec", "eval", "compile", "__import__"})
ROLE_DEPTH = 24  # how deep name resolution follows aliases and attribute chains before it reports a cut
#: Parameters of config functions that carry the device count (a hardware root).
DEVICE_COUNT_NAMES = frozenset({"num_devices", "n_devices", "device_count"})
#: Parameters of config functions that carry per-call shapes (runtime roots).
SHAPE_NAMES = frozenset({"input_shape", "seq_len", "batch", "batch_size", "shape"})
