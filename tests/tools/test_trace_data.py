"""``Analysis`` is pure data: JSON round trip, queries on a loaded analysis, character columns, the libcst helper,
branch decisions per (topology, mode), and a package without import cycles (issue 10, items 1, 2 and 6)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper

import tttv2_tools.trace_dependencies as td
from tttv2_tools.trace_dependencies import (
    SCHEMA_VERSION,
    Analysis,
    SchemaError,
    analyze,
    arm,
    decide,
    deciding_facts,
    node_at,
    node_for,
    parse_loc,
)
from tttv2_tools.trace_dependencies.query import all_paths

FIX = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]
INPUTS = {
    "tttv1 mlp": (ROOT / "tttv1/tt/mlp.py", ROOT / "tttv1/tt/model_config.py"),
    "tttv1 attention": (ROOT / "tttv1/tt/attention.py", ROOT / "tttv1/tt/model_config.py"),
    "g2 mlp": (FIX / "g2/mlp.py", FIX / "g2/model_config.py"),
    "g2 attention": (FIX / "g2/attention.py", FIX / "g2/model_config.py"),
    "g3 mlp": (FIX / "g3/mlp.py", FIX / "g3/model_config.py"),
    "misc": (FIX / "misc/module.py", FIX / "misc/model_config.py"),
    "weird": (FIX / "bad/weird.py", None),
}


@pytest.fixture(scope="module", params=sorted(INPUTS))
def analysis(request):
    module, config = INPUTS[request.param]
    return analyze(module, config, auto_config=False)


def test_json_round_trip_gives_an_equal_object(analysis):
    text = analysis.to_json()
    loaded = Analysis.from_json(text)
    assert loaded == analysis and loaded.to_json() == text
    assert json.loads(text)["schema_version"] == SCHEMA_VERSION == "2.0"
    view = analysis.restrict(mode="decode", topology="2d")
    assert Analysis.from_json(view.to_json()) == view


def test_equality_sees_every_field():
    analysis = analyze(*INPUTS["g2 mlp"])
    loaded = Analysis.from_json(analysis.to_json())
    assert loaded != dataclasses.replace(loaded, entries=[])
    other = Analysis.from_json(analysis.to_json())
    other.branches[0].decision = ["const", True]
    assert other != analysis
    other = Analysis.from_json(analysis.to_json())
    node = sorted(other.dependencies)[0]
    other.dependencies.nodes[node]["label"] = "changed"
    assert other != analysis
    assert loaded.seconds == 0.0 and loaded == dataclasses.replace(
        analysis, seconds=123.0
    )  # timing is not data


def test_queries_work_on_a_loaded_analysis(analysis):
    loaded = Analysis.from_json(analysis.to_json())
    assert all_paths(loaded) == loaded.paths == analysis.paths
    for mode, topology in (("prefill", "2d"), ("decode", None)):
        assert loaded.restrict(mode=mode, topology=topology) == analysis.restrict(
            mode=mode, topology=topology
        )
    for name in [*analysis.keys_read()[:2], *(b.loc for b in analysis.branches[:2])]:
        assert loaded.why(name) == analysis.why(name)
        assert loaded.focus(name) == analysis.focus(name)


def test_loading_rejects_other_json():
    with pytest.raises(SchemaError, match="not a trace-deps analysis"):
        Analysis.from_json("{}")
    with pytest.raises(SchemaError, match=re.escape("schema_version: expected one of 2.0, got '1.0'")):
        Analysis.from_json(json.dumps({"schema": "trace-deps", "schema_version": "1.0"}))
    with pytest.raises(SchemaError, match="malformed trace-deps JSON: KeyError"):
        Analysis.from_json(json.dumps({"schema": "trace-deps", "schema_version": SCHEMA_VERSION}))
    with pytest.raises(SchemaError, match="not JSON"):
        Analysis.from_json("{")


# -- branch decisions per (topology, mode) ------------------------------------------------------------------
def test_decide_per_topology_and_mode():
    a = analyze(FIX / "g2/mlp.py", FIX / "g2/model_config.py")
    mode_branch = a.branch_at("mlp.py", 50)  # if mode == "decode":
    galaxy_branch = a.branch_at("mlp.py", 51)  # if TG:  (TG = self.args.is_galaxy)
    both = a.branch_at("mlp.py", 71)  # if self.TG and mode != "decode":
    assert [decide(mode_branch, mode=m) for m in ("decode", "prefill", None)] == [True, False, None]
    assert [decide(galaxy_branch, topology=t) for t in ("2d", "1d", None)] == [True, False, None]
    assert decide(both, "2d", "prefill") is True and decide(both, "1d", "prefill") is False
    assert decide(both, "2d", None) is None and decide(both, None, "decode") is False
    assert arm(both, "2d", "prefill") == "then" and arm(both, "1d") == "else" and arm(both) is None
    assert deciding_facts(both) == [("galaxy", True), ("mode:decode", False)]
    assert a.decide("mlp.py:71", topology="2d", mode="prefill") is True
    assert a.decide(both.id, topology="1d") is False
    loaded = Analysis.from_json(a.to_json())
    assert decide(loaded.branch_at("mlp.py", 71), "2d", "prefill") is True
    with pytest.raises(KeyError, match=re.escape("no branch at 'mlp.py:9999'")):
        a.decide("mlp.py:9999")
    with pytest.raises(ValueError, match="topology: expected one of 1d, 2d or None, got '3d'"):
        decide(both, topology="3d")
    with pytest.raises(ValueError, match="mode: expected one of decode, prefill or None, got 'train'"):
        decide(both, mode="train")


# -- character columns and the libcst helper ------------------------------------------------------------------
NON_ASCII = """import ttnn


