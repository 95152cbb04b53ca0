"""Backward rules of the emulator's ops, one module per op family (imported for their registrations).

Ops without a differentiable output are declared here: creation from a tensor's shape, comparisons,
indices, and the KV-cache updates (they write a cache in place; gradients do not flow through a cache).
Every other op either has a rule in these modules or makes the engine raise a clear error when a tensor
that requires grad reaches it (the decode / chunked / paged SDPA forms, which read KV caches).
"""

from ..engine import register_non_differentiable
from . import attention, ccl, eltwise, matmul, norms, p2p, reduction, shape

register_non_differentiable(
    # creation ops: they take no tensor, or only read a tensor's shape
    "ttnn.arange",
    "ttnn.empty",
    "ttnn.full",
    "ttnn.ones",
    "ttnn.rand",
    "ttnn.zeros",
    # indices
    "ttnn.argmax",
    # KV-cache updates
    "ttnn.fill_cache",
    "ttnn.fill_cache_for_user_",
    "ttnn.update_cache",
    "ttnn.update_cache_for_token_",
    "ttnn.experimental.paged_fill_cache",
    "ttnn.experimental.paged_update_cache",
    "ttnn.experimental.paged_fused_update_cache",
)

__all__ = ["attention", "ccl", "eltwise", "matmul", "norms", "p2p", "reduction", "shape"]
