"""TTTv2 building blocks: modules split by topology (1D: 1xN meshes, 2D: Galaxy), flat decode/prefill paths,
explicit config dataclasses resolved once at construction, weights as ``LazyWeight``.

The public API is ``__all__``; everything else (modules starting with ``_``) is private. See docs/modules.md.
"""

from tttv2.modules.attention import (
    Attention1D,
    Attention1DConfig,
    Attention2D,
    Attention2DConfig,
    PagedAttentionConfig,
)
from tttv2.modules.decoder import Decoder1D, Decoder2D, TransformerBlock1D, TransformerBlock2D
from tttv2.modules.embedding import Embedding1D, Embedding1DConfig, Embedding2D, Embedding2DConfig
from tttv2.modules.lazy_weight import LazyWeight
from tttv2.modules.lm_head import LMHead1D, LMHead1DConfig, LMHead2D, LMHead2DConfig
from tttv2.modules.mlp import MLP1D, MLP2D, MLP1DConfig, MLP2DConfig
from tttv2.modules.rmsnorm import RMSNorm1D, RMSNorm1DConfig, RMSNorm2D, RMSNorm2DConfig
from tttv2.modules.rope import (
    RotarySetup1D,
    RotarySetup1DConfig,
    RotarySetup2D,
    RotarySetup2DConfig,
    rope_tables,
    rotation_tile,
)
from tttv2.modules.tt_ccl import TT_CCL, clear_tt_ccl_cache, get_tt_ccl

__all__ = [
    "MLP1D",
    "MLP2D",
    "TT_CCL",
    "Attention1D",
    "Attention1DConfig",
    "Attention2D",
    "Attention2DConfig",
    "Decoder1D",
    "Decoder2D",
    "Embedding1D",
    "Embedding1DConfig",
    "Embedding2D",
    "Embedding2DConfig",
    "LMHead1D",
    "LMHead1DConfig",
    "LMHead2D",
    "LMHead2DConfig",
    "LazyWeight",
    "MLP1DConfig",
    "MLP2DConfig",
    "PagedAttentionConfig",
    "RMSNorm1D",
    "RMSNorm1DConfig",
    "RMSNorm2D",
    "RMSNorm2DConfig",
    "RotarySetup1D",
    "RotarySetup1DConfig",
    "RotarySetup2D",
    "RotarySetup2DConfig",
    "TransformerBlock1D",
    "TransformerBlock2D",
    "clear_tt_ccl_cache",
    "get_tt_ccl",
    "rope_tables",
    "rotation_tile",
]
