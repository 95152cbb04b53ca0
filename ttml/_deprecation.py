"""One helper: warn that a TTML name is deprecated and name its replacement."""

from __future__ import annotations

import warnings


def deprecated(old: str, new: str, stacklevel: int = 3, *, verb: str = "use") -> None:
    """Emit ``DeprecationWarning: ttml.X is deprecated; use Y`` at the caller's caller."""
    warnings.warn(f"{old} is deprecated; {verb} {new}", DeprecationWarning, stacklevel=stacklevel)
