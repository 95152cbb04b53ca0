"""The recorder in-process: the import hook, what a call becomes (field rules), dedup, user fields, bad targets."""

from __future__ import annotations

import contextlib
import importlib
import sys

import pytest

from tttv2_tools.collect_cases import CollectCasesError, TargetError, load_cases
from tttv2_tools.collect_cases.fields import parse_user_field
from tttv2_tools.collect_cases.recorder import Recorder
from tttv2_tools.collect_cases.store import CaseStore
from tttv2_tools.collect_cases.targets import entry_method, import_target, parse_target


def _recorder(store, module, *classes, fields=()):
    return Recorder(
        store,
        [parse_target(f"{module}:{c}") for c in classes],
        [parse_user_field(f) for f in fields],
        command="test",
    )


@contextlib.contextmanager
def recording(store, module, *classes, fields=()):
    """A recorder installed for the block, which gets the (freshly imported) toy module."""
    recorder = _recorder(store, module, *classes, fields=fields)
    recorder.install()
    try:
        yield importlib.import_module(module)
    finally:
        recorder.close()


def test_hook_patches_only_the_named_class_when_its_module_is_imported(tmp_path, toy_module):
    recorder = _recorder(tmp_path / "s.sqlite", toy_module, "ToyMLP")
    recorder.install()
    assert toy_module not in sys.modules  # nothing imported yet: the hook waits for it
    try:
        module = importlib.import_module(toy_module)
        assert hasattr(module.ToyMLP.forward, "__collect_cases_original__")
        assert not hasattr(module.ToyAttention.forward, "__collect_cases_original__")
        assert toy_module in sys.modules and module.__spec__.loader.get_source(toy_module)  # loader delegates
    finally:
        recorder.close()
    # closing puts the class back as it was
    assert not hasattr(module.ToyMLP.forward, "__collect_cases_original__")
    assert "__init__" in vars(module.ToyMLP) and not hasattr(module.ToyMLP.__init__, "__wrapped__")


def test_a_call_records_mesh_mode_inputs_weights_model_and_layer(tmp_path, toy_module, mesh):
    store = tmp_path / "s.sqlite"
    with recording(store, toy_module, "ToyMLP") as toy:
        from tttv2 import ttnn

        args = toy.Args(mesh, "Toy-8B")
        layers = [toy.ToyMLP(mesh, args, i, up_dtype=ttnn.bfloat4_b) for i in range(3)]
        x = toy.tensor(mesh, (1, 1, 32, 64))
        for _ in range(5):
            for layer in layers:
                layer.forward(x, toy.Mode.DECODE)
        layers[0].forward(toy.tensor(mesh, (1, 1, 128, 64)), "prefill")
    cases = load_cases(store, f"{toy_module}:ToyMLP")
    assert [(c.mode, c.hits, c.layers) for c in cases] == [("decode", 15, (0, 1, 2)), ("prefill", 1, (0,))]
    decode = cases[0]
    assert decode.flat == {
        "mesh_shape": (1, 2),
        "num_devices": 2,
        "arch": "wormhole_b0",
        "mode": "decode",
        "model_name": "Toy-8B",
        "x_shape": (1, 1, 32, 64),
        "x_dtype": "bfloat16",
        "w1_shape": (64, 64),
        "w1_dtype": "bfloat4_b",
        "w2_shape": (64, 64),
        "w2_dtype": "bfloat8_b",
        # the case in the terms of the tests tttv2-refactor generates (GENERATED_TEST_COLUMNS)
        "mesh_device": (1, 2),
        "seq_len": 32,
        "recorded": '{"x": {"dtype": "bfloat16", "shape": [1, 1, 32, 64]}}',
    }
    assert decode.first_command == "test" and decode.topology == "1d"


