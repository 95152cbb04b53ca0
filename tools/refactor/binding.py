"""Binding times: which names and expressions of a specialised method are known at construction (static) and
which only at call time (dynamic).

The classification of every name comes from the analysis graph (``kinds`` of ``local:…``, ``param:…`` and
``self:…`` nodes): a name whose kinds are within {static, weights, mode} is static once the mode is fixed. The
codemod adds only what the analysis cannot know: which ``self`` attributes hold device tensors (they stay on
the module and are loaded by ``load_device_weights``), which hold the ``ModelArgs`` / ``model_config``
objects (they disappear: every read through them becomes a config field), and which calls have side effects
(ops, collectives, semaphore cycling) and so must stay where they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies.constants import ARGS_NAMES, MC_NAMES, MESH_MEMBERS, TTNN_NON_OPS

from .cstutil import PURE_BUILTINS, dotted, is_pure, summary
from .reiterable import yields_iterator
from .track import is_expression
from .walk import visit_read_only, walk

STATIC_KINDS = frozenset({"static", "weights", "mode"})


def local_kinds_by_name(kinds: dict[str, list[str] | None]) -> dict[str, list[str] | None]:
    """``kinds`` with one more entry, ``local:F:Q:NAME@*``, per local that the analysis versions by assignment.

    trace-deps gives a local assigned in several places one node per assignment (``local:F:Q:step@12:12``);
    the codemod asks about the name. ``@*`` holds the union of the versions' kinds, which
    :meth:`Scope.static_name` uses when the specialised function still assigns the name more than once: a local
    set in both arms of a run-time ``if`` is run-time wherever it is read, even when every value it is given is
    static. (Before, such a local was "not in the graph", taken as static, and hoisted into a field made of its
    own name: ``step=step``, a ``NameError`` at construction.)"""
    merged: dict[str, set[str]] = {}
    for node, node_kinds in kinds.items():
        if node.startswith("local:") and "@" in node:
            merged.setdefault(node.rsplit("@", 1)[0] + "@*", set()).update(node_kinds or ())
    out = dict(kinds)
    out.update({name: sorted(k) for name, k in merged.items()})
    return out


@dataclass
class ClassFacts:
    """What the codemod knows about the ``self`` attributes of the TTTv1 class."""

    holders: set[str] = field(default_factory=set)  # self.args, self.model_config: dissolved into fields
    resources: set[str] = field(
        default_factory=set
    )  # mesh device, CCL, prefetcher, sub-modules: kept as objects
    device: set[str] = field(default_factory=set)  # device tensors made at construction (weights, caches)
    assigned_in_forward: set[str] = field(default_factory=set)  # state a forward changes (not transformable)
    # config keys not defined on every configuration (each definition sits under a test): read only when present
    guarded_keys: set[str] = field(default_factory=set)
    properties: set[str] = field(default_factory=set)  # @property members: read as values, not bound methods
    # a part of ModelArgs kept by __init__ (``self.decoders_optimizations = self.args.decoders_optimizations``)
    # whose methods the forward calls: queries of the config, like ``self.args.get_*()``
    config_objects: set[str] = field(default_factory=set)
    # set by a forward for its own later use: locals of the generated method (cached.py)
    cached: set[str] = field(default_factory=set)
    # device weights a forward converts in place by an idempotent conversion: converted once, at loading (relaid.py)
    relaid: dict[str, cst.Call] = field(default_factory=dict)
    # device tensors of __init__ that a forward replaces with a value of the call (``self.w = ttnn.to_memory_config(
    # self.w, x.memory_config())``): kept as the generated module's own per-instance state, written as TTTv1 does
    kept_state: set[str] = field(default_factory=set)
    # plain attributes a forward changes that __init__ starts (``self.calls = 0``): kept as the generated module's
    # own per-instance state, started in _bind() by the literal or from a config field (instate.Start)
    instance_state: dict = field(default_factory=dict)
    # the attribute holding the constructor's device argument (``self.mesh_device = mesh_device``): a forward's
    # ``x.device()`` is read as it (inputdevice.py); None when the constructor takes no device
    mesh: str | None = None


#: Methods of a CCL object (tt-metal's ``TT_CCL``, given to the constructor) that only read the hardware: the
#: number of Ethernet links of a mesh axis (a table keyed by the device's name). Its other ``get_*`` methods
#: (``get_and_cycle_ag_semaphore_handles``) change the object and are not here.
CCL_QUERIES = frozenset({"get_num_links"})


@dataclass
class Scope:
    """The binding-time view of one specialised function."""

    kinds: dict[str, list[str] | None]  # analysis node id -> kinds (None: not in the graph)
    file: str  # the file of the function's code (the module, or a helper's file for a specialised copy)
    qualname: str
    class_name: str
    params: set[str]  # parameters other than self: per-call inputs
    facts: ClassFacts
    self_file: str  # the module's file (where the class's ``self`` attributes are)
    helper_has_ops: dict[str, bool]  # module-level function name -> it reaches device ops
    methods: set[str] | frozenset[str] = frozenset()  # method names of the (generated) class
    local_static: dict[str, bool] = field(default_factory=dict)
    assignments: dict[str, list[cst.BaseExpression | None]] = field(default_factory=dict)
    mutated: set[str] = field(default_factory=set)  # locals changed in place (x.append(…), x[k] = …)
    # of those, the ones changed only by attribute stores: name -> the first attribute of each stored path
    # (``kv_cache_memcfg.shard_spec.shape = …`` -> {"shard_spec"}); see ``QUERY_DEPENDS``
    stored_attrs: dict[str, frozenset[str]] = field(default_factory=dict)
    method_aliases: dict[str, str] = field(
        default_factory=dict
    )  # self.impl -> the method __init__ stores there
    straight: dict[str, cst.BaseExpression] = field(default_factory=dict)  # see straight_values

    # -- names -----------------------------------------------------------------------------------
    def is_local(self, name: str) -> bool:
        return name in self.assignments

    def static_name(self, name: str) -> bool:
        if name in self.params:
            return False
        if name not in self.assignments:
            return True  # a global, an import or a builtin
        cached = self.local_static.get(name)
        if cached is not None:
            return cached
        if name in self.mutated:
            self.local_static[name] = False
            return False
        return self._static_value(name)

    def _static_value(self, name: str) -> bool:
        """Whether every value the local is given is known at construction (its changes in place aside)."""
        self.local_static[name] = False  # cycles are dynamic until proven otherwise
        node = f"local:{self.file}:{self.qualname}:{name}"
        kinds = self.kinds.get(node)
        if kinds is None and len(self.assignments[name]) > 1:
            kinds = self.kinds.get(node + "@*")  # versions of a local assigned in several places
        # trace-deps' "unknown" (a value it could not follow, e.g. a part of ModelArgs it does not define) says
        # nothing either way: the values themselves decide below
        result = kinds is None or set(kinds) <= STATIC_KINDS | {"unknown"}
        # and every value it is given can be computed at construction (known, and free of side effects)
        result = result and all(v is not None and self.is_static(v) for v in self.assignments[name])
        # an iterator is used up by the first call: a local holding one is made per call (reiterable.py)
        result = result and not any(yields_iterator(v) for v in self.assignments[name])
        self.local_static[name] = result
        return result

    def self_attr_static(self, attr: str, *, device_static: bool = False) -> bool:
        if attr in self.facts.holders or attr in self.facts.resources or attr in self.facts.config_objects:
            return True
        if attr in self.facts.relaid:  # read as the forwards see it: once loaded and converted (relaid.py)
            return False
        if attr in self.facts.assigned_in_forward:
            return False  # a forward changes it: what it holds is known only at run time
        if attr in self.facts.device:
            return device_static
        if self.bound_method(attr):
            return False  # a bound method used as a value: the generated class's own copy, never a field
        kinds = self.kinds.get(f"self:{self.self_file}:{self.class_name}.{attr}")
        # "unknown": trace-deps could not follow the value __init__ gives it (a ModelArgs member it does not
        # define); set at construction and never by a forward, it is fixed once the module is built
        return kinds is None or set(kinds) <= STATIC_KINDS | {"unknown"}

    def _queried_only(self, node: cst.CSTNode, reads) -> set[str]:
        """Locals changed only by attribute stores that ``node`` reads only through a query those stores leave
        unchanged (``kv_cache_memcfg.is_sharded()`` where the arm sets ``kv_cache_memcfg.shard_spec.shape``)."""
        names = {n for n in reads if n in self.stored_attrs}
        if not names:
            return set()
        queried: dict[str, int] = {}
        seen: dict[str, int] = {}
        stored = self.stored_attrs

        class _V(cst.CSTVisitor):
            def visit_Attribute(self, attribute: cst.Attribute) -> None:
                value = attribute.value
                if isinstance(value, cst.Name) and value.value in names:
                    depends = QUERY_DEPENDS.get(attribute.attr.value)
                    if depends is not None and depends not in stored[value.value]:
                        queried[value.value] = queried.get(value.value, 0) + 1

            def visit_Name(self, name: cst.Name) -> None:
                if name.value in names:
                    seen[name.value] = seen.get(name.value, 0) + 1

        visit_read_only(node, _V())
        return {n for n in names if queried.get(n, 0) == seen.get(n, 0) > 0}

    def queried_values(self, node: cst.CSTNode) -> dict[str, cst.BaseExpression]:
        """The locals ``node`` reads only through queries their changes in place leave unchanged, each with the
        one value it is given, when that value is known at construction: the query can be made there, on that
        value (the hoister puts it in for the local)."""
        out = {}
        for name in self._queried_only(node, summary(node).reads):
            values = self.assignments.get(name) or []
            if len(values) == 1 and values[0] is not None and self._static_value_of_changed(name):
                out[name] = values[0]
        return out

    def _static_value_of_changed(self, name: str) -> bool:
        key = f"{name}#queried"
        if key not in self.local_static:
            self.local_static[key] = False  # cycles are dynamic until proven otherwise
            self.local_static[key] = self._static_value(name)
            self.local_static.pop(name, None)  # _static_value caches under the name itself: not for mutated
        return self.local_static[key]

    def bound_method(self, attr: str) -> bool:
        """``self.<attr>`` is a method of the class (not a property): as a value, a bound method."""
        return attr in self.methods and attr not in self.facts.properties

    def is_static_given(self, node: cst.CSTNode, names: tuple[str, ...]) -> bool:
        """``is_static`` when ``names`` (run-time values) are treated as given: the expression is then a
        function of them that can be built at construction."""
        saved_static, saved_params = dict(self.local_static), self.params
        self.params = self.params - set(names)
        self.local_static.update(dict.fromkeys(names, True))
        try:
            return self.is_static(node)
        finally:
            self.local_static, self.params = saved_static, saved_params

    # -- expressions -----------------------------------------------------------------------------
    def is_static(self, node: cst.CSTNode, *, device_static: bool = False) -> bool:
        """Known at construction and free of side effects."""
        info = summary(node)
        lambda_params = _lambda_params(node) if _has_scope(node) else set()
        queried = self.queried_values(node) if self.stored_attrs else {}
        for name in info.reads:
            if name == "self" or name in lambda_params or name in queried:
                continue
            if not self.static_name(name):
                return False
        for attr in info.self_attrs:
            if not self.self_attr_static(attr, device_static=device_static):
                return False
        return is_pure(node, self.pure_call)

    def pure_call(self, call: cst.Call) -> bool:
        """Calls that compute a value and change nothing: config methods, hardware queries, ttnn config
        constructors, helpers that reach no device op, methods of config-derived values."""
        func = call.func
        if isinstance(func, cst.Name):
            name = func.value
            if name in PURE_BUILTINS:
                return True
            if name in self.helper_has_ops:
                return not self.helper_has_ops[name]
            return False  # an unknown function may do anything
        if isinstance(func, cst.Subscript):
            # a value stored in model_config (a lambda of seq_len, mesh rows, ...) called: a config computation
            base = dotted(func.value) or ""
            parts = base.split(".")
            return (
                len(parts) == 2 and parts[0] == "self" and parts[1] in self.facts.holders
            ) or base in MC_NAMES
        if not isinstance(func, cst.Attribute):
            return False
        method = func.attr.value
        receiver = func.value
        if not isinstance(receiver, (cst.Name, cst.Attribute)) and self._config_value(receiver):
            return True  # a query on a config value: model_config["K"].is_sharded(), args.get_x().shape
        path = dotted(receiver) or ""
        root = path.split(".", 1)[0]
        if path == "ttnn" or path.startswith("ttnn."):
            return method in TTNN_NON_OPS or not method.islower()
        if root == "self":
            parts = path.split(".")
            if len(parts) == 1:
                # self.method(...) runs the module's own code; a callable stored in an attribute is a value
                return method not in self.methods and method not in self.facts.device
            attr = parts[1]
            if attr in self.facts.holders:
                return True  # self.args.get_...(), self.model_config[...]
            if attr in self.facts.config_objects and len(parts) == 2:
                return True  # self.decoders_optimizations.get_tensor_dtype(...): a part of ModelArgs
            if attr in self.facts.resources:
                # hardware queries only: the mesh's members, and a CCL object's link count
                return len(parts) == 2 and (method in MESH_MEMBERS or method in CCL_QUERIES)
            return False
        if root in ARGS_NAMES or root in MC_NAMES:
            return True
        if root and self.is_local(root):
            return self.static_name(root)  # a method of a config-derived value (``precision.get_...``)
        return False

    def _config_value(self, node: cst.CSTNode) -> bool:
        """A value read from the config: a subscript / attribute / call chain rooted at ModelArgs or
        model_config (``self.model_config["K"]``, ``self.args.get_x(...)``)."""
        while isinstance(node, (cst.Attribute, cst.Subscript, cst.Call)):
            inner = node.func if isinstance(node, cst.Call) else node.value
            path = dotted(inner) or ""
            parts = path.split(".")
            if parts[0] == "self" and len(parts) >= 2 and parts[1] in self.facts.holders:
                return True
            if parts[0] in ARGS_NAMES or parts[0] in MC_NAMES:
                return True
            node = inner
        return False


def self_attributes(node: cst.CSTNode) -> tuple[str, ...]:
    """Names X of every ``self.X`` in ``node``."""
    return summary(node).self_attrs


def _has_scope(node: cst.CSTNode) -> bool:
    """Whether ``node`` contains a lambda or comprehension (whose parameters / targets are its own names)."""
    return bool(summary(node).writes) or isinstance(
        node, (cst.Lambda, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)
    )


def _lambda_params(node: cst.CSTNode) -> set[str]:
    names: set[str] = set()

    class _V(cst.CSTVisitor):
        def visit_Param(self, param: cst.Param) -> None:
            names.add(param.name.value)

        def visit_CompFor(self, comp: cst.CompFor) -> None:
            names.update(_all_target_names(comp.target))

    visit_read_only(node, _V())
    return names


def _all_target_names(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _all_target_names(e.value)]
    return []


def straight_values(
    func: cst.FunctionDef, everywhere: dict[str, list[cst.BaseExpression | None]] | None = None
) -> dict[str, cst.BaseExpression]:
    """Local name -> the value that reaches every read of it, for a local assigned several times in straight
    code: each assignment a top-level statement ``name = value`` of the body, and no top-level statement up to
    the last of them reads it. A helper's copy whose reassigned parameter was decided reads so
    (``num_links = None`` then ``num_links = self.tt_ccl.get_num_links(1)``): the last value is the one it
    passes on."""
    body = func.body.body if isinstance(func.body, cst.IndentedBlock) else ()
    last: dict[str, tuple[int, cst.BaseExpression]] = {}
    count: dict[str, int] = {}
    for index, statement in enumerate(body):
        small = (
            statement.body[0]
            if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
            else None
        )
        if (
            type(small) is cst.Assign
            and len(small.targets) == 1
            and type(small.targets[0].target) is cst.Name
        ):
            name = small.targets[0].target.value
            last[name] = (index, small.value)
            count[name] = count.get(name, 0) + 1
    if not any(n >= 2 for n in count.values()):
        return {}
    everywhere = collect_assignments(func) if everywhere is None else everywhere
    out: dict[str, cst.BaseExpression] = {}
    for name, (index, value) in last.items():
        if count[name] < 2 or len(everywhere.get(name, ())) != count[name]:
            continue  # assigned once (the plain case), or also under a test, in a loop, by unpacking
        if any(name in summary(statement).reads for statement in body[: index + 1]):
            continue
        out[name] = value
    return out


def collect_assignments(func: cst.FunctionDef) -> dict[str, list[cst.BaseExpression | None]]:
    """Local name -> the values assigned to it (None for bindings without a plain value: loop targets,
    ``with … as``, augmented assignments, unpacking)."""
    out: dict[str, list[cst.BaseExpression | None]] = {}

    def enter(node: cst.CSTNode) -> bool:
        # statements only (a walrus inside an expression is not a binding this codemod follows), not nested defs
        return not is_expression(node) and (type(node) is not cst.FunctionDef or node is func)

    for node in walk(func, enter):
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    out.setdefault(target.target.value, []).append(node.value)
                else:
                    for name in _all_target_names(target.target):
                        out.setdefault(name, []).append(_element(target.target, name, node.value))
        elif kind is cst.AnnAssign:
            if isinstance(node.target, cst.Name):
                out.setdefault(node.target.value, []).append(node.value)
        elif kind is cst.AugAssign:
            if isinstance(node.target, cst.Name):
                out.setdefault(node.target.value, []).append(None)
        elif kind is cst.For:
            for name in _all_target_names(node.target):
                out.setdefault(name, []).append(None)
        elif kind is cst.WithItem:
            if node.asname is not None:
                for name in _all_target_names(node.asname.name):
                    out.setdefault(name, []).append(None)
        elif kind is cst.ExceptHandler and node.name is not None:
            for name in _all_target_names(node.name.name):
                out.setdefault(name, []).append(None)
    # nested function definitions bind their name
    for statement in func.body.body if isinstance(func.body, cst.IndentedBlock) else []:
        if isinstance(statement, cst.FunctionDef):
            out.setdefault(statement.name.value, []).append(None)
    return out


def _element(target: cst.BaseExpression, name: str, value: cst.BaseExpression):
    """For ``a, b = x, y`` the value of one name; for ``a, b = seq`` (no starred target, a sequence value)
    ``seq[i]``; None when the unpacking has no such form (``*a, b = …``, a dict)."""
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    if isinstance(value, (cst.Tuple, cst.List)):
        if len(target.elements) == len(value.elements):
            for t, v in zip(target.elements, value.elements):
                if isinstance(t.value, cst.Name) and t.value.value == name:
                    return v.value
        return None
    if any(
        isinstance(e.value, cst.StarredElement) or not isinstance(e.value, cst.Name) for e in target.elements
    ):
        return None
    if isinstance(value, (cst.Dict, cst.DictComp, cst.Set, cst.SetComp, cst.GeneratorExp)):
        return None
    for index, element in enumerate(target.elements):
        if element.value.value == name:
            if index == 0:  # the first element, spelled as ruff likes it
                return cst.Call(
                    func=cst.Name("next"),
                    args=[cst.Arg(cst.Call(func=cst.Name("iter"), args=[cst.Arg(value)]))],
                )
            return cst.Subscript(
                value=value
                if _indexable(value)
                else value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()]),
                slice=[cst.SubscriptElement(cst.Index(cst.Integer(str(index))))],
            )
    return None


def _indexable(node: cst.BaseExpression) -> bool:
    return isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.List, cst.Tuple)) or bool(
        node.lpar
    )


def helper_pure_call(helper_has_ops: dict[str, bool]):
    """Purity of calls in copied helper functions: builtins, helpers that reach no op, ttnn constructors."""

    def pure(call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Name):
            return func.value in PURE_BUILTINS or helper_has_ops.get(func.value) is False
        if isinstance(func, cst.Attribute):
            path = dotted(func.value) or ""
            if path == "ttnn" or path.startswith("ttnn."):
                return func.attr.value in TTNN_NON_OPS or not func.attr.value.islower()
        return False

    return pure


MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add", "discard",
     "sort", "reverse", "popitem", "__setitem__"}
)  # fmt: skip


#: Queries of a ttnn memory config and the attribute each one's answer depends on (ttnn: ``is_sharded()`` is a test
#: of ``memory_layout``). A store under another attribute leaves the answer unchanged: Falcon-40B's attention sets
#: ``kv_cache_memcfg.shard_spec.shape`` on every decode call, under ``if kv_cache_memcfg.is_sharded():``.
QUERY_DEPENDS = {
    "is_sharded": "memory_layout",
    "memory_layout": "memory_layout",
    "buffer_type": "buffer_type",
}


def attribute_stores(func: cst.CSTNode, mutated: set[str]) -> dict[str, frozenset[str]]:
    """The locals of ``mutated`` changed only by attribute stores (``x.a.b = …``, not ``x.append(…)``,
    ``x[k] = …``, ``x += …`` or ``x.a += …``): name -> the first attribute of each stored path."""
    if not mutated:
        return {}  # nothing to look for: the walk below only narrows the names of ``mutated``
    out: dict[str, set[str]] = {n: set() for n in mutated}
    for call in summary(func).calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in MUTATORS:
            out.pop(_root(call.func.value) or "", None)
    for node in walk(func, lambda n: not is_expression(n)):
        kind = type(node)
        if kind is cst.AugAssign:
            out.pop(_root(node.target) or "", None)
        elif kind is cst.AssignTarget and isinstance(node.target, (cst.Attribute, cst.Subscript)):
            path, link = node.target, node.target
            while isinstance(path, (cst.Attribute, cst.Subscript)):
                link, path = path, path.value
            # the link on the local itself: x.a… = … stores under attribute a; x[k]… = … changes an item
            first = link.attr.value if isinstance(link, cst.Attribute) else None
            name = path.value if isinstance(path, cst.Name) else None
            if name not in out:
                continue
            if first is None:
                out.pop(name)
            else:
                out[name].add(first)
    return {n: frozenset(a) for n, a in out.items()}


def _root(node: cst.CSTNode) -> str | None:
    while isinstance(node, (cst.Attribute, cst.Subscript)):
        node = node.value
    return node.value if isinstance(node, cst.Name) else None


#: ttnn ops that write into a tensor they are given (ttnn's in-place ops and preallocated outputs): op name ->
#: the position of that argument. Falcon-7B's optimized prefill writes each slice's result into a buffer of its
#: config with ``ttnn.sharded_to_interleaved_partial(out_data, out_tt, …)`` and returns ``out_tt[:, :, :, :h]``: a
#: slice of that buffer made at construction would be the buffer's contents before any call.
TTNN_WRITES_INTO = {
    "fill_cache": 0,
    "update_cache": 0,
    "paged_fill_cache": 0,
    "paged_update_cache": 0,
    "paged_fused_update_cache": 0,
    "fill_cache_for_user_": 0,
    "update_cache_for_token_": 0,
    "sharded_to_interleaved_partial": 1,
    "copy": 1,
}
#: keyword arguments by which a ttnn op writes its result into a tensor it is given
TTNN_OUTPUT_KEYWORDS = frozenset({"output_tensor", "optional_output_tensor"})


def written_by_ttnn(call: cst.Call) -> list[cst.BaseExpression]:
    """The arguments a ttnn op call writes into (``TTNN_WRITES_INTO``, ``TTNN_OUTPUT_KEYWORDS``)."""
    path = dotted(call.func) or ""
    if not path.startswith("ttnn."):
        return []
    out = [a.value for a in call.args if a.keyword is not None and a.keyword.value in TTNN_OUTPUT_KEYWORDS]
    position = TTNN_WRITES_INTO.get(path.rsplit(".", 1)[1])
    positional = [a for a in call.args if a.keyword is None and not a.star]
    if position is not None and position < len(positional):
        out.append(positional[position].value)
    return out


def mutated_locals(func: cst.CSTNode) -> set[str]:
    """Names changed in place: ``x.append(…)`` and friends, ``x[k] = …``, ``x.attr = …``, ``x += …``, and a
    tensor a ttnn op writes into (``ttnn.fill_cache(x, …)``, ``output_tensor=x``; ``written_by_ttnn``)."""
    out: set[str] = set()

    def root(node: cst.CSTNode) -> str | None:
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            node = node.value
        return node.value if isinstance(node, cst.Name) else None

    for call in summary(func).calls:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in MUTATORS:
            name = root(call.func.value)
            if name is not None:
                out.add(name)
        for target in written_by_ttnn(call):
            name = root(target)
            if name is not None:
                out.add(name)

    for node in walk(func, lambda n: not is_expression(n)):
        kind = type(node)
        if (
            kind is cst.AssignTarget and isinstance(node.target, (cst.Attribute, cst.Subscript))
        ) or kind is cst.AugAssign:
            name = root(node.target)
            if name is not None:
                out.add(name)
    out.discard("self")
    return out
