"""TTTv2 building blocks: modules split by topology (1D: 1xN meshes, 2D: Galaxy), flat decode/prefill paths,
explicit config dataclasses resolved once at construction, weights as ``LazyWeight``.

The public API is ``__all__``; everything else (modules starting with ``_``) is private. See docs/modules.md.
"""

from tttv2.modules.lazy_weight import LazyWeight
from tttv2.modules.mlp import MLP1D, MLP2D, MLP1DConfig, MLP2DConfig
from tttv2.modules.rmsnorm import RMSNorm1D, RMSNorm1DConfig, RMSNorm2D, RMSNorm2DConfig
from tttv2.modules.tt_ccl import TT_CCL, clear_tt_ccl_cache, get_tt_ccl

__all__ = [
    "MLP1D",
    "MLP2D",
    "TT_CCL",
    "LazyWeight",
    "MLP1DConfig",
    "MLP2DConfig",
    "RMSNorm1D",
    "RMSNorm1DConfig",
    "RMSNorm2D",
    "RMSNorm2DConfig",
    "clear_tt_ccl_cache",
    "get_tt_ccl",
]
