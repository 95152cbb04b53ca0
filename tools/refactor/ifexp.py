"""A conditional expression whose test is static but whose arms are not (``weight = self.w_dist if distributed
else self.w``: the arms are device tensors, known only once the weights are loaded; or run-time values).

The same holds for a choice between methods (``norm = self._distributed_rmsnorm if distributed else
ttnn.rms_norm``): a bound method cannot be a config field computed from TTTv1's object, so each arm keeps its
``self._m`` (the generated class gets its own copy of ``_m``) and the choice is bound at construction.

The hoister makes a static conditional a config field only when the whole expression is static; such a one it
leaves in the forward, where its test is a static branch at run time. When it is the whole value of an
assignment to names or of a ``return``, it is rewritten here as the ``if`` statement it stands for::

    if distributed:
        weight = self.w_dist
    else:
        weight = self.w

which the binder then turns into a method bound at construction, like any other static choice. A conditional
nested deeper in an expression is left as it is (the Zen check then reports it)."""

from __future__ import annotations

import libcst as cst

from .binding import Scope
from .track import Provenance, StatementTransformer, is_expression
from .walk import hot_paths


def _method_reference(node: cst.BaseExpression, scope: Scope) -> bool:
    """``self._m`` for a method ``_m`` of the class (a bound method used as a value)."""
    return (
        type(node) is cst.Attribute
        and type(node.value) is cst.Name
        and node.value.value == "self"
        and scope.bound_method(node.attr.value)
    )


def _static_choice(value: cst.BaseExpression | None, scope: Scope) -> bool:
    """A static test choosing between values that are not static, or between methods of the class (a bound
    method cannot be a config field: the generated class has its own copy of the method to bind)."""
    if type(value) is not cst.IfExp or not scope.is_static(value.test, device_static=True):
        return False
    if _method_reference(value.body, scope) or _method_reference(value.orelse, scope):
        return True
    return not scope.is_static(value)


def _target_names_only(targets) -> bool:
    def names(node: cst.BaseExpression) -> bool:
        if isinstance(node, cst.Name):
            return True
        if isinstance(node, (cst.Tuple, cst.List)):
            return all(isinstance(e, cst.Element) and names(e.value) for e in node.elements)
        return False

    return all(names(t.target) for t in targets)


def _arm(small: cst.BaseSmallStatement, value: cst.BaseExpression) -> cst.IndentedBlock:
    return cst.IndentedBlock(body=[cst.SimpleStatementLine([small.with_changes(value=value)])])


def static_ifexps_as_ifs(func: cst.FunctionDef, scope: Scope, prov: Provenance | None) -> cst.FunctionDef:
    """``x = A if <static> else B`` / ``return A if <static> else B`` (arms not static) -> an ``if`` statement
    with one arm each, which the binder makes a bound choice (see the module docstring)."""

    def candidate(node: cst.CSTNode) -> bool:
        if type(node) is not cst.SimpleStatementLine or len(node.body) != 1:
            return False
        small = node.body[0]
        if type(small) is cst.Assign:
            return _target_names_only(small.targets) and _static_choice(small.value, scope)
        return type(small) is cst.Return and _static_choice(small.value, scope)

    class _T(StatementTransformer):
        def on_leave(self, original_node, updated_node):
            result = super().on_leave(original_node, updated_node)
            if prov is not None and type(result) is cst.If and candidate(original_node):
                # the conditional expression is the branch the report follows, not its line
                prov.set_origin(result, prov.origin(original_node.body[0].value))
            return result

        def leave_SimpleStatementLine(self, original_node, updated_node):
            if not candidate(original_node):
                return updated_node
            small = updated_node.body[0]
            choice: cst.IfExp = small.value
            new = cst.If(
                test=choice.test,
                body=_arm(small, choice.body),
                orelse=cst.Else(body=_arm(small, choice.orelse)),
                leading_lines=updated_node.leading_lines,
            )
            return new

    transformer = _T(prov)
    transformer.hot = hot_paths(func, candidate, lambda n: not is_expression(n))
    return func.visit(transformer)


__all__ = ["static_ifexps_as_ifs"]
