"""Command line: ``collect-cases record | verify | list | export | import | emit | sweep``.

Exit codes: ``record`` passes the command's own code through (a killed command: 128 + signal); ``verify`` too
when it is not 0, else 0 every checked call passed (at least one), 1 a case failed or nothing was checked;
otherwise 0 done, 1 ``emit --check`` found the list out of date or a ``sweep`` run failed, 2 bad input, usage or
a refusal (``collect-cases: error: ...``, one line), 3 a bug in the tool (one line; ``--debug`` shows the
traceback), 130 interrupted (Ctrl-C, one line). Messages print paths as they are (no rich markup:
``cases[v2].sqlite`` stays ``cases[v2].sqlite``). The common options (``-q``, ``--debug``, ``--width``) may come
before or after the verb; the conventions are the toolkit's (``tools/_cli.py``, docs/cli.md).
"""

from __future__ import annotations

import argparse
import difflib
import json
import shlex
import sys
import time
import uuid
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tttv2_tools._cli import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    STDOUT,
    ArgumentParser,
    HelpFormatter,
    add_common,
    add_output,
    internal_error,
    normalise_argv,
    say,
    table_width,
)
from tttv2_tools._output import (
    Kind,
    OnlyOnce,
    Output,
    OutputError,
    check,
    file_argument,
    interrupted,
    same_file,
    write,
    write_text,
)
from tttv2_tools._recursion import deeper_recursion, too_deep

from . import load_cases, sweep_ranks
from .cases import MODES, TOPOLOGIES, Case, select
from .command import checked
from .csvio import CSV_KIND, export_csv, import_csv
from .emit import DEFAULT_LINE_LENGTH, emit
from .errors import CollectCasesError, TargetError
from .fields import canonical_json, parse_user_field
from .record import exit_status, forwarding_stop_signals, start
from .store import SCHEMA_VERSION, CaseStore
from .sweep import parse_meshes, parse_models, summary_table, sweep
from .targets import TTTV1_TARGETS, parse_target
from .verify import check_generated, parse_layers

TOOL = "collect-cases"
USAGE_ERROR = EXIT_USAGE
SWEEP_FAILED = 1  # a sweep run failed, or (under tttv2-run) a worker rank lost rank 0
INTERNAL_ERROR = EXIT_INTERNAL
TABLE_VERBS = ("list", "sweep")
TARGET = "MODULE[:CLASS]"  # the toolkit's one way to name a class (docs/cli.md)
TARGET_HELP = "e.g. tttv1.tt.mlp:MLP, tttv1/tt/mlp.py:MLP, or tttv1/tt/mlp.py (its main class)"  # the verbs that print tables: they take --width


