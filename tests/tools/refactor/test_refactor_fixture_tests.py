"""Generated tests with no recipes: on ``inputs/tmx`` (a package that is not tttv1: its own ModelArgs, CCL object
and Mode enum, tt-metal's constructor signatures, and a MoE router, a kind the toolkit knows nothing about), the
tests tttv2-refactor writes take every argument from the package's own ``tests/conftest.py`` and pass; they name
the first difference of a module that differs, a fixture that is missing, and a fixture whose tensor is not of the
recorded shape; with ``--cases`` the recorded inputs are built where the conftest has no fixture."""

from __future__ import annotations

import enum
import sys
from pathlib import Path

import pytest

from tttv2.modules._topology import TopologyError
from tttv2.testing import generated as harness
from tttv2_tools.collect_cases import Case, CaseStore
from tttv2_tools.refactor.cli import main

pytest_plugins = ["pytester"]

INPUTS = Path(__file__).parent / "inputs"
TMX = INPUTS / "tmx"
CONFTEST = (TMX / "tests" / "conftest.py").read_text()


@pytest.fixture(scope="module")
def tmx_importable():
    """``tmx`` importable, as it is in its own repository."""
    sys.path.insert(0, str(INPUTS))
    yield
    sys.path.remove(str(INPUTS))
    for name in [n for n in sys.modules if n.split(".")[0] == "tmx"]:
        del sys.modules[name]


def _generate(root: Path, *more: str, conftest: str = CONFTEST) -> Path:
    for name in ("mlp", "router"):
        argv = [
            str(TMX / "tt" / f"{name}.py"),
            "--out",
            str(root),
            "--tests-out",
            str(root / "tests"),
            "--quiet",
            "--no-verify",  # the tests below run them, with and without the conftest
        ]
        assert main([*argv, *more]) == 0, name
    (root / "tests" / "conftest.py").write_text(conftest)
    return root / "tests"


def _run(pytester, tests: Path, *args: str):
    result = pytester.runpytest_inprocess(str(tests), "-q", "-p", "no:cacheprovider", *args)
    return result.parseoutcomes(), result.stdout.str()


@pytest.fixture(scope="module")
def tmx_tests(tmp_path_factory, tmx_importable):
    return _generate(tmp_path_factory.mktemp("tmx"))


def test_a_foreign_package_s_generated_tests_pass_with_its_own_conftest(
    tmx_tests, pytester, nested_run_imports
):
    """MLP (1D and 2D: equivalence on 1x1/1x2/1x8/8x4 in both modes, the reference through the conftest's
    ``hf_reference``, the topology refusals) and the router (a kind with no reference: equivalence and refusal
    only); nothing imported from the tool."""
    outcomes, out = _run(pytester, tmx_tests)
    assert outcomes.get("passed") == 22 and not outcomes.get("failed") and not outcomes.get("error"), out[
        -3000:
    ]
    texts = [p.read_text() for p in sorted(tmx_tests.glob("test_*.py"))]
    assert len(texts) == 4 and not any("tttv2_tools" in t for t in texts)
    assert sum("hf_reference" in t for t in texts) == 2  # the MLP's two files, not the router's


def test_a_differing_module_fails_naming_the_first_difference(
    tmp_path, tmx_importable, pytester, nested_run_imports
):
    tests = _generate(tmp_path)
    module = tmp_path / "router_1d.py"
    text = module.read_text()
    assert "ttnn.softmax(logits, dim=-1)" in text
    module.write_text(
        text.replace("ttnn.softmax(logits, dim=-1)", "ttnn.softmax(ttnn.multiply(logits, 1.5), dim=-1)")
    )
    outcomes, out = _run(pytester, tests / "test_router_1d.py", "-k", "matches_tttv1 and 1x2")
    assert outcomes.get("failed") == 1, out[-2000:]
    assert "TopKRouter forward: device 0, index [" in out, out[-2000:]


def test_a_missing_fixture_is_named(tmp_path, tmx_importable, pytester, nested_run_imports):
    """No ``tt_ccl`` fixture: the MLP's tests fail saying which fixture to write; the router, which does not take
    one, passes; ``state_dict_prefix`` (a default, no fixture) is left to its default."""
    tests = _generate(tmp_path, conftest=CONFTEST.replace("def tt_ccl(", "def _no_tt_ccl("))
    outcomes, out = _run(pytester, tests, "-k", "1x2")
    assert outcomes.get("failed") == 4 and outcomes.get("passed") == 1, out[-3000:]
    assert "MLP.__init__ needs `tt_ccl`: no fixture of that name" in out


