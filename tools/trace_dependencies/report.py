"""The terminal report (rich) and the --why output."""

from __future__ import annotations

from collections import Counter, defaultdict

from rich.console import Console
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .ids import NodeKind, is_kind, parse_node
from .model import LEVELS, Analysis, Hop
from .summary import _upstream, short_name, summary_lines

__all__ = ["render", "render_summary", "render_why", "short_name", "summary_lines"]

STYLE = {"static": "blue", "weights": "green", "mode": "dark_orange", "runtime": "red", "unknown": "grey50"}
LEVEL_TITLES = {
    "hardware": "hardware & environment",
    "model_args": "model arguments (HF config, ModelArgs / module constructor args, weights)",
    "derived": "derived values",
    "config_keys": "config keys",
    "per_call_inputs": "per-call inputs",
    "branches": "branches",
    "terminal_ops": "terminal ttnn ops",
}


def _kind(text: str) -> Text:
    return Text(text, style=STYLE.get(text, ""))


def _hops(hops: list[Hop], limit: int | None = 7) -> str:
    """A proof path; longer than ``limit`` hops, its middle is one ``…`` (``None``: every hop, as ``-v`` asks)."""
    parts = []
    shown = hops if limit is None or len(hops) <= limit else [*hops[:2], None, *hops[-(limit - 3) :]]
    last_file = None
    for hop in shown:
        if hop is None:
            parts.append("…")
            continue
        text = short_name(hop.node, hop.label)
        if hop.loc:
            file, line, _col = hop.loc.rsplit(":", 2)
            text += f"@{line}" if file == last_file else f"@{file}:{line}"
            last_file = file
        parts.append(text)
    return " → ".join(parts)


def plain(console: Console) -> Console:
    """The same output stream with markup and ``:emoji:`` codes off: keys, file names and source excerpts are user
    text and are printed as they are (``[red]`` or ``:key:`` in a key name stays literal)."""
    if not console._markup and not console._emoji:  # rich has no public getter
        return console
    return Console(
        file=console.file,
        width=console.width,
        color_system=console.color_system,
        force_terminal=console.is_terminal,
        highlight=False,
        markup=False,
        emoji=False,
        soft_wrap=console.soft_wrap,
    )


def render_summary(analysis: Analysis, console: Console) -> None:
    console = plain(console)
    for line in summary_lines(analysis):
        console.print(Text(line, style="bold" if line.startswith("Summary") else ""))