def _is_list_json(text: str) -> bool:
    """An earlier ``collect-cases list --json=FILE``: a JSON list of cases (each with a target and fields)."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, list) and all(
        isinstance(c, dict) and {"target", "fields"} <= c.keys() for c in data
    )


LIST_JSON_KIND = Kind(TOOL, "list JSON", _is_list_json)
STORE_WRITERS = frozenset({"record", "verify", "import", "sweep"})  # their writes are store transactions


def _common(p: argparse.ArgumentParser, *, target: str | None) -> None:
    p.add_argument("--store", required=True, action=OnlyOnce, metavar="FILE", help="the case store (SQLite)")
    if target == "required":
        p.add_argument("--target", required=True, action=OnlyOnce, metavar=TARGET, help=TARGET_HELP)
    elif target == "optional":
        p.add_argument("--target", action=OnlyOnce, metavar=TARGET, help="only this target")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def parser() -> argparse.ArgumentParser:
    p = ArgumentParser(
        prog="collect-cases",
        formatter_class=HelpFormatter,
        description="Record the configurations TTTv1 modules see while commands run, and write them into tests "
        "as pytest.param lists.",
    )
    add_common(p, version=f"store schema {SCHEMA_VERSION}", width=True)
    sub = _Verbs(p.add_subparsers(dest="verb", required=True, metavar="VERB"))

    r = sub.add_parser("record", help="run a Python command and record the targets' calls")
    _common(r, target=None)
    r.add_argument(
        "--target", action="append", required=True, metavar=TARGET, help=f"{TARGET_HELP} (repeatable)"
    )
    r.add_argument(
        "--field", action="append", default=[], metavar="NAME=EXPR", help="extra field (repeatable)"
    )
    r.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- python -m MODULE ... (or SCRIPT, or pytest ...)"
    )

    v = sub.add_parser(
        "verify",
        help="run a Python command with each target's generated twin beside it, comparing every output",
    )
    _common(v, target=None)
    v.add_argument(
        "--generated",
        action="append",
        required=True,
        metavar="FILE",
        help="a module written by tttv2-refactor (repeatable: the 1D and 2D files, several modules)",
    )
    v.add_argument(
        "--target", action=OnlyOnce, metavar=TARGET, help="default: the class each file's header names"
    )
    v.add_argument("--layers", metavar="N,N,...", help="only instances of these layers (default: all)")
    v.add_argument("--sample", type=_positive_int, metavar="K", help="check at most K calls per case")
    v.add_argument("--atol", type=_tolerance, default=0.0, help="absolute tolerance (default 0: bit for bit)")
    v.add_argument("--rtol", type=_tolerance, default=0.0, help="relative tolerance (default 0)")
    v.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- python -m MODULE ... (or SCRIPT, or pytest ...)"
    )

    ls = sub.add_parser("list", help="show the recorded cases")
    _common(ls, target="optional")
    ls.add_argument("--topology", choices=TOPOLOGIES)
    ls.add_argument("--mode", choices=MODES)
    add_output(ls, "--json", "JSON instead of a table, to stdout (no FILE, or -) or to FILE")
    ls.add_argument(
        "--force", action="store_true", help="with --json=FILE: replace a file collect-cases did not write"
    )

    ex = sub.add_parser("export", help="write the cases as CSV")
    _common(ex, target="optional")
    ex.add_argument(
        "--csv", required=True, action=OnlyOnce, metavar="FILE", help="output file ('-' for stdout)"
    )
    ex.add_argument(
        "--force",
        action="store_true",
        help="overwrite FILE even if it is not an earlier collect-cases export",
    )

    im = sub.add_parser("import", help="add cases from a CSV (this tool's or upstream's format)")
    _common(im, target="optional")
    im.add_argument("--csv", required=True, action=OnlyOnce, metavar="FILE")

    em = sub.add_parser("emit", help="write a target's cases into a test file as a pytest.param list")
    _common(em, target="required")
    em.add_argument("--into", required=True, action=OnlyOnce, metavar="TEST_FILE")
    em.add_argument(
        "--name",
        required=True,
        action=OnlyOnce,
        metavar="LIST_NAME",
        help="module-level list, e.g. MLP_1D_CASES",
    )
    em.add_argument("--topology", choices=TOPOLOGIES)
    em.add_argument("--mode", choices=MODES)
    em.add_argument("--minimal", action="store_true", help="a small subset covering every value (set cover)")
    em.add_argument(
        "--fields", metavar="A,B,...", help="columns to write (default: pinned by the list header)"
    )
    em.add_argument("--diff", action="store_true", help="print the change, write nothing")
    em.add_argument("--check", action="store_true", help="exit 1 if the list is out of date, write nothing")
    em.add_argument(
        "--drop-unrecorded",
        action="store_true",
        help="drop hand-written entries the store does not have (was --force, still accepted with a warning)",
    )
    em.add_argument("--force", action="store_true", dest="old_force", help=argparse.SUPPRESS)
    em.add_argument("--line-length", type=int, default=DEFAULT_LINE_LENGTH, metavar="N")

    sw = sub.add_parser(
        "sweep", help="record the tttv1 demo over models x meshes (over MPI ranks under tttv2-run)"
    )
    _common(sw, target=None)
    sw.add_argument("--models", default="all", help="'all' or NAME,NAME (tttv1 catalogue)")
    sw.add_argument("--meshes", default="N150,N300,T3K,TG", help="N150,N300,N150x4,T3K,TG or RxC")
    sw.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2)")
    sw.add_argument("--target", action="append", metavar=TARGET, help="default: tttv1's MLP, "
                    "Attention, RMSNorm, DistributedNorm, Embedding, LMHead")  # fmt: skip
    sw.add_argument("--field", action="append", default=[], metavar="NAME=EXPR")
    sw.add_argument("--logs", metavar="DIR", help="per-run logs (default: STORE.logs/<time>)")
    sw.add_argument(
        "--demo-args", default="--max-new-tokens 2", help="extra demo options (default: '--max-new-tokens 2')"
    )
    return p


class _Verbs:
    """The verbs' parsers, each with the common options (so ``collect-cases list -q`` works as well as
    ``collect-cases -q list``) and the toolkit's help layout."""

    def __init__(self, action) -> None:
        self.action = action

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        p = self.action.add_parser(name, formatter_class=HelpFormatter, **kwargs)
        add_common(p, version=None, width=name in TABLE_VERBS, subcommand=True)
        return p


