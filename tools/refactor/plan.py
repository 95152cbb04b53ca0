"""The plan of one generated class: for one topology, the specialised and flattened decode / prefill methods,
the static code each mode moves to construction, the bound choices and the fields. Built from the analysis and
the passes; rendered by :mod:`emit`."""

from __future__ import annotations

from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies.constants import ARGS_NAMES, MC_NAMES, MESH_NAMES, MODE_KEY, MODE_NAMES

from .binding import (
    MUTATORS,
    ClassFacts,
    Scope,
    attribute_stores,
    collect_assignments,
    local_kinds_by_name,
    mutated_locals,
    straight_values,
)
from .cached import cached_attributes, localise_cached
from .cleanup import remove_dead_code
from .cstutil import (
    assigned_names,
    block_statements,
    code,
    dotted,
    names_read,
    one_line,
    small_statement,
    summary,
)
from .errors import Gap
from .helpers import module_names
from .hoist import (
    Binding,
    BranchBinder,
    Hoister,
    Registry,
    propagate_literals,
    split_mixed_tests,
    split_static,
    static_asserts_as_ifs,
)
from .ifexp import static_ifexps_as_ifs
from .inline import MAX_DEPTH, Inliner
from .inputdevice import input_device_to_mesh
from .instate import instance_state
from .members import members_of
from .relaid import drop_conversions, relaid_weights
from .semicolons import has_semicolons, one_statement_per_line
from .source import Inputs, ParsedFile, methods_of
from .specialise import Decisions, enum_spelling, fact_replacements, specialise
from .track import Provenance, TrackingTransformer
from .walk import hot_paths, visit_read_only, walk

MODES = ("decode", "prefill")
SINGLE = "forward"  # the one "mode" of a module whose forward takes no mode (an embedding)


@dataclass
class MethodPlan:
    name: str  # name in the generated class
    func: cst.FunctionDef  # final body, fields as placeholders
    mode: str
    origin: str  # TTTv1 qualname it came from
    kind: str  # "forward" | "arm" | "method" | "helper"
    file: str = ""  # the analysed file its code comes from (the module, or a helper's file)


@dataclass
class ModePlan:
    mode: str
    entry: str  # generated method name (decode_forward / prefill_forward)
    entry_origin: (
        str  # TTTv1 method the entry was made from (forward, or forward_decode when forward dispatches)
    )
    call_args: list[cst.Arg]  # how forward() passes its parameters to the entry
    # static code moved to construction, per function it came from (each gets its own fields function)
    construction: dict[str, list[cst.BaseStatement]] = field(default_factory=dict)
    group_files: dict[str, str] = field(default_factory=dict)  # group -> the file its code comes from


@dataclass
class ClassPlan:
    topology: str
    class_name: str
    init_params: cst.Parameters
    init_func: cst.FunctionDef | None
    init_body: list[cst.BaseStatement]
    init_methods: list[cst.FunctionDef]
    forward_params: cst.Parameters
    modes: dict[str, ModePlan]
    methods: list[MethodPlan]
    bindings: list[Binding]
    registry: Registry
    facts: ClassFacts
    decisions: dict[tuple[str, str], Decisions]
    device_attrs: list[str]
    prov: Provenance
    helper_ops: dict[str, bool]


# ================================================================================================ class facts
def construction_calls(inputs: Inputs) -> set[int]:
    """ids of the Call nodes the analysis records as construction-time device ops (uploads, reshapes)."""
    out: set[int] = set()
    parsed = inputs.module
    for op in inputs.analysis.ops:
        if op.phase != "construction":
            continue
        file, line, col = op.loc.rsplit(":", 2)
        if file != parsed.name:
            continue
        for node in parsed.nodes_starting(int(line), int(col)):
            if isinstance(node, cst.Call):
                out.add(id(node))
                break
    return out


def construction_methods(inputs: Inputs) -> list[str]:
    """Methods ``__init__`` calls on ``self`` (transitively), in call order."""
    methods = methods_of(inputs.klass)
    order: list[str] = []
    queue = ["__init__"]
    while queue:
        name = queue.pop(0)
        func = methods.get(name)
        if func is None or name in order:
            continue
        order.append(name)
        for callee in _self_calls(func):
            if callee in methods and callee not in order:
                queue.append(callee)
    return order[1:]


def _self_calls(func: cst.CSTNode) -> list[str]:
    found: list[str] = []
    for node in walk(func):
        if type(node) is cst.Call:
            parts = (dotted(node.func) or "").split(".")
            if len(parts) == 2 and parts[0] == "self":
                found.append(parts[1])
    return found


def _inherit(inherited: dict[str, tuple], callee: str, guards: tuple) -> None:
    """Record the guards of one call site of ``callee``; call sites with other guards make it unconditional.
    Only tests on ``self`` alone carry over (a test on the caller's locals means nothing in the callee's fields
    function); dropping a test only widens where the fields are computed."""
    guards = tuple((test, polarity) for test, polarity in guards if names_read(test) <= {"self"})
    if callee not in inherited:
        inherited[callee] = guards
    elif [(code(t), p) for t, p in inherited[callee]] != [(code(t), p) for t, p in guards]:
        inherited[callee] = ()


def self_refs(func: cst.CSTNode, methods: dict) -> list[str]:
    """Methods of the class a function calls or refers to (``self.forward_decode``)."""
    return [a for a in summary(func).self_attrs if a in methods]


def class_facts(inputs: Inputs, forward_methods: list[str]) -> ClassFacts:
    key = ("class_facts", tuple(forward_methods))
    cached = inputs.cache.get(key)
    if cached is None:
        cached = inputs.cache[key] = _class_facts(inputs, forward_methods)
    return cached


