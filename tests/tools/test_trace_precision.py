"""Precision a codemod that decides branches needs (issue 10, item 4): flow-sensitive locals, helper parameters per
call site, and the classes the module constructs or calls followed into their own files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tttv2_tools.trace_dependencies import MODE, STATIC, Analysis, analyze, decide

FIX = Path(__file__).parent / "fixtures" / "precision"


@pytest.fixture(scope="module")
def block():
    return analyze(FIX / "block.py")


def test_classes_the_module_constructs_and_calls_are_followed(block):
    paths = block.paths
    assert "ttnn.rms_norm" in paths["decode/galaxy"] and "ttnn.rms_norm" not in paths["prefill/galaxy"]
    assert (
        "ttnn.layer_norm" in paths["prefill/non-galaxy"] and "ttnn.layer_norm" not in paths["decode/galaxy"]
    )
    assert all("ttnn.linear" in ops for ops in paths.values())  # LMHead.__call__
    assert block.construction_ops == ["ttnn.as_tensor"]  # RMSNorm.__init__, run by Block.__init__
    (rms,) = [o for o in block.ops if o.op == "ttnn.rms_norm"]
    assert rms.loc == "norm.py:14:19" and rms.function == "RMSNorm.forward" and rms.via == ["RMSNorm.forward"]
    reads = {r.name: r for r in block.reads}
    assert (
        reads["NORM_PROGCFG"].function == "RMSNorm.__init__" and reads["NORM_PROGCFG"].phase == "construction"
    )
    assert reads["HEAD_MEMCFG"].function == "LMHead.__call__" and reads["HEAD_MEMCFG"].resolved
    assert [d.loc for d in block.definitions["HEAD_MEMCFG"]] == ["model_config.py:12:8"]
    norm_branch = block.branch_at("norm.py", 15)  # if self.args.is_galaxy:
    assert norm_branch.side == "helper" and norm_branch.topology == ["galaxy"]
    assert "ttnn.all_gather" in block.restrict(mode="prefill", topology="2d").paths["prefill/galaxy"]


def test_helper_parameters_are_bound_per_call_site(block):
    paths = block.paths
    for name in ("decode/galaxy", "decode/non-galaxy"):
        assert "ttnn.gelu" in paths[name] and "ttnn.silu" not in paths[name]
        assert "ttnn.all_gather" not in paths[name]  # gather_if(x, mode == "prefill")
    for name in ("prefill/galaxy", "prefill/non-galaxy"):
        assert "ttnn.silu" in paths[name] and "ttnn.gelu" not in paths[name]
        assert "ttnn.all_gather" in paths[name]
    kind = block.branch_at("block.py", 9)  # if kind == "gelu":  (activate(x, "gelu") / activate(x, "silu"))
    assert kind.decision == ["param_eq", "kind", "gelu", 1] and decide(kind) is None
    assert block.decide(kind, mode="decode") is True and block.decide(kind, mode="prefill") is False
    assert block.decide(kind) is None  # the two call sites disagree
    flag = block.branch_at("block.py", 15)  # if flag:  in gather_if
    assert block.decide(flag, mode="prefill") is True and block.decide(flag, mode="decode") is False
    calls = {(c.callee, c.loc): c.args for c in block.calls}
    assert calls[("block.py:activate", "block.py:36:16")] == {"kind": ["value", "gelu"]}
    assert calls[("block.py:gather_if", "block.py:39:12")] == {"flag": ["fact", "mode:prefill", 1]}
    decode = block.restrict(mode="decode")
    assert "decided:true" in decode.branch_at("block.py", 9).facts
    assert [o.op for o in decode.ops if o.function == "activate"] == ["ttnn.gelu"]


def test_locals_are_flow_sensitive(block):
    galaxy = block.branch_at("block.py", 30)  # flag = self.args.is_galaxy; if flag:
    assert galaxy.classification == STATIC and galaxy.factors == [STATIC] and galaxy.topology == ["galaxy"]
    decode = block.branch_at("block.py", 33)  # flag = mode == "decode"; if flag:
    assert decode.classification == MODE and decode.factors == [MODE] and decode.mode == ["decode"]
    assert block.paths["decode/non-galaxy"] == [
        "ttnn.gelu",
        "ttnn.linear",
        "ttnn.rms_norm",
        "ttnn.to_memory_config",
    ]
    assert "ttnn.to_memory_config" not in block.paths["prefill/galaxy"]
    g = block.graph
    assert sorted(g.predecessors("branch:block.py:30:11")) == [
        "fact:galaxy",
        "local:block.py:Block.forward:flag@29:8",
    ]
    assert sorted(g.predecessors("branch:block.py:33:11")) == ["local:block.py:Block.forward:flag@32:8"]


def test_reaching_definitions_through_loops_branches_and_augmented_assignments(tmp_path):
    module = tmp_path / "mlp.py"
    module.write_text(
        "import ttnn\n\n\nclass MLP:\n"
        "    def forward(self, x, mode, args):\n"
        "        n = args.dim\n"  # 6
        "        if mode == 'decode':\n"
        "            n = 1\n"  # 8
        "        m = n\n"  # 9: both definitions of n reach
        "        for _ in range(3):\n"
        "            if m:\n"  # 11: m@9 and m@12 (loop-carried)
        "                m = x.shape[0]\n"  # 12
        "        k = args.hidden\n"  # 13
        "        k += args.extra\n"  # 14: reads k@13
        "        if k:\n"  # 15
        "            return ttnn.relu(x)\n"
        "        return x\n",
    )
    a = analyze(module, auto_config=False)
    g = a.graph
    assert sorted(g.predecessors("local:mlp.py:MLP.forward:m@9:8")) == [
        "local:mlp.py:MLP.forward:n@6:8",
        "local:mlp.py:MLP.forward:n@8:12",
    ]
    assert sorted(g.predecessors("branch:mlp.py:11:15")) == [
        "local:mlp.py:MLP.forward:m@12:16",
        "local:mlp.py:MLP.forward:m@9:8",
    ]
    assert sorted(g.predecessors("local:mlp.py:MLP.forward:k@14:8")) == [
        "attr:extra",
        "local:mlp.py:MLP.forward:k@13:8",
    ]
    # (no config module: args.* are unknown) m@12 reads x: runtime; n@8 sits under the mode test
    assert a.branch_at("mlp.py", 11).factors == ["mode", "runtime", "unknown"]
    assert a.branch_at("mlp.py", 15).factors == ["unknown"]  # k@13 and args.extra only: not x, not the mode


def test_precision_fixture_round_trips(block):
    assert Analysis.from_json(block.to_json()) == block


EARLY_EXITS = """
import ttnn


