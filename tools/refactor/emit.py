"""Rendering one :class:`ClassPlan` as a module: the config dataclass, the class with its happy-path
``__init__``, ``from_config``, ``from_model_args``, ``load_device_weights``, the bound choices and the flat
``decode_forward`` / ``prefill_forward``. Scaffolding comes from small templates parsed by libcst; every line of
TTTv1 code is moved as a libcst node, so it keeps its comments."""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

import libcst as cst

from tttv2_tools.trace_dependencies.constants import ARGS_NAMES, GALAXY_NAMES, MESH_NAMES, MODE_NAMES

from .bases import inherited
from .cleanup import lint_after_specialising, remove_dead_code, unused_imports
from .cstutil import (
    assigned_names,
    block_statements,
    children,
    code,
    dotted,
    is_staticmethod,
    names_read,
    names_written,
    one_line,
    slug,
    small_statement,
    summary,
)
from .errors import Gap
from .fields import FieldTable, name_fields, rename, to_construction
from .galaxy import galaxy_tests, has_galaxy_sites
from .helpers import (
    RUNTIME_MODULES,
    HelperCopier,
    dotted_module_of,
    first_party_folder,
    first_party_roots,
    module_names,
)
from .imports import resolve_module
from .layout import sorted_imports, tidy
from .plan import (
    CONFIG_PARAM,
    MODES,
    SINGLE,
    ClassPlan,
    MethodPlan,
    config_per_mode,
    mode_in_dict,
    setter_child_switches,
    setter_rebuild_calls,
)
from .relaid import loaded_conversion
from .source import Inputs, methods_of
from .walk import hot_paths, walk

LEGACY = "legacy"
_TIGHT_EQUAL = cst.AssignEqual(
    whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
)


@dataclass
class Rendered:
    module: cst.Module
    fields: FieldTable
    helpers: dict[str, str]  # copied helper -> where it came from
    methods: list[MethodPlan]
    entry_params: dict[str, list[str]] = field(default_factory=dict)
    # (mode, group) -> the function of from_model_args that runs that group's construction code
    construction_functions: dict[tuple[str, str], str] = field(default_factory=dict)


def _fill(template: str, **blocks) -> cst.Module:
    """Parse ``template`` and replace each statement ``__NAME__`` by the statements ``blocks[NAME]``."""
    module = cst.parse_module(textwrap.dedent(template).lstrip("\n"))

    class _T(cst.CSTTransformer):
        def leave_SimpleStatementLine(self, original_node, updated_node):
            small = small_statement(updated_node)
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Name):
                name = small.value.value
                if name.startswith("__") and name.endswith("__") and name[2:-2] in blocks:
                    statements = blocks[name[2:-2]]
                    if not statements:
                        return cst.RemoveFromParent()
                    return cst.FlattenSentinel(statements)
            return updated_node

    return module.visit(_T())


def _comment(text: str) -> cst.EmptyLine:
    return cst.EmptyLine(comment=cst.Comment("# " + text))


def _with_comment(statement: cst.BaseStatement, text: str) -> cst.BaseStatement:
    return statement.with_changes(leading_lines=[*statement.leading_lines, _comment(text)])


