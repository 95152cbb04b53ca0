"""Held-out review 2 of trace-deps (R1, R4, R5, R8, R21, R22, R28, R29): silent wrong results, each pinned on a
small module written here."""

from __future__ import annotations

import pytest

from tttv2_tools.trace_dependencies import Analysis, analyze


def _analyze(tmp_path, source: str, name: str = "m.py", **kw) -> Analysis:
    (tmp_path / name).write_text(source)
    return analyze(tmp_path / name, auto_config=False, **kw)


HELPER_FLAG = """
import ttnn


class VA:
    def __init__(self, mesh_device, args, TG=False):
        self.args = args
        self.wide = TG

    def _a(self, x, tg=False):
        if tg:
            return ttnn.add(x, 3.0)
        return ttnn.mul(x, 5.0)

    def forward(self, x, mode):
        x = self._a(x, tg=self.args.is_galaxy)
        x = self._a(x)
        x = self._a(x, tg=not self.args.is_galaxy)
        if self.wide:
            x = ttnn.exp(x)
        return x
"""


def test_a_helper_parameter_named_tg_is_a_parameter_not_the_galaxy_fact(tmp_path):
    """R29: only the analysed class's constructor argument ``TG=`` is the galaxy fact; a helper's ``tg`` parameter
    is closed per call site (one call passes ``is_galaxy``, one the default, one ``not is_galaxy``)."""
    a = _analyze(tmp_path, HELPER_FLAG)
    helper = a.branch_at("m.py", 11)
    assert helper.decision == ["param", "tg", 1] and helper.topology == []
    assert a.decide(helper, topology="2d", mode="decode") is None  # the three call sites disagree
    calls = sorted((c.loc, c.args) for c in a.calls if c.callee == "m.py:VA._a")
    assert [args.get("tg") for _loc, args in calls] == [
        ["fact", "galaxy", 1],
        ["value", False],
        ["not", ["fact", "galaxy", 1]],
    ]
    for path, ops in a.paths.items():  # every path runs both arms: one call takes add, another mul
        assert "ttnn.add" in ops and "ttnn.mul" in ops, path
    assert not any(s.function == "VA._a" and s.fact == "galaxy" for s in a.fact_sites)
    ctor = a.branch_at("m.py", 19)  # self.wide = TG (the constructor argument): still the galaxy fact
    assert ctor.decision == ["fact", "galaxy", 1] and ctor.topology == ["galaxy"]
    assert "ttnn.exp" not in a.paths["decode/non-galaxy"] and "ttnn.exp" in a.paths["decode/galaxy"]


REBOUND_MODE = """
import ttnn
from enum import Enum


class Mode(Enum):
    DECODE = "decode"
    PREFILL = "prefill"


class Rsn:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if x.shape[-2] <= 32 and mode == "prefill":
            mode = "decode"
        if mode == "decode":
            x = ttnn.mul(x, 2.0)
        else:
            x = ttnn.add(x, 1.0)
        return x

    def other(self, x, mode):
        mode = Mode(mode)
        if mode == Mode.DECODE:
            x = ttnn.exp(x)
        return x
"""


def test_a_rebound_mode_is_not_the_mode_fact(tmp_path):
    """R1: after ``if ...: mode = "decode"`` the name ``mode`` is no longer the call's mode: the test gets no
    decision (it is runtime), both arms stay on the prefill paths; a normalisation ``mode = Mode(mode)`` still is
    the mode."""
    a = _analyze(tmp_path, REBOUND_MODE)
    first = a.branch_at("m.py", 16)  # only the parameter reaches this ``mode``
    assert first.decision == ["and", [None, ["fact", "mode:prefill", 1]]]
    rebound = a.branch_at("m.py", 18)
    assert rebound.classification == "runtime" and rebound.decision is None and rebound.mode == []
    assert a.decide(rebound, topology="1d", mode="prefill") is None
    assert a.paths["prefill/non-galaxy"] == ["ttnn.add", "ttnn.mul"]
    assert not any(s.span.start_line == 18 for s in a.fact_sites)
    b = _analyze(tmp_path, REBOUND_MODE, entry="other")
    assert b.branch_at("m.py", 26).decision == ["fact", "mode:decode", 1]