class M:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if mode == "decode":
            if self.args.is_galaxy:
                return ttnn.mul(x, 2.0)
            x = ttnn.add(x, 1.0)
        else:
            for _ in range(2):
                if self.args.is_galaxy:
                    if x.shape[-1] > 32:
                        break
                    x = ttnn.exp(x)
                x = ttnn.relu(x)
            x = ttnn.neg(x)
            if not self.args.is_galaxy:
                x = ttnn.abs(x)
            else:
                return ttnn.sqrt(x)
            if mode != "prefill":
                raise ValueError(mode)
        return ttnn.to_memory_config(x, ttnn.DRAM_MEMORY_CONFIG)
"""


def test_an_arm_that_returns_guards_the_code_after_the_enclosing_if(tmp_path):
    """An early return nested in an arm guards what follows the enclosing ``if`` (review F10: the op after it was
    on every path); a break only guards the rest of its loop; an arm that raises ends the path of the ops after it
    (review 2, R22: ``m.py:26`` below)."""
    (tmp_path / "m.py").write_text(EARLY_EXITS)
    a = analyze(tmp_path / "m.py", auto_config=False)
    assert a.paths["decode/galaxy"] == ["ttnn.mul"]
    assert a.paths["decode/non-galaxy"] == ["ttnn.add", "ttnn.to_memory_config"]
    # prefill: the else arm of the last topology test returns, so the tail runs on 1D only; the break leaves
    # the loop on galaxy only when x is wide, so relu and neg stay on both
    assert a.paths["prefill/galaxy"] == ["ttnn.exp", "ttnn.neg", "ttnn.relu", "ttnn.sqrt"]
    assert a.paths["prefill/non-galaxy"] == ["ttnn.abs", "ttnn.neg", "ttnn.relu", "ttnn.to_memory_config"]
    (tail,) = [o for o in a.ops if o.op == "ttnn.to_memory_config"]
    assert tail.guards == ["m.py:11:15#unless-then", "m.py:22:15#unless-else", "m.py:26:15#unless-then"]
    guards = {o.op: o.guards for o in a.ops}
    # relu follows the break in the loop: guarded by it; neg follows the loop: not
    assert guards["ttnn.relu"] == ["m.py:10:11#else", "m.py:17:23#unless-then"]
    assert guards["ttnn.neg"] == ["m.py:10:11#else"]
    two_d = a.restrict(topology="2d")
    assert "ttnn.to_memory_config" not in two_d.paths["prefill/galaxy"]
    assert Analysis.from_json(a.to_json()) == a


def test_guards_after_an_arm_that_left():
    """How the guard after a left arm reads, and which guards of one branch exclude each other (last-wins)."""
    from tttv2_tools.trace_dependencies.graphing import exclusive
    from tttv2_tools.trace_dependencies.records import Guard

    assert Guard("m.py:3:7", "unless-then", "TG").describe() == "not left under (TG)"
    assert Guard("m.py:3:7", "unless-else", "TG").describe() == "not left under not (TG)"
    assert exclusive("then", "else") and exclusive("then", "unless-then") and exclusive("else", "unless-else")
    assert not exclusive("else", "unless-then") and not exclusive("unless-then", "unless-else")
    assert not exclusive("then", "then")


STATEFUL = """
import ttnn