class Emitter:
    def __init__(self, inputs: Inputs, plan: ClassPlan, other_class: str | None, gaps: list[Gap]) -> None:
        self.inputs = inputs
        self.plan = plan
        self.other_class = other_class
        # a module checks its mesh when TTTv1 has code for the other topology (other_class), or runs only on a
        # galaxy (a 2D module alone: api.generate); ``instead`` is what its refusal says to use
        self.checked = other_class is not None or plan.topology == "2d"
        self.instead = other_class or f"a galaxy mesh (TTTv1's {inputs.class_name} runs only on a galaxy)"
        self.gaps = gaps
        self.name = plan.class_name
        self.config_name = plan.class_name + "Config"
        self.tttv1_class = inputs.class_name
        self.orig = module_names(inputs.module)
        self.construction_methods = {f.name.value for f in plan.init_methods}
        self.mesh_param = self._mesh_param()
        self.generated_names: set[str] = set()
        self.first_party = first_party_roots(inputs.module.path)
        self.construction_functions: dict[tuple[str, str], str] = {}

    def _mesh_param(self) -> str | None:
        for param in self.plan.init_params.params:
            if param.name.value in MESH_NAMES:
                return param.name.value
        return None

    # ------------------------------------------------------------------------------------------ fields
    def _reserved(self) -> set[str]:
        starts = {s.field for s in self.plan.facts.instance_state.values() if s.literal is None}  # instate.py
        return set(self.plan.device_attrs) | starts | {"config", "forward", "mesh_device"} - {"mesh_device"}

    def _defined_at(self, value: cst.BaseExpression) -> str | None:
        """Where TTTv1 defines the config value an expression reads (first config read in it)."""
        text = code(value)
        for read in self.inputs.analysis.reads:
            if read.phase != "forward":
                continue
            if read.kind == "key" and f'"{read.name}"' in text:
                defs = [d for d in self.inputs.analysis.definitions.get(read.name, []) if d.live]
                if defs:
                    return ", ".join(d.loc.rsplit(":", 1)[0] for d in defs)
            if read.kind in ("method", "attr") and f".{read.name}" in text:
                node = self.inputs.analysis.graph.nodes.get(read.node, {})
                if node.get("loc") and read.kind == "method":
                    return node["loc"].rsplit(":", 1)[0]
                defs = [d for d in self.inputs.analysis.attr_definitions.get(read.name, []) if d.live]
                if defs:
                    return defs[-1].loc.rsplit(":", 1)[0]
        return None

    def render(self) -> Rendered:
        plan = self.plan
        if self.mesh_param is not None:
            mesh_value = (
                cst.parse_expression(f"self.{self._mesh_attr()}")
                if self._mesh_attr()
                else cst.Name(self.mesh_param)
            )
            first_mode = next(iter(plan.modes))
            entry_group = (
                f"{self.inputs.module.name}:{self.tttv1_class}.{plan.modes[first_mode].entry_origin}"
            )
            plan.registry.add(
                "mesh_device",
                mesh_value,
                (),
                first_mode,
                self.mesh_param,
                f"{self.inputs.module.name}:__init__",
                group=entry_group,
            )
        constructions = {
            (m, group): statements
            for m, p in plan.modes.items()
            for group, statements in p.construction.items()
        }
        table = name_fields(
            plan.registry,
            constructions,
            self.tttv1_class,
            self._reserved(),
            self._defined_at,
            split_by_mode=config_per_mode(self.inputs),
        )
        methods = [
            MethodPlan(m.name, rename(m.func, table, plan.prov), m.mode, m.origin, m.kind, m.file)
            for m in plan.methods
        ]
        bindings = [(b, rename(b.test, table)) for b in plan.bindings]
        helpers = HelperCopier(self.inputs, plan.topology, self.gaps, plan.helper_ops)
        module_file = self.inputs.module.name
        entry_params = {}
        final_methods = []
        for method in methods:
            func = method.func
            if method.kind == "forward":
                func, kept = self._finish_entry(func, method)
                entry_params[method.mode] = kept
            final_methods.append(
                MethodPlan(method.name, func, method.mode, method.origin, method.kind, method.file)
            )
        for method in final_methods:
            file = method.file or module_file
            helpers.require(self._module_level_reads(method.func, file), file, file)
        for binding, test in bindings:
            file = binding.file or module_file
            helpers.require(self._module_level_reads(test, file), file, file)
        self.generated_names = set(helpers.copied) | set(helpers.imports)
        module = self._module(table, final_methods, bindings, helpers, entry_params)
        return Rendered(
            module, table, dict(helpers.sources), final_methods, entry_params, self.construction_functions
        )

    def _mesh_attr(self) -> str | None:
        init = self.plan.init_body
        for statement in init:
            small = small_statement(statement)
            if (
                isinstance(small, cst.Assign)
                and isinstance(small.value, cst.Name)
                and small.value.value == self.mesh_param
            ):
                target = small.targets[0].target
                if isinstance(target, cst.Attribute) and code(target.value) == "self":
                    return target.attr.value
        return None

    def _module_level_reads(self, node: cst.CSTNode, file: str | None = None) -> set[str]:
        reads = names_read(node)
        table = self.orig
        if file and file != self.inputs.module.name and file in self.inputs.files:
            table = module_names(self.inputs.files[file])
        return {n for n in reads if n in table.imports or n in table.definitions}

    # ------------------------------------------------------------------------------------------ methods
    def _finish_entry(self, func: cst.FunctionDef, method: MethodPlan) -> tuple[cst.FunctionDef, list[str]]:
        """Name, drop unused parameters, docstring, and load the weights first."""
        used = names_read(func.body)
        params = func.params
        if method.mode == SINGLE:  # a module without modes keeps TTTv1's forward signature
            used |= {p.name.value for p in [*params.params, *params.kwonly_params]}
        # the input (TTTv1's first parameter after self) stays: the contract is decode_forward(x) even when this
        # path only raises
        kept_params = [*params.params[:2], *(p for p in params.params[2:] if p.name.value in used)]
        kept_params[-1] = kept_params[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        kept_kwonly = [p for p in params.kwonly_params if p.name.value in used]
        new_params = params.with_changes(params=kept_params, kwonly_params=kept_kwonly)
        if not kept_kwonly and isinstance(params.star_arg, cst.ParamStar):
            new_params = new_params.with_changes(star_arg=cst.MaybeSentinel.DEFAULT)
        body = [s for s in block_statements(func.body) if not _docstring(s)]
        doc = self._entry_doc(method)
        load = cst.parse_statement("self.load_device_weights()")
        func = func.with_changes(
            name=cst.Name(method.name),
            params=new_params,
            body=func.body.with_changes(body=[doc, load, *body]),
            decorators=[],
        )
        kept = [p.name.value for p in kept_params[1:]] + [p.name.value for p in kept_kwonly]
        return func, kept

    def _entry_doc(self, method: MethodPlan) -> cst.SimpleStatementLine:
        origin = f"{self.tttv1_class}.{method.origin}"
        path = "Forward" if method.mode == SINGLE else f"{method.mode.capitalize()} path"
        text = (
            f'"""{path} of {origin} ({self.inputs.module.name}) on '
            f'{self._topology_words()}, with every static choice made at construction."""'
        )
        return cst.SimpleStatementLine([cst.Expr(cst.SimpleString(text))])

    def _topology_words(self) -> str:
        if not self.checked:
            return "every mesh (it has no topology-dependent code)"
        if self.other_class is None:
            return "2D (galaxy) meshes only (TTTv1's class runs only on a galaxy)"
        return "1D meshes" if self.plan.topology == "1d" else "2D (galaxy) meshes"

    # ------------------------------------------------------------------------------------------ module
    def _module(self, table, methods, bindings, helpers: HelperCopier, entry_params) -> cst.Module:
        fields_block = self._dataclass_fields(table)
        class_body = self._class_body(table, methods, bindings, entry_params)
        module = _fill(
            f'''
            """{self.name}: TTTv1's {self.tttv1_class} ({self.inputs.module.name}) on {self._topology_words()}.

            Generated by tttv2-refactor: decode and prefill are separate flat methods, every choice known at construction
            is made once (config fields, bound methods), and from_model_args computes each field as TTTv1 does.
            """

            __IMPORTS__


            __CHECK__

            __HELPERS__


            @dataclasses.dataclass(kw_only=True)
            class {self.config_name}:
                """Everything {self.name} uses, resolved: device tensors, then values (each says which TTTv1 code
                computes it; from_model_args fills them that way)."""

                __FIELDS__


            class {self.name}(TTModule):
                """TTTv1's {self.tttv1_class} on {self._topology_words()}, flattened."""

                CONFIG_CLASS = {self.config_name}

                __BODY__
            ''',
            IMPORTS=self._noqa(
                sorted_imports(
                    [
                        ("__future__", "annotations", "annotations"),
                        ("dataclasses", None, "dataclasses"),
                        ("types", None, "types"),
                        ("pathlib", "Path", "Path"),
                        ("typing", "Any", "Any"),
                        ("tttv2", "ttnn", "ttnn"),
                        ("tttv2.modules._module", "TTModule", "TTModule"),
                        ("tttv2.modules._module", "mode_name", "mode_name"),
                        *(
                            [
                                (
                                    "tttv2.modules._topology",
                                    self._topology_check_name(),
                                    self._topology_check_name(),
                                ),
                                ("tttv2.modules._topology", "TopologyError", "TopologyError"),
                            ]
                            if self.checked
                            else []
                        ),
                        ("tttv2.modules.lazy_weight", "LazyWeight", "LazyWeight"),
                        ("tttv2.modules._tttv1_bridge", "lazy_weight", "_lazy_weight"),
                        ("tttv2.modules._tttv1_bridge", "on_device", "_on_device"),
                        ("tttv2.modules._tttv1_bridge", "load_weight_fields", "_load_weight_fields"),
                        ("tttv2.modules._tttv1_bridge", "check_weight_fields", "_check_weight_fields"),
                        ("tttv2.modules._tttv1_bridge", "mode_view", "_mode_view"),
                        *(entry for local, entry in helpers.imports.items() if local != "ttnn"),
                    ],
                    self.first_party,
                )
            ),
            CHECK=[],
            HELPERS=helpers.statements(),
            FIELDS=fields_block,
            BODY=class_body,
        )
        return self._with_noqa(tidy(lint_after_specialising(unused_imports(module))))

    def _noqa(self, imports: list[cst.SimpleStatementLine]) -> list[cst.SimpleStatementLine]:
        return imports  # the file-level rules are added once the module is complete (_with_noqa)

    def _with_noqa(self, module: cst.Module) -> cst.Module:
        """Carry the TTTv1 file's own ``# ruff: noqa`` over (the moved TTTv1 code keeps its style), keeping only
        the codes the generated code still needs."""
        lines = [
            _needed_noqa(line.strip(), module)
            for line in self.inputs.module.text.splitlines()
            if line.startswith("# ruff: noqa")
        ]
        lines = [line for line in lines if line]
        first = next((i for i, st in enumerate(module.body) if _is_import_line(st)), None)
        if not lines or first is None:
            return module
        comments = [
            _comment(
                f"the moved TTTv1 code keeps its style: {self.inputs.module.name}'s file-level ruff rules"
            ),
            *(cst.EmptyLine(comment=cst.Comment(line)) for line in lines),
            cst.EmptyLine(indent=False),
        ]
        body = list(module.body)
        body[first] = body[first].with_changes(leading_lines=[*body[first].leading_lines, *comments])
        return module.with_changes(body=body)

    def _topology_guard(self) -> list[cst.BaseStatement]:
        """The check from_model_args makes first, before any device work: the mesh (or TTTv1's own galaxy flag)
        must be of this class's topology."""
        if not self.checked:
            return []
        names = [p.name.value for p in self.plan.init_params.params[1:]]
        flag = next((n for n in names if n in GALAXY_NAMES), None)
        if self.mesh_param is not None:
            checks = [
                cst.parse_statement(
                    f'{self._topology_check_name()}("{self.name}", {self.mesh_param}, "{self.instead}")'
                )
            ]
            checks += self._galaxy_checks(flag)
            if flag is not None and self._flag_is_fact(flag):  # specialised too: it must agree with the mesh
                galaxy = self.plan.topology == "2d"
                checks.append(
                    cst.parse_statement(
                        f"if {'not ' if galaxy else ''}{flag}:\n"
                        f"    raise TopologyError(\"{self.name}: {flag} is {not galaxy}, but this is TTTv1's "
                        f"{'galaxy' if galaxy else 'non-galaxy'} code ({flag}={galaxy}); TTTv1 runs other code with "
                        f'{flag}={not galaxy} on this mesh (TTTv1 callers pass {flag}=args.is_galaxy)")\n'
                    )
                )
            return checks
        if flag is None:
            flag = next((f"{n}.is_galaxy" for n in names if n in ARGS_NAMES), None)
        if flag is None:
            init = methods_of(self.inputs.klass)["__init__"]  # a class without one is refused before this
            params = self.plan.init_params
            star = [f"*{params.star_arg.name.value}"] if isinstance(params.star_arg, cst.Param) else []
            star += [f"**{params.star_kwarg.name.value}"] if params.star_kwarg is not None else []
            shown = ", ".join([*names, *star]) or "none"  # *args / **kwargs: handed on, never read here
            self.gaps.append(
                Gap(
                    self.inputs.module.loc(init),
                    f"{self.tttv1_class}.__init__",
                    "no mesh, galaxy flag or ModelArgs parameter to check the topology with (its parameters: "
                    f"{shown})",
                )
            )
            return []
        wrong = flag if self.plan.topology == "1d" else f"not {flag}"
        topology = "a galaxy" if self.plan.topology == "1d" else "not a galaxy"
        return [
            cst.parse_statement(
                f'if {wrong}:\n    raise TopologyError("{self.name}: {flag} says {topology}; use {self.instead} instead")\n'
            ),
            *self._galaxy_checks(flag),
        ]

    def _galaxy_checks(self, flag: str | None) -> list[cst.BaseStatement]:
        """TTTv1's own galaxy tests, on the constructor's arguments: the mesh shape does not decide them (a 2x4
        mesh is 2-D, yet ``num_devices == 32`` is False there), and this class is TTTv1's code for one answer.
        A module whose galaxy tests cannot be written that way is reported (its 2D code would run unchecked)."""
        tests = [t for t in galaxy_tests(self.inputs) if t.text != flag]
        if not tests and flag is None and has_galaxy_sites(self.inputs):
            self.gaps.append(
                Gap(
                    f"{self.inputs.module.name}:1",
                    f"{self.tttv1_class}: the galaxy test",
                    "no galaxy test of the class can be written with the constructor's arguments alone, so "
                    "from_model_args could not check that TTTv1 takes the galaxy code it was specialised on",
                )
            )
        galaxy = self.plan.topology == "2d"
        out: list[cst.BaseStatement] = []
        for test in tests:
            expected = galaxy if test.polarity > 0 else not galaxy
            message = (
                f"{self.name}: TTTv1's galaxy test `{test.text}` ({test.loc}) is {not expected} for these "
                f"arguments, but {self.name} is TTTv1's code for when it is {expected}"
                + (f"; use {self.other_class}" if not galaxy else "")
            )
            out.append(
                _with_comment(
                    cst.parse_statement(f"galaxy_test = {test.text}"),
                    f"TTTv1's code differs with this test ({test.loc}): this class is its {expected} side",
                )
            )
            out.append(
                cst.parse_statement(
                    f"if {'not ' if expected else ''}galaxy_test:\n    raise TopologyError({message!r})\n"
                )
            )
        return out

    def _flag_is_fact(self, flag: str) -> bool:
        """Whether the analysis reads the constructor's ``flag`` as the galaxy fact (so it was specialised)."""
        parsed = self.inputs.module
        for site in self.inputs.analysis.fact_sites:
            if site.file == parsed.name and site.function == f"{self.tttv1_class}.__init__":
                node = parsed.node_for_span(site.span)
                if isinstance(node, cst.Name) and node.value == flag:
                    return True
        return False

    def _topology_check_name(self) -> str:
        return "require_1d_mesh" if self.plan.topology == "1d" else "require_2d_mesh"

    def _dataclass_fields(self, table: FieldTable) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        for attr in self.plan.device_attrs:
            line = cst.parse_statement(f"{attr}: Any")
            out.append(
                line.with_changes(trailing_whitespace=_trailing(f"device tensor self.{attr} of TTTv1"))
            )
        for attr, start in sorted(self.plan.facts.instance_state.items()):
            if start.literal is None:
                line = cst.parse_statement(f"{start.field}: Any")
                note = (
                    f"starting value of self.{attr}, per-instance state: what TTTv1's __init__ leaves in it"
                )
                out.append(line.with_changes(trailing_whitespace=_trailing(note)))
        for f in table.fields:
            line = cst.parse_statement(f"{f.name}: Any")
            note = f.source if len(f.source) < 70 else f.source[:69] + "…"
            where = ", ".join(f.locs)
            text = f"{note} ({where})"
            if f.defined_at:
                text += f"; defined at {f.defined_at}"
            if f.params:
                text = f"callable of ({', '.join(f.params)}): {text}"
            out.append(line.with_changes(trailing_whitespace=_trailing(text)))
        return out

    def _class_body(self, table, methods, bindings, entry_params) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        out.extend(self._init())
        out.extend(self._from_config())
        out.extend(self._from_model_args(table))
        out.extend(self._load_weights())
        out.extend(self._bind(bindings))
        if SINGLE not in self.plan.modes:
            out.extend(self._dispatcher(entry_params))
        for method in methods:
            out.append(method.func.with_changes(leading_lines=[cst.EmptyLine()]))
        return out

    def _init(self) -> list[cst.BaseStatement]:
        weights = self.plan.device_attrs
        params = "".join(f", {w}" for w in weights)
        passed = ", ".join(f"{w}={w}" for w in weights)
        passed = passed + ", " if passed else ""
        check = f'{self._topology_check_name()}("{self.name}", config.mesh_device, "{self.instead}")'
        if self.mesh_param is None or not self.checked:
            check = "# the TTTv1 module has no topology-dependent code: every mesh"
        text = f'''
        def __init__(self{params}, **fields: Any) -> None:
            """The device tensors and every other field of {self.config_name} (from_model_args computes them from TTTv1's ModelArgs)."""
            try:
                config = {self.config_name}({passed}**fields)
            except TypeError as exc:
                raise ValueError(f"{self.name}: {{exc}} (see {self.config_name}, or use {self.name}.from_model_args)") from None
            self._setup(config)


        @staticmethod
        def _resolve_config(config: {self.config_name}) -> {self.config_name}:
            """A copy of the config (the caller's object is never changed), after the topology check."""
            {check}
            _check_weight_fields("{self.name}", config)
            return dataclasses.replace(config)
        '''
        return list(cst.parse_module(textwrap.dedent(text)).body)

    def _from_config(self) -> list[cst.BaseStatement]:
        return []

    def _load_weights(self) -> list[cst.BaseStatement]:
        relaid = self.plan.facts.relaid  # converted as the forwards convert them, once (relaid.py)
        lines = [
            cst.parse_statement(
                loaded_conversion(a, relaid[a]) if a in relaid else f"self.{a} = _on_device(self.config.{a})"
            )
            for a in self.plan.device_attrs
        ]
        return list(
            _fill(
                """
                def load_device_weights(self) -> None:
                    \"\"\"Convert every LazyWeight now and keep the device tensors where the forwards read them (idempotent; each forward calls it first).\"\"\"
                    if getattr(self, "_device_weights_loaded", False):
                        return
                    __BODY__
                    _load_weight_fields(self)
                    self._device_weights_loaded = True
                """,
                BODY=lines,
            ).body
        )

    def _bind(self, bindings) -> list[cst.BaseStatement]:
        lines = []
        for attr, start in sorted(self.plan.facts.instance_state.items()):
            # per-instance state the forwards change: started as TTTv1's __init__ starts it (instate.py)
            line = cst.parse_statement(f"self.{attr} = {start.source}")
            lines.append(
                _with_comment(
                    line, "per-instance state the forward changes, started as TTTv1's __init__ starts it"
                )
            )
        for binding, test in bindings:
            test = _device_attrs_from_config(test, set(self.plan.device_attrs))
            line = cst.parse_statement(
                f"self.{binding.attr} = self.{binding.when_true} if {code(test)} else self.{binding.when_false}"
            )
            source = self.plan.prov.origin(binding.origin)
            origin = self.inputs.loc(source, binding.file)
            if isinstance(source, cst.IfExp):  # a conditional expression bound as a choice (ifexp.py)
                tested = source.test
            else:
                tested = binding.origin.test if isinstance(binding.origin, cst.If) else binding.origin
            lines.append(_with_comment(line, f"{binding.mode}: if {one_line(tested, 80)} ({origin})"))
        return list(
            _fill(
                """
                def _bind(self) -> None:
                    \"\"\"The code choices TTTv1 makes in every forward call, made once.\"\"\"
                    __BODY__
                """,
                BODY=lines,
            ).body
        )

    def _dispatcher(self, entry_params) -> list[cst.BaseStatement]:
        forward = self.plan.forward_params
        # the mode parameter as TTTv1 names it (``mode``, ``llm_mode``)
        name = next(
            (p.name.value for p in [*forward.params, *forward.kwonly_params] if p.name.value in MODE_NAMES),
            "mode",
        )
        lines = []
        for mode, plan in self.plan.modes.items():
            kept = set(entry_params.get(mode, []))
            args = self._call_args(plan, kept)
            lines.append(
                cst.parse_statement(f'if {name} == "{mode}":\n    return self.{plan.entry}({args})\n')
            )
        lines[-1] = cst.parse_statement(f"return self.{plan.entry}({args})")
        module = _fill(
            f"""
            def forward(__PARAMS__):
                \"\"\"TTTv1's signature; {name} is "decode" / "prefill" or a Mode member.\"\"\"
                {name} = mode_name("{self.name}", {name})
                __BODY__
            """,
            BODY=lines,
        )
        params = _mode_default_as_string(forward)
        if mode_in_dict(self.inputs):  # TTTv1 reads the mode from its dict: the TTTv2 forward takes it
            params = _with_mode_param(params)
        forward_def = module.body[0].with_changes(params=params)
        return [forward_def]

    def _call_args(self, plan, kept: set[str]) -> str:
        entry = next(m for m in self.plan.methods if m.kind == "forward" and m.mode == plan.mode)
        params = [p.name.value for p in entry.func.params.params[1:]]
        out = []
        for index, arg in enumerate(plan.call_args):
            if arg.keyword is not None:
                if arg.keyword.value in kept:
                    out.append(f"{arg.keyword.value}={code(arg.value)}")
            elif index < len(params) and params[index] in kept:
                out.append(f"{params[index]}={code(arg.value)}")
        return ", ".join(out)

    # ------------------------------------------------------------------------------------------ bridge
    def _from_model_args(self, table: FieldTable) -> list[cst.BaseStatement]:
        plan = self.plan
        methods = self.construction_methods
        base_init = bool(inherited(self.inputs))  # a base's __init__ sets attributes: run it, as TTTv1 does
        init_body = [
            to_construction(s, self.tttv1_class, methods, lazy=True, base_init=base_init)
            for s in plan.init_body
        ]
        init_body = [s for s in init_body if isinstance(s, cst.CSTNode) and not _docstring(s)]
        init_body = self._early_return_safe(init_body)
        nested = []
        for func in plan.init_methods:
            converted = to_construction(func, self.tttv1_class, methods, lazy=True)
            # a @staticmethod's first parameter is data, not the instance: it is kept
            kept = converted.params.params if is_staticmethod(func) else converted.params.params[1:]
            params = converted.params.with_changes(params=kept)
            nested.append(converted.with_changes(params=params, decorators=[]))
        mode_blocks = []
        block_modes: dict[str, str] = {}
        for mode, mode_plan in plan.modes.items():
            for group, group_statements in [
                *mode_plan.construction.items(),
                *self._empty_groups(table, mode),
            ]:
                mine = [f for f in table.fields if f.home == (mode, group)]
                if not mine and not _checks(group_statements):
                    continue  # no field reads it (a check, an assert, runs even so)
                statements = [to_construction(s, self.tttv1_class, methods) for s in group_statements]
                statements = [s for s in statements if isinstance(s, cst.CSTNode)]
                returns = [f"        {f.name}=__V{i}__," for i, f in enumerate(mine)]
                origin, _, copy = group.split(":", 1)[1].partition("#")  # copy: a helper's call-site copy
                is_entry = (
                    not copy
                    and origin.split(".")[-1] == mode_plan.entry_origin
                    and group.startswith(self.inputs.module.name + ":")
                )
                part = slug(copy or origin.split(".")[-1])
                fn_name = f"_{mode}_fields" if is_entry else f"_{mode}_{part}_fields"
                self.construction_functions[(mode, group)] = fn_name
                src = f"def {fn_name}():\n    return dict(\n" + "\n".join(returns) + "\n    )\n"
                fn = cst.parse_statement(src)
                fn = _substitute_values(fn, mine, self._field_value)
                body = [*_predeclare(statements), *statements, *block_statements(fn.body)]
                fn = fn.with_changes(body=fn.body.with_changes(body=body))
                fn = remove_dead_code(fn, lambda _call: True)  # construction statements were proven pure
                what = (
                    f"TTTv1's {self.tttv1_class}.{mode_plan.entry_origin}"
                    if is_entry
                    else f"{origin} as {mode} calls it"
                )
                fn = fn.with_changes(
                    leading_lines=[_comment(f"fields of {mode}_forward: the static part of {what}")]
                )
                mode_blocks.append((fn_name, fn))
                block_modes[fn_name] = mode
        device = ", ".join(f'{a}=getattr({LEGACY}, "{a}", None)' for a in plan.device_attrs)
        # the starting values of per-instance state that __init__ computes (instate.py): what it leaves there
        starts = [
            f"{s.field}={LEGACY}.{a}"
            for a, s in sorted(plan.facts.instance_state.items())
            if s.literal is None
        ]
        device = ", ".join(x for x in (device, *starts) if x)
        per_mode = config_per_mode(self.inputs) and bool(
            mode_blocks
        )  # a mode parameter: every block is a mode's
        if per_mode:
            final_statements = self._per_mode_fields(mode_blocks, block_modes, device)
        else:
            calls = ", ".join(f"**{name}()" for name, _ in mode_blocks)
            args = ", ".join(x for x in (device, calls) if x)
            final_statements = [cst.parse_statement(f"return cls.from_config({self.config_name}({args}))")]
        check = self._topology_guard()
        if base_init:  # an instance (not run), so that super(...).__init__ runs the bases' code on it
            legacy = cst.parse_statement(f"{LEGACY} = {self.tttv1_class}.__new__({self.tttv1_class})")
        else:
            legacy = cst.parse_statement(f"{LEGACY} = types.SimpleNamespace()")
        legacy = _with_comment(
            legacy, f"the attributes TTTv1's {self.tttv1_class}.__init__ sets, as it sets them"
        )
        body_nodes: list[cst.BaseStatement] = [*check]
        construction_code = [
            *materialise_reads([legacy, *nested, *init_body], frozenset(plan.device_attrs)),
            *(fn for _, fn in mode_blocks),
            *final_statements,
        ]
        imports = self._construction_imports(construction_code)
        body_nodes += imports + construction_code
        first = plan.init_params.params[0]
        params = plan.init_params.with_changes(
            params=[first.with_changes(name=cst.Name("cls"), annotation=None), *plan.init_params.params[1:]]
        )
        if per_mode:  # each mode's dict, after TTTv1's arguments (TTTv1 gives it by set_model_config)
            params = params.with_changes(
                star_arg=params.star_arg
                if params.star_arg is not cst.MaybeSentinel.DEFAULT
                else cst.ParamStar(),
                kwonly_params=[
                    *params.kwonly_params,
                    *(
                        cst.Param(
                            cst.Name(f"{m}_{CONFIG_PARAM}"), default=cst.Name("None"), equal=_TIGHT_EQUAL
                        )
                        for m in MODES
                    ),
                ],
            )
        doc = (
            f'"""Build from TTTv1\'s {self.tttv1_class} constructor arguments ({self.inputs.module.name}): '
            f'the same weights, and every field computed by the same expressions."""'
        )
        func = cst.FunctionDef(
            name=cst.Name("from_model_args"),
            params=params,
            whitespace_before_params=plan.init_func.whitespace_before_params
            if plan.init_func
            else cst.SimpleWhitespace(""),
            body=cst.IndentedBlock(
                body=[cst.SimpleStatementLine([cst.Expr(cst.SimpleString(doc))]), *body_nodes]
            ),
            decorators=[cst.Decorator(cst.Name("classmethod"))],
            leading_lines=[cst.EmptyLine()],
        )
        return [func]

    def _per_mode_fields(
        self, mode_blocks: list[tuple[str, cst.FunctionDef]], block_modes: dict[str, str], device: str
    ) -> list[cst.BaseStatement]:
        """The config is one dict per mode (``get_model_config(..., llm_mode, ...)``): each mode's fields are
        computed with ``legacy.model_config`` set to that mode's dict, as TTTv1 reads them after
        ``set_model_config``. A mode's dict is ``<mode>_model_config``, or the constructor's ``model_config``
        when that is the mode's own (its ``LLM_MODE``); anything else is refused by name."""
        owner = f"{self.plan.class_name}.from_model_args"
        helper = cst.parse_statement(
            "def _mode_config(mode, given):\n"
            f"    chosen = {CONFIG_PARAM} if given is None else given\n"
            f'    found = chosen.get("LLM_MODE", None if given is None else mode)\n'
            "    if found != mode:\n"
            "        raise ValueError(\n"
            f'            f"{owner}: the {{mode}} fields read the {{mode}} config dict, but the dict given for '
            f"{{mode}} has LLM_MODE={{found!r}}; pass {{mode}}_{CONFIG_PARAM}=(the dict get_model_config builds "
            f'for {{mode!r}})"\n'
            "        )\n"
            "    return chosen\n"
        )
        helper = _with_comment(
            helper,
            "the config is built per mode: each mode's fields read that mode's dict (TTTv1: set_model_config)",
        )
        out: list[cst.BaseStatement] = [helper]
        spreads = []
        rebuild, order = self._setter_rebuild()
        if rebuild:
            out.append(
                _with_comment(
                    cst.parse_statement(f"built_from = {CONFIG_PARAM}"),
                    "the dict the state below was last built from (TTTv1's setter rebuilds it for a new dict)",
                )
            )
        children = setter_child_switches(self.inputs)
        if children:
            built = ", ".join(f'"{attr}": {LEGACY}.{attr}' for attr, _ in children)
            out.append(
                _with_comment(
                    cst.parse_statement(f"tttv1_children = {{{built}}}"),
                    "the sub-modules TTTv1's dict setter switches too, as __init__ built them: each mode reads "
                    "its own view of each, switched by the sub-module's own setter to that mode's dict",
                )
            )
        for mode in order:
            names = [name for name, _ in mode_blocks if block_modes[name] == mode]
            if not names and not rebuild and not children:
                continue
            out.append(
                cst.parse_statement(
                    f'{LEGACY}.{CONFIG_PARAM} = _mode_config("{mode}", {mode}_{CONFIG_PARAM})'
                )
            )
            if rebuild:
                calls = "".join(f"    {name}()\n" for name in rebuild)
                out.append(
                    cst.parse_statement(
                        f"if {LEGACY}.{CONFIG_PARAM} is not built_from:\n"
                        f"    built_from = {LEGACY}.{CONFIG_PARAM}\n{calls}"
                    )
                )
            for attr, setter in children:
                out.append(
                    cst.parse_statement(
                        f'{LEGACY}.{attr} = _mode_view(tttv1_children["{attr}"], "{setter}", '
                        f"{LEGACY}.{CONFIG_PARAM})"
                    )
                )
            if not names:
                continue
            out.append(cst.parse_statement(f"{mode}_fields = {{{', '.join(f'**{n}()' for n in names)}}}"))
            spreads.append(f"**{mode}_fields")
        args = ", ".join(x for x in (device, *spreads) if x)
        out.append(cst.parse_statement(f"return cls.from_config({self.config_name}({args}))"))
        return out

    def _setter_rebuild(self) -> tuple[list[str], list[str]]:
        """(construction methods a dict setter runs again, the order of the modes) for a config built per mode
        whose setter rebuilds state (``plan.setter_rebuild_calls``: Falcon-40B's prefill output buffer). The
        state is one set of attributes for both modes, so each attribute those methods write must be read by one
        mode at most, and that mode's dict is set last; otherwise a gap, and nothing is run again."""
        calls = setter_rebuild_calls(self.inputs) or []
        if not calls:
            return [], list(MODES)
        methods = {f.name.value: f for f in self.plan.init_methods}
        written: set[str] = set()
        for name in calls:
            for node in walk(methods[name]) if name in methods else ():
                target = (
                    node.target if type(node) in (cst.AssignTarget, cst.AnnAssign, cst.AugAssign) else None
                )
                if (
                    type(target) is cst.Attribute
                    and type(target.value) is cst.Name
                    and target.value.value == "self"
                ):
                    written.add(target.attr.value)
        readers: dict[str, set[str]] = {}
        for method in self.plan.methods:
            for node in walk(method.func):
                if (
                    type(node) is cst.Attribute
                    and node.attr.value in written
                    and type(node.value) is cst.Name
                    and node.value.value == "self"
                    and method.mode in MODES
                ):
                    readers.setdefault(node.attr.value, set()).add(method.mode)
        read_by = set().union(*readers.values()) if readers else set()
        if len(read_by) > 1:
            both = ", ".join(f"self.{a}" for a in sorted(a for a, m in readers.items() if m))
            self.gaps.append(
                Gap(
                    self.inputs.module.name,
                    f"{self.tttv1_class} dict setter",
                    f"the dict setter rebuilds {both} (by {', '.join(calls)}), and both modes read it: one "
                    "generated module holds one such state",
                )
            )
            return [], list(MODES)
        order = [m for m in MODES if m not in read_by] + [m for m in MODES if m in read_by]
        return calls, order

    def _early_return_safe(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """TTTv1's ``__init__`` body as a nested function run once when it can ``return`` early: the return then
        ends that body, as in TTTv1, not ``from_model_args`` (which would return None). The names it binds stay
        ``from_model_args``'s own (``nonlocal``), for the code after it."""
        returns = [r for s in body for r in _own_returns(s)]
        if not returns:
            return body
        params = {p.name.value for p in [*self.plan.init_params.params, *self.plan.init_params.kwonly_params]}
        bound = sorted(set().union(*(names_written(s) for s in body)) - {LEGACY})
        originals = [r for s in self.plan.init_body for r in _own_returns(s)]
        lines = [self.inputs.module.line_of(r) for r in originals]
        where = next((f"{self.inputs.module.name}:{line}" for line in lines if line), self.inputs.module.name)
        out: list[cst.BaseStatement] = []
        fresh = [n for n in bound if n not in params]
        if fresh:
            out.append(cst.parse_statement(" = ".join([*fresh, "None"])))
        inner = [cst.parse_statement(f"nonlocal {', '.join(bound)}")] if bound else []
        func = cst.FunctionDef(
            name=cst.Name("_tttv1_init"),
            params=cst.Parameters(),
            body=cst.IndentedBlock(body=[*inner, *body]),
        )
        out.append(
            _with_comment(func, f"TTTv1's __init__ body: its early return ({where}) ends only this body")
        )
        out.append(cst.parse_statement("_tttv1_init()"))
        return out

    def _empty_groups(self, table: FieldTable, mode: str) -> list[tuple[str, list]]:
        """Groups with fields but no static code of their own (e.g. the mesh field)."""
        known = set(self.plan.modes[mode].construction)
        groups = {f.home[1] for f in table.fields if f.home[0] == mode and f.home[1] not in known}
        return [(g, []) for g in sorted(groups)]

    def _helper_name(self, name: str) -> tuple[str, str | None, str] | None:
        """A name of one of the helper files (code specialised from ``ccl.py`` reads ``_links``): imported from
        that file's TTTv1 module, in the bridge."""
        for file, parsed in sorted(self.inputs.files.items()):
            if file == self.inputs.module.name:
                continue
            table = module_names(parsed)
            if name in table.definitions:
                return (dotted_module_of(parsed.path), name, name)
            if name in table.imports:
                module, imported = table.imports[name]
                return (module, imported, name)
        return None

    def _field_value(self, f) -> cst.BaseExpression:
        value = f.value
        if f.params:
            value = cst.Lambda(
                params=cst.Parameters(params=[cst.Param(cst.Name(p)) for p in f.params]), body=value
            )
        if _always_none(value):
            return cst.Name("None")  # None on every path anyway
        if len(f.guards) == 1:
            for test, polarity in reversed(f.guards[0]):
                # only the code path that runs under this test uses the field: compute it only then
                none = cst.Name("None")
                value = (
                    cst.IfExp(test=test, body=_grouped(value), orelse=none)
                    if polarity
                    else cst.IfExp(test=test, body=none, orelse=_grouped(value))
                )
        elif f.guards:
            value = cst.IfExp(test=_disjunction(f.guards), body=_grouped(value), orelse=cst.Name("None"))
        value = value.visit(_SameArms(value, lambda node: type(node) is cst.IfExp))
        # a keyword argument of dict(…): a bare tuple (``self.layer_past[0], self.layer_past[1]``) gets its
        # parentheses
        return _grouped(value) if isinstance(value, cst.Tuple) else value

    def _construction_imports(self, statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        reads: set[str] = set()
        for statement in statements:
            reads |= names_read(statement)
        origin = dotted_module_of(self.inputs.module.path)
        entries = []
        for name in sorted(reads):
            if name in ("ttnn", LEGACY, "cls", "types") or name in self.generated_names:
                continue  # module-level names of the generated file itself (copied helpers) need no import
            if name in self.orig.imports:
                module, imported = self.orig.imports[name]
                entries.append((module, imported, name))
            elif name in self.orig.definitions:
                entries.append((origin, name, name))
            else:
                found = self._helper_name(name)
                if found is not None:
                    entries.append(found)
        self._unresolved_construction_imports(entries)
        out = sorted_imports(entries, self.first_party)
        if out:
            out[0] = _with_comment(
                out[0].with_changes(leading_lines=[]), "TTTv1 names the bridge needs (imported here only)"
            )
        return out

    def _unresolved_construction_imports(self, entries: list[tuple[str, str | None, str]]) -> None:
        """A name ``from_model_args`` imports from a module that resolves to no file of the project and to no
        installed package is a gap: building the module raises ``ModuleNotFoundError`` (TTTv1's own module cannot
        be imported either; tt-metal's cross-attention block imports a ``llama_cross_attention`` a partial
        checkout lacks)."""
        root = first_party_folder(self.inputs.module.path)
        for module, _imported, name in entries:
            if module.startswith(".") or module.split(".", 1)[0] in RUNTIME_MODULES:
                continue
            if resolve_module(module, root) is not None:
                continue
            if any(g.what == name and "resolves to no file" in g.reason for g in self.gaps):
                continue  # said already (the run-time import of the same name)
            gap = Gap(
                f"{self.inputs.module.name}:{_import_line(self.inputs.module.text, name)}",
                name,
                f"from_model_args imports it from {module}, which resolves to no file under {root} (or a folder "
                "above it) and to no installed package: ModuleNotFoundError when the module is built",
            )
            if gap not in self.gaps:
                self.gaps.append(gap)


def _import_line(text: str, name: str) -> int:
    """The line of the import that binds ``name`` at the top of a module (1 when none is found)."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(("from ", "import ")) and name in line.replace(",", " ").split():
            return number
    return 1


def _checks(statements: list[cst.BaseStatement]) -> bool:
    """Whether static code contains an ``assert`` or ``raise``: TTTv1's own checks, kept even when no field
    needs the code around them."""
    return any(type(node) in (cst.Assert, cst.Raise) for s in statements for node in walk(s))


def _own_returns(node: cst.CSTNode) -> list[cst.Return]:
    """The ``return`` statements of a block's own code (not those of functions or classes defined in it)."""
    if isinstance(node, cst.Return):
        return [node]
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return []
    return [r for child in children(node) for r in _own_returns(child)]


def _trailing(text: str) -> cst.TrailingWhitespace:
    return cst.TrailingWhitespace(whitespace=cst.SimpleWhitespace("  "), comment=cst.Comment("# " + text))


def _docstring(statement: cst.BaseStatement) -> bool:
    small = small_statement(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, (cst.SimpleString, cst.ConcatenatedString))


def _substitute_values(fn, fields, make_value):
    values = {f"__V{i}__": make_value(f) for i, f in enumerate(fields)}

    class _T(_Entering):
        def leave_Name(self, original_node, updated_node):
            return values.get(updated_node.value, updated_node)

    out = fn.visit(_T(fn, lambda node: type(node) is cst.Name and node.value in values))
    # one comment per field: where TTTv1 computes it
    return out


def assigned(statement) -> list[str]:
    return assigned_names(small_statement(statement)) or []


def _predeclare(statements: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
    """``name = None`` for every name the construction code assigns only under a static test, so that the
    fields that read it exist (as None) on the paths where TTTv1 never computes it."""
    top: set[str] = set()
    guarded: set[str] = set()
    for statement in statements:
        if isinstance(statement, cst.If):
            from .cstutil import names_written

            guarded |= names_written(statement)
        else:
            top |= set(assigned(statement))
    names = sorted(guarded - top)
    return [cst.parse_statement(f"{name} = None") for name in names]


def _with_mode_param(params: cst.Parameters) -> cst.Parameters:
    """``(self, x)`` -> ``(self, x, mode)``: the mode TTTv1 read from ``model_config["LLM_MODE"]`` (keyword-only
    after a parameter with a default)."""
    mode = cst.Param(cst.Name("mode"))
    if params.star_arg is not cst.MaybeSentinel.DEFAULT or any(p.default is not None for p in params.params):
        return params.with_changes(kwonly_params=[*params.kwonly_params, mode])
    return params.with_changes(params=[*params.params, mode])


def _mode_default_as_string(params: cst.Parameters) -> cst.Parameters:
    """``mode: Mode = Mode.DECODE`` -> ``mode="decode"``: the dispatcher takes either spelling and needs no TTTv1
    import (not even for an annotation)."""

    def fix(param: cst.Param) -> cst.Param:
        if param.name.value not in MODE_NAMES:
            return param
        if param.annotation is not None:
            param = param.with_changes(annotation=None)
        default = param.default
        if isinstance(default, cst.Attribute):
            value = default.attr.value.lower()
            if value in ("decode", "prefill"):
                return param.with_changes(default=cst.SimpleString(f'"{value}"'))
        return param

    return params.with_changes(
        params=[fix(p) for p in params.params], kwonly_params=[fix(p) for p in params.kwonly_params]
    )


def _literal(test: cst.BaseExpression, polarity: bool) -> cst.BaseExpression:
    if polarity:
        return _parens(test)
    inverse = {
        cst.Equal: cst.NotEqual,
        cst.NotEqual: cst.Equal,
        cst.Is: cst.IsNot,
        cst.IsNot: cst.Is,
        cst.In: cst.NotIn,
        cst.NotIn: cst.In,
    }
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        flipped = inverse.get(type(target.operator))
        if flipped is not None:
            return _parens(test.with_changes(comparisons=[target.with_changes(operator=flipped())]))
    return cst.UnaryOperation(operator=cst.Not(), expression=_parens(test))


def _parens(node: cst.BaseExpression) -> cst.BaseExpression:
    from .cstutil import is_atom

    if is_atom(node) or node.lpar:
        return node
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def _disjunction(conjunctions) -> cst.BaseExpression:
    terms = []
    for conjunction in conjunctions:
        term = None
        for test, polarity in conjunction:
            lit = _literal(test, polarity)
            term = lit if term is None else cst.BooleanOperation(left=term, operator=cst.And(), right=lit)
        terms.append(_parens(term))
    out = terms[0]
    for term in terms[1:]:
        out = cst.BooleanOperation(left=out, operator=cst.Or(), right=term)
    return out


def _device_attrs_from_config(test: cst.BaseExpression, device: set[str]) -> cst.BaseExpression:
    """A bound choice tested on a device tensor's presence reads it from the config (``self.config.bias``): at
    construction only the LazyWeight (or None) exists."""

    class _T(cst.CSTTransformer):
        def leave_Attribute(self, original_node, updated_node):
            value = updated_node.value
            if isinstance(value, cst.Name) and value.value == "self" and updated_node.attr.value in device:
                return cst.Attribute(
                    value=cst.Attribute(value=cst.Name("self"), attr=cst.Name("config")),
                    attr=updated_node.attr,
                )
            return updated_node

    return test.visit(_T())


def materialise_reads(
    statements: list[cst.BaseStatement], weights: frozenset[str] | set[str] = frozenset()
) -> list[cst.BaseStatement]:
    """TTTv1's __init__ may use an uploaded tensor right away (``width = bias.shape[-1]`` on the per-device
    tensor): every read of a LazyWeight-holding local other than storing it on ``legacy`` becomes
    ``_on_device(local)``, the (memoised) device tensor, so construction computes what TTTv1 computed. So does a
    LazyWeight handed straight to another call (Llama-2-70B's KV cache, ``ttnn.to_device(ttnn.as_tensor(…),
    mesh)`` in a comprehension), or made by a function or lambda of ``__init__`` that uploads it (the T3000
    Mixtral expert MLP's ``ttnn.to_device(upload("w1"), mesh)``, ``upload = lambda name: ttnn.as_tensor(…)``):
    that call gets the device tensor TTTv1's ``as_tensor`` returned.

    The same for the device attributes ``weights`` once TTTv1 has stored them: ``legacy.w1`` handed to a call
    (the Galaxy demo's ``prefetcher_setup.insert_tensor(self.w1)``, which reads its ``buffer_address()``) or
    read through (``legacy.w1.shape``) is ``_on_device(legacy.w1)`` at that statement, as TTTv1 has the device
    tensor there. The LazyWeight memoises it, so the forwards later use that same tensor. Storing it
    (``legacy.x = legacy.w1``, a list, ``append``) keeps the LazyWeight."""
    module = cst.Module(body=statements)
    producers: set[str] = set()
    lazy: set[str] = set()

    def makes_lazy(node: cst.CSTNode) -> bool:
        names = {"_lazy_weight"} | producers
        return any(isinstance(c.func, cst.Name) and c.func.value in names for c in summary(node).calls)

    def is_lazy_call(node: cst.CSTNode) -> bool:
        return (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Name)
            and (node.func.value == "_lazy_weight" or node.func.value in producers)
        )

    def passed_on(node: cst.CSTNode) -> bool:
        """A ``_lazy_weight(…)`` call that is an argument of a call other than ``_on_device``."""
        if not isinstance(node, cst.Call) or (
            isinstance(node.func, cst.Name) and node.func.value == "_on_device"
        ):
            return False
        return any(is_lazy_call(arg.value) for arg in node.args)

    for _ in range(2):  # producers defined before the locals that use them
        for node in walk(module):
            if type(node) is cst.FunctionDef:
                if makes_lazy(node.body):
                    producers.add(node.name.value)
            elif type(node) is cst.Assign:
                for target in node.targets:
                    if not isinstance(target.target, cst.Name):
                        continue
                    if isinstance(node.value, cst.Call) and makes_lazy(node.value):
                        lazy.add(target.target.value)
                    elif isinstance(node.value, cst.Lambda) and makes_lazy(node.value.body):
                        # ``upload = lambda name: ttnn.as_tensor(…)`` (tt-metal's T3000 Mixtral MLP): a producer
                        producers.add(target.target.value)
    if not lazy and not weights and not any(passed_on(node) for node in walk(module)):
        return statements

    def weight_attr(node: cst.BaseExpression) -> bool:
        return (
            type(node) is cst.Attribute
            and isinstance(node.value, cst.Name)
            and node.value.value == LEGACY
            and node.attr.value in weights
        )

    def on_device(node: cst.BaseExpression) -> cst.Call:
        return cst.Call(func=cst.Name("_on_device"), args=[cst.Arg(node)])

    class _Wrap(cst.CSTTransformer):
        def __init__(self) -> None:
            super().__init__()
            self.keep: set[int] = set()
            self.wrap: set[int] = set()

        def visit_Assign(self, node: cst.Assign) -> None:
            # ``legacy.x = local`` (or a list of them) stores the LazyWeight itself
            if any(isinstance(t.target, cst.Attribute) for t in node.targets):
                values = [node.value]
                if isinstance(node.value, (cst.List, cst.Tuple)):
                    values = [e.value for e in node.value.elements]
                for value in values:
                    if isinstance(value, cst.Name):
                        self.keep.add(id(value))
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self.keep.add(id(target.target))

        def visit_Attribute(self, node: cst.Attribute) -> None:
            self.keep.add(id(node.attr))

        def visit_Arg(self, node: cst.Arg) -> None:
            if node.keyword is not None:
                self.keep.add(id(node.keyword))

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "_on_device":
                for arg in node.args:
                    self.keep.add(id(arg.value))
            elif passed_on(node):
                self.wrap.update(id(arg.value) for arg in node.args if is_lazy_call(arg.value))

        def leave_Name(self, original_node, updated_node):
            if updated_node.value in lazy and id(original_node) not in self.keep:
                return on_device(updated_node)
            return updated_node

        def leave_Call(self, original_node, updated_node):
            if id(original_node) in self.wrap:  # a LazyWeight handed straight to another call
                return on_device(updated_node)
            callee = dotted(updated_node.func) or ""
            if callee.rsplit(".", 1)[-1] in _KEEPS_WEIGHT or not any(
                weight_attr(a.value) for a in updated_node.args
            ):
                return updated_node
            args = [
                a.with_changes(value=on_device(a.value)) if weight_attr(a.value) else a
                for a in updated_node.args
            ]
            return updated_node.with_changes(args=args)

        def leave_Attribute(self, original_node, updated_node):
            if weight_attr(updated_node.value):  # legacy.w1.shape: the device tensor's
                return updated_node.with_changes(value=on_device(updated_node.value))
            return updated_node

    return list(module.visit(_Wrap()).body)


# calls that keep a weight as it is (store, test or convert it): its LazyWeight is handed on
_KEEPS_WEIGHT = frozenset(
    {
        "_on_device",
        "_lazy_weight",
        "list",
        "tuple",
        "dict",
        "append",
        "extend",
        "setattr",
        "getattr",
        "hasattr",
        "isinstance",
        "id",
    }
)


def _needed_noqa(line: str, module: cst.Module) -> str | None:
    """A file-level ``# ruff: noqa: A, B`` keeping only the codes the generated code still needs (ruff reports
    unused ones). Codes this function cannot check are kept."""
    prefix, _, codes = line.rpartition(":")
    if not prefix.strip().endswith("noqa"):
        return line
    found = {"E731": False, "SIM210": False}
    for node in walk(module):
        kind = type(node)
        if kind is cst.Assign and isinstance(node.value, cst.Lambda):
            found["E731"] = True
        elif kind is cst.IfExp and code(node.body).strip() == "True" and code(node.orelse).strip() == "False":
            found["SIM210"] = True
    kept = [c.strip() for c in codes.split(",") if c.strip() and found.get(c.strip(), True)]
    return f"{prefix}: {', '.join(kept)}" if kept else None


def _is_import_line(statement) -> bool:
    return isinstance(statement, cst.SimpleStatementLine) and all(
        isinstance(s, (cst.Import, cst.ImportFrom)) for s in statement.body
    )


def _grouped(node: cst.BaseExpression) -> cst.BaseExpression:
    """A conditional expression or lambda as an arm of another conditional keeps its own extent (libcst does not
    add the parentheses: ``a if t else None if u else None`` would read as ``a if t else (None if u ...)``); a
    bare tuple too (``None if t else a, b`` is a tuple of two)."""
    if isinstance(node, (cst.IfExp, cst.Lambda, cst.Tuple)) and not node.lpar:
        return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return node


class _Entering(cst.CSTTransformer):
    """A transformer that enters only the subtrees of ``tree`` holding a node ``hit`` is true for (the only
    nodes its leave hooks change): the rest keeps its identity, and LibCST does not rebuild it."""

    def __init__(self, tree: cst.CSTNode, hit) -> None:
        super().__init__()
        self.hot = hot_paths(tree, hit)

    def on_visit(self, node) -> bool:
        return (self.hot is None or id(node) in self.hot) and super().on_visit(node)


class _SameArms(_Entering):
    """``a if test else a`` -> ``a`` (the tests of field guards are config reads without side effects)."""

    def leave_IfExp(self, original_node, updated_node):
        if code(updated_node.body).strip() == code(updated_node.orelse).strip():
            return updated_node.body
        return updated_node


def _always_none(node: cst.BaseExpression) -> bool:
    """``None``, or conditional expressions whose every arm is ``None``."""
    if isinstance(node, cst.IfExp):
        return _always_none(node.body) and _always_none(node.orelse)
    return isinstance(node, cst.Name) and node.value == "None"