RAISES = """
import ttnn


class Asr:
    def __init__(self, mesh_device, args):
        self.args = args

    def _tail(self, x):
        return ttnn.exp(x)

    def forward(self, x, mode):
        assert x.shape[-1] > 0 and x.shape[0] > 0, "empty"
        if mode == "prefill":
            assert not self.args.is_galaxy, "prefill is not supported on galaxy"
            return ttnn.add(x, 1.0)
        try:
            if self.args.is_galaxy:
                raise KeyError("caught")
        except KeyError:
            x = ttnn.neg(x)
        x = ttnn.relu(x)
        if self.args.is_galaxy:
            raise NotImplementedError("decode on galaxy")
        x = x * 2.0
        return self._tail(ttnn.mul(x, 2.0))
"""


def test_a_raise_or_a_failed_assert_ends_the_path(tmp_path):
    """R22: ops (and calls) after an arm that raises, or after an assert decided false, are not on that path; a
    raise a ``try`` catches does not end it; an assert nothing decides adds no guard."""
    a = _analyze(tmp_path, RAISES)
    assert a.paths["decode/galaxy"] == ["ttnn.neg", "ttnn.relu"]
    assert a.paths["decode/non-galaxy"] == ["ttnn.exp", "ttnn.mul", "ttnn.multiply", "ttnn.neg", "ttnn.relu"]
    assert a.paths["prefill/galaxy"] == []
    assert a.paths["prefill/non-galaxy"] == ["ttnn.add"]
    ops = {o.op: o for o in a.ops}
    assert ops["ttnn.mul"].guards == ["m.py:14:11#else", "m.py:23:11#unless-then"]
    assert ops["ttnn.multiply"].guards == ops["ttnn.mul"].guards  # x * 2.0
    assert ops["ttnn.relu"].guards == ["m.py:14:11#else"]  # the raise at 19 is caught; the assert at 13 open
    assert ops["ttnn.add"].guards == ["m.py:14:11#then", "m.py:15:19#unless-else"]
    two_d = a.restrict(topology="2d", mode="decode")
    assert sorted(o.op for o in two_d.ops if o.phase == "forward") == ["ttnn.neg", "ttnn.relu"]
    assert Analysis.from_json(a.to_json()) == a


REBOUND_GLOBAL = """
import ttnn

FAST_DECODE = True
SCALE = 2.0


def set_fast_decode(value):
    global FAST_DECODE
    FAST_DECODE = value


class Glb:
    def __init__(self, mesh_device, args):
        self.args = args

    def forward(self, x, mode):
        if FAST_DECODE:
            x = ttnn.add(x, 1.0)
        if SCALE > 1.0:
            x = ttnn.mul(x, SCALE)
        return x
"""


def test_a_global_a_function_rebinds_is_module_state(tmp_path, capsys):
    """R5: a module global that a function declares ``global`` may change between calls: a test on it is runtime,
    with a proof from the per-call root ``input:global:...`` naming the ``global`` statement; a global nothing
    rebinds stays static."""
    from tttv2_tools.trace_dependencies.cli import main

    a = _analyze(tmp_path, REBOUND_GLOBAL)
    fast = a.branch_at("m.py", 18)
    assert fast.classification == "runtime" and fast.factors == ["runtime"]
    assert [h.node for h in fast.chain["runtime"]] == [
        "input:global:m.py:FAST_DECODE",
        "global:m.py:FAST_DECODE",
        "branch:m.py:18:11",
    ]
    assert fast.chain["runtime"][0].loc == "m.py:9:0"  # the global statement in set_fast_decode
    assert "input:global:m.py:FAST_DECODE" in a.roots["input"]
    assert a.branch_at("m.py", 20).classification == "static"
    assert main([str(tmp_path / "m.py"), "--width", "400"]) == 0
    assert "FAST_DECODE (module state: a rebound global)@m.py:9 → FAST_DECODE@4 → condition@18" in (
        capsys.readouterr().out
    )