def test_model_from_constructor_arguments_nested_targets_and_lists_of_tensors(tmp_path, toy_module, mesh):
    store = tmp_path / "s.sqlite"
    with recording(store, toy_module, "ToyAttention", "ToyNorm") as toy:
        attention = toy.ToyAttention(mesh, toy.Args(mesh, "Toy-70B"), layer_num=4)
        x = toy.tensor(mesh, (1, 1, 32, 64))
        rot = [toy.tensor(mesh, (1, 1, 32, 32)), toy.tensor(mesh, (1, 1, 32, 32))]
        attention.forward(x, toy.tensor(mesh, (1, 32)), rot_mats=rot, page_table=toy.tensor(mesh, (1, 32)))
        toy.ToyNorm(mesh)(x)  # outside any attention: no model known
    (att,) = load_cases(store, f"{toy_module}:ToyAttention")
    assert att.flat["model_name"] == "Toy-70B" and att.layers == (4,)  # init.configuration / init.layer_num
    assert att.flat["mesh_shape"] == (1, 2) and att.flat["mode"] == "decode"  # self.mesh_device, default mode
    assert att.flat["rot_mats_shape"] == ((1, 1, 32, 32), (1, 1, 32, 32))
    assert att.flat["rot_mats_dtype"] == ("bfloat16", "bfloat16")
    assert att.flat["page_table_shape"] == (1, 32)  # **extra keyword arguments are inputs too
    assert att.flat["layer_past_dtype"] == ("bfloat16", "bfloat16") and att.flat["wqkv_dtype"] == "bfloat8_b"
    norms = load_cases(store, f"{toy_module}:ToyNorm")
    # inside the attention the norm inherits the model (outer); alone it does not know it
    assert sorted(c.flat.get("model_name", "?") for c in norms) == ["?", "Toy-70B"]
    assert all(c.flat["mesh_shape"] == (1, 2) for c in norms)  # self.device


def test_subclass_calls_are_recorded_with_their_class_name(tmp_path, toy_module, mesh):
    store = tmp_path / "s.sqlite"
    with recording(store, toy_module, "ToyMLP") as toy:
        x = toy.tensor(mesh, (1, 1, 32, 64))
        toy.SubMLP(mesh, toy.Args(mesh), 0).forward(x, "decode")
        toy.ToyMLP(mesh, toy.Args(mesh), 0).forward(x, "decode")
    names = sorted(c.flat.get("class_name", "-") for c in load_cases(store, f"{toy_module}:ToyMLP"))
    assert names == ["-", "SubMLP"]


def test_user_fields_are_evaluated_on_self_arguments_and_x(tmp_path, toy_module, mesh):
    store = tmp_path / "s.sqlite"
    fields = ["seq_len=x.shape[-2]", "scale=self.scale", "up=self.w1.dtype", "m=mode"]
    with recording(store, toy_module, "ToyMLP", fields=fields) as toy:
        toy.ToyMLP(mesh, toy.Args(mesh), 0).forward(toy.tensor(mesh, (1, 1, 64, 64)), toy.Mode.PREFILL)
    (case,) = load_cases(store, f"{toy_module}:ToyMLP")
    assert case.fields["extra"] == {"seq_len": 64, "scale": 2.0, "up": "bfloat8_b", "m": "prefill"}
    assert case.flat["seq_len"] == 64


def test_a_failing_user_field_is_an_error_naming_it(tmp_path, toy_module, mesh):
    with recording(tmp_path / "s.sqlite", toy_module, "ToyMLP", fields=["bad=self.missing"]) as toy:
        layer = toy.ToyMLP(mesh, toy.Args(mesh), 0)
        with pytest.raises(CollectCasesError, match=r"--field bad: .*AttributeError"):
            layer.forward(toy.tensor(mesh, (1, 1, 32, 64)), "decode")


def test_an_unrecordable_user_field_value_is_an_error(tmp_path, toy_module, mesh):
    message = "--field obj: a value of type ToyMLP cannot be recorded"
    store = tmp_path / "s.sqlite"
    with (
        recording(store, toy_module, "ToyMLP", fields=["obj=self"]) as toy,
        pytest.raises(CollectCasesError, match=message),
    ):
        toy.ToyMLP(mesh, toy.Args(mesh), 0).forward(toy.tensor(mesh, (1, 1, 32, 64)), "decode")


def test_calls_that_do_not_bind_are_not_recorded_and_still_raise(tmp_path, toy_module, mesh):
    store = tmp_path / "s.sqlite"
    with recording(store, toy_module, "ToyMLP") as toy, pytest.raises(TypeError):
        toy.ToyMLP(mesh, toy.Args(mesh), 0).forward()
    assert load_cases(store, f"{toy_module}:ToyMLP") == []


@pytest.mark.parametrize(
    "name, message",
    [
        ("cc_no_such_module:X", "does not import: ModuleNotFoundError"),
        ("{mod}:Missing", "has no attribute 'Missing'"),
        ("{mod}:NOT_A_CLASS", "expected a class, got int"),
        ("{mod}:NoEntry", "has no forward"),
    ],
)
def test_bad_targets_are_clear_errors(tmp_path, toy_module, name, message):
    recorder = _recorder(tmp_path / "s.sqlite", *name.format(mod=toy_module).split(":"))
    recorder.install()
    with pytest.raises(TargetError, match=message):
        recorder.import_targets()
    recorder.close()


