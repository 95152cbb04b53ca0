"""The answer first: the report's opening summary, as plain lines (no rich: a run that writes its outputs to files
prints only these, and loads nothing it does not need), and the compact node names the report shares."""

from __future__ import annotations

import re
from collections import Counter

from .ids import NodeKind, is_kind, parse_node
from .model import Analysis

#: ``n@14:8``: a local assigned more than once has one node per assignment (line and column appended).
_SITE_SUFFIX = re.compile(r"@\d+:\d+$")
#: ``model_config_str (get_model_config() argument)``: the label of a config function's parameter.
_BUILDER_ARG = re.compile(r"(.+) \(([\w.]+)\(\) argument\)")


def short_name(node: str, label: str | None = None) -> str:
    """A compact name for a graph node (used in proofs); ``label`` (the node's) tells a config function's
    parameters from ModelArgs constructor arguments."""
    kind, _, rest = node.partition(":")
    if kind in ("local", "param"):
        rest = _SITE_SUFFIX.sub("", rest)  # the hop's location shows the line
    last = rest.rsplit(":", 1)[-1]
    if kind == "arg" and label and (builder := _BUILDER_ARG.fullmatch(label)):
        return f"{builder[2]}({builder[1]}=)"
    if kind == "input" and rest.startswith("state:"):
        return f"self.{rest.rsplit('.', 1)[-1]} (module state)"
    if kind == "input" and rest.startswith("global:"):
        return f"{last} (module state: a rebound global)"
    return {
        "hw": f"hw.{rest}",
        "env": f"${rest}",
        "hf": f"hf.{rest}",
        "attr": f"args.{rest}",
        "method": f"args.{rest}()",
        "key": rest,
        "arg": f"ModelArgs({rest}=)",
        "module": f"ctor({rest}=)",
        "input": f"{rest} (input)",
        "weights": "state_dict",
        "self": f"self.{rest.rsplit('.', 1)[-1]}",
        "local": last,
        "param": last,
        "global": last,
        "func": f"{last.rsplit('.', 1)[-1]}()",
        "def": "definition",
        "branch": "condition",
        "fact": rest,
        "unknown": "unknown",
        "extern": f"{rest.rsplit('.', 1)[-1]}()",
    }.get(kind, node)


def summary_lines(a: Analysis) -> list[str]:
    """The answer first: a few lines on what the class reads, what it depends on, and what needs a look (the
    report opens with them; a run that wrote its outputs to files prints only them)."""
    direct = sorted({r.name for r in a.reads if r.kind == "key"})
    methods = sorted({r.name for r in a.reads if r.kind == "method"})
    via = sorted(
        {
            parse_node(n).rest
            for m in methods
            for n in _upstream(a, f"method:{m}")
            if is_kind(n, NodeKind.KEY) and parse_node(n).rest not in direct
        }
    )
    members = sorted({(f"{r.name}()" if r.kind == "method" else r.name) for r in a.reads if r.kind != "key"})
    keys = f"{len(direct) + len(via)} config keys"
    if via:
        keys += f" ({len(direct)} read directly, {len(via)} more through args.get_*())"
    lines = [
        f"Summary: class {a.module_class} in {a.module}" + (f" with {a.config}" if a.config else ""),
        *([f"  {a.class_choice}"] if a.class_choice else []),
        f"  reads {keys}: {', '.join(direct + via) or '-'}",
        f"  reads {len(members)} ModelArgs members: {', '.join(members) or '-'}",
    ]
    for level, title in (("hardware", "hardware & environment"), ("model_args", "model arguments"),
                         ("per_call_inputs", "per-call inputs")):  # fmt: skip
        roots = [n for n in a.levels.get(level, []) if a.dependencies.nodes[n].get("root")]
        names = [short_name(n, a.dependencies.nodes[n].get("label")) for n in roots]
        lines.append(f"  root parameters, {title}: {', '.join(names) or '-'}")
    for side, where in (("module", a.module), ("helper", "helpers")):
        counts = Counter(b.classification for b in a.branches if b.side == side)
        if counts:
            lines.append(
                f"  branches in {where}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
    unknown = sum(1 for n in a.dependencies.nodes if a.dependencies.nodes[n]["category"] == "unknown")
    look = [f"{unknown} unknown nodes"] if unknown else []
    look += [f"{len(a.skipped)} skipped constructs"] if a.skipped else []
    lines.append(
        "  needs a look: "
        + (", ".join(look) + ' (see "Not understood")' if look else "nothing, all understood")
    )
    return lines


def _upstream(a: Analysis, node: str) -> set[str]:
    if node not in a.dependencies:
        return set()
    return a.dependencies.ancestors(node)