MUTATED_STATE = """
import ttnn


class Mut:
    def __init__(self, mesh_device, args):
        self.args = args
        self.out_kwargs = {"scale": 2.0}
        self.seen = []
        self.table = {"a": 1.0}
        self.fixed = {"b": 3.0}

    def _note(self, x):
        self.seen.append(x)

    def forward(self, x, mode):
        opts = self.out_kwargs
        if mode == "prefill":
            opts["scale"] += 1.0
            self.table.update(a=2.0)
        self._note(x)
        if opts["scale"] > 2.0:
            x = ttnn.mul(x, 2.0)
        if self.seen:
            x = ttnn.add(x, 1.0)
        if self.table["a"] > 1.0:
            x = ttnn.neg(x)
        if self.fixed["b"] > 1.0:
            x = ttnn.exp(x)
        return x
"""


def test_state_changed_in_place_is_module_state(tmp_path):
    """R8: forward changing a ``self`` attribute in place (``opts = self.d; opts[k] += v``, ``self.d.update(...)``,
    ``self.seen.append(...)`` in a helper it calls) is module state: tests on it are runtime, rooted at the
    change; an attribute only read stays static."""
    a = _analyze(tmp_path, MUTATED_STATE)
    for line, attr, loc in (
        (22, "out_kwargs", "m.py:19:12"),
        (24, "seen", "m.py:14:8"),
        (26, "table", "m.py:20:12"),
    ):
        branch = a.branch_at("m.py", line)
        assert branch.classification == "runtime", line
        root = branch.chain["runtime"][0]
        assert root.node == f"input:state:m.py:Mut.{attr}" and root.loc == loc, line
    assert a.branch_at("m.py", 28).classification == "static"
    labels = {n: d["label"] for n, d in a.graph.nodes(data=True)}
    assert (
        labels["input:state:m.py:Mut.seen"]
        == "self.seen (module state: Mut._note changes it in place: .append())"
    )
    assert labels["input:state:m.py:Mut.out_kwargs"].endswith("Mut.forward changes it in place: [...] =)")


INHERITED = """
import ttnn


class Base:
    SCALE = 2.0

    def __init__(self, mesh_device, args):
        self.args = args

    def _post(self, x):
        return ttnn.add(x, 1.0)

    def forward(self, x, mode):
        if mode == "decode":
            x = ttnn.mul(x, self.SCALE)
        if self.args.is_galaxy:
            x = ttnn.exp(x)
        return self._post(x)


class Child(Base):
    SCALE = 5.0

    def __init__(self, mesh_device, args):
        self.args = args

    def _post(self, x):
        return ttnn.neg(x)


class Sub(Base):
    def __init__(self, mesh_device, args):
        super(Sub, self).__init__(mesh_device, args)

    def forward(self, x, mode):
        x = super().forward(x, mode)
        return Base._post(self, ttnn.relu(x))


class Ext(Unknown):
    def forward(self, x, mode):
        return super().forward(x, mode)
"""


def test_inherited_forward_follows_the_analysed_class_mro(tmp_path):
    """R4: ``--class Child`` running ``Base.forward``: ``self._post`` is Child's override and ``self.args`` comes
    from Child's ``__init__`` (the galaxy fact); R21: ``super().forward(...)``, ``super().__init__(...)`` and
    ``Base._post(self, ...)`` are followed into the base class, and a super call no analysed class answers is an
    explicit unknown (``--strict`` fails), never dropped."""
    child = _analyze(tmp_path, INHERITED, class_name="Child")
    assert child.paths["decode/galaxy"] == ["ttnn.exp", "ttnn.mul", "ttnn.neg"]
    assert child.paths["prefill/non-galaxy"] == ["ttnn.neg"]
    galaxy = child.branch_at("m.py", 17)
    assert galaxy.topology == ["galaxy"] and galaxy.decision == ["fact", "galaxy", 1]
    sub = _analyze(tmp_path, INHERITED, class_name="Sub")
    assert sub.paths["decode/non-galaxy"] == ["ttnn.add", "ttnn.mul", "ttnn.relu"]
    assert sub.paths["prefill/galaxy"] == ["ttnn.add", "ttnn.exp", "ttnn.relu"]
    assert sub.branch_at("m.py", 15).decision == ["fact", "mode:decode", 1]  # Base.forward's own branch
    callees = {(c.caller, c.callee) for c in sub.calls}
    assert ("m.py:Sub.__init__", "m.py:Base.__init__") in callees
    assert ("m.py:Sub.forward", "m.py:Base.forward") in callees
    assert ("m.py:Sub.forward", "m.py:Base._post") in callees
    ext = _analyze(tmp_path, INHERITED, class_name="Ext")
    (unknown,) = ext.unknowns()
    node = ext.node(unknown)
    assert node["loc"] == "m.py:43:15" and "no analysed base class defines forward()" in node["reason"]
    assert [s.what for s in ext.skipped if s.severity == "warning"] == ["super().forward()"]


