"""trace-deps engine details: less common spellings, import resolution, the constant evaluator, guards."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

from tttv2_tools.trace_dependencies import MODE, STATIC, TraceError, analyze
from tttv2_tools.trace_dependencies.astutil import NOTHING, const_eval
from tttv2_tools.trace_dependencies.engine import Engine
from tttv2_tools.trace_dependencies.source import Project, common_base, read_source

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def misc():
    return analyze(FIX / "misc" / "module.py")


@pytest.fixture(scope="module")
def misc_engine():
    project = Project(FIX / "misc")
    engine = Engine(
        project, project.load(FIX / "misc" / "module.py"), project.load(FIX / "misc" / "model_config.py")
    )
    engine.compose()
    return engine


def test_config_class_found_by_model_config_use_and_inheritance(misc):
    assert misc.config_class == "Config" and misc.module_class == "Block"
    assert misc.keys_read() == [
        "AFTER_RETURN",
        "FROM_KW",
        "LITERAL_B",
        "NOT_THERE",
        "P_LOOP",
        "RAISES",
        "WHILE_KEY",
        "X1_GLOBAL",
    ]
    members = {r.name: r.resolved for r in misc.reads if r.kind != "key"}
    assert members == {
        "prop": True,
        "with_prop": True,
        "BASE_CONST": True,
        "base_helper": True,
        "missing_method": False,
    }
    (after,) = misc.definitions["AFTER_RETURN"]
    assert [g.describe() for g in after.guards] == ['not (self.arch == "blackhole")']  # early return
    assert misc.definitions["RAISES"][0].guards == []  # a raising arm is a validation, not a guard
    assert "hf:hidden_size" in nx.ancestors(misc.graph, "key:P_LOOP")
    assert misc.graph.nodes["unknown:method:missing_method"]["reason"] == (
        "ModelArgs (model_config.py) defines no method 'missing_method'"
    )


def test_generated_and_literal_keys(misc_engine):
    keys = set(misc_engine.out.key_defs)
    assert {
        "LITERAL_A",
        "LITERAL_B",
        "P_LOOP",
        "Q_LOOP",
        "X1_GLOBAL",
        "X2_GLOBAL",
        "L1_LOCAL",
        "FROM_DICT_CALL",
        "FROM_KW",
        "FROM_UPDATE_LITERAL",
        "P_C",
        "SET_DEFAULT",
        "USES_GLOBAL",
        "ORPHAN",
        "CYCLE",
    } <= keys
    assert "Q_C" not in keys  # filtered by the comprehension's if
    dynamic = sorted(d.dynamic for d in misc_engine.out.dynamic_defs)
    assert dynamic == ["model_config.update(self.extra())", 'model_config[f"{key}_DYN"]']
    (orphan,) = misc_engine.out.key_defs["ORPHAN"]
    assert orphan.guards == (("call:Config.orphan", "called"),)
    (cycle,) = misc_engine.out.key_defs["CYCLE"]
    assert cycle.guards[0][0] == "call:Config.cycle_a"


def test_env_hardware_and_imports(misc):
    g = misc.graph
    env_nodes = {n for n in g if n.startswith("env:")}
    assert env_nodes == {"env:MODULE_ENV"}  # only what the module reaches
    project = Project(FIX / "misc")
    engine = Engine(
        project, project.load(FIX / "misc" / "module.py"), project.load(FIX / "misc" / "model_config.py")
    )
    for attr in ("env_a", "env_b", "env_c", "env_d", "env_e", "arch", "cluster", "grid"):
        engine.attr_node(attr)
    engine.expand_all()
    assert {"env:ENV_A", "env:ENV_B", "env:ENV_C"} <= set(engine.out.g)
    unknown_env = [n for n in engine.out.g if n.startswith("unknown:env:")]
    assert len(unknown_env) == 2  # os.getenv(name) and environ.get(name) with a computed name
    assert {"hw:arch", "hw:cluster_type", "hw:compute_grid"} <= set(engine.out.g)


def test_module_spellings(misc):
    ops = {o.op: o for o in misc.ops}
    assert (
        ops["ttnn.experimental.all_gather_async"].spelled == "all_gather_async"
    )  # from ttnn.experimental import
    assert ops["ttnn.exp"].function.endswith("<lambda@25:19>")  # from tttv2 import ttnn as emu, in a lambda
    assert ops["ttnn.relu"].function == "Base.shared"  # inherited method stored on self
    assert ops["ttnn.matmul"].spelled == "@ (tensor operator)"
    assert misc.branch_at("module.py", 32).topology == ["galaxy"]  # constructor argument galaxy=
    assert misc.branch_at("module.py", 34).mode == ["decode"]  # mode in ("decode",)
    assert misc.branch_at("module.py", 34).classification == MODE
    assert {"input:rest", "input:extra", "module:kw"} <= set(misc.graph)
    keys = [r for r in misc.reads if r.name == "LITERAL_B"]
    assert keys[0].note == "key from k over a constant iterable"


def test_no_config_and_no_model_args(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "class M:\n    def forward(self, x, mode):\n        return self.args.dim, self.mc['K']\n"
    )
    a = analyze(module, auto_config=False)
    assert a.config is None and a.config_class is None
    cfg = tmp_path / "model_config.py"
    cfg.write_text("X = 1\n")
    module.write_text(
        "class M:\n    def __init__(self, args, model_config):\n        self.args, self.mc = args, model_config\n"
        "    def forward(self, x, mode):\n        return self.args.dim, self.mc['K'], self.args.m()\n"
    )
    a = analyze(module)
    assert a.config == "model_config.py" and a.config_class is None
    assert any(s.what == "ModelArgs" for s in a.skipped)
    assert a.graph.nodes["unknown:key:K"]["reason"] == "model_config.py has no ModelArgs class"
    assert "has no ModelArgs class" in a.graph.nodes["unknown:attr:dim"]["reason"]
    a = analyze(module, auto_config=False)
    assert a.graph.nodes["unknown:key:K"]["reason"] == "no config module given"
    assert a.analysis if hasattr(a, "analysis") else True
    same = analyze(module, module)  # a module given as its own config is ignored as config
    assert same.config is None


def test_class_and_entry_selection(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\nclass A:\n    def run(self, x):\n        return ttnn.relu(x)\n"
        "class B(A):\n    def other(self, x):\n        return x\n"
    )
    a = analyze(module, entry="run")
    assert a.module_class == "A"
    b = analyze(module, class_name="B", entry="run")  # inherited entry method
    assert b.module_class == "B" and b.paths["decode/galaxy"] == ["ttnn.relu"]


def test_import_resolution(tmp_path):
    pkg = tmp_path / "models" / "tt_transformers" / "tt"
    pkg.mkdir(parents=True)
    (pkg / "ccl.py").write_text("x = 1\n")
    (tmp_path / "models" / "__init__.py").write_text("")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "__init__.py").write_text("")
    project = Project(tmp_path)
    importer = pkg / "mlp.py"
    assert project.resolve_module("models.tt_transformers.tt.ccl", 0, importer) == pkg / "ccl.py"
    assert project.resolve_module("tt.ccl", 0, importer) == pkg / "ccl.py"
    assert project.resolve_module("other.pkg.ccl", 0, importer) is None  # tail only matches its own package
    assert project.resolve_module("ccl", 0, importer) == pkg / "ccl.py"
    assert project.resolve_module("ccl", 1, importer) == pkg / "ccl.py"
    assert project.resolve_module("sub", 1, importer) == pkg / "sub" / "__init__.py"
    assert project.resolve_module("", 1, importer) is None
    assert project.resolve_module("tt_transformers", 2, importer / "x") is None
    assert project.resolve_module("models", 0, importer) == tmp_path / "models" / "__init__.py"
    assert project.resolve_module("", 0, importer) is None
    assert project.display(Path("/elsewhere/file.py")) == "file.py"
    assert common_base([pkg / "a.py", tmp_path / "b.py"]) == tmp_path


def test_read_source_errors(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_bytes(b"\xff\xfe not utf8")
    with pytest.raises(TraceError, match="not UTF-8"):
        read_source(bad, "bad.py")
    with pytest.raises(TraceError, match="no such file"):
        read_source(tmp_path / "missing.py", "missing.py")
    with pytest.raises(TraceError, match="cannot read"):
        read_source(tmp_path, "folder")
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\x00\n")
    with pytest.raises(TraceError, match="does not parse"):
        read_source(nul, "nul.py")
    project = Project(tmp_path)
    with pytest.raises(TraceError):
        project.load(bad)
    with pytest.raises(TraceError):  # cached failure
        project.load(bad)
    ok = tmp_path / "ok.py"
    ok.write_text("import a.b\nfrom . import c\nfrom .d import *\nx = [1]\n")
    source = read_source(ok, "ok.py")
    assert source.imports == {"a": ("a", None, 0), "c": ("", "c", 1)}
    assert source.segment(source.tree.body[-1], limit=5) == "x = …"


def test_const_eval():
    env = {"key": "MLP_WEIGHTS"}
    cases = {
        'f"{key}_MEMCFG"': "MLP_WEIGHTS_MEMCFG",
        '"WEIGHTS" in key': True,
        '"W" not in key': False,
        'key == "X"': False,
        'key != "X"': True,
        'key.startswith("MLP")': True,
        "key.lower()": "mlp_weights",
        '"A" + "B"': "AB",
        "not key": False,
        "key and 1": True,
        "(1, key)": (1, "MLP_WEIGHTS"),
        "[1]": [1],
    }
    for source, expected in cases.items():
        assert const_eval(ast.parse(source, mode="eval").body, env) == expected, source
    for source in (
        'f"{key!r}"',
        'f"{key:>3}"',
        "unknown",
        "1 + x",
        "x < 1",
        'key.split("_")',
        "1 < 2 < 3",
        "1 in 2",
        "f(1)",
        '"a" + 1',
        "not x",
        "x or 1",
        "[x]",
        'f"{x}"',
    ):
        assert const_eval(ast.parse(source, mode="eval").body, env) is NOTHING, source
    assert const_eval(None, {}) is NOTHING


def test_guards_from_loops_match_and_try(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\n"
        "class M:\n"
        "    def forward(self, x, mode):\n"
        "        for i in range(3):\n"
        "            if i:\n"
        "                continue\n"
        "            x = ttnn.relu(x)\n"
        "        match mode:\n"
        "            case {'a': 1, **rest}:\n"
        "                return rest\n"
        "            case [first, *others]:\n"
        "                return others\n"
        "            case _:\n"
        "                pass\n"
        "        try:\n"
        "            return x\n"
        "        finally:\n"
        "            x = None\n"
    )
    a = analyze(module, auto_config=False)
    relu = next(o for o in a.ops if o.op == "ttnn.relu")
    assert relu.guards == ["m.py:5:15#else"]  # after "if i: continue"
    assert sum(1 for b in a.branches if b.construct == "match") == 3
    assert a.branch_at("m.py", 9).classification == MODE


def test_helper_cycles_and_recursion_are_bounded(tmp_path):
    module = tmp_path / "m.py"
    deep = "x" + " + x" * 400
    module.write_text(
        "import ttnn\n"
        "def f(x):\n    return g(x)\n"
        "def g(x):\n    return f(x) if x else ttnn.relu(x)\n"
        "class M:\n    def forward(self, x, mode):\n"
        f"        y = {deep}\n"
        "        return f(y)\n"
    )
    a = analyze(module, auto_config=False)
    assert a.paths["decode/galaxy"] == ["ttnn.add", "ttnn.relu"] or "ttnn.relu" in a.paths["decode/galaxy"]
    assert a.branch_at("m.py", 5).classification in (STATIC, "runtime")


def test_containers_filled_in_place_depend_on_what_goes_in(tmp_path):
    """``pieces.append(op(x))`` / ``out[i] = v``: the container depends on the values, so a test on what is
    built from it is runtime, not static (it was static before: the fill was not an assignment)."""
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\n\n\nclass M:\n    def forward(self, x, mode):\n"
        "        kept = []\n        kept.append(self.args.dim)\n        if kept[0] == 8:\n            x = x + 1\n"
        "        pieces = []\n        for w in range(2):\n            pieces.append(ttnn.linear(x, w))\n"
        "        if ttnn.concat(pieces).is_sharded():\n            x = x + 1\n"
        "        table = {}\n        table[0] = x\n        if table[0].is_sharded():\n            x = x + 1\n"
        "        return x\n"
    )
    a = analyze(module, auto_config=False)
    classes = {b.loc.split(":")[1]: b.classification for b in a.branches}
    assert classes == {"8": "static", "13": "runtime", "17": "runtime"}