def _class_facts(inputs: Inputs, forward_methods: list[str]) -> ClassFacts:
    methods = methods_of(inputs.klass)
    facts = ClassFacts()
    ops = construction_calls(inputs)
    init_names = ["__init__", *construction_methods(inputs)]
    init = methods.get("__init__")
    ctor_params = {p.name.value for p in init.params.params} if init is not None else set()
    for name in init_names:
        func = methods.get(name)
        if func is None:
            continue
        producers = _tensor_producers(func, ops)
        for attr, value in _self_assignments(func):
            if _makes_tensor(value, ops, producers):
                facts.device.add(attr)
            elif isinstance(value, cst.Name) and value.value in ctor_params:
                if value.value in ARGS_NAMES or value.value in MC_NAMES:
                    facts.holders.add(attr)
                else:
                    facts.resources.add(attr)
                    if value.value in MESH_NAMES and facts.mesh is None:
                        facts.mesh = attr
            elif isinstance(value, cst.Call) and (dotted(value.func) or "").endswith(".get_model_config"):
                facts.holders.add(attr)
    mutated: dict[str, set[str]] = {}
    assigned: set[str] = set()
    for name in forward_methods:
        func = methods.get(name)
        if func is not None:
            mutated[name] = _self_mutations(func)
            assigned |= {attr for attr, _ in _self_assignments(func)}
            facts.assigned_in_forward |= {attr for attr, _ in _self_assignments(func)}
            facts.assigned_in_forward |= mutated[name]
    facts.resources -= facts.holders
    facts.config_objects = _config_objects(methods, init_names, forward_methods, facts.holders)
    facts.properties = set(members_of(inputs.klass).properties)
    facts.cached = cached_attributes(methods, forward_methods, init_names)
    facts.assigned_in_forward -= facts.cached
    facts.relaid = relaid_weights(methods, forward_methods, init_names, facts.device, mutated)
    facts.assigned_in_forward -= set(facts.relaid)
    # a device tensor a forward only rebinds (never changes in place): the generated module holds it as self.<attr>
    # too (load_device_weights), so the forward's writes stay what they are in TTTv1, per-instance state
    facts.kept_state = (assigned & facts.device) - set().union(*mutated.values()) - set(facts.relaid)
    # plain state (``self.calls += 1``, a value cached on the first call): started as TTTv1's __init__ starts it
    # (not the mesh, nor an object whose methods give config values: those stay gaps)
    plain = facts.assigned_in_forward - facts.device - facts.holders - facts.config_objects - {facts.mesh}
    facts.instance_state = instance_state(methods, plain, set().union(*mutated.values()))
    # a constructor argument stored as is (``self.pos = start_pos``) is then state, not a fixed resource
    facts.resources -= set(facts.instance_state)
    facts.guarded_keys = {
        key for key, defs in inputs.analysis.definitions.items() if _missing_on_a_topology(defs)
    }
    if (
        inputs.analysis.config
    ):  # a key the analysed config never defines may be missing from the one given too
        facts.guarded_keys |= {
            key for key, defs in inputs.analysis.definitions.items() if not any(d.live for d in defs)
        }
    return facts


def _missing_on_a_topology(definitions) -> bool:
    """Whether every live definition of a config key is galaxy-only, or every one non-galaxy-only (the key is
    absent from the other topology's config)."""
    live = [d for d in definitions if d.live]
    return bool(live) and (
        all("not galaxy" in d.facts for d in live) or all("galaxy" in d.facts for d in live)
    )


def _self_mutations(func: cst.FunctionDef) -> set[str]:
    """``self`` attributes a forward changes in place: ``self.d[k] = v``, ``self.d.update(…)``, ``self.l += …``,
    or the same through a local alias (``opts = self.d; opts[k] = v``). TTTv1 keeps the change for the next
    call; a config field would not."""
    aliases: dict[str, str] = {}
    for node in walk(func):
        if type(node) is cst.Assign and isinstance(node.value, cst.Attribute):
            path = (dotted(node.value) or "").split(".")
            if len(path) == 2 and path[0] == "self":
                for target in node.targets:
                    if isinstance(target.target, cst.Name):
                        aliases[target.target.value] = path[1]
    out = {aliases[name] for name in mutated_locals(func) if name in aliases}

    def self_attr(node: cst.CSTNode) -> str | None:
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            if (
                isinstance(node, cst.Attribute)
                and isinstance(node.value, cst.Name)
                and node.value.value == "self"
            ):
                return node.attr.value
            node = node.value
        return None

    for node in walk(func):
        target = None
        if (
            type(node) is cst.Call
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in MUTATORS
        ):
            target = node.func.value
        elif type(node) is cst.AssignTarget and isinstance(node.target, (cst.Attribute, cst.Subscript)):
            target = node.target.value
        elif type(node) is cst.AugAssign:
            target = node.target
        attr = self_attr(target) if target is not None else None
        if attr is not None:
            out.add(attr)
    return out


def _self_assignments(func: cst.FunctionDef) -> list[tuple[str, cst.BaseExpression]]:
    out: list[tuple[str, cst.BaseExpression]] = []
    for node in walk(func):
        if type(node) is not cst.Assign:
            continue
        for target in node.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self":
                out.append((t.attr.value, node.value))
            elif isinstance(t, (cst.Tuple, cst.List)):
                for element in t.elements:
                    e = element.value
                    if (
                        isinstance(e, cst.Attribute)
                        and isinstance(e.value, cst.Name)
                        and e.value.value == "self"
                    ):
                        out.append((e.attr.value, node.value))
    return out


def _tensor_producers(func: cst.FunctionDef, ops: set[int]) -> set[str]:
    """Local functions (nested defs, lambdas) and locals of ``func`` whose value is a device tensor, at any depth
    of its body."""
    defs = [n for n in walk(func) if type(n) is cst.FunctionDef and n is not func]
    assigns = [n for n in walk(func) if type(n) is cst.Assign]
    producers: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in defs:
            if node.name.value not in producers and _contains(node, ops, producers):
                producers.add(node.name.value)
                changed = True
        for node in assigns:
            names = assigned_names(node) or []
            if names and not producers.issuperset(names) and _contains(node.value, ops, producers):
                producers.update(names)
                changed = True
    return producers


def _contains(node: cst.CSTNode, ops: set[int], producers: set[str]) -> bool:
    return any(
        type(call) is cst.Call
        and (id(call) in ops or (isinstance(call.func, cst.Name) and call.func.value in producers))
        for call in walk(node)
    )


def _makes_tensor(value: cst.BaseExpression, ops: set[int], producers: set[str]) -> bool:
    if _contains(value, ops, producers):
        return True
    return any(n in producers for n in summary(value).reads)