DEFS_MODULE = """
class Df:
    def __init__(self, mesh_device, args):
        self.model_config = args.get_model_config()

    def forward(self, x, mode):
        return x * self.model_config["GONE"] * self.model_config["UPD_A"] * self.model_config["BACK"]
"""

DEFS_CONFIG = """
class ModelArgs:
    def __init__(self, mesh_device, dim=64):
        self.is_galaxy = mesh_device.get_num_devices() == 32
        self.model_config = {}
        self.model_config.update({"UPD_A": 1.0})
        self.model_config.setdefault("UPD_A", 99.0)
        self.model_config["GONE"] = 5.0
        if self.is_galaxy:
            self.model_config["GONE"] = 6.0
        del self.model_config["GONE"]
        self.model_config["BACK"] = 1.0
        del self.model_config["BACK"]
        self.model_config.setdefault("BACK", 2.0)
        del self.model_config[self.key_name()]

    def get_model_config(self):
        return self.model_config
"""


def test_del_ends_a_key_and_a_setdefault_without_effect_says_so(tmp_path, capsys):
    """R28: ``del model_config[KEY]`` is a definition of kind "deleted" that ends the earlier ones (the key is
    absent after it), a ``setdefault`` after a ``del`` takes effect, and a ``setdefault`` of a key already set is
    shown as "no effect", not "overwritten"."""
    from tttv2_tools.trace_dependencies.cli import main

    (tmp_path / "df.py").write_text(DEFS_MODULE)
    (tmp_path / "model_config.py").write_text(DEFS_CONFIG)
    a = analyze(tmp_path / "df.py", tmp_path / "model_config.py")
    gone = a.definitions["GONE"]
    assert [(d.loc, d.value_kind, d.live) for d in gone] == [
        ("model_config.py:8:8", "value", False),
        ("model_config.py:10:12", "value", False),
        ("model_config.py:11:12", "deleted", True),
    ]
    assert gone[0].shadowed_by == [gone[2].id] and gone[2].value == 'del model_config["GONE"]'
    back = a.definitions["BACK"]
    assert [(d.value_kind, d.live) for d in back] == [("value", False), ("deleted", False), ("value", True)]
    upd = a.definitions["UPD_A"]
    assert upd[1].only_if_absent and not upd[1].live
    assert "?" not in a.definitions  # del model_config[<computed>] is a dynamic definition, not a key
    assert Analysis.from_json(a.to_json()) == a
    assert main([str(tmp_path / "df.py"), "--width", "300"]) == 0
    out = capsys.readouterr().out
    assert "model_config.py:7  always: 99.0 [no effect: already set]" in out
    assert "model_config.py:8  always: 5.0 [removed by del]" in out
    assert 'model_config.py:11  always: del model_config["GONE"] [the key is removed]' in out


def test_an_entry_bound_by_assignment_is_named_in_the_error(tmp_path):
    """R35: ``forward = _fwd`` in the class body is refused with a message that says so, not "no forward()"."""
    from tttv2_tools.trace_dependencies import TraceError

    (tmp_path / "w.py").write_text(
        "def _fwd(self, x, mode):\n    return x\n\n\nclass B:\n    forward = _fwd\n"
    )
    for kw in ({}, {"class_name": "B"}):
        with pytest.raises(
            TraceError, match=r"class B: forward is assigned \(forward = _fwd\), not defined with def"
        ):
            analyze(tmp_path / "w.py", auto_config=False, **kw)
