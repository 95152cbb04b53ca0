"""Standard interfaces: ``ModelSpec`` (architecture, no hardware), ``ModelFactory`` (Hugging Face configs →
specs, specs → runnable models) and the Hugging Face weight format (``HuggingFaceWeights``,
``SafetensorsCheckpoint``). See docs/library.md."""

from tttv2.interfaces._huggingface import SUPPORTED_MODEL_TYPES, UnsupportedConfigError
from tttv2.interfaces._model_factory import ModelFactory
from tttv2.interfaces._model_spec import (
    ActivationType,
    LayerOverride,
    LayerSpec,
    ModelSpec,
    NormType,
    RopeScaling,
)
from tttv2.interfaces._weights import (
    HuggingFaceWeights,
    RandomWeights,
    SafetensorsCheckpoint,
    hf_param_shapes,
    interleave_rotary_rows,
)

__all__ = [
    "SUPPORTED_MODEL_TYPES",
    "ActivationType",
    "HuggingFaceWeights",
    "LayerOverride",
    "LayerSpec",
    "ModelFactory",
    "ModelSpec",
    "NormType",
    "RandomWeights",
    "RopeScaling",
    "SafetensorsCheckpoint",
    "UnsupportedConfigError",
    "hf_param_shapes",
    "interleave_rotary_rows",
]
