"""Fact sites: every sub-expression of the analysed functions that states a topology or mode fact (``TG``,
``self.args.is_galaxy``, ``mode == Mode.DECODE``, ``1 in list(mesh_device.shape)``, ...) or that *is* the mode
(a use of the ``mode`` parameter), with its extent.

Branch decisions (``Analysis.restrict``) cover whole tests only; a rewriter that specialises code for one
(topology, mode) also needs the operands of compound tests and the facts used as plain values
(``sharded=(mode == Mode.DECODE)``). The facts are the ones the three-valued evaluator uses, found by the same
engine code, so the two never disagree.
"""

from __future__ import annotations

import ast
import re

from .astutil import endswith_mode
from .decision import assumption, eval_tree
from .engine import Engine
from .ids import Scope
from .records import FactSite, Span
from .scan import children

#: Facts a (topology, mode) assumption decides.
_DECIDABLE = ("galaxy", "mesh_1d", "single_device", "mode:decode", "mode:prefill")
_LEAF_TYPES = frozenset({ast.Compare, ast.Name, ast.Attribute, ast.Call})
_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef})
# how an attribute ``.DECODE`` / ``.PREFILL`` can be spelled: the dot, then blanks, line continuations or comments
_MODE_MEMBER = re.compile(r"\.(?:\s|\\|#[^\n]*)*(?:DECODE|PREFILL)(?!\w)")


def fact_sites(engine: Engine) -> list[FactSite]:
    """Fact sites of every function the engine visited outside the config module, sorted by location."""
    out: list[FactSite] = []
    line_starts: dict[int, list[int] | None] = {}  # per file, this call only: where each line starts
    for fid, phases in engine.out.scanned.items():
        info = engine.out.funcs.get(fid)
        if info is None or info.file is engine.st.config:
            continue
        phase = "forward" if "forward" in phases else "construction"
        body = [info.node.body] if isinstance(info.node, ast.Lambda) else list(info.node.body)
        form: list[str] = []  # how the function spells its mode: computed at its first site
        names: dict[str, tuple[str, int] | None] = {}  # fact of a name that is not a local (see _name_fact)
        stack = list(reversed(body))
        pop, push = stack.pop, stack.append
        while stack:
            node = pop()
            kind = type(node)
            if kind in _SCOPES:
                continue  # nested functions are visited as functions of their own
            if kind in _LEAF_TYPES and type(getattr(node, "ctx", None)) is not ast.Store:
                site = _site(engine, info, node, phase, form, line_starts, names)
                if site is not None:
                    out.append(site)
                    continue
            if kind is ast.Call and type(node.func) is ast.Attribute:
                push(node.func.value)  # never the method name itself
                stack.extend(reversed([*node.args, *(k.value for k in node.keywords)]))
                continue
            if kind is not ast.Constant:
                stack.extend(reversed(children(node)))
    out.sort(key=lambda s: (s.file, s.span.start_line, s.span.start_col, -s.span.end_line, -s.span.end_col))
    return out


def decide_fact(site: FactSite, *, topology: str, mode: str | None):
    """True / False / None: the value of a fact site (not a ``mode`` value site) on ``topology`` ("1d" for the
    meshes 1x1 ... 1x8, "2d" for galaxy) in ``mode`` ("decode" / "prefill", or None: undecided), by the
    analysis's own evaluator."""
    if site.fact == "mode":
        raise ValueError(f"decide_fact: {site.loc} is the mode itself, not a fact")
    if topology not in ("1d", "2d"):
        raise ValueError(f"decide_fact: topology must be '1d' or '2d', got {topology!r}")
    return eval_tree(("fact", site.fact, site.polarity), assumption(topology, mode))


def _site(
    engine: Engine,
    info,
    node: ast.AST,
    phase: str,
    form: list[str],
    line_starts: dict[int, list[int] | None],
    names: dict[str, tuple[str, int] | None],
) -> FactSite | None:
    found = _name_fact(engine, info, node, names) if type(node) is ast.Name else _fact(engine, info, node)
    if found is None:
        return None
    fact, polarity = found
    if not form:
        form.append(_mode_form(info, line_starts))
    end = node.end_lineno or node.lineno
    file = info.file
    span = Span(
        node.lineno, file.char_col(node.lineno, node.col_offset), end, file.char_col(end, node.end_col_offset)
    )
    return FactSite(
        file=file.name,
        span=span,
        function=info.qualname,
        phase=phase,
        fact=fact,
        polarity=polarity,
        mode_form=form[0],
    )


def _fact(engine: Engine, info, node: ast.AST) -> tuple[str, int] | None:
    """The decidable fact ``node`` is (with its polarity), ``("mode", 0)`` for a name that is the mode, else None."""
    exact = engine.exact_fact(node, info)
    if exact is not None and exact[0] in _DECIDABLE:
        return exact
    if exact is None and type(node) is ast.Name and engine.is_mode(node, info):
        return "mode", 0
    return None


def _name_fact(engine: Engine, info, node: ast.Name, names: dict[str, tuple[str, int] | None]):
    """:func:`_fact` of a name, the same for every use in one function of a name that is not a local (a parameter,
    global, import or builtin: the evaluator's answer depends on what the name is, not on where it is used), so
    it is worked out once a function (``names``); a local's depends on the assignments that reach each use."""
    name = node.id
    if name in names:
        return names[name]
    found = _fact(engine, info, node)
    if engine.lookup(name, info)[0] is not Scope.LOCAL:
        names[name] = found
    return found


def _mode_form(info, line_starts: dict[int, list[int] | None]) -> str:
    """How the function spells its mode: "enum" when it normalises it (``mode = Mode(mode)``) or compares it
    with ``Mode.X`` members, else "str" (the strings "decode" / "prefill")."""
    for sites in info.assigns.values():
        for site in sites:
            value = site.value
            if isinstance(value, ast.Call) and endswith_mode(value.func):
                return "enum"
    if not _may_name_a_mode_member(info, line_starts):
        return "str"
    stack = [info.node]
    while stack:
        node = stack.pop()
        if type(node) is ast.Compare:
            for operand in (node.left, *node.comparators):
                if type(operand) is ast.Attribute and operand.attr in ("DECODE", "PREFILL"):
                    return "enum"
        stack.extend(children(node))
    return "str"


def _may_name_a_mode_member(info, line_starts: dict[int, list[int] | None]) -> bool:
    """False when the function's source lines (decorators included) spell no attribute ``.DECODE`` /
    ``.PREFILL``: then no ``Mode.X`` comparison can be in it and the whole-function walk of :func:`_mode_form` is
    skipped. Python reads identifiers NFKC-normalised, so a file that is not plain ASCII is searched normalised;
    a file with carriage returns (which end lines too) always says True: the answer never differs from the
    walk's."""
    file = info.file
    text = file.text
    node = info.node
    if getattr(node, "lineno", None) is None:
        return True
    key = id(file)
    if key not in line_starts:
        starts = None
        if "\r" not in text:
            starts = [0]
            find = text.find
            at = find("\n")
            while at != -1:
                starts.append(at + 1)
                at = find("\n", at + 1)
        line_starts[key] = starts
    starts = line_starts[key]
    if starts is None:
        return True
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
    last = node.end_lineno or node.lineno
    segment = text[starts[first - 1] : starts[last] if last < len(starts) else len(text)]
    if not file.ascii:
        import unicodedata

        segment = unicodedata.normalize("NFKC", segment)
    return _MODE_MEMBER.search(segment) is not None
