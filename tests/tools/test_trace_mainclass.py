"""Which class trace-deps analyses by default in a file with several classes that have an entry (issue 21, item
3): the main class, the one no other class of the file uses; else the first class with an entry. The choice is
explained in one line (stderr note, report summary, JSON ``class_choice``); ``--class`` overrides it."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from tttv2_tools.trace_dependencies import Analysis, analyze
from tttv2_tools.trace_dependencies.cli import main
from tttv2_tools.trace_dependencies.mainclass import main_class

FIX = Path(__file__).parent / "fixtures"
ROTARY = FIX / "fn_t3k" / "rotary_attention.py"  # Falcon-40B's attention: a rotary class before it
NORMS = FIX / "misc" / "norms.py"  # models/common/rmsnorm.py: two unrelated norms


def test_the_class_no_other_uses_is_analysed():
    a = analyze(ROTARY)
    assert a.module_class == "TtRotaryAttention" and a.entry == "__call__"
    # the attention's own keys, and the rotary's through the object it builds
    assert {"FUSED_QKV_MM_PROGCFG", "SOFTMAX_PROGCFG", "ROTARY_EMBEDDING_OUTPUT_MEMCFG"} <= set(a.keys_read())
    assert a.class_choice == (
        "class TtRotaryAttention chosen: the one class with an entry (TtRotaryEmbedding, TtRotaryAttention) that "
        "no other class of the file uses (TtRotaryEmbedding is used by TtRotaryAttention)"
    )


def test_class_overrides_and_says_nothing():
    a = analyze(ROTARY, class_name="TtRotaryEmbedding")
    assert a.module_class == "TtRotaryEmbedding" and a.class_choice is None
    assert a.keys_read() == ["COS_CACHED_WEIGHTS_MEMCFG", "ROTARY_EMBEDDING_OUTPUT_MEMCFG"]


def test_unrelated_classes_keep_the_first():
    a = analyze(NORMS)
    assert a.module_class == "LayerRMSNorm"
    assert a.class_choice == (
        "class LayerRMSNorm chosen: the first class with an entry: 2 classes with an entry (LayerRMSNorm, "
        "PlainRMSNorm) are used by no other class of the file, not exactly one"
    )


def test_classes_using_each_other_keep_the_first(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\n"
        "class A:\n    def forward(self, x):\n        return B.scale(ttnn.relu(x))\n"
        "class B:\n    peer = A\n    def forward(self, x):\n        return ttnn.exp(x)\n"
    )
    a = analyze(module)
    assert a.module_class == "A"
    assert (
        a.class_choice
        == "class A chosen: the first class with an entry: each class with an entry (A, B) is used by another one"
    )


def test_one_class_with_an_entry_needs_no_note(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "import ttnn\nclass Helper:\n    def scale(self, x):\n        return x\n"
        "class Block:\n    def forward(self, x):\n        return ttnn.relu(Helper().scale(x))\n"
    )
    assert main_class(ast.parse(module.read_text()), ("forward",)) == (None, "")
    a = analyze(module)
    assert a.module_class == "Block" and a.class_choice is None


def test_an_annotation_is_a_use_and_a_base_is_not():
    tree = ast.parse(
        "class Base:\n    def forward(self, x): ...\n"
        "class Typed:\n    def forward(self, x: 'str') -> None:\n        y: Base = None\n"
    )
    name, why = main_class(tree, ("forward",))
    assert name == "Typed" and "Base is used by Typed" in why
    # tttv1/tt/embedding.py: ScaledEmbedding(Embedding) is a variant, so neither is used and the first is kept
    tree = ast.parse(
        "class Embedding:\n    def forward(self, x): ...\nclass Scaled(Embedding):\n    def forward(self, x): ...\n"
    )
    name, why = main_class(tree, ("forward",))
    assert name is None and "2 classes with an entry (Embedding, Scaled) are used by no other class" in why


def test_cli_note_report_and_json(capsys):
    assert main([str(ROTARY)]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines()[0].startswith("trace-deps: note: class TtRotaryAttention chosen: the one class")
    summary = out.splitlines()
    assert summary[0].startswith("Summary: class TtRotaryAttention") and "chosen" in summary[1]
    assert main([str(ROTARY), "--json=-", "--quiet"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert err == "" and data["class_choice"].startswith("class TtRotaryAttention chosen")
    assert Analysis.from_json(out).class_choice == data["class_choice"]
    assert main([f"{ROTARY}:TtRotaryEmbedding", "--json=-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["class_choice"] is None and "chosen" not in err