def _per_mode_keys(inputs: Inputs) -> list[tuple[str, list]]:
    """The config keys the module reads (``model_config["KEY"]``) that are defined under a mode test: the config
    is built per mode (``get_model_config(..., llm_mode, ...)`` with decode and prefill builders)."""
    analysis = inputs.analysis
    out = []
    for name in sorted({r.name for r in analysis.reads if r.kind == "key"}):
        definitions = [d for d in analysis.definitions.get(name, []) if any("mode:" in f for f in d.facts)]
        if definitions:
            out.append((name, definitions))
    return out


def _assigns_config(statement: cst.CSTNode) -> bool:
    return any(
        type(n) is cst.AssignTarget
        and type(n.target) is cst.Attribute
        and type(n.target.value) is cst.Name
        and n.target.value.value == "self"
        and n.target.attr.value == CONFIG_PARAM
        for n in walk(statement)
    )


def _config_per_mode_obstacle(inputs: Inputs) -> tuple[str, str, str] | None:
    """Why one dict per mode cannot be given to each mode's specialisation, as (where, what, why); None when it
    can: the forward takes the mode as a parameter, ``__init__`` keeps its ``model_config`` parameter as
    ``self.model_config``."""
    methods = methods_of(inputs.klass)
    name = inputs.module.name
    entry = "forward" if "forward" in methods else "__call__"
    if entry not in methods or not (
        {p.name.value for p in methods[entry].params.params[1:]} & MODE_NAMES or mode_in_dict(inputs)
    ):
        return (
            name,
            f"{inputs.class_name}.{entry}",
            "the forward takes no mode parameter: which mode's dict a call runs with (or the mode itself, "
            '`model_config["LLM_MODE"]`) is not known when it is built',
        )
    init = methods.get("__init__")
    params = {p.name.value for p in init.params.params[1:]} if init else set()
    kept = init is not None and any(
        _assigns_config(s)
        and type(s) is cst.SimpleStatementLine
        and type(s.body[0]) is cst.Assign
        and type(s.body[0].value) is cst.Name
        and s.body[0].value.value == CONFIG_PARAM
        for s in init.body.body
    )
    if CONFIG_PARAM not in params or not kept:
        return (
            name,
            f"{inputs.class_name}.__init__",
            f"__init__ does not keep a `{CONFIG_PARAM}` parameter as `self.{CONFIG_PARAM}`",
        )
    return None


def mode_in_dict(inputs: Inputs) -> bool:
    """Llama-2-70B T3000 style: the forward takes no mode parameter and reads the mode from the config dict
    (``self.model_config["LLM_MODE"] == "decode"``), which a dict setter (``set_model_config``) swaps between
    modes. trace-deps takes that entry as the mode; the module then has a decode and a prefill path like one
    with a mode parameter (``forward(x, mode)`` dispatching to them), each reading its own mode's dict."""
    if "mode_in_dict" in inputs.cache:
        return inputs.cache["mode_in_dict"]
    methods = methods_of(inputs.klass)
    entry = "forward" if "forward" in methods else "__call__"
    found = (
        entry in methods
        and not {p.name.value for p in methods[entry].params.params[1:]} & MODE_NAMES
        and any(r.kind == "key" and r.name == MODE_KEY for r in inputs.analysis.reads)
        and _setter_name(methods) is not None
    )
    inputs.cache["mode_in_dict"] = found
    return found


def _setter_name(methods: dict[str, cst.FunctionDef]) -> str | None:
    """The method other than ``__init__`` that sets ``self.model_config`` (``set_model_config``), if any."""
    return next(
        (name for name, func in methods.items() if name != "__init__" and _assigns_config(func)), None
    )


def mode_setter(inputs: Inputs) -> str | None:
    """The dict setter the generated test switches TTTv1 with before each mode, for a module whose config is
    read per mode (:func:`config_per_mode`): one reading the mode from its config dict (:func:`mode_in_dict`), or
    one whose forward takes the mode with a dict built per mode and a setter (Falcon-40B style); None otherwise."""
    return _setter_name(methods_of(inputs.klass)) if config_per_mode(inputs) else None


def _setter_extras(func: cst.FunctionDef) -> list[cst.BaseStatement]:
    """What a method that sets the dict (``set_model_config``) runs besides the assignment."""
    return [
        s
        for s in func.body.body
        if not _assigns_config(s) and not (type(s) is cst.SimpleStatementLine and _is_docstring(s))
    ]


def setter_rebuild_calls(inputs: Inputs) -> list[str] | None:
    """The methods a dict setter runs besides the assignment (:func:`_setter_parts`); None when there is no such
    setter or it runs anything the tool does not transform."""
    parts = _setter_parts(inputs)
    return None if parts is None else parts[0]


def setter_child_switches(inputs: Inputs) -> list[tuple[str, str]]:
    """The children a dict setter switches too, as (attribute, the child's setter): Falcon-40B's decoder's
    ``self.self_attn.set_model_config(model_config)``. ``from_model_args`` gives each mode its own view of such a
    child, switched by the child's own setter to that mode's dict (``_tttv1_bridge.mode_view``, emit.py)."""
    parts = _setter_parts(inputs)
    return [] if parts is None else parts[1]