class MLP:
    def forward(self, x, mode):
        s = "héllo"; a = self.model_config["K_é"] if mode == "décode" else x
        t = "ü→"; y = ttnn.linear(x, x) if "é" else ttnn.relu(x)
        if "ß" and mode == "prefill":
            return ttnn.softmax(y)
        return a
"""


def test_locations_are_character_columns_on_non_ascii_lines(tmp_path):
    path = tmp_path / "mlp.py"
    path.write_text(NON_ASCII, encoding="utf-8")
    lines = NON_ASCII.splitlines()
    a = analyze(path, auto_config=False)

    def col(line: int, text: str) -> int:
        return lines[line - 1].index(text)

    (read,) = a.reads
    assert read.loc == f"mlp.py:6:{col(6, 'self.model_config')}"
    ifexp = a.branch_at("mlp.py", 6)
    assert (
        ifexp.loc == f"mlp.py:6:{col(6, 'mode ==')}" and ifexp.stmt_loc == f"mlp.py:6:{col(6, 'self.model')}"
    )
    ops = {o.op: o.loc for o in a.ops}
    assert ops["ttnn.linear"] == f"mlp.py:7:{col(7, 'ttnn.linear')}"
    assert ops["ttnn.relu"] == f"mlp.py:7:{col(7, 'ttnn.relu')}"
    stmt = a.branch_at("mlp.py", 8)
    assert stmt.span == td.Span(8, 8, 9, 34) and stmt.test_span == td.Span(8, 11, 8, 36)

    wrapper = MetadataWrapper(cst.parse_module(NON_ASCII))
    module = wrapper.module
    test = node_at(wrapper, *parse_loc(ifexp.loc)[1:])
    assert isinstance(test, cst.Comparison) and module.code_for_node(test) == 'mode == "décode"'
    whole = node_at(wrapper, *parse_loc(ifexp.stmt_loc)[1:], kind=cst.IfExp)
    assert module.code_for_node(whole) == 'self.model_config["K_é"] if mode == "décode" else x'
    if_stmt = node_for(wrapper, stmt.span, kind=cst.If)
    assert module.code_for_node(if_stmt).startswith('if "ß" and mode == "prefill":')
    assert module.code_for_node(node_for(NON_ASCII, stmt.test_span)) == '"ß" and mode == "prefill"'
    line, column = parse_loc(ops["ttnn.relu"])[1:]
    assert module.code_for_node(node_at(module, line, column, kind=cst.Call)) == "ttnn.relu(x)"
    assert node_at(wrapper, 6, 3) is None and node_at(wrapper, 8, 11, kind=cst.If) is None
    with pytest.raises(ValueError, match=re.escape("loc: expected 'file:line:col', got 'mlp.py'")):
        parse_loc("mlp.py")
    with pytest.raises(TypeError, match="source: expected source text"):
        node_at(b"x = 1", 1, 0)


# -- structure: no import cycles, every module importable on its own ------------------------------------------
PACKAGE = Path(td.__file__).resolve().parent


def _imports(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports anywhere (functions included), except under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            skip |= {id(n) for n in ast.walk(node)}
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out |= {alias.name for alias in node.names}
    return out


def test_no_import_cycles_between_the_package_modules():
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert {"engine", "model", "query", "serial", "records", "graphing", "facts", "roles"} <= set(graph)
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        assert state.get(name) != 1, f"import cycle: {' -> '.join([*path, name])}"
        state[name] = 1
        for dep in sorted(graph.get(name, ())):
            visit(dep, [*path, name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])
    for pure in ("records", "decision", "ids", "query", "serial", "model", "locate"):  # the data layer ...
        assert not graph[pure] & {"engine", "graphing", "api", "cli", "scan", "state"}, (
            pure
        )  # ... needs no engine
    for name in sorted(graph):
        importlib.import_module(f"tttv2_tools.trace_dependencies.{name}")


def test_public_api_lists_the_codemod_helpers():
    for name in ("node_at", "node_for", "parse_loc", "decide", "arm", "deciding_facts", "Span", "Analysis"):
        assert name in td.__all__ and hasattr(td, name)


def test_json_path_imports_neither_networkx_nor_rich(tmp_path):
    """networkx is imported only for graph outputs and ``Analysis.graph``, rich only for the terminal report."""
    script = (
        "import sys\n"
        "from tttv2_tools.trace_dependencies.cli import main\n"
        f"code = main([{str(FIX / 'g2/mlp.py')!r}, '--json={tmp_path / 'a.json'}', '--quiet'])\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'networkx', 'rich', 'libcst'})\n"
        "print(code, heavy)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0 []"
    loaded = Analysis.from_json((tmp_path / "a.json").read_text())
    assert loaded.graph.number_of_nodes() == loaded.dependencies.number_of_nodes() > 0  # networkx on demand
    assert sorted(loaded.graph.predecessors("key:FF1_3_TG_PROGCFG")) == sorted(
        loaded.dependencies.predecessors("key:FF1_3_TG_PROGCFG")
    )


def test_json_to_a_file_loads_only_what_json_needs(tmp_path):
    """``trace-deps MODULE CONFIG --json=OUT`` (no --quiet): the JSON file is the chosen output, so only the report's
    summary is printed (plain lines) and neither rich, networkx, the graph exporters and report modules nor tempfile
    (the atomic write makes its temporary file itself) nor socket (the temporary file's host name comes from
    os.uname) is imported; stderr has only the "wrote" line."""
    out = tmp_path / "a.json"
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from tttv2_tools.trace_dependencies.cli import console\n"
        f"sys.argv = ['trace-deps', {str(ROOT / 'tttv1/tt/attention.py')!r}, "
        f"{str(ROOT / 'tttv1/tt/model_config.py')!r}, '--json={out}']\n"
        "code = console()\n"
        "new = set(sys.modules) - before\n"
        "heavy = {m.split('.')[0] for m in new} & {'networkx', 'rich', 'libcst', 'tempfile', 'shutil', 'socket'}\n"
        "ours = {m.rsplit('.', 1)[-1] for m in new if m.startswith('tttv2_tools.')} & {'export', 'report', 'html'}\n"
        "print(code, sorted(heavy | ours))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.startswith("Summary: class Attention") and done.stdout.endswith("\n0 []\n")
    assert done.stderr == f"wrote {out} (json)\n"
    assert json.loads(out.read_text())["schema"] == "trace-deps"


def test_every_record_class_has_its_own_docstring():
    """Start-up: ``@dataclass`` gives a class without a docstring one made from ``inspect.signature(cls)``, at
    import, at every run (~0.1-0.3 ms a class). Every dataclass of the tracer has its own, so none is made."""
    import dataclasses
    import importlib
    import pkgutil

    import tttv2_tools.trace_dependencies as td

    seen, generated = [], []
    for info in pkgutil.iter_modules(td.__path__):
        module = importlib.import_module(f"{td.__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and dataclasses.is_dataclass(value)
                and value.__module__ == module.__name__
            ):
                seen.append(value.__qualname__)
                if (value.__doc__ or "").startswith(value.__name__ + "("):
                    generated.append(value.__qualname__)
    assert len(seen) >= 10 and "Analysis" in seen and "ConfigRead" in seen
    assert generated == []


def test_json_on_stdout_imports_neither_typing_nor_shutil():
    """Start-up: the ``--json`` run imports no typing (annotations only) and no shutil (argparse's help formatter
    would import it, with zlib, bz2 and lzma, to read the terminal width). What the interpreter had loaded before
    the tool (a site-packages ``.pth`` file may import them for everyone) is not counted."""
    script = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from tttv2_tools.trace_dependencies.cli import console\n"
        f"sys.argv = ['trace-deps', {str(FIX / 'g2/mlp.py')!r}, '--json']\n"
        "code = console()\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "loaded = sorted(new & {'typing', 'shutil', 'tempfile', 'networkx', 'rich', 'libcst'})\n"
        "print('\\n', code, loaded)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    text, _, last = done.stdout.rpartition("\n\n")
    assert last.strip() == "0 []" and json.loads(text)["schema"] == "trace-deps"


def test_analysis_api_imports_neither_networkx_nor_rich_nor_libcst():
    """The analysis entry point and the queries over its data (what the codemod and collect-cases call) load none
    of the heavy libraries: networkx only for ``Analysis.graph`` and graph outputs, rich only for the terminal
    report, libcst only for ``locate``. Checked in a fresh interpreter, so an import added at the top of any module
    on this path fails here (a check of what is imported, not of how long it takes)."""
    script = (
        "import sys\n"
        "import tttv2_tools.trace_dependencies as td\n"
        f"a = td.analyze({str(ROOT / 'tttv1/tt/attention.py')!r}, {str(ROOT / 'tttv1/tt/model_config.py')!r})\n"
        "loaded = td.Analysis.from_json(a.to_json())\n"
        "assert loaded == a\n"
        "view = loaded.restrict(mode='decode', topology='2d')\n"
        "paths = loaded.why('args.dim')\n"
        "small = loaded.focus('args.dim')\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & {'networkx', 'rich', 'libcst'})\n"
        "print(len(view.ops) > 0, len(paths) > 0, small.dependencies.number_of_nodes() > 0, heavy)\n"
        "a.graph\n"  # asking for the networkx graph does load it (the check above can see an import)
        "print('networkx' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[:2] == ["True True True []", "True"]


def test_small_graph_matches_networkx():
    from tttv2_tools.trace_dependencies.graph import Graph

    g = Graph()
    g.add_nodes_from(["a", ("b", {"category": "key"})])
    g.add_edges_from([("a", "b", {"kind": "data"}), ("b", "c"), ("c", "d", {"kind": "bind"})])
    g.add_edge("a", "b", loc="x.py:1:0")  # updates the same edge
    g.add_node("b", label="B")  # updates the attributes
    assert (
        g.nodes["b"] == {"category": "key", "label": "B"} and g.nodes.get("zz", 1) == 1 and len(g.nodes) == 4
    )
    assert dict(g.nodes.items())["a"] == {} and list(g.nodes()) == ["a", "b", "c", "d"]
    assert sorted(g.edges(data=True))[0] == ("a", "b", {"kind": "data", "loc": "x.py:1:0"})
    assert g.has_edge("a", "b") and not g.has_edge("b", "a") and g.in_degree("d") == 1
    assert list(g.successors("b")) == ["c"] and g.ancestors("d") == {"a", "b", "c"}
    sub = g.subgraph(["d", "c", "zz"])
    assert list(sub) == ["d", "c"] and list(sub.edges()) == [("c", "d")]
    nxg = g.to_networkx()
    assert sorted(nxg.edges(data=True)) == sorted(g.edges(data=True)) and dict(nxg.nodes["b"]) == g.nodes["b"]
    g.remove_nodes_from(["c", "missing"])
    assert list(g) == ["a", "b", "d"] and g.number_of_edges() == 1 and "c" not in g and len(g) == 3
    copy = g.copy()
    copy.add_edge("d", "a")
    assert not g.has_edge("d", "a") and g.number_of_nodes() == 3


def test_proof_chains_do_not_depend_on_the_order_the_graph_was_built_in():
    """Two equally short paths from a root: the chain takes the smaller node id, whatever the insertion order
    (the engine's order follows set iteration, which changes with the hash seed)."""
    from tttv2_tools.trace_dependencies.facts import DataView, Proofs, compute_bits, root_bits
    from tttv2_tools.trace_dependencies.graph import Graph

    edges = [("hw:a", "local:y"), ("hw:a", "local:x"), ("local:y", "branch:b"), ("local:x", "branch:b")]
    chains = []
    for order in (edges, edges[::-1]):
        g = Graph()
        for node in sorted({n for e in order for n in e}, reverse=order is edges):
            g.add_node(node, category=node.split(":")[0].replace("hw", "hardware"), label=node)
        for u, v in order:
            g.add_edge(u, v, kind="data")
        view = DataView(g)
        compute_bits(g, view)
        proofs = Proofs(g, view, {n: root_bits(g, n, view.in_degree(n)) for n in g.nodes})
        chains.append([h.node for h in proofs.chain("branch:b", "static")])
    assert chains == [["hw:a", "local:x", "branch:b"]] * 2


def test_reaching_definitions_come_in_source_order():
    from tttv2_tools.trace_dependencies.flow import PARAM, reaching
    from tttv2_tools.trace_dependencies.scan import make_funcinfo
    from tttv2_tools.trace_dependencies.source import SourceFile

    def read_source_text(text):
        return SourceFile(Path("f.py"), "f.py", text, ast.parse(text), text.count("\n") + 1)

    text = "def f(x, c):\n    if c:\n        x = 1\n    elif c > 1:\n        x = 2\n    return x\n"
    source = read_source_text(text)
    info = make_funcinfo(source, source.tree.body[0], "f", None, None, False)
    use = info.returns[0][0]
    assert [s if s is PARAM else s.line for s in reaching(info)[id(use)]] == [PARAM, 3, 5]


def test_reaching_definitions_map_only_locals_with_several_assignments():
    """A local assigned once is the same at every use, so only reassigned locals and parameters are mapped (what
    ``local_uses`` asks for); the sets of the mapped ones do not depend on the others."""
    from tttv2_tools.trace_dependencies.flow import PARAM, reaching
    from tttv2_tools.trace_dependencies.scan import make_funcinfo
    from tttv2_tools.trace_dependencies.source import SourceFile

    def info_of(text):
        source = SourceFile(Path("f.py"), "f.py", text, ast.parse(text), text.count("\n") + 1)
        return make_funcinfo(source, source.tree.body[0], "f", None, None, False)

    assert reaching(info_of("def f(a):\n    y = a\n    return y\n")) == {}
    info = info_of("def f(a, c):\n    y = a\n    z = 1\n    if c:\n        z = y\n    return z + y\n")
    use = info.returns[0][0]  # z + y
    mapped = reaching(info)
    assert id(use.right) not in mapped  # y: one assignment
    assert [s if s is PARAM else s.line for s in mapped[id(use.left)]] == [3, 5]


def test_json_text_is_the_dict_form_written_out(analysis):
    # to_json() encodes the records directly (json asks for each record's fields), to_dict() builds plain dicts:
    # the same bytes, for the analysis and for a restricted view
    from tttv2_tools.trace_dependencies.serial import dumps

    assert analysis.to_json() == dumps(analysis.to_dict())
    view = analysis.restrict(mode="prefill", topology="1d")
    assert view.to_json() == dumps(view.to_dict())
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps({"x": {1, 2}})
    # one top-level field a line, each value compact (joined once from its pieces, no field copied into a line)
    assert (
        dumps({"a": 1, "b": [1, "\u00e9"], "c": None})
        == '{\n  "a": 1,\n  "b": [1, "\u00e9"],\n  "c": null\n}\n'
    )
    assert dumps({}) == "{\n\n}\n"


def test_json_edges_written_directly_are_the_encoders_bytes():
    # to_json() writes the edges with one format each instead of dicts for the encoder: the same text for ids that
    # need escaping (quotes, backslashes, control and non-ASCII characters), None, and any other value (encoder)
    from tttv2_tools.trace_dependencies.graph import Graph
    from tttv2_tools.trace_dependencies.serial import _ENCODER, _edge_dicts, _edges_text, dumps

    g = Graph()
    g.add_edge('key:A"B', "attr:x\\y", kind="reads", loc="m.py:1:0")
    g.add_edge("hw:\u00e9t\u00e9\n", "op:ttnn.add\t", kind=None, loc=None)
    g.add_edge("a", "b", kind=3, loc=["m.py", 2])
    g.add_edge("\U0001f600", "a")
    text = _edges_text(g)
    assert text == _ENCODER.encode(_edge_dicts(g))
    assert json.loads(text) == _edge_dicts(g)
    assert dumps({"edges": text}) == dumps({"edges": _edge_dicts(g)})
    assert _edges_text(Graph()) == "[]"
    one = Graph()
    one.add_edge("a", "b", kind="data", loc=None)
    assert _edges_text(one) == '[{"source": "a", "target": "b", "kind": "data", "loc": null}]'


def test_json_output_runs_without_the_cyclic_collector(monkeypatch):
    # to_json / to_dict pause the cyclic garbage collector while they build the JSON form (it has no cycles) and
    # leave it as they found it
    import gc

    from tttv2_tools.trace_dependencies import serial

    a = analyze(*INPUTS["g2 mlp"], auto_config=False)
    seen = []
    document = serial._document
    monkeypatch.setattr(serial, "_document", lambda *args: seen.append(gc.isenabled()) or document(*args))
    assert gc.isenabled()
    a.to_json(), a.to_dict()
    assert seen == [False, False] and gc.isenabled()
    gc.disable()
    try:
        a.to_json()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_records_compare_and_print_as_dataclasses_do():
    # the records share one __eq__ / __repr__ (records.Record) instead of dataclass-generated ones
    from tttv2_tools.trace_dependencies.records import Hop, Record, Span

    hop = Hop("hw:a", "a", None)
    assert repr(hop) == "Hop(node='hw:a', label='a', loc=None)"
    assert repr(Span(1, 0, 2, 3)) == "Span(start_line=1, start_col=0, end_line=2, end_col=3)"
    assert hop == Hop("hw:a", "a", None) and hop != Hop("hw:a", "a", "f.py:1:0")
    assert hop != Span(1, 0, 1, 0) and (hop == ("hw:a", "a", None)) is False
    assert dataclasses.replace(hop, loc="f.py:2:0") == Hop("hw:a", "a", "f.py:2:0")
    with pytest.raises(TypeError):
        hash(hop)

    @dataclasses.dataclass(eq=False, repr=False)
    class Tagged(Record):
        name: str
        note: str = dataclasses.field(default="", compare=False, repr=False)

    assert Tagged("a", "x") == Tagged("a", "y") != Tagged("b", "x")
    assert repr(Tagged("a", "x")).endswith(".Tagged(name='a')")


def test_plain_turns_records_into_json_values():
    from enum import Enum

    from tttv2_tools.trace_dependencies.records import Hop, Span
    from tttv2_tools.trace_dependencies.serial import plain

    class Side(str, Enum):  # a str subclass: kept as it is (json writes its value)
        MODULE = "module"

    value = {"chain": {"static": [Hop("hw:a", "a", None)]}, "span": Span(1, 0, 2, 3), "t": (1, [Side.MODULE])}
    assert plain(value) == {
        "chain": {"static": [{"node": "hw:a", "label": "a", "loc": None}]},
        "span": {"start_line": 1, "start_col": 0, "end_line": 2, "end_col": 3},
        "t": [1, [Side.MODULE]],
    }
    assert plain("text") == "text" and plain(None) is None


def test_engine_records_compare_by_value_as_the_dataclasses_they_were():
    """The engine-internal records (scan.py, state.py) are plain classes with slots instead of dataclasses (start-up):
    ``==`` still compares every field within one class, they stay unhashable, and AssignSite, ClassInfo and
    SourceFile stay compared by identity."""
    from tttv2_tools.trace_dependencies.scan import AssignSite, CallSite, Event, ExprSite
    from tttv2_tools.trace_dependencies.state import CallEdge, DefSite

    call = ast.parse("f(x)").body[0].value
    guards = (("f.py:1:0", "then"),)
    one, same = CallSite(call, guards, 3, False), CallSite(call, tuple(guards), 3, False)
    assert one == same and (one != same) is False
    assert one != CallSite(call, guards, 4, False) and one != CallSite(call, guards, 3, False, guards)
    assert ExprSite(call, (), False) != CallSite(call, (), 0, False)  # another class: never equal
    assert Event(1, "call", call, ()) != (1, "call", call, ())
    assert CallEdge("a", "b", (), "f.py:1:0") == CallEdge(
        "a", "b", (), "f.py:1:0", {}
    )  # the default: a new {}
    first, second = CallEdge("a", "b", (), "l"), CallEdge("a", "b", (), "l")
    first.args["x"] = ("value", 1)
    assert second.args == {} and first != second
    with pytest.raises(TypeError):
        hash(one)
    with pytest.raises(AttributeError):
        one.extra = 1  # slots: a misspelt field is an error, not a new attribute
    site = AssignSite(None, 1, 0, (), "assign")
    assert site == site and site != AssignSite(None, 1, 0, (), "assign") and hash(site) == hash(site)
    info = type("F", (), {"file": type("S", (), {"name": "m.py"})()})()
    define = DefSite("K", "key", info, None, None, 3, 4, 3, (), 1)
    assert (define.id, define.env, define.via, define.only_if_absent) == ("def:m.py:3:4", {}, (), False)


def test_roles_and_node_refs_are_immutable_values_as_the_frozen_dataclasses_were():
    """``Role`` and ``NodeRef`` are plain classes (start-up) with the frozen dataclasses' ``==``, hash and repr."""
    from tttv2_tools.trace_dependencies.ids import (
        ARGS,
        NodeKind,
        NodeRef,
        Role,
        RoleKind,
        parse_node,
        ttnn_role,
    )

    assert Role(RoleKind.ARGS) == ARGS and hash(Role(RoleKind.ARGS)) == hash(ARGS)
    assert ttnn_role("ttnn.add") == Role(RoleKind.TTNN, path="ttnn.add") != ttnn_role("ttnn.mul")
    assert ARGS != "args" and NodeRef(NodeKind.KEY, "K") != ARGS
    assert {ARGS: 1}[Role(RoleKind.ARGS, None, "")] == 1
    assert repr(ttnn_role("ttnn.add")) == "Role(kind=<RoleKind.TTNN: 'ttnn'>, cls=None, path='ttnn.add')"
    ref = parse_node("key:FF1_PROGCFG")
    assert ref == NodeRef(NodeKind.KEY, "FF1_PROGCFG") and hash(ref) == hash(
        NodeRef(NodeKind.KEY, "FF1_PROGCFG")
    )
    assert (
        str(ref) == "key:FF1_PROGCFG"
        and repr(ref) == "NodeRef(kind=<NodeKind.KEY: 'key'>, rest='FF1_PROGCFG')"
    )
    for value, field in ((ARGS, "path"), (ref, "rest")):
        with pytest.raises(AttributeError):
            setattr(value, field, "x")
        with pytest.raises(AttributeError):
            delattr(value, field)
    assert ARGS.path == "" and ref.rest == "FF1_PROGCFG"
    # a role without class or path is its kind's constant, so the engine's ``role is MESH`` is ``role == MESH``
    from tttv2_tools.trace_dependencies import ids

    for constant in (ids.ARGS, ids.MC, ids.MESH, ids.OS, ids.ENVIRON, ids.GETENV, ids.HFCFG):
        assert Role(constant.kind) is constant and Role(constant.kind, None, "") is constant
        assert Role(constant.kind, path="x") is not constant and Role(constant.kind, path="x") != constant
    assert Role(RoleKind.SELF) is not Role(RoleKind.SELF) and Role(RoleKind.SELF) == Role(RoleKind.SELF)
    # copy, deepcopy and pickle work as they did on the dataclasses; a constant comes back as itself
    import copy
    import pickle

    for value in (ids.MESH, ttnn_role("ttnn.add"), ref):
        for clone in (copy.copy(value), copy.deepcopy(value), pickle.loads(pickle.dumps(value))):
            assert clone == value and type(clone) is type(value)
            assert (clone is value) == (value is ids.MESH)


def test_the_trace_deps_process_keeps_freed_memory_where_glibc_allows_it(monkeypatch):
    """``cli.keep_freed_memory`` (called by the ``trace-deps`` command): glibc's mallopt where there is one, and
    nothing (False) on another system, without a C library that can be loaded, or without mallopt."""
    import ctypes
    import platform

    from tttv2_tools.trace_dependencies import cli

    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        # the real call changes the allocator of the process it runs in: a process of its own, not pytest's
        script = "from tttv2_tools.trace_dependencies import cli; print(cli.keep_freed_memory())"
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
        assert done.stdout == "True\n"
    calls = []

    class Libc:
        def __init__(self, result):
            self.result = result

        def mallopt(self, option, value):
            calls.append((option, value))
            return self.result

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: Libc(1))
    assert cli.keep_freed_memory() is True
    assert calls == [(-1, 256 << 20), (-3, 32 << 20)]  # M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: Libc(0))  # refused by the library
    assert cli.keep_freed_memory() is False
    monkeypatch.setattr(ctypes, "CDLL", lambda _name: object())  # a libc without mallopt
    assert cli.keep_freed_memory() is False

    def unloadable(_name):
        raise OSError("no C library")

    monkeypatch.setattr(ctypes, "CDLL", unloadable)
    assert cli.keep_freed_memory() is False
    monkeypatch.setattr(sys, "platform", "darwin")
    calls.clear()
    assert cli.keep_freed_memory() is False and calls == []
