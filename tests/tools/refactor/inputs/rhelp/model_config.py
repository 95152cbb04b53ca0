"""ModelArgs of the ``rhelp`` inputs, with what tt-metal's model_config.py also offers its modules: a core-range
helper, op / tensor group enums and a per-decoder optimisation object."""

from enum import Enum

import ttnn


class OpGroup(Enum):
    LI_FF1 = "li_ff1"
    LI_FF2 = "li_ff2"


class TensorGroup(Enum):
    FF1 = "ff1"
    FF2 = "ff2"


def num_to_corerange(cores):
    """The first ``cores`` cores of an 8-wide grid, as one rectangle."""
    assert cores < 8 or cores % 8 == 0
    width = min(cores, 8)
    height = cores // width
    return ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(width - 1, height - 1))


def cores_from(count, start_core=ttnn.CoreCoord(0, 0), grid_x=8):  # noqa: B008 (tt-metal writes it so)
    """``count`` cores as one rectangle from ``start_core`` (tt-metal's later ``num_to_corerange(x, start_core=...)``:
    a default built when the module is imported, and one the callers never change)."""
    width = min(count, grid_x - start_core.x)
    height = count // width
    assert width * height == count
    return ttnn.CoreRange(start_core, ttnn.CoreCoord(start_core.x + width - 1, start_core.y + height - 1))


class DecoderOptimizations:
    """Per-decoder precision choices, looked up by tensor group."""

    def __init__(self, dtypes):
        self.dtypes = dtypes

    def get_tensor_dtype(self, decoder_id, tensor):
        return self.dtypes[tensor]


class ModelArgs:
    def __init__(self, mesh_device, dim=64):
        self.num_devices = mesh_device.get_num_devices() if mesh_device else 0
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.max_batch_size = 16
        self.decoders_optimizations = DecoderOptimizations(
            {TensorGroup.FF1: ttnn.bfloat16, TensorGroup.FF2: ttnn.bfloat8_b}
        )
        self.model_config = {"OUT_MEMCFG": ttnn.DRAM_MEMORY_CONFIG}

    def get_model_config(self):
        return self.model_config
