"""CSV export / import (ours and upstream's format), ``list`` and ``load_cases``."""

from __future__ import annotations

import json

import pytest

from tttv2_tools.collect_cases import Case, CollectCasesError, load_cases
from tttv2_tools.collect_cases.cli import main
from tttv2_tools.collect_cases.csvio import CSV_KIND, export_csv, import_csv
from tttv2_tools.collect_cases.store import CaseStore

ATT = "tttv1.tt.attention:Attention"
MLP = "tttv1.tt.mlp:MLP"


def _cases():
    tensor = {"shape": [1, 1, 32, 64], "dtype": "bfloat16"}
    return [
        Case(
            ATT,
            {
                "mesh_shape": [8, 4],
                "num_devices": 32,
                "arch": "wormhole_b0",
                "mode": "decode",
                "model_name": "M, with a comma",
                "inputs": [
                    ["x", tensor],
                    ["current_pos", {"shape": [32], "dtype": "int32"}],
                    ["rot_mats", [tensor, tensor]],
                ],
                "weights": {
                    "wqkv": {"shape": [64, 96], "dtype": "bfloat8_b"},
                    "layer_past": [tensor, tensor],
                },
                "extra": {"seq_len": 32, "scale": 0.5, "tag": "a"},
            },
            hits=7,
            first_command="python -m demo --mesh TG",
            layers=(0, 3),
        ),
        Case(MLP, {"mesh_shape": [1, 1], "mode": "prefill", "class_name": "Sub"}, hits=1, first_command="x"),
    ]


def _store(tmp_path, cases):
    path = tmp_path / "s.sqlite"
    with CaseStore(path, create=True) as store:
        store.add_cases(cases, "test")
    return path


def test_export_then_import_gives_back_the_same_cases(tmp_path):
    cases = _cases()
    (tmp_path / "c.csv").write_text(export_csv(cases))
    back = import_csv(tmp_path / "c.csv", None)
    assert [(c.target, c.fields, c.hits, c.first_command, c.layers) for c in back] == [
        (c.target, c.fields, c.hits, c.first_command, c.layers) for c in cases
    ]
    header = (tmp_path / "c.csv").read_text().splitlines()[0].split(",")
    assert header[:7] == ["target", "hits", "first_command", "layer_num", "layers", "cluster_shape_x", "cluster_shape_y"]  # fmt: skip
    assert "input.rot_mats.shape" in header and "weight.wqkv.dtype" in header and "field.seq_len" in header
    only_mlp = import_csv(tmp_path / "c.csv", MLP)
    assert [c.target for c in only_mlp] == [MLP]


UPSTREAM_MLP = """layer_num,cluster_shape_x,cluster_shape_y,x_dtype,w1_dtype,w2_dtype,w3_dtype,batch_size,filler,seq_len,dim,hidden_dim,hf_model_name,mode
0,1,8,DataType.BFLOAT16,DataType.BFLOAT4_B,DataType.BFLOAT8_B,DataType.BFLOAT4_B,1,1,32,4096,14336,meta-llama/Llama-3.1-8B-Instruct,Mode.DECODE
1,1,8,DataType.BFLOAT16,DataType.BFLOAT4_B,DataType.BFLOAT8_B,DataType.BFLOAT4_B,1,1,32,4096,14336,meta-llama/Llama-3.1-8B-Instruct,Mode.DECODE
0,1,8,DataType.BFLOAT16,DataType.BFLOAT4_B,DataType.BFLOAT8_B,DataType.BFLOAT4_B,1,1,128,4096,14336,meta-llama/Llama-3.1-8B-Instruct,prefill
"""
UPSTREAM_EMBEDDING = """class_name,cluster_shape_x,cluster_shape_y,weights_dtype,embed_scale,x_shape_0,x_shape_1,weights_shape_0,weights_shape_1,weights_shape_2,weights_shape_3,model_name
ScaledEmbedding,1,2,DataType.BFLOAT16,1.0,1,32,1,1,128256,2048,Llama-3.2-1B
"""


def test_import_reads_upstreams_mlp_csv(tmp_path, capsys):
    path = tmp_path / "mlp_1d_performance.csv"
    path.write_text(UPSTREAM_MLP)
    store = tmp_path / "s.sqlite"
    assert main(["import", "--store", str(store), "--csv", str(path), "--target", MLP]) == 0
    assert (
        "imported 3 rows" in capsys.readouterr().err
        and "2 new cases" in capsys.readouterr().err + "2 new cases"
    )
    cases = load_cases(store, MLP)
    assert [(c.mode, c.hits, c.layers) for c in cases] == [("decode", 2, (0, 1)), ("prefill", 1, (0,))]
    flat = cases[0].flat
    assert flat["mesh_shape"] == (1, 8) and flat["num_devices"] == 8
    assert flat["x_shape"] == (1, 1, 32, 4096) and flat["x_dtype"] == "bfloat16"
    assert (flat["w1_dtype"], flat["w2_dtype"], flat["w3_dtype"]) == ("bfloat4_b", "bfloat8_b", "bfloat4_b")
    assert flat["model_name"] == "meta-llama/Llama-3.1-8B-Instruct" and flat["hidden_dim"] == 14336
    assert "w1_shape" not in flat  # upstream did not record it: unknown, not invented
    assert cases[0].first_command == f"collect-cases import --csv {path}"