def _normalised(argv: list[str]) -> list[str]:
    """``list --json`` with no FILE means stdout (``tools/_cli.py``); the verb has no positional argument, so a
    next word that is not an option is its FILE (``--json out.json`` = ``--json=out.json``). The commands after
    ``record`` / ``verify`` / ``sweep`` are never touched."""
    for i, word in enumerate(argv):
        if word in VERBS:
            if word == "list":
                return argv[: i + 1] + normalise_argv(argv[i + 1 :], ["--json"], lambda w: True)
            return argv
    return argv


def parse_args(argv) -> argparse.Namespace:
    """The command line as ``main`` reads it (argparse only: nothing is read or run)."""
    return parser().parse_args(_normalised([str(a) for a in argv]))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    out = Console(width=table_width(args.width))
    err = Console(stderr=True, soft_wrap=True, markup=False)  # messages hold paths: never read as markup
    try:
        # libcst's visitors recurse per operand of a long expression in a test file; a SIGTERM reaches the
        # recorded commands too (record, verify, sweep), never leaving one running on its own
        with deeper_recursion(), forwarding_stop_signals():
            return VERBS[args.verb](args, out, err)
    except (CollectCasesError, OutputError) as exc:
        say(TOOL, str(exc))
        return USAGE_ERROR
    except RecursionError:
        say(TOOL, too_deep("read"))
        return USAGE_ERROR
    except KeyboardInterrupt as exc:  # Ctrl-C: one line, no traceback
        kept = (
            "the store keeps every case committed before" if args.verb in STORE_WRITERS else "nothing written"
        )
        err.print(interrupted(f"collect-cases {args.verb}", exc, kept), highlight=False)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, never a traceback unless asked
        return internal_error(TOOL, exc, args.debug)


def _info(args, err: Console, text: str) -> None:
    """A progress or summary line on stderr (``-q`` leaves it out; errors and failures are always printed)."""
    if not args.quiet:
        err.print(text, highlight=False, markup=False)


# --- verbs ------------------------------------------------------------------------------------------------------


def _finish(recording, store: Path, created: bool, command: list[str], verb: str, done: str, err: Console):
    """Wait for a started recording: ``(exit code, status)``; a target error removes a store this run created."""
    try:
        try:
            code, status = recording.finish()
        except KeyboardInterrupt:
            code, status = recording.finish()
    except TargetError:  # nothing ran: a store this run created stays uncreated
        if created:
            _remove_empty_store(store)
        raise
    if not status.get("ready"):
        why = (
            f"{command[0]!r} was killed by signal {-code} before the recorder started"
            if code < 0
            else f"the recorder did not start in {command[0]!r} (is tttv2 installed for that interpreter?)"
        )
        say(TOOL, f"{verb}: {why}; nothing was {done}", "warning")
    return code, status


