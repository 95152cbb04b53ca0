"""Forward inputs: a ``ttnn.Tensor`` is used as given, a ``LazyWeight`` (a host array) is converted onto the
module's mesh with the memory config the module expects for that mode. Both checks are on the call's argument,
i.e. runtime facts."""

from __future__ import annotations

from tttv2 import ttnn
from tttv2.modules.lazy_weight import LazyWeight


def load_input(
    x,
    *,
    owner: str,
    device,
    memory_config,
    mesh_mapper_config=None,
    dtype=ttnn.bfloat16,
    layout=ttnn.TILE_LAYOUT,
    arg: str = "x",
):
    """``x`` as a device tensor. LazyWeight fields the caller set win over ``dtype`` / ``layout`` (bfloat16, TILE),
    ``memory_config`` and ``mesh_mapper_config`` (None: replicated)."""
    if isinstance(x, LazyWeight):
        resolved = x.with_defaults(
            device=device,
            dtype=dtype,
            layout=layout,
            memory_config=memory_config,
            mesh_mapper_config=mesh_mapper_config,
        )
        return resolved.get_device_weight()
    if not isinstance(x, ttnn.Tensor):
        raise TypeError(f"{owner}: {arg} must be a ttnn.Tensor or a LazyWeight, got {type(x).__name__}")
    return x
