"""The codemod's passes on small TTTv1-style modules written for the test: specialisation by topology and mode,
static code moved to construction, code choices bound at construction, fields named and guarded, dead code."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from tttv2_tools.refactor import generate
from tttv2_tools.refactor.cleanup import remove_dead_code, unused_imports
from tttv2_tools.refactor.cstutil import code, is_pure, slug
from tttv2_tools.refactor.fields import reduce_conjunctions
from tttv2_tools.refactor.layout import sorted_imports

BLOCK = """
import ttnn


class Block:
    def __init__(self, mesh_device, tt_ccl, args, state_dict, model_config):
        self.args = args
        self.model_config = model_config
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.dim = args.dim
        self.w = ttnn.as_tensor(
            state_dict["w"], dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device),
        )

    def forward(self, x, mode):
        TG = self.args.is_galaxy
        seq_len = x.shape[-2]
        scale = self.args.scale if mode == "decode" else self.args.prefill_scale
        if TG and mode == "decode":
            x = ttnn.all_gather(x, dim=3)  # galaxy decode only
        out = ttnn.linear(x, self.w, dtype=ttnn.bfloat8_b if TG else ttnn.bfloat16)
        if self.dim == 8192:
            out = ttnn.relu(out)
            extra = 1
        else:
            extra = 2
        if seq_len > 128:
            out = ttnn.reshape(out, [1, 1, -1, out.shape[-1]])
        cfg = self.model_config["OUT_MEMCFG"](seq_len)
        return ttnn.multiply(out, scale + extra, memory_config=cfg)
"""


CONFIG = """
class ModelArgs:
    def __init__(self, mesh_device, dim=512):
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.dim = dim
        self.scale = 0.5
        self.prefill_scale = 0.25
        self.model_config = {"OUT_MEMCFG": lambda seq_len: None}