def _record(args, out: Console, err: Console) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    targets = [parse_target(t) for t in args.target]
    fields = tuple(parse_user_field(f) for f in args.field)
    checked(command)  # a command that cannot run (python nosuch.py) is one line, and creates no store
    created = not Path(args.store).exists()
    with CaseStore(args.store, create=True) as store:
        before = {t: n for t, n, _ in store.targets()}
    recording = start(args.store, targets, command, fields)
    code, status = _finish(recording, Path(args.store), created, command, "record", "recorded", err)
    with CaseStore(args.store) as store:
        after = {t: n for t, n, _ in store.targets()}
    lines = [
        f"{t}: {after.get(t.name, 0)} cases (+{after.get(t.name, 0) - before.get(t.name, 0)})"
        for t in targets
    ]
    calls = f"{status['calls']} calls; " if "calls" in status else ""
    _info(
        args,
        err,
        f"collect-cases record: {calls}{'; '.join(lines)} in {args.store}; the command exited with "
        f"{exit_status(code)}",
    )
    return exit_status(code)


def _verify(args, out: Console, err: Console) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    checked(command)
    generated = check_generated(args.generated, args.target)
    layers = parse_layers(args.layers)
    targets = [parse_target(t) for t in dict.fromkeys(g.target for g in generated)]
    sources: dict[str, str] = {}
    for g in generated:
        if sources.setdefault(g.target, str(g.source)) != str(g.source):
            raise CollectCasesError(
                f"--generated {g.path}: generated from {g.source}, but another file for {g.target} from "
                f"{sources[g.target]}"
            )
    run = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"
    created = not Path(args.store).exists()
    settings = {
        "run": run,
        "generated": [[str(Path(g.path).resolve()), g.target, g.path] for g in generated],
        "sources": sources,
        "layers": layers,
        "sample": args.sample,
        "atol": args.atol,
        "rtol": args.rtol,
    }
    recording = start(args.store, targets, command, verify=settings)
    code, status = _finish(recording, Path(args.store), created, command, "verify", "verified", err)
    with CaseStore(args.store) as store:
        results = store.verifications(run=run)
    return verify_summary(results, status, [t.name for t in targets], exit_status(code), args, run, err)