class Cell:
    def __init__(self, mesh_device, args):
        self.args = args
        self.warm = False
        self.scale = 2.0

    def _mark(self):
        self.warm = True

    def forward(self, x, mode):
        seq_len = 32
        if mode == "prefill":
            seq_len = x.shape[-2]
        if seq_len > 64:
            x = ttnn.relu(x)
        if not self.warm:
            x = ttnn.mul(x, self.scale)
            self._mark()
        if self.scale > 1.0:
            x = ttnn.add(x, 1.0)
        return x
"""


def test_module_state_is_runtime_and_proof_hops_name_locals(tmp_path, capsys):
    """An attribute the per-call entry (or what it calls) assigns is module state: a test on it is runtime, with a
    proof naming the write (review F11: it was static with an empty proof); one only ``__init__`` assigns stays
    static. Proof hops show a local assigned twice by its name, not its column (review F15)."""
    from tttv2_tools.trace_dependencies.cli import main

    (tmp_path / "cell.py").write_text(STATEFUL)
    a = analyze(tmp_path / "cell.py", auto_config=False)
    warm = a.branch_at("cell.py", 20)
    assert warm.classification == "runtime" and warm.factors == ["runtime"]
    assert [h.node for h in warm.chain["runtime"]] == [
        "input:state:cell.py:Cell.warm",
        "self:cell.py:Cell.warm",
        "branch:cell.py:20:11",
    ]
    assert warm.chain["runtime"][0].loc == "cell.py:12:8"  # the write in _mark, which forward calls
    assert a.branch_at("cell.py", 23).classification == STATIC  # self.scale: only __init__ assigns it
    assert main([str(tmp_path / "cell.py"), "--width", "400"]) == 0
    out = capsys.readouterr().out
    assert "self.warm (module state)@cell.py:12 → self.warm@8 → condition@20" in out
    assert "x (input)@cell.py:14 → seq_len@17 → condition@18" in out


MATCHES = """
import ttnn


class Norm:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode, kind="a"):
        match mode:
            case "decode" if self.args.is_galaxy:
                x = ttnn.mul(x, 2.0)
            case "decode":
                x = ttnn.exp(x)
            case "prefill":
                x = ttnn.add(x, 1.0)
            case _:
                raise ValueError(mode)
        match kind:
            case "a":
                x = ttnn.relu(x)
        match mode:
            case "prefill" | "decode":
                x = ttnn.neg(x)
            case [_, _]:
                x = ttnn.abs(x)
        return x
"""


def test_match_on_the_mode_is_decided(tmp_path):
    """``match mode:`` cases get the mode facts (review F13: their decision was None, so nothing could decide
    them): a case runs when no earlier case matched and its own pattern (and guard) does."""
    (tmp_path / "norm.py").write_text(MATCHES)
    a = analyze(tmp_path / "norm.py", auto_config=False)
    galaxy_decode, decode, prefill, other = (a.branch_at("norm.py", line) for line in (11, 13, 15, 17))
    assert galaxy_decode.mode == ["decode"] and galaxy_decode.topology == ["galaxy"]
    assert decide(galaxy_decode, "2d", "decode") is True and decide(galaxy_decode, "1d", "decode") is False
    assert decide(decode, "2d", "decode") is False and decide(decode, "1d", "decode") is True
    assert decide(decode, mode="decode") is None  # the guarded case before it depends on the topology
    assert prefill.mode == ["not decode", "prefill"] and decide(prefill, mode="prefill") is True
    assert decide(prefill, mode="decode") is False
    assert decide(other, mode="prefill") is False and decide(other, mode="decode") is False
    assert decide(other) is None
    assert a.branch_at("norm.py", 20).decision is None  # match kind: not the mode
    either, sequence = a.branch_at("norm.py", 23), a.branch_at("norm.py", 25)
    assert decide(either, mode="decode") is True and decide(either) is None
    assert decide(sequence, mode="prefill") is False and sequence.mode == ["not decode", "not prefill"]
    assert a.paths["decode/galaxy"] == ["ttnn.mul", "ttnn.neg", "ttnn.relu"]
    assert a.paths["decode/non-galaxy"] == ["ttnn.exp", "ttnn.neg", "ttnn.relu"]
    assert a.paths["prefill/galaxy"] == ["ttnn.add", "ttnn.neg", "ttnn.relu"]
    assert "decided:true" in a.restrict(mode="prefill").branch_at("norm.py", 15).facts