"""


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    folder = tmp_path_factory.mktemp("engine")
    (folder / "block.py").write_text(textwrap.dedent(BLOCK))
    (folder / "model_config.py").write_text(textwrap.dedent(CONFIG))
    return generate(folder / "block.py")


def _method(module_code: str, name: str) -> str:
    tree = cst.parse_module(module_code)
    for statement in tree.body:
        if isinstance(statement, cst.ClassDef):
            for item in statement.body.body:
                if isinstance(item, cst.FunctionDef) and item.name.value == name:
                    return code(item)
    raise AssertionError(f"no method {name}")


def test_topologies_and_classes(block):
    assert [m.class_name for m in block.modules] == ["Block1D", "Block2D"]
    assert [m.file_name for m in block.modules] == ["block_1d.py", "block_2d.py"]
    assert block.gaps == []
    for generated in block.modules:
        compile(generated.code, generated.file_name, "exec")


def test_topology_and_mode_facts_are_decided(block):
    one_d, two_d = (m.code for m in block.modules)
    decode_1d = _method(one_d, "decode_forward")
    assert "all_gather" not in decode_1d and "TG" not in decode_1d and "mode" not in decode_1d
    assert "all_gather" in _method(two_d, "decode_forward")
    assert "all_gather" not in _method(two_d, "prefill_forward")
    # the conditional dtype is decided per topology, and nothing of it is left to choose at run time
    assert "ttnn.bfloat16" in decode_1d and "bfloat8_b" not in decode_1d
    assert "ttnn.bfloat8_b" in _method(two_d, "decode_forward")


def test_static_choices_move_to_construction(block):
    one_d = block.modules[0].code
    decode = _method(one_d, "decode_forward")
    # a static code choice is bound once; its arms are methods; the value it selects is returned
    assert "self.dim" not in decode and "== 8192" not in decode
    assert "out = self._decode_dim_eq_8192(out)" in decode
    binder = _method(one_d, "_bind")
    assert "self.config.dim == 8192" in binder and "_decode_dim_eq_8192_true" in binder
    assert "ttnn.relu" in _method(one_d, "_decode_dim_eq_8192_true")
    # the value the same branch selects (extra = 1 / 2) is computed at construction: one field for the sum
    assert "self.config.decode_scale_plus_extra" in decode
    bridge = _method(one_d, "from_model_args")
    assert "extra = 1" in bridge and "extra = 2" in bridge
    # the run-time branch stays; config reads become fields, a lambda of seq_len a callable field
    assert "if seq_len > 128:" in decode
    assert "self.config.out_memcfg(seq_len)" in decode
    assert "self.args" not in one_d.split("def from_model_args")[0]
    fields = {f.name: f for f in block.modules[0].rendered.fields.fields}
    assert code(fields["decode_scale_plus_extra"].value) == "scale + extra"
    assert fields["out_memcfg"].modes == ["decode", "prefill"]  # the same read in both modes: one field
    bridge = _method(one_d, "from_model_args")
    assert "scale = legacy.args.scale" in bridge and "scale = legacy.args.prefill_scale" in bridge


def test_from_model_args_keeps_the_weights_lazy(block):
    one_d = block.modules[0].code
    bridge = _method(one_d, "from_model_args")
    assert "_lazy_weight(" in bridge and "ttnn.as_tensor" not in bridge
    assert 'require_1d_mesh("Block1D", mesh_device, "Block2D")' in bridge
    assert bridge.index("require_1d_mesh") < bridge.index("legacy =")  # checked before any device work


def test_report_lists_every_branch(block):
    from tttv2_tools.refactor.report import build_report

    report = build_report(
        block, ["block_1d.py", "block_2d.py"], [], {"1d": "block_1d.py", "2d": "block_2d.py"}
    )
    by_test = {b.test: b for b in report.branches}
    fates = {(f.topology, f.mode): f.kind for f in by_test["self.dim == 8192"].fates}
    assert fates == {
        ("1d", "decode"): "bound",
        ("1d", "prefill"): "bound",
        ("2d", "decode"): "bound",
        ("2d", "prefill"): "bound",
    }
    runtime = by_test["seq_len > 128"].fates
    assert {f.kind for f in runtime} == {"runtime"} and all(f.new_loc for f in runtime)
    decided = {f.kind for f in by_test['TG and mode == "decode"'].fates}
    assert decided == {"decided"}
    markdown = report.to_markdown()
    assert "## Branches" in markdown and "OUT_MEMCFG" in markdown


def test_dead_code_and_purity():
    func = cst.parse_statement("def f(x):\n    a = 1\n    b = g()\n    c, d = h()\n    return d\n")
    cleaned = code(remove_dead_code(func))
    assert "a = 1" not in cleaned  # pure and unread
    assert "g()" in cleaned and "b =" not in cleaned  # the call stays, its unread result does not
    assert "_c, d = h()" in cleaned
    assert is_pure(cst.parse_expression("max(a, b) + len(c)"))
    assert not is_pure(cst.parse_expression("ttnn.linear(a, b)"))
    assert is_pure(cst.parse_expression("ttnn.CoreGrid(x=1, y=2)"))


def test_unused_imports_and_sorting():
    module = cst.parse_module("from __future__ import annotations\nimport os\nfrom a import b, c\nx = c\n")
    assert unused_imports(module).code == "from __future__ import annotations\nfrom a import c\nx = c\n"
    lines = [
        code(s)
        for s in sorted_imports(
            [("tttv1.x", "B", "B"), ("os", None, "os"), ("ttnn", None, "ttnn")], {"tttv1"}
        )
    ]
    assert lines == ["import os\n", "\nimport ttnn\n", "\nfrom tttv1.x import B\n"]


def test_guards_reduce_over_paths():
    a_true, a_false, b_true = ("a", True), ("a", False), ("b", True)
    assert reduce_conjunctions({(a_true,), (a_false,)}) == []  # both arms use it: unconditional
    assert reduce_conjunctions({(b_true, a_true), (b_true, a_false)}) == [(b_true,)]
    assert reduce_conjunctions({(a_true,), ()}) == []
    assert reduce_conjunctions({(a_true,)}) == [(a_true,)]


def test_slugs():
    assert slug("self.dim == 8192") == "dim_eq_8192"
    assert slug("self.args.prefetcher is not None") == "prefetcher_is_not_none"
    assert slug("3 > x").startswith("value_")