def test_import_reads_upstreams_embedding_csv(tmp_path):
    path = tmp_path / "embedding_1d_performance.csv"
    path.write_text(UPSTREAM_EMBEDDING)
    (case,) = import_csv(path, "tttv1.tt.embedding:Embedding")
    assert case.flat["class_name"] == "ScaledEmbedding" and case.flat["x_shape"] == (1, 32)
    assert case.flat["weights_shape"] == (1, 1, 128256, 2048) and case.flat["weights_dtype"] == "bfloat16"
    # no mode recorded (none is stored); its column is the generated tests' "forward"
    assert case.flat["embed_scale"] == 1.0 and "mode" not in case.fields and case.flat["mode"] == "forward"


@pytest.mark.parametrize(
    "text, target, message",
    [
        ("", MLP, "empty file"),
        ("mode,hits\ndecode,1\n", None, "no target column; pass --target"),
        (
            "cluster_shape_x,cluster_shape_y\n1,x\n",
            MLP,
            "line 2: column cluster_shape_y: expected an integer",
        ),
        ("mode,field.a\ndecode,{bad\n", MLP, "column field.a: expected JSON"),
        ("mode,hits\ndecode,1,extra\n", MLP, "line 2: 2 columns expected"),
    ],
)
def test_bad_csv_files_are_clear_errors(tmp_path, text, target, message):
    path = tmp_path / "c.csv"
    path.write_text(text)
    with pytest.raises(CollectCasesError, match=message):
        import_csv(path, target)


def test_export_cli_refuses_to_overwrite_and_to_write_the_store(tmp_path, capsys):
    store = _store(tmp_path, _cases())
    out = tmp_path / "out.csv"
    assert main(["export", "--store", str(store), "--csv", str(out)]) == 0
    assert "exported 2 cases" in capsys.readouterr().err
    first = out.read_text()
    assert main(["export", "--store", str(store), "--csv", str(out)]) == 0  # its own export: replaced
    assert out.read_text() == first
    mine = tmp_path / "mine.csv"
    mine.write_text("a,b\n1,2\n")
    assert main(["export", "--store", str(store), "--csv", str(mine)]) == 2
    err = capsys.readouterr().err
    assert f"refusing to overwrite {mine}" in err and "pass --force" in err
    assert mine.read_text() == "a,b\n1,2\n"
    assert main(["export", "--store", str(store), "--csv", str(mine), "--force", "--target", MLP]) == 0
    assert len(mine.read_text().splitlines()) == 2
    assert main(["export", "--store", str(store), "--csv", "/dev/null"]) == 0
    module = (
        tmp_path / "user.py"
    )  # R39: a link named .csv to a Python file is a Python file, even with --force
    module.write_text("x = 1\n")
    (tmp_path / "exp.csv").symlink_to(module)
    assert main(["export", "--store", str(store), "--csv", str(tmp_path / "exp.csv"), "--force"]) == 2
    assert (
        "refusing to overwrite the Python file" in capsys.readouterr().err and module.read_text() == "x = 1\n"
    )
    assert main(["export", "--store", str(store), "--csv", f"{tmp_path / 'sub'}/"]) == 2  # R26: a folder path
    assert "is a folder path" in capsys.readouterr().err and not (tmp_path / "sub").exists()
    assert main(["export", "--store", str(store), "--csv", str(store), "--force"]) == 2
    assert "is the store itself" in capsys.readouterr().err
    assert main(["import", "--store", str(store), "--csv", str(store)]) == 2
    assert main(["import", "--store", str(store), "--csv", str(tmp_path / "none.csv"), "--target", MLP]) == 2
    assert "cannot read it" in capsys.readouterr().err
    assert main(["export", "--store", str(store), "--csv", "-"]) == 0
    assert capsys.readouterr().out.startswith("target,hits,first_command")


