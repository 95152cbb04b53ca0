"""A forward's ``<tensor>.device()`` is the module's own device.

TTTv1 modules put their weights on the mesh device given to the constructor (``self.mesh_device =
mesh_device``), and their forwards take inputs on that same mesh: every op result is on the mesh of its inputs,
so ``x.device()`` of an input or of a local the forward computes is that device. Assuming so, a hardware query
made of it (Falcon-7B's ``get_falcon_default_core_grid(x.device())``, whose ``is_wormhole_b0() and
grid_size.y >= 8`` is static) is a construction value: the codemod reads such a call as ``self.<attr>``, the
attribute holding the constructor's device argument, and hoists the query like any other of the mesh.

The same holds in a helper's copy made a method of the class (``up_matmul(a, …)`` asking ``a.device()``). A
module whose constructor stores no device argument on ``self`` (no parameter named as ``MESH_NAMES``) keeps
``x.device()``: its queries stay in the forward, and the static-branch gap says why (:func:`note`)."""

from __future__ import annotations

import libcst as cst

from .binding import collect_assignments
from .track import Provenance, TrackingTransformer
from .walk import hot_paths


def _device_query(node: cst.CSTNode, names: set[str]) -> bool:
    """``name.device()`` with no arguments, ``name`` a parameter or local of the function (not ``self``)."""
    if type(node) is not cst.Call or node.args:
        return False
    func = node.func
    return (
        type(func) is cst.Attribute
        and func.attr.value == "device"
        and type(func.value) is cst.Name
        and func.value.value in names
    )


def input_device_to_mesh(func: cst.FunctionDef, mesh_attr: str, prov: Provenance | None) -> cst.FunctionDef:
    """``func`` (a forward, a method it reaches, or a helper's copy made a method) with each ``<local>.device()`` read as ``self.<mesh_attr>``."""
    names = {p.name.value for p in func.params.params[1:]} | set(collect_assignments(func))
    names.discard("self")
    transformer = _Rewrite(prov, mesh_attr, names)
    transformer.hot = hot_paths(func, lambda node: _device_query(node, names))
    if not transformer.hot:
        return func
    return func.visit(transformer)


class _Rewrite(TrackingTransformer):
    def __init__(self, prov: Provenance | None, mesh_attr: str, names: set[str]) -> None:
        super().__init__(prov)
        self.mesh_attr = mesh_attr
        self.names = names

    def leave_Call(self, original_node, updated_node):
        if _device_query(updated_node, self.names):
            return cst.Attribute(cst.Name("self"), cst.Name(self.mesh_attr))
        return updated_node


#: Said of a static branch left in a generated module that still asks a tensor for its device.
NO_DEVICE_ARGUMENT = (
    "; its forward still asks a value for its device (`.device()`), which is read as the module's device only for "
    "a parameter or local of a module whose TTTv1 constructor stores a device argument (`mesh_device`, `device`, …) "
    "on `self`"
)


def note(code: str) -> str:
    """What a static-branch gap adds for a generated module that still calls ``.device()`` on a value: empty
    otherwise."""
    return NO_DEVICE_ARGUMENT if ".device()" in code else ""


__all__ = ["NO_DEVICE_ARGUMENT", "input_device_to_mesh", "note"]
