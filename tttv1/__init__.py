"""tttv1: a compact TTTv1-style transformer (laid out like tt-metal's ``models/tt_transformers``).

It is the migration toolkit's built-in input and the "before" side of every equivalence test, so its modules
import ``ttnn`` exactly as TTTv1 code does. Importing this package makes a plain ``import ttnn`` resolve to the
emulator (``tttv2.ttnn``) unless ``TTTV2_BACKEND=ttnn`` asks for Tenstorrent's real package; this must happen
before any submodule runs ``import ttnn``, hence here.
"""

from __future__ import annotations

import os as _os

BACKEND = _os.environ.get("TTTV2_BACKEND", "emulator").strip().lower()

if BACKEND != "ttnn":
    from tttv2.ttnn import install_as_ttnn as _install_as_ttnn

    _install_as_ttnn()

__all__ = ["BACKEND"]