def render(analysis: Analysis, console: Console, verbose: bool = False) -> None:
    a = analysis
    console = plain(console)
    render_summary(a, console)
    console.print()
    head = Text.assemble(
        ("trace-deps ", "bold"),
        (a.module, "bold cyan"),
        f" (class {a.module_class})",
        "  +  " if a.config else "",
        (a.config or "", "bold cyan"),
        f" (class {a.config_class})" if a.config_class else "",
    )
    console.print(head)
    stats = a.stats
    console.print(
        f"{stats.get('files')} files, {stats.get('lines')} lines, {stats.get('nodes')} nodes, "
        f"{stats.get('edges')} edges · files: {', '.join(a.files)}"
        + (f" · view: {a.assumptions}" if a.assumptions else "")
    )

    # -- config reads -------------------------------------------------------------------------------
    table = Table(
        title="Config reads (model_config keys)", title_justify="left", show_lines=False, expand=False
    )
    table.add_column("key", overflow="fold")
    table.add_column("read at", overflow="fold")
    table.add_column("how", overflow="fold")
    table.add_column("defs", justify="right", overflow="fold")
    table.add_column("value kind", overflow="fold")
    by_key: dict[str, list] = defaultdict(list)
    for r in a.reads:
        if r.kind == "key":
            by_key[r.name].append(r)
    for key in sorted(by_key):
        reads = by_key[key]
        lines = sorted({int(r.loc.rsplit(":", 2)[1]) for r in reads})
        how = sorted({_how(r) for r in reads})
        defs = a.definitions.get(key, [])
        kinds = sorted({d.value_kind + (f"({', '.join(d.params)})" if d.params else "") for d in defs})
        table.add_row(
            Text(key, style="" if reads[0].resolved else "bold red"),
            "L" + ",".join(map(str, lines)),
            "; ".join(how),
            str(len(defs)) if defs else Text("none", style="bold red"),
            ", ".join(kinds),
        )
    console.print(table)

    members = Counter()
    unresolved_members = set()
    for r in a.reads:
        if r.kind != "key":
            members[(r.kind, r.name)] += 1
            if not r.resolved:
                unresolved_members.add((r.kind, r.name))
    if members:
        text = Text("ModelArgs members read: ")
        for i, ((kind, name), count) in enumerate(sorted(members.items())):
            if i:
                text.append(", ")
            label = f"{name}()" if kind == "method" else name
            text.append(
                label + (f"×{count}" if count > 1 else ""),
                style="bold red" if (kind, name) in unresolved_members else "",
            )
        console.print(text)

    methods = sorted({r.name for r in a.reads if r.kind == "method"})
    if methods:
        table = Table(title="ModelArgs methods the module calls (G3 style)", title_justify="left")
        table.add_column("method", overflow="fold")
        table.add_column("defined at", overflow="fold")
        table.add_column("config keys it reaches", overflow="fold")
        for name in methods:
            node = f"method:{name}"
            data = a.dependencies.nodes.get(node, {})
            keys = sorted(parse_node(n).rest for n in _upstream(a, node) if is_kind(n, NodeKind.KEY))
            where = data.get("loc") or ""
            table.add_row(
                Text(name + "()", style="" if data.get("resolved", False) else "bold red"),
                where.rsplit(":", 1)[0] if where else Text("not defined", style="bold red"),
                ", ".join(keys),
            )
        console.print(table)

    # -- definitions --------------------------------------------------------------------------------
    console.print()
    console.print(Text("Definitions of the keys read (source order; last assignment wins)", style="bold"))
    tree = Tree("model_config", hide_root=True)
    for key in sorted(by_key):
        defs = a.definitions.get(key, [])
        branch = tree.add(Text(key, style="bold"))
        if not defs:
            node = a.dependencies.nodes.get(f"unknown:key:{key}")
            reason = node.get("reason") if node else "not defined"
            branch.add(Text(f"unknown: {reason}", style="red"))
            continue
        kinds = {d.id: d.value_kind for d in defs}
        for d in defs:
            guards = " and ".join(g.describe() for g in d.guards)
            status = "" if d.live else " [no effect: already set]" if d.only_if_absent else " [overwritten]"
            if d.shadowed_by and all(kinds.get(i) == "deleted" for i in d.shadowed_by):
                status = " [removed by del]"
            if d.live and d.value_kind == "deleted":
                status = " [the key is removed]"
            if d.live and d.live_when:
                status = f" [survives when {d.live_when}]"
            line = Text(f"{d.loc.rsplit(':', 1)[0]}  ")
            line.append(f"if {guards}" if guards else "always", style="italic")
            line.append(f": {d.value}" if verbose or len(d.value) < 90 else f": {d.value[:88]}…")
            if status:
                line.append(status, style="yellow")
            branch.add(line)
    console.print(tree)

    # -- branches -----------------------------------------------------------------------------------
    for side, title in (
        ("module", f"Branches in {a.module}"),
        ("helper", "Branches in helpers the module calls"),
    ):
        rows = [
            b
            for b in a.branches
            if b.side == side and (verbose or side == "module" or b.construct != "boolop")
        ]
        if not rows:
            continue
        console.print()
        table = Table(title=title, title_justify="left")
        table.add_column("where", overflow="fold")
        table.add_column("construct", overflow="fold")
        table.add_column("test", max_width=44, overflow="fold")
        table.add_column("class", overflow="fold")
        table.add_column("facts", max_width=22, overflow="fold")
        table.add_column("proof (root → … → condition)", overflow="fold")
        for b in rows:
            facts = ", ".join([*b.topology, *(f"mode {m}" for m in b.mode), *b.facts])
            proof = (
                _hops(b.chain[b.classification], None if verbose else 7)
                if b.classification in b.chain
                else ""
            )
            where = b.loc.rsplit(":", 1)[0] if side == "module" else f"{b.loc.rsplit(':', 1)[0]} {b.function}"
            table.add_row(
                where,
                b.construct,
                b.test if verbose or len(b.test) < 60 else b.test[:58] + "…",
                _kind(b.classification),
                facts,
                proof,
            )
        console.print(table)
        counts = Counter(b.classification for b in a.branches if b.side == side)
        console.print("  " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))

    # -- roots and hierarchy ------------------------------------------------------------------------
    console.print()
    console.print(Text("Root parameters and hierarchy levels", style="bold"))
    for level in LEVELS:
        nodes = a.levels.get(level, [])
        if not nodes:
            continue
        roots = [n for n in nodes if a.dependencies.nodes[n].get("root")]
        if level in ("hardware", "model_args", "per_call_inputs"):
            shown = ", ".join(short_name(n, a.dependencies.nodes[n].get("label")) for n in (roots or nodes))
        elif level == "config_keys":
            shown = ", ".join(sorted(parse_node(n).rest for n in nodes if is_kind(n, NodeKind.KEY)))
        elif level == "terminal_ops":
            shown = ", ".join(parse_node(n).rest for n in nodes)
        else:
            shown = f"{len(nodes)} nodes"
        console.print(Text.assemble((f"  {LEVEL_TITLES[level]}: ", "bold"), shown))

    # -- terminal ops per path ------------------------------------------------------------------------
    if a.paths:
        console.print()
        table = Table(title="Terminal ttnn ops per path (forward)", title_justify="left")
        table.add_column("op", overflow="fold")
        names = list(a.paths)
        for name in names:
            table.add_column(name, justify="center", overflow="fold")
        all_ops = sorted({op for ops in a.paths.values() for op in ops})
        for op in all_ops:
            table.add_row(op, *("✓" if op in a.paths[name] else "" for name in names))
        console.print(table)
    if a.construction_ops:
        console.print("Construction (__init__) ops: " + ", ".join(a.construction_ops))

    # -- unknowns and skipped -----------------------------------------------------------------------
    unknown = [n for n in sorted(a.dependencies.nodes) if a.dependencies.nodes[n]["category"] == "unknown"]
    if unknown or a.skipped:
        console.print()
        console.print(Text("Not understood (explicit unknowns and skipped constructs)", style="bold"))
        for n in unknown:
            data = a.dependencies.nodes[n]
            console.print(f"  [unknown] {n}: {data.get('reason')}")
        for s in a.skipped:
            style = "yellow" if s.severity == "warning" else ""
            console.print(Text(f"  [{s.severity}] {s.loc}: {s.what}: {s.reason}", style=style))


def _how(r) -> str:
    text = r.via  # whole: it holds the key's name (the table folds it)
    if r.called_with is not None:
        text += " (called)"
    return text


def render_why(analysis: Analysis, name: str, console: Console, limit: int = 12) -> bool:
    from .query import resolve_name

    console = plain(console)
    targets = resolve_name(analysis, name)
    if not targets:
        console.print(
            Text(
                f"nothing called {name!r} in the graph (try a key, args.<attr>, an op, file:line)",
                style="red",
            )
        )
        return False
    paths = analysis.why(name, limit=limit)
    console.print(Text(f"why {name}: {', '.join(targets)}", style="bold"))
    if not paths:
        console.print("  depends on no root parameter (a constant)")
    for path in paths:
        console.print(f"  {path[0].label}")
        for hop in path[1:]:
            loc = f"  ({hop.loc})" if hop.loc else ""
            console.print(f"    → {hop.label}{loc}")
    return True