def _case_text(fields_json: str) -> str:
    """``1x8 decode, x 1x1x32x512 bfloat16``: a case as the summary names it."""
    case = Case("", json.loads(fields_json))
    inputs = [f"{name}_shape" for name, _ in case.fields.get("inputs", [])]
    mesh = "x".join(map(str, case.mesh_shape)) if case.mesh_shape else "mesh ?"
    parts = [mesh, case.mode or "-"]
    if case.flat.get("model_name"):
        parts.append(case.flat["model_name"])
    described = _describe_tensors(case.flat, inputs)
    return " ".join(parts) + (f", {described}" if described else "")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def verify_summary(results, status: dict, targets: list[str], code: int, args, run: str, err: Console) -> int:
    """One line per target, one per failed case (its first difference or exception); returns the exit code."""
    counts = status.get("verify", {})
    tolerance = f"atol={args.atol}, rtol={args.rtol}" if args.atol or args.rtol else "bit for bit"
    failed_any, checked_any, unchecked = False, 0, []
    for target in targets:
        mine = [r for r in results if r.target == target]
        c = counts.get(target, {})
        checked = sum(r.checked for r in mine)
        passed = sum(r.passed for r in mine)
        failed = [r for r in mine if r.first_failure is not None]
        checked_any += checked
        if not checked:
            unchecked.append(target)
        failed_any = failed_any or bool(failed)
        twins = sorted({f"{r.twin_class} ({r.generated})" for r in mine if r.twin_class})
        verdict = "FAILED" if failed else ("passed" if checked else "NOTHING CHECKED")
        extra = []
        if c.get("not_shadowed"):
            extra.append(f"{_count(c['not_shadowed'], 'instance')} not shadowed (subclass or --layers)")
        if c.get("unchecked_calls"):
            extra.append(
                f"{_count(c['unchecked_calls'], 'call')} ran TTTv1 only (--sample, or a twin out of step)"
            )
        if c.get("build_failed"):
            extra.append(f"{_count(c['build_failed'], 'twin')} failed to build")
        if c.get("shared_arguments"):
            extra.append(
                f"{_count(c['shared_arguments'], 'constructor argument object')} shared with the twin, not "
                f"copyable (first: {c.get('shared_first', '')})"
            )
        if c.get("rebuilt"):
            extra.append(
                f"{_count(c['rebuilt'], 'twin rebuild')}: the setter switched TTTv1 to another dict of one mode "
                "(state a rebuilt twin keeps itself starts empty)"
            )
        if c.get("one_mode_only"):
            extra.append(
                f"{_count(c['one_mode_only'], 'call')} not checked: the twin reads one dict per mode, and the "
                "program never ran that TTTv1 instance with the other mode's dict"
            )
        err.print(
            f"collect-cases verify: {target}: {verdict}: {len(mine) - len(failed)} of {len(mine)} cases and "
            f"{passed} of {checked} calls equal ({tolerance}); {_count(c.get('instances', 0), 'instance')}"
            + (f"; twins {', '.join(twins)}" if twins else "")
            + (f"; {'; '.join(extra)}" if extra else ""),
            highlight=False,
            markup=False,
        )
        for r in failed:
            err.print(
                f"  FAILED {r.generated} ({r.twin_class or 'no twin'}), case {_case_text(r.fields_json)}: "
                f"{r.first_failure}",
                highlight=False,
                markup=False,
            )
    if code != 0:
        verdict = f"the command exited with {code}"
    elif failed_any:
        verdict, code = "a case failed", 1
    elif unchecked:
        verdict, code = f"nothing was checked for {', '.join(unchecked)} (no shadowed instance was called)", 1
    else:
        verdict = f"every checked call was equal ({checked_any} calls)"
    err.print(
        f"collect-cases verify: {verdict}; results in {args.store} (run {run})",
        highlight=False,
        markup=False,
    )
    return code


def _remove_empty_store(path: Path) -> None:
    """Remove a store this run created, if it is still empty (and SQLite's side files with it)."""
    with CaseStore(path) as store:
        if store.targets():
            return
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        name.unlink(missing_ok=True)


def _describe_tensors(flat: dict, suffix_keys: list[str]) -> str:
    parts = []
    for key in suffix_keys:
        name = key[: -len("_shape")]
        shape, dtype = flat.get(f"{name}_shape"), flat.get(f"{name}_dtype")
        if isinstance(shape, tuple) and shape and isinstance(shape[0], tuple):
            shape = "+".join("x".join(map(str, s)) for s in shape)
        elif isinstance(shape, tuple):
            shape = "x".join(map(str, shape))
        dtype = "+".join(dtype) if isinstance(dtype, tuple) else dtype
        parts.append(f"{name} {shape or '?'} {dtype or '?'}")
    return ", ".join(parts)


