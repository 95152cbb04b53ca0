"""``ttnn.nn``: modules, layers, transformer blocks and models for training on ttnn tensors.

Parameters are ttnn tensors that require grad; layers call the fused training ops
(``ttnn.layer_norm_forward``, ``ttnn.rms_norm_forward``, ``ttnn.swiglu``,
``ttnn.transformer.scaled_dot_product_attention_forward`` …), so ``loss.backward()`` fills every
``parameter.grad`` and a ``ttnn.optim`` optimizer updates them in place. See docs/training.md.
"""

from . import functional, parallel, utils
from ._random import get_rng_state, manual_seed, set_rng_state
from .attention import GroupedQueryAttention, MultiHeadAttention, RotaryEmbedding
from .blocks import GPTMLP, GPTBlock, LlamaBlock, LlamaMLP, llama_hidden_dim
from .checkpoint import checkpoint
from .layers import Dropout, Embedding, LayerNorm, Linear, RMSNorm
from .models import GPT, GPTConfig, Llama, LlamaConfig
from .module import IncompatibleKeys, Module, ModuleList, Parameter, Sequential
from .utils import clip_grad_norm_

__all__ = [
    "GPT",
    "GPTMLP",
    "Dropout",
    "Embedding",
    "GPTBlock",
    "GPTConfig",
    "GroupedQueryAttention",
    "IncompatibleKeys",
    "LayerNorm",
    "Linear",
    "Llama",
    "LlamaBlock",
    "LlamaConfig",
    "LlamaMLP",
    "Module",
    "ModuleList",
    "MultiHeadAttention",
    "Parameter",
    "RMSNorm",
    "RotaryEmbedding",
    "Sequential",
    "checkpoint",
    "clip_grad_norm_",
    "functional",
    "get_rng_state",
    "llama_hidden_dim",
    "manual_seed",
    "parallel",
    "set_rng_state",
    "utils",
]