def test_target_names_and_entry_methods(toy_module):
    with pytest.raises(
        TargetError, match=r"found no source of module tttv1\.tt\.mlp\.MLP .* write tttv1\.tt\.mlp\.MLP:CLASS"
    ):
        parse_target("tttv1.tt.mlp.MLP")
    with pytest.raises(TargetError, match=r"expected MODULE\[:CLASS\]"):
        parse_target("tttv1.tt.mlp:")
    assert parse_target("a.b:C.D").qualname == "C.D"
    toy = importlib.import_module(toy_module)
    assert entry_method(toy.ToyMLP) == "forward" and entry_method(toy.ToyNorm) == "__call__"
    assert import_target(parse_target(f"{toy_module}:ToyNorm")) is toy.ToyNorm
    with pytest.raises(TargetError, match="does not import"):
        import_target(parse_target("cc_missing_mod:X"))


@pytest.mark.parametrize(
    "text, message",
    [("seq", "expected NAME=EXPR"), ("1x=2", "expected NAME=EXPR"), ("mode=x", "is a default field"),
     ("a=x.(", "is not a Python expression")],
)  # fmt: skip
def test_bad_user_fields(text, message):
    with pytest.raises(CollectCasesError, match=message):
        parse_user_field(text)


def test_already_imported_targets_are_patched_at_once_and_the_store_is_checked_first(tmp_path, toy_module):
    toy = importlib.import_module(toy_module)
    recorder = _recorder(tmp_path / "s.sqlite", toy_module, "ToyNorm")
    recorder.install()
    assert hasattr(toy.ToyNorm.__call__, "__collect_cases_original__")
    recorder.import_targets()  # already patched: not twice
    recorder.close()
    assert not hasattr(toy.ToyNorm.__call__, "__collect_cases_original__")
    recorder.close()  # twice is fine
    (tmp_path / "junk").write_bytes(b"not sqlite at all, sorry")
    with pytest.raises(CollectCasesError, match="not an SQLite database"):
        _recorder(tmp_path / "junk", toy_module, "ToyNorm")
    with CaseStore(tmp_path / "s.sqlite") as store:
        assert store.cases() == []


FALCON_STYLE = '''
from tttv2 import ttnn


class TtBlock:
    """A T3000-demo style module: the forward takes the mode as ``llm_mode`` and dispatches on it."""

    def __init__(self, mesh_device, layer_num):
        self.mesh_device = mesh_device
        self.layer_num = layer_num

    def __call__(self, hidden_states, attention_mask, llm_mode, layer_past_len=0):
        if llm_mode == "prefill":
            return ttnn.multiply(hidden_states, 2.0)
        return ttnn.multiply(hidden_states, 0.5)
'''


def test_the_mode_of_a_forward_taking_llm_mode_is_recorded(tmp_path, mesh, monkeypatch):
    """tt-metal's Falcon-40B modules take the mode as ``llm_mode``: their calls were recorded with the mode
    ``forward`` (no mode); they are now decode and prefill cases, as the generated tests name the parameter."""
    from tttv2 import ttnn
    from tttv2.testing.generated import MODE_PARAMETERS
    from tttv2_tools.collect_cases.fields import DEFAULT_RULES

    assert {
        s.removeprefix("arg.") for s in next(r for r in DEFAULT_RULES if r.name == "mode").sources
    } == set(MODE_PARAMETERS)
    (tmp_path / "cc_falcon_style.py").write_text(FALCON_STYLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    store = tmp_path / "s.sqlite"
    try:
        with recording(store, "cc_falcon_style", "TtBlock") as mod:
            block = mod.TtBlock(mesh, 0)
            x = ttnn.from_torch(
                __import__("torch").zeros(1, 1, 32, 64),
                dtype=ttnn.bfloat16,
                layout=ttnn.TILE_LAYOUT,
                device=mesh,
            )
            block(x, None, "prefill")
            block(x, None, llm_mode="decode", layer_past_len=3)
            block(x, None, "decode")
    finally:
        sys.modules.pop("cc_falcon_style", None)
    cases = load_cases(store, "cc_falcon_style:TtBlock")
    assert sorted((c.mode, c.hits) for c in cases) == [("decode", 2), ("prefill", 1)]
