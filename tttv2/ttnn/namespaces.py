"""``ttnn.experimental`` and ``ttnn.transformer``: sub-namespaces assembled from the op modules' name lists."""

from __future__ import annotations

import types

from .ops import OP_MODULES

__all__ = ["experimental", "transformer"]


def _namespace(name: str, attr: str) -> types.ModuleType:
    module = types.ModuleType(f"tttv2.ttnn.{name}", f"ttnn.{name} on the emulator")
    names = []
    for ops_module in OP_MODULES:
        for entry in getattr(ops_module, attr, ()):
            # an entry is the op's name, or (its name here, the function's name in the module) where the module
            # already has a top-level op of that name (``ttnn.experimental.typecast`` beside ``ttnn.typecast``)
            op_name, function = entry if isinstance(entry, tuple) else (entry, entry)
            setattr(module, op_name, getattr(ops_module, function))
            names.append(op_name)
    module.__all__ = sorted(names)
    return module


experimental = _namespace("experimental", "__experimental__")
transformer = _namespace("transformer", "__transformer__")