def _list(args, out: Console, err: Console) -> int:
    with CaseStore(args.store) as store:
        cases = store.cases(parse_target(args.target).name if args.target else None)
        verified = _latest_verifications(
            store.verifications(parse_target(args.target).name if args.target else None)
        )
    cases = select(cases, args.topology, args.mode)
    if args.json is not None:
        text = (
            json.dumps(
                [
                    {
                        "target": c.target,
                        "fields": c.fields,
                        "hits": c.hits,
                        "layers": list(c.layers),
                        "first_command": c.first_command,
                        "first_seen": c.first_seen,
                        "last_seen": c.last_seen,
                        **(
                            {"verification": verified[(c.target, canonical_json(c.fields))]}
                            if (c.target, canonical_json(c.fields)) in verified
                            else {}
                        ),
                    }
                    for c in cases
                ],
                indent=2,
            )
            + "\n"
        )
        if args.json == STDOUT:
            sys.stdout.write(text)
        else:
            target = Output(file_argument("--json", args.json), text, LIST_JSON_KIND, "--json")
            check([target], [Path(args.store)], args.force)
            write([target])
            _info(args, err, f"wrote {len(cases)} cases to {args.json}")
        return 0
    for target in dict.fromkeys(c.target for c in cases):
        mine = load_cases(args.store, target, args.topology, args.mode)
        table = Table(title=f"{target}: {len(mine)} cases, {sum(c.hits for c in mine)} calls")
        columns = ["mesh", "mode", "model", "inputs", "weights", "hits", "layers"]
        show_verified = any(t == target for t, _ in verified)
        if show_verified:
            columns.append("verified")
        for column in columns:  # values wrap, never cut: a CI log needs every name and number
            table.add_column(column, justify="right" if column == "hits" else "left", overflow="fold")
        for c in mine:
            inputs = [n for n in (f"{name}_shape" for name, _ in c.fields.get("inputs", []))]
            weights = ", ".join(
                f"{name} {spec['dtype'] if isinstance(spec, dict) else '+'.join(s['dtype'] for s in spec)}"
                for name, spec in sorted(c.fields.get("weights", {}).items())
            )
            row = [
                "x".join(map(str, c.mesh_shape)) if c.mesh_shape else "?",
                c.mode or "-",
                c.flat.get("model_name", "?"),
                _describe_tensors(c.flat, inputs),
                weights,
                str(c.hits),
                " ".join(map(str, c.layers)),
            ]
            if show_verified:
                v = verified.get((c.target, canonical_json(c.fields)))
                row.append(
                    "-"
                    if v is None
                    else f"{'FAILED ' if v['first_failure'] else ''}{v['passed']}/{v['checked']} equal"
                )
            table.add_row(*row)
        out.print(table)
    if not cases:
        _info(args, err, f"no cases in {args.store}" + (f" for {args.target}" if args.target else ""))
    return 0


def _latest_verifications(rows) -> dict:
    """The last verify run's result per case: ``{(target, fields JSON): {...}}`` (rows come oldest first)."""
    latest = {}
    for r in rows:
        latest[(r.target, r.fields_json)] = {
            "run": r.run,
            "generated": r.generated,
            "twin_class": r.twin_class,
            "checked": r.checked,
            "passed": r.passed,
            "first_failure": r.first_failure,
        }
    return latest


def _export(args, out: Console, err: Console) -> int:
    if args.csv != "-" and same_file(file_argument("--csv", args.csv), Path(args.store)):
        raise CollectCasesError(f"--csv {args.csv}: is the store itself; choose another file")
    if args.csv != "-":  # an existing file only if it is an earlier export, or with --force
        check([Output(Path(args.csv), "", CSV_KIND, "--csv")], [Path(args.store)], args.force)
    with CaseStore(args.store) as store:
        cases = store.cases(parse_target(args.target).name if args.target else None)
    text = export_csv(cases)
    if args.csv == "-":
        sys.stdout.write(text)
    else:
        write([Output(Path(args.csv), text, CSV_KIND, "--csv")])
        _info(args, err, f"exported {len(cases)} cases to {args.csv}")
    return 0


def _import(args, out: Console, err: Console) -> int:
    if same_file(Path(args.csv), Path(args.store)):
        raise CollectCasesError(f"--csv {args.csv}: is the store itself")
    target = parse_target(args.target).name if args.target else None
    cases = import_csv(args.csv, target)
    for case in cases:
        parse_target(case.target)
    with CaseStore(args.store, create=True) as store:
        new = store.add_cases(cases, f"collect-cases import --csv {args.csv}")
    _info(args, err, f"imported {len(cases)} rows from {args.csv}: {new} new cases in {args.store}")
    return 0