def _setter_parts(inputs: Inputs) -> tuple[list[str], list[tuple[str, str]]] | None:
    """What the dict setter runs besides the assignment, when the tool can run it per mode: ``self.m()`` calls (no
    arguments) of methods ``__init__`` also calls (Falcon-40B's MLP: ``self._allocate_output_mlp_tensors()``,
    which rebuilds the prefill output buffer from the new dict; ``from_model_args`` runs them again after each
    mode's dict is set, as TTTv1's setter does), and ``self.child.setter(model_config)`` calls that pass the new
    dict, alone, to an attribute ``__init__`` sets (a sub-module). ``([], [])`` for a setter that only assigns;
    None when there is no such setter or it runs anything else."""
    if "setter_parts" in inputs.cache:
        return inputs.cache["setter_parts"]
    methods = methods_of(inputs.klass)
    init = methods.get("__init__")
    from_init = (
        {
            n.func.attr.value
            for n in walk(init)
            if type(n) is cst.Call
            and type(n.func) is cst.Attribute
            and type(n.func.value) is cst.Name
            and n.func.value.value == "self"
        }
        if init is not None
        else set()
    )
    set_in_init = {
        n.target.attr.value
        for n in (walk(init) if init is not None else ())
        if type(n) in (cst.AssignTarget, cst.AnnAssign)
        and type(n.target) is cst.Attribute
        and type(n.target.value) is cst.Name
        and n.target.value.value == "self"
    }
    found: tuple[list[str], list[tuple[str, str]]] | None = None
    for method_name, func in methods.items():
        if method_name == "__init__" or not _assigns_config(func):
            continue
        params = func.params.params
        new_dict = params[1].name.value if len(params) > 1 else None
        calls: list[str] = []
        children: list[tuple[str, str]] = []
        for statement in _setter_extras(func):
            small = (
                statement.body[0]
                if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
                else None
            )
            call = small.value if type(small) is cst.Expr else None
            func_node = call.func if type(call) is cst.Call else None
            if (
                type(func_node) is cst.Attribute
                and not call.args
                and type(func_node.value) is cst.Name
                and func_node.value.value == "self"
                and func_node.attr.value in from_init
                and func_node.attr.value in methods
            ):
                calls.append(func_node.attr.value)
            elif (
                type(func_node) is cst.Attribute
                and type(func_node.value) is cst.Attribute
                and type(func_node.value.value) is cst.Name
                and func_node.value.value.value == "self"
                and func_node.value.attr.value in set_in_init
                and func_node.value.attr.value not in methods
                and len(call.args) == 1
                and call.args[0].keyword is None
                and not call.args[0].star
                and type(call.args[0].value) is cst.Name
                and call.args[0].value.value == new_dict
            ):
                children.append((func_node.value.attr.value, func_node.attr.value))
            else:
                inputs.cache["setter_blocker"] = statement
                break
        else:
            found = (calls, children)
        break
    inputs.cache["setter_parts"] = found
    return found


def _setter_rebuilds(inputs: Inputs) -> Gap | None:
    """A method that sets another mode's dict (``set_model_config``) and also runs code that is neither a
    construction method nor a child's switch to the new dict (:func:`_setter_parts`; ``self.rows = 1``): what that
    code rebuilds for the new dict is built once, from the constructor's dict. The gap names that statement."""
    if _setter_parts(inputs) is not None:
        return None
    for method_name, func in methods_of(inputs.klass).items():
        if method_name == "__init__" or not _assigns_config(func):
            continue
        blocker = inputs.cache.get("setter_blocker")
        if blocker is not None:
            return Gap(
                inputs.loc(blocker),
                f"{inputs.class_name}.{method_name}",
                f"the config is built per mode, and {method_name} sets another mode's dict and also runs "
                f"`{code(blocker).strip()}`: what that rebuilds for the new dict is built once, from the "
                "constructor's model_config (each mode's fields do read its own dict)",
            )
    return None


def _is_docstring(statement: cst.SimpleStatementLine) -> bool:
    return type(statement.body[0]) is cst.Expr and isinstance(statement.body[0].value, cst.SimpleString)


CONFIG_PARAM = "model_config"


def config_per_mode(inputs: Inputs) -> bool:
    """Whether the module's config is built per mode and each mode's specialisation can read that mode's dict
    (``from_model_args``'s ``decode_model_config`` / ``prefill_model_config``)."""
    if "config_per_mode" not in inputs.cache:
        inputs.cache["config_per_mode"] = (
            bool(_per_mode_keys(inputs)) or mode_in_dict(inputs)
        ) and _config_per_mode_obstacle(inputs) is None
    return inputs.cache["config_per_mode"]


def per_mode_config(inputs: Inputs) -> list[Gap]:
    """A config built per mode that cannot be given per mode (see :func:`_config_per_mode_obstacle`): one gap
    naming the obstacle, then one per such key (not transformed). When it can, at most one gap: a setter that
    rebuilds state for the new dict (:func:`_setter_rebuilds`)."""
    keys = _per_mode_keys(inputs)
    in_dict = mode_in_dict(inputs)
    obstacle = _config_per_mode_obstacle(inputs) if keys or in_dict else None
    if obstacle is None:
        rebuilds = _setter_rebuilds(inputs) if keys or in_dict else None
        return [rebuilds] if rebuilds else []
    if in_dict:  # each mode's dict carries its mode (LLM_MODE): one dict cannot serve both specialisations
        what = f'the forward reads the mode from the config dict (`model_config["{MODE_KEY}"]`)'
        return [Gap(*obstacle[:2], f"{what}, so each mode needs its own dict, but {obstacle[2]}")]
    gaps = [Gap(*obstacle[:2], f"the config is built per mode, but {obstacle[2]}")]
    for name, definitions in keys:
        where = [
            f"{d.loc.rsplit(':', 1)[0]} when "
            + " and ".join(f"{'' if g.arm == 'then' else 'not '}{g.text}" for g in d.guards)
            for d in definitions
        ]
        gaps.append(
            Gap(
                definitions[0].loc.rsplit(":", 1)[0],
                f'model_config["{name}"]',
                f"the config is built per mode ({'; '.join(where)}): one dict holds one mode's keys and values, "
                f"and {obstacle[1]} keeps it from giving each mode its own dict",
            )
        )
    return gaps