def _store(path: Path, shape: list[int]) -> Path:
    fields = {
        "mesh_shape": [1, 2],
        "model_name": "tmx-tiny",
        "inputs": [["hidden_states", {"shape": shape, "dtype": "bfloat16"}]],
    }
    with CaseStore(path, create=True) as store:
        store.add_cases([Case("tmx.tt.router:TopKRouter", fields)], "test")
    return path


def test_recorded_inputs_are_built_where_no_fixture_exists(
    tmp_path, tmx_importable, pytester, nested_run_imports
):
    """``--cases``: the router's case recorded with ``hidden_states`` of [1, 1, 64, 64]: listed in the generated
    test; without a ``hidden_states`` fixture the test builds the tensor from the record and passes; a fixture
    that gives another shape than the record fails, naming both."""
    from tttv2_tools.refactor.cases import case_notes

    store = _store(tmp_path / "cases.sqlite", [1, 1, 64, 64])
    # tmx-tiny is not a tttv1 catalogue model, and need not be: the package's conftest builds its ModelArgs
    assert case_notes(store, TMX / "tt" / "router.py", "TopKRouter", ("forward",)) == []
    no_fixture = CONFTEST.replace("def hidden_states(", "def _no_hidden_states(")
    tests = _generate(tmp_path / "a", "--cases", str(store), conftest=no_fixture)
    text = (tests / "test_router_1d.py").read_text()
    assert '"hidden_states": {"dtype": "bfloat16", "shape": [1, 1, 64, 64]}' in text
    outcomes, out = _run(pytester, tests / "test_router_1d.py", "-k", "matches_tttv1")
    assert outcomes.get("passed") == 1 and not outcomes.get("failed"), out[-2000:]

    other = _store(tmp_path / "other.sqlite", [1, 1, 64, 96])
    tests = _generate(tmp_path / "b", "--cases", str(other))
    outcomes, out = _run(pytester, tests / "test_router_1d.py", "-k", "matches_tttv1")
    assert outcomes.get("failed") == 1, out[-2000:]
    assert (
        "the fixture `hidden_states` gives shape [1, 1, 64, 64], the recorded case has [1, 1, 64, 96]" in out
    )


# --- the library's pieces on their own ---------------------------------------------------------------------------
class _Mode(enum.Enum):
    DECODE = "decode"
    PREFILL = "prefill"


class _ByDefault:
    def forward(self, x, mode=_Mode.DECODE):
        return x


class _ByAnnotation:
    def forward(self, x, mode: _Mode):
        return x


class _Unresolved:
    def forward(self, x, mode: NoSuchType):  # noqa: F821 - an annotation that does not resolve
        return x


class _Plain:
    def __call__(self, x, llm_mode):
        return x


def _mode_of(cls, mode: str):
    import inspect

    param = next(
        p for p in inspect.signature(harness._entry(cls)).parameters.values() if p.name.endswith("mode")
    )
    return harness._mode_value(cls, param, mode)


def test_the_mode_is_passed_as_the_forward_takes_it():
    assert _mode_of(_ByDefault, "prefill") is _Mode.PREFILL
    assert _mode_of(_ByAnnotation, "decode") is _Mode.DECODE
    assert _mode_of(_ByAnnotation, "forward") == "forward"  # no such member: the string
    assert _mode_of(_Unresolved, "decode") == "decode"
    assert _mode_of(_Plain, "decode") == "decode"  # a __call__ entry, llm_mode, no annotation


class _Refuses:
    @classmethod
    def from_model_args(cls, **kwargs):
        raise TopologyError("_Refuses needs a 1-D mesh; use Other2D")


class _Accepts:
    @classmethod
    def from_model_args(cls, **kwargs):
        return cls()


class _Legacy:
    def __init__(self, size=1):
        self.size = size


class _Request:
    """The part of pytest's request the harness uses: no fixture of any name but the mesh (1x1, opened here)."""

    def getfixturevalue(self, name):
        if name == "mesh_device" and hasattr(self, "mesh"):
            return self.mesh
        raise pytest.FixtureLookupError(name, self)

    def _get_fixturestack(self):
        return []


def test_the_refusal_check_fails_when_the_class_accepts_or_names_another():
    harness.assert_refuses_mesh(_Request(), _Legacy, _Refuses, "Other2D")
    with pytest.raises(AssertionError, match="without naming Else2D"):
        harness.assert_refuses_mesh(_Request(), _Legacy, _Refuses, "Else2D")
    with pytest.raises(AssertionError, match="accepted a mesh of the other topology"):
        harness.assert_refuses_mesh(_Request(), _Legacy, _Accepts, "Other2D")