def _emit(args, out: Console, err: Console) -> int:
    if same_file(file_argument("--into", args.into), Path(args.store)):
        raise CollectCasesError(f"--into {args.into}: is the store itself; choose the test file")
    target = parse_target(args.target).name
    with CaseStore(args.store) as store:
        cases = store.cases(target)
    columns = [c.strip() for c in args.fields.split(",") if c.strip()] if args.fields else None
    if args.old_force:  # the old spelling: --force means one thing in every tool (replace a file)
        say(TOOL, "emit --force is now spelled --drop-unrecorded (--force still works, for now)", "warning")
    result = emit(
        cases,
        target,
        args.into,
        args.name,
        topology=args.topology,
        mode=args.mode,
        minimal=args.minimal,
        columns=columns,
        force=args.drop_unrecorded or args.old_force,
        line_length=args.line_length,
    )
    for warning in result.warnings:
        say(TOOL, warning, "warning")
    if args.minimal:
        # one dropped id per line: a sweep drops hundreds, and a reviewer greps for one
        _info(
            args,
            err,
            f"--minimal kept {result.kept} cases and dropped {len(result.dropped)}"
            + (":" if result.dropped else ""),
        )
        for case_id in result.dropped:
            _info(args, err, f"  {case_id}")
    if args.diff and result.changed:
        diff = difflib.unified_diff(
            (result.old_text or "").splitlines(keepends=True),
            result.new_text.splitlines(keepends=True),
            f"a/{args.into}",
            f"b/{args.into}",
        )
        sys.stdout.write("".join(diff))
    if args.check or args.diff:
        if result.changed:
            err.print(f"{args.name} in {args.into} is out of date with {args.store}", highlight=False)
            return 1 if args.check else 0
        _info(args, err, f"{args.name} in {args.into} is up to date ({result.kept} cases)")
        return 0
    if not result.changed:
        _info(args, err, f"{args.name} in {args.into} is up to date ({result.kept} cases)")
        return 0
    write_text(Path(args.into), result.new_text, "--into")
    verb = "created" if result.old_text is None else "updated"
    _info(
        args,
        err,
        f"{verb} {args.name} in {args.into}: {result.kept} cases, fields {', '.join(result.columns)}",
    )
    return 0


def _sweep(args, out: Console, err: Console) -> int:
    models = parse_models(args.models)
    meshes = parse_meshes(args.meshes)
    targets = [parse_target(t) for t in (args.target or TTTV1_TARGETS)]
    fields = tuple(parse_user_field(f) for f in args.field)
    demo_args = shlex.split(args.demo_args)
    world = sweep_ranks.rank_world()  # under tttv2-run: rank 0 coordinates and writes, the others run demos
    if world is not None and world[0] != 0:
        from tttv2.distributed import DistributedError

        try:
            return sweep_ranks.work(
                world[0], targets, fields=fields, jobs=args.jobs, demo_args=demo_args, demo=sweep_ranks.DEMO
            )
        except DistributedError as exc:  # rank 0 died or hangs: this rank's sweep failed, not the tool
            say(TOOL, str(exc))
            return SWEEP_FAILED
    logs = Path(args.logs) if args.logs else Path(f"{args.store}.logs") / time.strftime("%Y%m%d-%H%M%S")
    kwargs = {"fields": fields, "jobs": args.jobs, "logs": logs, "demo_args": demo_args, "console": err}
    if world is None:
        CaseStore(args.store, create=True).close()
        runs = sweep(args.store, models, meshes, targets, demo=sweep_ranks.DEMO, **kwargs)
    else:
        runs = sweep_ranks.coordinate(
            args.store, models, meshes, targets, size=world[1], demo=sweep_ranks.DEMO, **kwargs
        )
    out.print(summary_table(runs, meshes))
    failed = [r for r in runs if not r.passed]
    with CaseStore(args.store) as store:
        totals = store.targets()
    out.print(
        f"{len(runs) - len(failed)} of {len(runs)} runs passed; store {escape(args.store)}: "
        + ", ".join(f"{t} {n} cases" for t, n, _ in totals)
        + f"; logs in {escape(str(logs))}",
        highlight=False,
    )
    return 1 if failed else 0


VERBS = {
    "record": _record,
    "verify": _verify,
    "list": _list,
    "export": _export,
    "import": _import,
    "emit": _emit,
    "sweep": _sweep,
}


if __name__ == "__main__":
    raise SystemExit(main())