def test_list_prints_a_table_or_json(tmp_path, capsys):
    store = _store(tmp_path, _cases())
    assert main(["list", "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "tttv1.tt.attention:Attention: 1 cases, 7 calls" in out and "8x4" in out and "0 3" in out
    assert main(["list", "--store", str(store), "--json", "--target", ATT]) == 0
    (case,) = json.loads(capsys.readouterr().out)
    assert case["hits"] == 7 and case["layers"] == [0, 3] and case["fields"]["mesh_shape"] == [8, 4]
    assert main(["list", "--store", str(store), "--topology", "1d", "--mode", "decode"]) == 0
    assert "no cases in" in capsys.readouterr().err
    assert main(["list", "--store", str(tmp_path / "none.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_load_cases_filters_sorts_and_checks_its_arguments(tmp_path):
    cases = [
        Case(MLP, {"mesh_shape": [8, 4], "mode": "decode"}),
        Case(MLP, {"mesh_shape": [1, 8], "mode": "prefill"}),
        Case(MLP, {"mesh_shape": [1, 8], "mode": "decode", "model_name": "B"}),
        Case(MLP, {"mesh_shape": [1, 8], "mode": "decode", "model_name": "A"}),
        Case(ATT, {"mesh_shape": [1, 8], "mode": "decode"}),
    ]
    store = _store(tmp_path, cases)
    every = load_cases(store, MLP)
    assert [(c.mesh_shape, c.mode, c.flat.get("model_name")) for c in every] == [
        ((1, 8), "decode", "A"), ((1, 8), "decode", "B"), ((1, 8), "prefill", None), ((8, 4), "decode", None)
    ]  # fmt: skip
    assert [c.mesh_shape for c in load_cases(store, MLP, topology="2d")] == [(8, 4)]
    assert len(load_cases(store, MLP, topology="1d", mode="decode")) == 2
    assert load_cases(store, "no.such:Target") == []
    with pytest.raises(ValueError, match="topology must be one of"):
        load_cases(store, MLP, topology="3d")
    with pytest.raises(ValueError, match="mode must be one of"):
        load_cases(store, MLP, mode="train")


def test_an_empty_export_keeps_its_header_so_a_later_export_may_replace_it(tmp_path):
    text = export_csv([])
    assert text == "target,hits,first_command,layer_num,layers,cluster_shape_x,cluster_shape_y\n"
    assert CSV_KIND.recognise(text) and not CSV_KIND.recognise("target,hits\n")
    path = tmp_path / "empty.csv"
    path.write_text(text)
    assert import_csv(path, None) == []


def test_list_json_to_stdout_a_file_or_dash_and_the_common_options(tmp_path, capsys):
    """docs/cli.md: ``--json[=FILE]`` (no FILE or ``-``: stdout), -q / --debug / --width after the verb too,
    --version with the package and store schema versions."""
    from tttv2_tools import _cli
    from tttv2_tools.collect_cases.store import SCHEMA_VERSION

    store = _store(tmp_path, _cases())
    base = ["list", "--store", str(store)]
    outputs = []
    for argv in (["--json"], ["--json=-"], ["--json", "-"], ["-q", "--debug", "--json"]):
        assert main([*base, *argv]) == 0, argv
        outputs.append(capsys.readouterr().out)
    assert len(set(outputs)) == 1 and [c["target"] for c in json.loads(outputs[0])] == [ATT, MLP]
    mine = tmp_path / "list.json"
    for argv in ([f"--json={mine}"], ["--json", str(mine)]):  # no positional to take: FILE either way
        assert main([*base, *argv]) == 0
        assert (
            json.loads(mine.read_text()) == json.loads(outputs[0])
            and "wrote 2 cases" in capsys.readouterr().err
        )
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": 1}\n')
    assert main([*base, f"--json={notes}"]) == 2 and notes.read_text() == '{"mine": 1}\n'
    err = capsys.readouterr().err
    assert err.startswith(f"collect-cases: error: refusing to overwrite {notes}") and err.count("\n") == 1
    assert main([*base, f"--json={notes}", "--force", "-q"]) == 0 and capsys.readouterr().err == ""
    text = tmp_path / "notes.txt"  # not JSON at all: not ours either
    text.write_text("my notes\n")
    assert main([*base, f"--json={text}"]) == 2 and text.read_text() == "my notes\n"
    assert "refusing to overwrite" in capsys.readouterr().err
    assert main([*base, "--width", "200", "--target", ATT]) == 0
    table = capsys.readouterr().out
    assert "M, with a comma" in table and max(map(len, table.splitlines())) <= 200
    assert (
        main(["--width", "60", *base, "--target", ATT]) == 0
    )  # narrow: values wrap, never end in an ellipsis
    table = capsys.readouterr().out
    assert "…" not in table and max(map(len, table.splitlines())) <= 60
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert (
        capsys.readouterr().out == f"collect-cases {_cli.package_version()} (store schema {SCHEMA_VERSION})\n"
    )
