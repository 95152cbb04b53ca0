"""trace-deps results do not depend on the order in which a helper's parameter learns its role: a helper visited
while its parameter looks like a plain value, and later called with model_config / ModelArgs, is analysed as if
the role had been known from the start (engine.run redoes the run; see docs/trace_deps.md)."""

from __future__ import annotations

import networkx as nx
import pytest

from tttv2_tools.trace_dependencies import analyze

CONFIG = """
class ModelArgs:
    def __init__(self):
        self.is_galaxy = False
        self.model_config = {}
        self.model_config["MEM"] = 1
        self.model_config["PING"] = 2
        self.model_config["INNER"] = 3
        self.model_config["PROG"] = lambda table: self.prog(table)

    def prog(self, table):
        return table["INNER"]
"""

MODULE = """import ttnn


def use(table, x):
    return ttnn.linear(x, memory_config=table["MEM"])


def use_named(args, x):
    return ttnn.linear(x, memory_config=args["MEM"])


def maybe_gather(a, x):
    if a.is_galaxy:
        return ttnn.all_gather(x)
    return x


def shard(dev, x):
    if dev.get_num_devices() == 32:
        return ttnn.reshard(x)
    return x


def ping(t, x, n):
    if n:
        return pong(t, x)
    return ttnn.linear(x, memory_config=t["PING"])


def pong(u, x):
    return ping(u, x, 0)


class Block:
    def __init__(self, args, model_config, mesh_device):
        self.args = args
        self.model_config = model_config
        self.mesh_device = mesh_device
        self.plain = {"MEM": None}

    def later(self, x):
        LATE
        return x

    def forward(self, x):
"""

# (the call made from later(), which passes the config object; the call forward() makes with a plain value)
CASES = {
    "key_read": ("use(self.model_config, x)", "use(self.plain, x)"),
    "role_from_name_overridden": ("use_named(self.model_config, x)", "use_named(self.plain, x)"),
    "topology_branch": ("maybe_gather(self.args, x)", "maybe_gather(self.plain, x)"),
    "mesh_fact": ("shard(self.mesh_device, x)", "shard(self.plain, x)"),
    "mutual_recursion": ("pong(self.model_config, x)", "ping(self.plain, x, 2)"),
    "lambda_in_config": (
        'ttnn.linear(x, program_config=self.model_config["PROG"](self.model_config))',
        'ttnn.linear(x, program_config=self.model_config["PROG"](self.plain))',
    ),
}
ROOT_KINDS = ("key", "attr", "method", "hw", "fact", "input", "unknown")


def _analyse(tmp_path, case: str, later_first: bool):
    late, plain = CASES[case]
    if later_first:  # the plain call is the last one: the engine visits it, and the helper, first
        body = ["        self.later(x)", f"        return {plain}"]
    else:
        body = [f"        y = {plain}", "        self.later(x)", "        return y"]
    folder = tmp_path / ("later_first" if later_first else "plain_first")
    folder.mkdir()
    (folder / "m.py").write_text(MODULE.replace("LATE", late) + "\n".join(body) + "\n")
    (folder / "model_config.py").write_text(CONFIG)
    return analyze(folder / "m.py", folder / "model_config.py")


def _summary(a) -> dict:
    """Everything the order could change, without source locations (the two orders differ in line numbers)."""
    return {
        "keys": a.keys_read(),
        "reads": sorted((r.name, r.kind, r.function) for r in a.reads),
        "branches": sorted(
            (b.function, b.test, b.classification, b.topology, b.mode, b.factors) for b in a.branches
        ),
        "paths": {name: sorted(ops) for name, ops in a.paths.items()},
        "op_roots": {
            n: sorted(r for r in nx.ancestors(a.graph, n) if r.split(":")[0] in ROOT_KINDS)
            for n in a.graph
            if n.startswith("op:")
        },
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_results_do_not_depend_on_when_a_parameter_gets_its_role(tmp_path, case):
    assert _summary(_analyse(tmp_path, case, True)) == _summary(_analyse(tmp_path, case, False))


def test_key_read_through_a_helper_visited_before_it_received_model_config(tmp_path):
    a = _analyse(tmp_path, "key_read", later_first=True)
    assert a.keys_read() == ["MEM"]
    assert [(r.function, r.via) for r in a.reads] == [("use", 'table["MEM"]')]
    assert "key:MEM" in nx.ancestors(a.graph, "op:ttnn.linear")


def test_parameter_named_args_that_receives_model_config(tmp_path):
    """``args`` is ModelArgs by its name until a call site passes model_config: the name no longer counts."""
    for later_first in (True, False):
        a = _analyse(tmp_path, "role_from_name_overridden", later_first)
        assert [(r.name, r.kind, r.function) for r in a.reads] == [("MEM", "key", "use_named")]


def test_topology_branch_in_a_helper_visited_before_it_received_model_args(tmp_path):
    a = _analyse(tmp_path, "topology_branch", later_first=True)
    (branch,) = a.branches
    assert (branch.test, branch.topology) == ("a.is_galaxy", ["galaxy"])
    assert [r.name for r in a.reads] == ["is_galaxy"]
    assert (
        "ttnn.all_gather" in a.paths["decode/galaxy"]
        and "ttnn.all_gather" not in a.paths["decode/non-galaxy"]
    )


def test_role_that_reaches_a_helper_through_mutual_recursion(tmp_path):
    """ping(plain) -> pong -> ping is visited first; pong(model_config) later makes both parameters the dict."""
    for later_first in (True, False):
        a = _analyse(tmp_path, "mutual_recursion", later_first)
        assert a.keys_read() == ["PING"]
        assert "key:PING" in nx.ancestors(a.graph, "op:ttnn.linear")