# ================================================================================================ planning
class Planner:
    """Builds the :class:`ClassPlan` of one topology."""

    def __init__(self, inputs: Inputs, topology: str, class_name: str, gaps: list[Gap]) -> None:
        self.inputs = inputs
        self.topology = topology
        self.class_name = class_name
        self.gaps = gaps
        self.methods = methods_of(inputs.klass)
        self.parsed = inputs.module
        self.analysis = inputs.analysis
        self.kinds = local_kinds_by_name(
            {n: d.get("kinds") for n, d in inputs.analysis.graph.nodes(data=True)}
        )
        self.prov = Provenance()
        self.registry = Registry()
        self.helper_ops = _helper_ops(inputs)
        entry = "forward" if "forward" in self.methods else "__call__"
        self.entry = entry
        self.forward_methods = sorted({entry, *self._reachable(entry)})
        entry_params = {p.name.value for p in self.methods[entry].params.params[1:]}
        self.modes = MODES if entry_params & MODE_NAMES or mode_in_dict(inputs) else (SINGLE,)
        self.facts = class_facts(inputs, self.forward_methods)
        self.taken: set[str] = set(self.methods) | {"decode_forward", "prefill_forward", "config", "forward"}
        self.method_aliases: dict[
            str, str
        ] = {}  # self.X that __init__ sets to the method self.M (per topology)
        self.inliner = Inliner(
            inputs,
            {name: module_names(parsed) for name, parsed in inputs.files.items()},
            self.helper_ops,
            self.methods,
            self.taken,
            frozenset({self.entry, "__init__"}),
            prov=self.prov,
        )

    @property
    def helper_ops_table(self) -> dict[str, bool]:
        return self.helper_ops

    def _reachable(self, start: str) -> list[str]:
        seen: list[str] = []
        queue = [start]
        while queue:
            name = queue.pop(0)
            if name in seen or name not in self.methods:
                continue
            seen.append(name)
            queue.extend(self_refs(self.methods[name], self.methods))
        return seen

    def loc_of(self, node: cst.CSTNode) -> str:
        original = self.prov.origin(node)
        line = self.parsed.line_of(original)
        return f"{self.parsed.name}:{line}" if line else self.parsed.name

    def _scope(self, func: cst.FunctionDef, qualname: str, file: str | None = None) -> Scope:
        params = {p.name.value for p in func.params.params[1:]}
        params |= {p.name.value for p in func.params.kwonly_params}
        for star in (func.params.star_arg, func.params.star_kwarg):
            if isinstance(star, cst.Param):
                params.add(star.name.value)
        assignments = collect_assignments(func)
        mutated = mutated_locals(func)
        return Scope(
            kinds=self.kinds,
            file=file or self.parsed.name,
            self_file=self.parsed.name,
            qualname=qualname,
            class_name=self.inputs.class_name,
            params=params,
            facts=self.facts,
            helper_has_ops=self.helper_ops,
            assignments=assignments,
            mutated=mutated,
            stored_attrs=attribute_stores(func, mutated),
            straight=straight_values(func, assignments),
            methods=self.taken,  # TTTv1's methods and the ones generated so far
            method_aliases=self.method_aliases,
        )

    def _method_aliases(self, init_body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """``self.impl = self._forward_1d`` (what ``__init__``'s ``self._forward_tg if args.is_galaxy else
        self._forward_1d`` leaves on this topology), the only assignment of ``impl`` in the class: forward's
        ``self.impl(x, mode)`` is then the call ``self._forward_1d(x, mode)``, copied and specialised like any
        method call (hoist._fold_method_dispatch), and the statement leaves the construction code."""
        counts: dict[str, int] = {}
        for func in self.methods.values():
            for attr, _ in _self_assignments(func):
                counts[attr] = counts.get(attr, 0) + 1
        kept = []
        for statement in init_body:
            small = small_statement(statement)
            if (
                isinstance(small, cst.Assign)
                and len(small.targets) == 1
                and isinstance(small.targets[0].target, cst.Attribute)
                and code(small.targets[0].target.value) == "self"
                and isinstance(small.value, cst.Attribute)
                and code(small.value.value) == "self"
                and small.value.attr.value in self.methods
                and counts.get(small.targets[0].target.attr.value) == 1
            ):
                self.method_aliases[small.targets[0].target.attr.value] = small.value.attr.value
                continue
            kept.append(statement)
        return kept

    def _specialise(
        self, func: cst.FunctionDef, mode: str | None, decisions: Decisions, parsed: ParsedFile | None = None
    ) -> cst.FunctionDef:
        own = parsed is None  # a method of the class, not a helper's copy
        parsed = parsed or self.parsed
        key = ("semicolons", parsed.name)
        if key not in self.inputs.cache:
            self.inputs.cache[key] = has_semicolons(parsed.text)
        if self.inputs.cache[key]:
            func = one_statement_per_line(func, self.prov)
        replacements = fact_replacements(
            parsed, self.analysis.fact_sites, self.topology, mode or "decode", enum_spelling(func)
        )
        if mode is None or mode == SINGLE:  # construction, or a module without modes: topology facts only
            replacements = {
                k: v
                for k, v in replacements.items()
                if isinstance(v, cst.Name) and v.value in ("True", "False")
            }
            replacements = self._topology_only(replacements, parsed)
        out = specialise(func, replacements, self.prov, decisions)
        if mode is not None and own and self.facts.mesh is not None:  # x.device(): the module's device
            out = input_device_to_mesh(out, self.facts.mesh, self.prov)
        if self.facts.cached and mode is not None:  # a forward's own attribute: a local (cached.py)
            out = localise_cached(out, self.facts.cached, self.prov)
        # a weight a forward converts in place: converted once, at loading (relaid.py)
        if self.facts.relaid and mode is not None and own:
            out = drop_conversions(out, self.facts.relaid, self.prov)
        pure = self._scope(out, f"{self.inputs.class_name}.{func.name.value}").pure_call
        return remove_dead_code(out, pure, prov=self.prov)

    def _topology_only(
        self, replacements: dict[int, cst.BaseExpression], parsed: ParsedFile
    ) -> dict[int, cst.BaseExpression]:
        keep = set()
        for site in self.analysis.fact_sites:
            if site.file != parsed.name or site.fact.startswith("mode"):
                continue
            node = parsed.node_for_span(site.span)
            if node is not None:
                keep.add(id(node))
        return {k: v for k, v in replacements.items() if k in keep}

    # -- construction ------------------------------------------------------------------------------
    def construction(self) -> tuple[list[cst.BaseStatement], list[cst.FunctionDef], Decisions]:
        decisions = Decisions()
        self.prov.phase = "construction"
        init = self.methods.get("__init__")
        body: list[cst.BaseStatement] = []
        if init is not None:
            body = block_statements(self._specialise(init, None, decisions).body)
        helpers = [
            self._specialise(self.methods[m], None, decisions) for m in construction_methods(self.inputs)
        ]
        return body, helpers, decisions

    # -- forward -------------------------------------------------------------------------------------
    def _check_call(self) -> None:
        """A ``__call__`` next to ``forward`` that does more than call it: TTTv1's callers (``module(x, mode)``)
        would get something else than the generated class gives them (its ``__call__`` is ``forward``)."""
        call = self.methods.get("__call__")
        if self.entry != "forward" or call is None:
            return
        target = _dispatch_target(call, self.methods)
        params = [p.name.value for p in call.params.params[1:]]
        if target is not None and target[0] == "forward":
            passed = [a.value.value for a in target[1].args if a.keyword is None]
            if passed == params[: len(passed)] and not any(a.keyword for a in target[1].args):
                return
        self.gaps.append(
            Gap(
                f"{self.parsed.name}:{self.parsed.line_of(call)}",
                f"{self.inputs.class_name}.__call__",
                "it does more than call forward; the generated class's __call__ is forward, so callers of "
                "module(...) would get another result (not transformed)",
            )
        )

    def build(self) -> ClassPlan:
        self._check_call()
        init_body, init_methods, init_decisions = self.construction()
        init_body = self._method_aliases(init_body)
        decisions = {("construction", self.topology): init_decisions}
        modes: dict[str, ModePlan] = {}
        methods: list[MethodPlan] = []
        bindings: list[Binding] = []
        forward = self.methods[self.entry]
        produced: dict[tuple[str, str], str] = {}
        for mode in self.modes:
            self.prov.phase = mode
            mode_decisions = Decisions()
            decisions[(mode, self.topology)] = mode_decisions
            entry_name, entry_func, call_args = self._entry(forward, mode, mode_decisions)
            plan = ModePlan(mode, SINGLE if mode == SINGLE else f"{mode}_forward", entry_name, call_args)
            modes[mode] = plan
            queue: list[tuple[str, cst.FunctionDef, str, str, str, str, int]] = [
                (
                    entry_name,
                    entry_func,
                    plan.entry,
                    "forward",
                    self.parsed.name,
                    f"{self.inputs.class_name}.{entry_name}",
                    0,
                )
            ]
            # the static tests under which each generated method runs (a copy called only from a bound arm: that
            # arm's tests), so its fields are computed only where TTTv1 computes them
            inherited: dict[str, tuple] = {}
            used: dict[str, tuple] = {}
            while queue:
                origin, func, out_name, kind, file, qualname, depth = queue.pop(0)
                if kind == "helper" and self.facts.mesh is not None:  # a helper's copy: a method of the class
                    func = input_device_to_mesh(func, self.facts.mesh, self.prov)
                scope = self._scope(func, qualname, file)
                func = propagate_literals(func, scope, self.prov)  # constants reach the calls they feed
                func, copies = self._inline(func, mode, file, depth, mode_decisions, qualname)
                queue.extend(copies)
                binder = BranchBinder(
                    self._scope(func, qualname, file),
                    mode,
                    self.prov,
                    self.gaps,
                    self.loc_of,
                    self.taken,
                )
                # the construction code of one generated method: call-site copies of one helper differ
                group = f"{file}:{qualname}" + (f"#{out_name}" if kind == "helper" else "")
                plan.group_files[group] = file
                outer = used[out_name] = inherited.get(out_name, ())
                results = self._process(func, origin, mode, binder, plan, group, outer)
                bindings.extend(binder.bindings)
                callees = set(self.inliner.copies.values()) | set(self.methods)
                for name, result in results:
                    guards = (*outer, *(binder.guards_of.get(name, ()) if name else ()))
                    for callee in set(summary(result).self_attrs) & callees:
                        _inherit(inherited, callee, guards)
                    methods.append(
                        MethodPlan(
                            name or out_name, result, mode, origin, kind if name is None else "arm", file
                        )
                    )
                    for callee in self_refs(result, self.methods):
                        if callee in (self.entry, "__init__") or (callee, mode) in produced:
                            continue
                        callee_func = self._specialise(self.methods[callee], mode, mode_decisions)
                        produced[(callee, mode)] = callee
                        queue.append(
                            (
                                callee,
                                callee_func,
                                callee,
                                "method",
                                self.parsed.name,
                                f"{self.inputs.class_name}.{callee}",
                                depth,
                            )
                        )
            for name, guards in used.items():  # a call site found after the method was made: say so
                if [(code(t), p) for t, p in guards] != [(code(t), p) for t, p in inherited.get(name, ())]:
                    self.gaps.append(
                        Gap(
                            self.parsed.name,
                            f"{mode}: fields of {name}",
                            "its call sites run under different static tests than the first one seen",
                        )
                    )
        self._check_holders(methods)
        init_params = self.methods["__init__"].params if "__init__" in self.methods else cst.Parameters()
        return ClassPlan(
            topology=self.topology,
            class_name=self.class_name,
            init_params=init_params,
            init_func=self.methods.get("__init__"),
            init_body=init_body,
            init_methods=init_methods,
            forward_params=forward.params,
            modes=modes,
            methods=methods,
            bindings=bindings,
            registry=self.registry,
            facts=self.facts,
            decisions=decisions,
            device_attrs=sorted(self.facts.device),
            prov=self.prov,
            helper_ops=self.helper_ops,
        )

    def _entry(self, forward: cst.FunctionDef, mode: str, decisions: Decisions):
        """The entry method of ``mode``: the specialised forward, or the method it only dispatches to."""
        func = self._specialise(forward, mode, decisions)
        params = [p.name.value for p in func.params.params[1:]]
        call_args = [cst.Arg(cst.Name(p)) for p in params]
        target = None if mode == SINGLE else _dispatch_target(func, self.methods)
        if target is not None:
            name, call = target
            inner = self._specialise(self.methods[name], mode, decisions)
            return name, inner, list(call.args)
        return self.entry, func, call_args

    def _inline(
        self, func: cst.FunctionDef, mode: str, file: str, depth: int, decisions: Decisions, qualname: str
    ):
        """Calls of helpers with device ops, and of methods, given constant or construction-time arguments:
        each becomes a call of a private copy specialised for those arguments (see inline.py)."""
        if depth >= MAX_DEPTH:
            return func, []
        inliner = self.inliner
        caller_locals = set(collect_assignments(func)) | {p.name.value for p in func.params.params}
        caller_scope = self._scope(func, qualname, file)
        copies: list = []
        planner = self

        class _T(TrackingTransformer):
            def leave_Call(self, original_node, updated_node):
                callee = inliner.resolve(updated_node, file)
                if callee is None:
                    return updated_node
                updated_node = updated_node.with_changes(
                    args=[
                        a.with_changes(value=inliner.forward_static_locals(a.value, caller_scope))
                        if a.star == "**"
                        else a
                        for a in updated_node.args
                    ]
                )
                binding = inliner.bind(updated_node, callee)
                if binding is None:
                    return updated_node
                binding = {
                    k: (None if v is None else inliner.forward_static_locals(v, caller_scope))
                    for k, v in binding.items()
                }
                if not callee.has_ops and all(
                    v is None or caller_scope.is_static(v) for v in binding.values()
                ):
                    return updated_node  # computed where it is used: at construction, if the call is static
                callee_mode = (
                    planner._call_mode(updated_node, callee, binding, mode) if callee.is_method else None
                )
                body = planner._specialise(callee.func, callee_mode, decisions, callee.file)
                made = inliner.specialise_call(
                    updated_node, callee, body, binding, file, caller_locals, caller_scope.pure_call
                )
                if made is None:
                    return updated_node
                new_call, copy, name, new = made
                passed = {a.keyword.value for a in new_call.args if a.keyword is not None}
                read = summary(body.body).reads
                for param, value in binding.items():  # substituted, but the copy never reads it
                    if value is not None and param not in passed and param not in read:
                        planner.prov.drop(
                            value, f"argument {param} of {callee.qualname}: its copy here does not read it"
                        )
                if new:
                    folded = remove_dead_code(
                        specialise(copy, {}, planner.prov, decisions), prov=planner.prov
                    )
                    copies.append(
                        (
                            callee.qualname,
                            folded,
                            name,
                            "helper",
                            callee.file.name,
                            callee.qualname,
                            depth + 1,
                        )
                    )
                return new_call

        transformer = _T(self.prov)
        # only calls of helpers and methods can change (what a call resolves to is read from its callee,
        # which this pass never rewrites); f-strings are entered for the quotes of what lands in them
        transformer.hot = hot_paths(
            func,
            lambda node: (
                type(node) is cst.FormattedString
                or (type(node) is cst.Call and inliner.resolve(node, file) is not None)
            ),
        )
        return func.visit(transformer), copies

    def _call_mode(self, call: cst.Call, callee, binding: dict, mode: str) -> str:
        """The mode a method runs in at one call site: what its mode parameter receives there (the caller's
        mode was already put in as a constant), or the caller's mode when it has no mode parameter. A mode
        argument that is not a constant is a gap (the copy is then specialised for the caller's mode)."""
        if mode not in MODES:
            return mode
        for param in [*callee.func.params.params[1:], *callee.func.params.kwonly_params]:
            if param.name.value not in MODE_NAMES:
                continue
            value = binding.get(param.name.value)
            value = param.default if value is None else value
            found = _mode_constant(value)
            if found is None:
                self.gaps.append(
                    Gap(
                        self.loc_of(call),
                        one_line(call, 80),
                        f"the mode argument {param.name.value}= of {callee.qualname} is not a mode constant here",
                    )
                )
                return mode
            return found
        return mode

    def _process(self, func, origin, mode, binder: BranchBinder, plan: ModePlan, group: str, outer=()):
        """Specialised method -> (static statements to construction, bound arms, hoisted fields)."""
        scope = binder.scope
        func = propagate_literals(func, scope, self.prov)
        scope.assignments = collect_assignments(func)
        dynamic, static = split_static(block_statements(func.body), scope, self.prov)
        plan.construction.setdefault(group, []).extend(static)
        func = func.with_changes(body=func.body.with_changes(body=dynamic))
        func = remove_dead_code(func, scope.pure_call, prov=self.prov)
        func = static_asserts_as_ifs(func, scope, self.prov)
        func = split_mixed_tests(func, scope, self.prov)
        func = static_ifexps_as_ifs(func, scope, self.prov)
        func = binder.run(func)
        out = [(None, func)]
        pending = list(binder.extracted)
        binder.extracted.clear()
        while pending:
            extracted = pending.pop(0)
            result = binder.run(extracted.func)
            out.append((extracted.name, result))  # an arm of a bound choice
            pending.extend(binder.extracted)
            binder.extracted.clear()
        final = []
        for name, result in out:
            guards = (*outer, *(binder.guards_of.get(name, ()) if name else ()))
            hoister = Hoister(
                scope, self.registry, mode, self.loc_of, self.gaps, prov=self.prov, guards=guards, group=group
            )
            result = hoister.hoist(result)
            final.append((name, remove_dead_code(result, scope.pure_call, prov=self.prov)))
        for binding in binder.bindings:
            if _short_circuits(binding.test):
                # parts that run only when the earlier ones allow (``hasattr(a, "s") and a.s``): one field, the
                # test's value (leaf by leaf, each part would be computed at construction whatever the others)
                binding.test = Hoister(
                    scope, self.registry, mode, self.loc_of, self.gaps, prov=self.prov, group=group
                ).hoist(binding.test)
                continue
            hoister = Hoister(
                scope,
                self.registry,
                mode,
                self.loc_of,
                self.gaps,
                leaves_only=True,
                prov=self.prov,
                group=group,
            )
            test = hoister.hoist(binding.test)
            if set(summary(test).self_attrs) & self.facts.holders:
                # a test on the config object itself (``"K" in self.model_config``): one field, the test's value
                test = Hoister(
                    scope, self.registry, mode, self.loc_of, self.gaps, prov=self.prov, group=group
                ).hoist(binding.test)
            binding.test = test
        return final

    def _check_holders(self, methods: list[MethodPlan]) -> None:
        """A ModelArgs / model_config object still used at run time cannot be made explicit."""
        holders = self.facts.holders
        for method in methods:
            if not set(summary(method.func).self_attrs) & (holders | self.facts.assigned_in_forward):
                continue
            for attr in _self_attr_nodes(method.func):
                if attr.attr.value in holders:
                    self.gaps.append(
                        Gap(
                            self.loc_of(attr),
                            f"self.{attr.attr.value}",
                            "the ModelArgs / model_config object is used at run time (not as a config read)",
                        )
                    )
            for attr in _self_attr_nodes(method.func):
                kept = self.facts.kept_state | set(self.facts.instance_state)
                if attr.attr.value in self.facts.assigned_in_forward - kept:
                    self.gaps.append(
                        Gap(self.loc_of(attr), f"self.{attr.attr.value}", "forward changes module state")
                    )


def _config_objects(
    methods: dict, init_names: list[str], forward_methods: list[str], holders: set[str]
) -> set[str]:
    """Attributes ``__init__`` takes from ModelArgs (``self.X = self.args.Y`` / ``args.Y``) whose methods a
    forward calls (``self.X.get_tensor_dtype(…)``): parts of the config, queried like ``self.args.get_*()``."""
    called: set[str] = set()
    for name in forward_methods:
        func = methods.get(name)
        for node in walk(func) if func is not None else ():
            if type(node) is cst.Call:
                parts = (dotted(node.func) or "").split(".")
                if len(parts) == 3 and parts[0] == "self":
                    called.add(parts[1])
    out: set[str] = set()
    for name in init_names:
        func = methods.get(name)
        for attr, value in _self_assignments(func) if func is not None else ():
            parts = (dotted(value) or "").split(".") if isinstance(value, cst.Attribute) else []
            from_args = len(parts) >= 2 and (
                parts[0] in ARGS_NAMES or (parts[0] == "self" and len(parts) >= 3 and parts[1] in holders)
            )
            if from_args and attr in called and attr not in holders:
                out.add(attr)
    return out


def _short_circuits(test: cst.BaseExpression) -> bool:
    """Whether ``test`` has parts that run only depending on others (``and`` / ``or``, a conditional): hoisted
    leaf by leaf, each part would be computed at construction whatever the others are."""
    return any(type(node) in (cst.BooleanOperation, cst.IfExp) for node in walk(test))


def _self_attr_nodes(func: cst.CSTNode) -> list[cst.Attribute]:
    out: list[cst.Attribute] = []

    class _V(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                out.append(node)

    visit_read_only(func, _V())
    return out


def _dispatch_target(func: cst.FunctionDef, methods: dict) -> tuple[str, cst.Call] | None:
    """``return self.m(<parameters>)`` as the whole body (after a docstring): the method it dispatches to."""
    body = [s for s in block_statements(func.body) if not _is_docstring(s)]
    if len(body) != 1:
        return None
    small = small_statement(body[0])
    if not isinstance(small, cst.Return) or not isinstance(small.value, cst.Call):
        return None
    call = small.value
    path = (dotted(call.func) or "").split(".")
    if len(path) != 2 or path[0] != "self" or path[1] not in methods:
        return None
    params = {p.name.value for p in func.params.params[1:]} | {
        p.name.value for p in func.params.kwonly_params
    }
    for arg in call.args:
        if arg.star or not (isinstance(arg.value, cst.Name) and arg.value.value in params):
            return None
    return path[1], call


def _mode_constant(value: cst.BaseExpression | None) -> str | None:
    """``"decode"`` / ``Mode.PREFILL`` -> the mode it names; anything else -> None."""
    if isinstance(value, cst.SimpleString) and value.evaluated_value in MODES:
        return value.evaluated_value
    if isinstance(value, cst.Attribute) and value.attr.value in ("DECODE", "PREFILL"):  # Mode.DECODE
        return value.attr.value.lower()
    return None


def _is_docstring(statement: cst.BaseStatement) -> bool:
    small = small_statement(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))


def dedupe_methods(methods: list[MethodPlan]) -> list[MethodPlan]:
    """A method specialised identically for both modes is emitted once; otherwise each mode's copy gets a mode
    suffix and that mode's methods call it by its new name."""
    by_name: dict[str, list[MethodPlan]] = {}
    for method in methods:
        by_name.setdefault(method.name, []).append(method)
    renames: dict[tuple[str, str], str] = {}
    for name, group in by_name.items():
        if len(group) > 1 and len({code(m.func) for m in group}) > 1:
            for method in group:
                renames[(method.mode, name)] = f"_{name.lstrip('_')}_{method.mode}"
    out: list[MethodPlan] = []
    emitted: set[str] = set()
    for method in methods:
        new_name = renames.get((method.mode, method.name), method.name)
        if new_name in emitted:
            continue
        emitted.add(new_name)
        mine = {old: new for (mode, old), new in renames.items() if mode == method.mode}
        func = _rename_self_calls(method.func, mine).with_changes(name=cst.Name(new_name))
        out.append(MethodPlan(new_name, func, method.mode, method.origin, method.kind, method.file))
    return out


def _rename_self_calls(func: cst.FunctionDef, renames: dict[str, str]) -> cst.FunctionDef:
    if not renames:
        return func

    class _T(cst.CSTTransformer):
        def leave_Attribute(self, original_node, updated_node):
            if (
                isinstance(updated_node.value, cst.Name)
                and updated_node.value.value == "self"
                and updated_node.attr.value in renames
            ):
                return updated_node.with_changes(attr=cst.Name(renames[updated_node.attr.value]))
            return updated_node

    return func.visit(_T())


def _helper_ops(inputs: Inputs) -> dict[str, bool]:
    """Module-level function name -> whether it reaches a device op (by the analysis's op list)."""
    out: dict[str, bool] = {}
    for parsed in inputs.files.values():
        for name in parsed.functions():
            out.setdefault(name, False)
    for op in inputs.analysis.ops:
        top = op.function.split(".", 1)[0]
        if top in out:
            out[top] = True
        for helper in op.via:
            if helper.split(".", 1)[0] in out:
                out[helper.split(".", 1)[0]] = True
    return out


def describe(node: cst.CSTNode) -> str:
    return one_line(node)


__all__ = [
    "MODES",
    "ClassPlan",
    "MethodPlan",
    "ModePlan",
    "Planner",
    "class_facts",
    "describe",
    "names_read",
]
