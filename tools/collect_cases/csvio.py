"""CSV: ``export`` writes one row per case; ``import`` reads that format and upstream's in-module CSVs.

Exported columns: ``target, hits, first_command, layer_num`` (first layer, as upstream), ``layers`` (all),
``cluster_shape_x, cluster_shape_y, num_devices, arch, mode, hf_model_name, class_name``, then
``input.<arg>.shape`` / ``input.<arg>.dtype``, ``weight.<attr>.shape`` / ``weight.<attr>.dtype`` (shapes as
JSON lists; a list of tensors as a JSON list of them) and ``field.<name>`` (JSON).

Upstream's CSVs (tt-metal's ``mlp_1d_performance.csv`` and ``embedding_1d_performance.csv`` hacks) are read by
column name: ``layer_num``, ``cluster_shape_x/_y``, ``hf_model_name`` / ``model_name``, ``mode``
(``Mode.DECODE`` or ``decode``), ``class_name``; ``x_dtype`` is the input's dtype and any other ``<name>_dtype``
a weight's (``DataType.BFLOAT8_B`` or ``bfloat8_b``); ``batch_size, filler, seq_len, dim`` together are the
input's shape, ``<name>_shape_<i>`` is dimension i of the input ``x`` or of weight ``<name>``; every other
column (``hidden_dim``, ``embed_scale``) becomes a user field, typed as int, float or bool when it reads as one.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from tttv2_tools._output import first_line

from .cases import Case
from .errors import CollectCasesError

_HEAD = ["target", "hits", "first_command", "layer_num", "layers", "cluster_shape_x", "cluster_shape_y"]
_SIMPLE = {"num_devices": "num_devices", "arch": "arch", "mode": "mode", "hf_model_name": "model_name",
           "model_name": "model_name", "class_name": "class_name"}  # fmt: skip
#: an export always starts with this header, which tells a later export that the file is one it wrote
CSV_KIND = first_line("collect-cases", "CSV export", ",".join(_HEAD[:3]) + ",")
_UPSTREAM_SHAPE = ("batch_size", "filler", "seq_len", "dim")
_INDEXED_SHAPE = re.compile(r"^(?P<name>\w+?)_shape_(?P<index>\d+)$")


def export_csv(cases: list[Case]) -> str:
    """The CSV text for ``cases`` (columns: the union over all cases, in first-seen order)."""
    rows = []
    columns = [*list(_HEAD), "num_devices", "arch", "mode", "hf_model_name", "class_name"]
    for case in cases:
        f = case.fields
        row = {
            "target": case.target,
            "hits": case.hits,
            "first_command": case.first_command,
            "layer_num": case.layers[0] if case.layers else "",
            "layers": " ".join(str(v) for v in case.layers),
        }
        if "mesh_shape" in f and len(f["mesh_shape"]) == 2:
            row["cluster_shape_x"], row["cluster_shape_y"] = f["mesh_shape"]
        for key in ("num_devices", "arch", "mode", "class_name"):
            if key in f:
                row[key] = f[key]
        if "model_name" in f:
            row["hf_model_name"] = f["model_name"]
        specs = [("input", n, s) for n, s in f.get("inputs", [])]
        specs += [("weight", n, s) for n, s in sorted(f.get("weights", {}).items())]
        for kind, name, spec in specs:
            parts = spec if isinstance(spec, list) else [spec]
            for part in ("shape", "dtype"):
                if all(part in p for p in parts):
                    value = [p[part] for p in parts] if isinstance(spec, list) else spec[part]
                    row[f"{kind}.{name}.{part}"] = value if isinstance(value, str) else json.dumps(value)
        for name, value in f.get("extra", {}).items():
            row[f"field.{name}"] = json.dumps(value)
        for key in row:
            if key not in columns:
                columns.append(key)
        rows.append(row)
    used = [c for c in columns if any(c in r for r in rows)] or list(_HEAD)  # no cases: the header alone
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=used, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def _dtype(text: str) -> str:
    return text.strip().rpartition(".")[2].lower()  # DataType.BFLOAT8_B → bfloat8_b


def _mode(text: str) -> str:
    return text.strip().rpartition(".")[2].lower()  # Mode.DECODE → decode


def _typed(text: str):
    text = text.strip()
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"True": True, "False": False}.get(text, text)


def _int(text: str, column: str, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise CollectCasesError(
            f"--csv line {line}: column {column}: expected an integer, got {text!r}"
        ) from None


def _json(text: str, column: str, line: int):
    try:
        return json.loads(text)
    except ValueError:
        raise CollectCasesError(f"--csv line {line}: column {column}: expected JSON, got {text!r}") from None


def _put(specs: dict, kind_name: tuple[str, str], part: str, value) -> None:
    spec = specs.setdefault(kind_name, {})
    if (isinstance(value, list) and part == "dtype") or (
        part == "shape" and value and isinstance(value[0], list)
    ):
        # a list of tensors: one spec per element
        items = spec.setdefault("__list__", [{} for _ in value])
        for item, v in zip(items, value):
            item[part] = v
    else:
        spec[part] = value


def import_csv(path: str | Path, target: str | None) -> list[Case]:
    """Cases from a CSV in either format; ``target`` is required unless the file has a ``target`` column."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a FIFO would make the read wait forever
        raise CollectCasesError(f"--csv {path}: is not a regular file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CollectCasesError(f"--csv {path}: cannot read it: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise CollectCasesError(
            f"--csv {path}: not UTF-8 text ({exc.reason} at byte {exc.start}, line {line}); save it as UTF-8"
        ) from None
    reader = csv.DictReader(io.StringIO(text))
    header = reader.fieldnames or []
    if not header:
        raise CollectCasesError(f"--csv {path}: empty file, expected a header line")
    if "target" not in header and not target:
        raise CollectCasesError(f"--csv {path}: the file has no target column; pass --target module:Class")
    known = set(_HEAD) | set(_SIMPLE) | set(_UPSTREAM_SHAPE)
    cases = []
    for line, row in enumerate(reader, start=2):
        if None in row or any(v is None for v in row.values()):
            raise CollectCasesError(f"--csv {path} line {line}: {len(header)} columns expected")
        row = {k: v for k, v in row.items() if v is not None and v.strip() != ""}
        fields: dict = {}
        specs: dict[tuple[str, str], dict] = {}
        extra = {}
        for column, raw in row.items():
            if column in _SIMPLE:
                key = _SIMPLE[column]
                fields[key] = (
                    _int(raw, column, line)
                    if key == "num_devices"
                    else _mode(raw)
                    if key == "mode"
                    else raw.strip().lower()
                    if key == "arch"
                    else raw.strip()
                )
            elif column.startswith(("input.", "weight.")) and column.count(".") >= 2:
                kind, rest = column.split(".", 1)
                name, part = rest.rsplit(".", 1)
                value = raw if part == "dtype" and not raw.startswith("[") else _json(raw, column, line)
                _put(specs, (kind, name), part, value)
            elif column.startswith("field."):
                extra[column[len("field.") :]] = _json(raw, column, line)
            elif column.endswith("_dtype"):
                name = column[: -len("_dtype")]
                _put(specs, ("input" if name == "x" else "weight", name), "dtype", _dtype(raw))
            elif m := _INDEXED_SHAPE.match(column):
                name = m["name"]
                spec = specs.setdefault(("input" if name == "x" else "weight", name), {})
                spec.setdefault("__dims__", {})[int(m["index"])] = _int(raw, column, line)
            elif column not in known:
                extra[column] = _typed(raw)
        if "cluster_shape_x" in row and "cluster_shape_y" in row:
            shape = [_int(row[c], c, line) for c in ("cluster_shape_x", "cluster_shape_y")]
            fields["mesh_shape"] = shape
            if "num_devices" not in header:  # upstream's files: the device count is the mesh's, by definition
                fields["num_devices"] = shape[0] * shape[1]
        if all(c in row for c in _UPSTREAM_SHAPE):
            specs.setdefault(("input", "x"), {})["shape"] = [_int(row[c], c, line) for c in _UPSTREAM_SHAPE]
        inputs, weights = [], {}
        for (kind, name), spec in specs.items():
            dims = spec.pop("__dims__", None)
            if dims:
                spec["shape"] = [dims[i] for i in sorted(dims)]
            value = spec.pop("__list__", None) or spec
            if kind == "input":
                inputs.append([name, value])
            else:
                weights[name] = value
        if inputs:
            fields["inputs"] = inputs
        if weights:
            fields["weights"] = weights
        if extra:
            fields["extra"] = extra
        layers = row.get("layers", row.get("layer_num", ""))
        case_target = row.get("target", target)
        if target and case_target != target and "target" in row:
            continue  # --target filters an exported file with several targets
        cases.append(
            Case(
                case_target,
                fields,
                hits=_int(row["hits"], "hits", line) if "hits" in row else 1,
                first_command=row.get("first_command", ""),
                layers=tuple(sorted({_int(v, "layers", line) for v in layers.split()})),
            )
        )
    return cases