def test_a_missing_fixture_a_fixture_needs_is_the_user_s_error():
    """A fixture that exists but needs a missing one: pytest's own error, not 'no fixture of that name'."""

    class Deeper:
        def getfixturevalue(self, name):
            raise pytest.FixtureLookupError("something_else", self)

        def _get_fixturestack(self):
            return []

    with pytest.raises(pytest.FixtureLookupError):
        harness.constructor_arguments(Deeper(), _Legacy)
    assert harness.constructor_arguments(_Request(), _Legacy) == {}  # size keeps its default


def test_a_forward_input_with_no_fixture_record_or_default_fails_naming_it():
    with pytest.raises(
        pytest.fail.Exception, match=r"_ByAnnotation.forward needs `x`: no fixture of that name"
    ):
        harness.forward_arguments(_Request(), _ByAnnotation, "decode")
    # a recorded input is built on the mesh given
    from tttv2 import ttnn

    request = _Request()
    request.mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 1))
    try:
        calls = harness.forward_arguments(request, _ByDefault, "decode", {"x": {"shape": [32, 32]}})
        assert calls["mode"] is _Mode.DECODE and list(calls["x"].shape) == [32, 32]
    finally:
        ttnn.close_mesh_device(request.mesh)


def test_a_module_that_raises_on_import_is_not_left_half_loaded(tmp_path):
    (tmp_path / "broken_1d.py").write_text("raise RuntimeError('broken at import')\n")
    for _ in range(2):  # the second load runs the file again: nothing half-loaded was kept
        with pytest.raises(RuntimeError, match="broken at import"):
            harness.load_generated(str(tmp_path / "t.py"), "broken_1d.py", "Broken1D")


def test_recorded_inputs_follow_the_recorded_shape_and_dtype(ttnn_mesh_pool):
    from tttv2 import ttnn

    mesh = ttnn_mesh_pool((1, 2))
    built = harness.recorded_input(
        [{"shape": [1, 1, 32, 64], "dtype": "bfloat16"}, {"shape": [32], "dtype": "int32"}], mesh
    )
    assert [list(t.shape) for t in built] == [[1, 1, 32, 64], [32]]
    assert built[0].dtype == ttnn.bfloat16 and built[0].layout == ttnn.TILE_LAYOUT
    assert built[1].dtype == ttnn.int32 and built[1].layout == ttnn.ROW_MAJOR_LAYOUT
    values = ttnn.to_numpy(ttnn.get_device_tensors(built[1])[1])
    assert values.min() >= 0 and values.max() < 32
    row_major = harness.recorded_input(
        {"shape": [1, 1, 4, 8], "dtype": "float32", "layout": "row_major"}, mesh
    )
    assert row_major.layout == ttnn.ROW_MAJOR_LAYOUT and row_major.dtype == ttnn.float32


class _LegacyOK:
    def forward(self, x=1):
        return x

    __call__ = forward


class _LegacyRaises(_LegacyOK):
    def forward(self, x=1):
        raise ValueError("bad case")

    __call__ = forward


class _TwinRaises:
    @classmethod
    def from_model_args(cls, **kwargs):
        return cls()

    def __call__(self, x=1):
        raise RuntimeError("twin broke")


class _TwinOK(_TwinRaises):
    def __call__(self, x=1):
        return x + 1


def test_a_failure_says_whether_tttv1_or_the_generated_module_raised_or_differed():
    with pytest.raises(
        AssertionError, match=r"TTTv1 _LegacyRaises itself raised on this case \(ValueError: bad"
    ):
        harness.assert_matches_tttv1(_Request(), _LegacyRaises, [_TwinOK], "forward")
    with pytest.raises(
        AssertionError, match=r"generated module raised where TTTv1 _LegacyOK did not \(Runtime"
    ):
        harness.assert_matches_tttv1(_Request(), _LegacyOK, [_TwinRaises], "forward")
    with pytest.raises(AssertionError, match=r"_LegacyOK forward: value 2 != 1"):
        harness.assert_matches_tttv1(_Request(), _LegacyOK, [_TwinOK], "forward")


def test_the_missing_fixture_error_is_found_on_a_pytest_that_does_not_export_it(monkeypatch):
    from _pytest.fixtures import FixtureLookupError

    assert harness._lookup_error() is FixtureLookupError
    monkeypatch.delattr(pytest, "FixtureLookupError")
    assert harness._lookup_error() is FixtureLookupError
