"""``generate()``: from one TTTv1 module to the source text of its TTTv2 modules (nothing is written here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from .cstutil import clear_memos, one_line
from .emit import Emitter, Rendered
from .errors import Gap
from .galaxy import galaxy_assert
from .members import MemberCheck
from .modeparam import mode_parameter_gaps
from .plan import ClassPlan, Planner, per_mode_config
from .source import Inputs, load_inputs
from .unsupported import leftover_super_gaps, unsupported_gaps
from .zencheck import static_branch_gaps

TOPOLOGIES = ("1d", "2d")


@dataclass
class Generated:
    """One generated module."""

    topology: str
    class_name: str
    file_name: str
    plan: ClassPlan
    rendered: Rendered

    _code: tuple[cst.Module, str] | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def code(self) -> str:
        """The module's text, rendered once per module object (the run, the Zen check and the markers ask)."""
        module = self.rendered.module
        if self._code is None or self._code[0] is not module:
            self._code = (module, module.code)
        return self._code[1]


@dataclass
class Result:
    inputs: Inputs
    name: str
    modules: list[Generated] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def galaxy_dependent(inputs: Inputs) -> bool:
    """Whether any code the generated module holds depends on the topology (the analysis's topology facts).

    Not the code of the sub-modules it builds (``self.mlp = MLP(…)``): the methods of another class of the
    analysed files, and the helpers only they call, run inside those TTTv1 objects, which choose their own
    topology code; the generated module keeps them as they are (tt-metal's cross-attention block builds the
    tt_transformers MLP, whose galaxy code once made it write identical 1D and 2D modules and report that no
    galaxy test could be written)."""
    sites = [s for s in inputs.analysis.fact_sites if s.fact in ("galaxy", "mesh_1d", "single_device")]
    if not sites:
        return False
    others = _sub_module_classes(inputs)
    reached = _reached_without(inputs, others)
    known = {c.caller for c in inputs.analysis.calls} | {c.callee for c in inputs.analysis.calls}
    for site in sites:
        owner = site.function.split(".", 1)[0]
        if (site.file, owner) in others:
            continue
        node = f"{site.file}:{site.function}"
        if node in known and node not in reached:
            continue  # a helper only the sub-modules call
        return True
    return False


def _sub_module_classes(inputs: Inputs) -> set[tuple[str, str]]:
    """(file, class) of the analysed classes other than the module's class, its bases and the config class."""
    bases = set()
    for base in inputs.klass.bases:
        value = base.value
        if isinstance(value, cst.Attribute):
            bases.add(value.attr.value)
        elif isinstance(value, cst.Name):
            bases.add(value.value)
    keep = {inputs.class_name, *bases}
    config_class = inputs.analysis.config_class
    out = set()
    for name, parsed in inputs.files.items():
        for class_name in parsed.classes():
            if class_name in keep or (class_name == config_class and name == inputs.analysis.config):
                continue
            out.add((name, class_name))
    return out


def _reached_without(inputs: Inputs, others: set[tuple[str, str]]) -> set[str]:
    """The analysis's functions reached from the module's entries without entering a method of ``others``."""
    edges: dict[str, set[str]] = {}
    for call in inputs.analysis.calls:
        edges.setdefault(call.caller, set()).add(call.callee)
    reached = set(inputs.analysis.entries)
    todo = list(reached)
    while todo:
        for callee in edges.get(todo.pop(), ()):
            file, _, function = callee.partition(":")
            if callee in reached or (file, function.split(".", 1)[0]) in others:
                continue
            reached.add(callee)
            todo.append(callee)
    return reached


def class_base_name(tttv1_class: str) -> str:
    return tttv1_class


def generate(
    module: str | Path,
    config: str | Path | None = None,
    *,
    class_name: str | None = None,
    name: str | None = None,
    topology: str | None = None,
) -> Result:
    clear_memos()  # nothing carried over from an earlier run
    inputs = load_inputs(Path(module), Path(config) if config else None, class_name)
    stem = name or Path(module).stem
    result = Result(inputs, stem)
    result.gaps.extend(per_mode_config(inputs))
    result.gaps.extend(mode_parameter_gaps(inputs))
    result.gaps.extend(unsupported_gaps(inputs))
    asserted = galaxy_assert(inputs)
    if topology == "2d" or asserted:  # a module that runs only on a galaxy: its 2D module alone
        topologies: tuple[str, ...] = ("2d",)
        why = f"__init__ asserts a galaxy ({asserted})" if asserted else "--topology 2d"
        result.notes.append(f"{inputs.class_name} runs only on a galaxy ({why}): 2D module only")
    else:
        topologies = TOPOLOGIES if galaxy_dependent(inputs) else ("1d",)
    names = {t: f"{class_base_name(inputs.class_name)}{t.upper()}" for t in topologies}
    for topology in topologies:
        gaps: list[Gap] = []
        plan = Planner(inputs, topology, names[topology], gaps).build()
        other = next((names[t] for t in topologies if t != topology), None)
        rendered = Emitter(inputs, plan, other, gaps).render()
        rendered.module = MemberCheck(inputs, gaps).apply(rendered.module)
        result.modules.append(Generated(topology, names[topology], f"{stem}_{topology}.py", plan, rendered))
        for gap in gaps:
            if gap not in result.gaps:
                result.gaps.append(gap)
    # a weight the forward converts in place: once, at loading (relaid.py; the same facts for each topology)
    for attr, call in result.modules[0].plan.facts.relaid.items():
        result.notes.append(
            f"{inputs.loc(call)}: self.{attr}: the forward converts it in place on every call "
            f"(`{one_line(call, 90)}`); the generated module converts it once, in load_device_weights()"
        )
    for attr in sorted(result.modules[0].plan.facts.kept_state):
        result.notes.append(
            f"self.{attr}: a device tensor of __init__ that the forward replaces with a value of the call: kept as "
            "the generated module's own per-instance state, written by the forward as TTTv1 writes it"
        )
    for attr, start in sorted(result.modules[0].plan.facts.instance_state.items()):
        result.notes.append(
            f"self.{attr}: plain state the forward changes: kept as the generated module's own per-instance state, "
            f"started in _bind() as TTTv1's __init__ starts it (`{start.source}`)"
        )
    # the Zen, checked on the output itself: no static branch left on the forward path (zencheck)
    result.gaps.extend(static_branch_gaps(result.modules))
    if not any(g.what.startswith("super().") for g in result.gaps):  # one report per super() call
        result.gaps.extend(leftover_super_gaps(result.modules))
    return result


__all__ = ["TOPOLOGIES", "Generated", "Result", "cst", "generate"]
