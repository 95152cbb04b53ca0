"""One command-line language for trace-deps, tttv2-refactor, collect-cases and tttv2-coverage (docs/cli.md).

What every command shares, written once:

- exit codes: 0 done, 1 needs a look, 2 bad input, usage or a refusal, 3 internal error, 130 interrupted;
- messages: ``<tool>: error: ...`` (``warning:``, ``note:``) on stderr, one line, paths printed literally;
- ``--json[=FILE]`` (and every ``--FORMAT[=FILE]``): stdout without FILE or with ``-``; a bare flag never takes
  a positional argument as its file (:func:`normalise_argv`);
- ``-q/--quiet``, ``--debug``, ``--version`` (the package version, plus schema versions) and ``--width`` for
  commands that print tables (:func:`add_common`), and one table width in a pipe (:func:`table_width`);
- one phrasing for a missing input file (:func:`missing_file`).

Kept light: trace-deps imports it on every start (no rich, no shutil, no importlib.metadata until
``--version``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Iterable

from tttv2_tools._output import INTERRUPTED

EXIT_OK = 0
EXIT_ATTENTION = 1  # something needs a look (--strict, --check, a failed case, a spot not transformed)
EXIT_USAGE = 2  # bad input, usage, or a refusal (an output that would replace a user's file, ...)
EXIT_INTERNAL = 3  # a bug in the tool: one line, --debug shows the traceback
EXIT_INTERRUPTED = INTERRUPTED  # Ctrl-C: 128 + SIGINT, as a shell reports it (tools/_output.py)

STDOUT = "-"
PIPE_WIDTH = 140  # the width of tables and reports when stdout is not a terminal (and no --width)
MIN_WIDTH = 20


def message(tool: str, text: str, kind: str = "error") -> str:
    """``<tool>: <kind>: text``: the one shape of every error, warning and note line."""
    return f"{tool}: {kind}: {text}"


def say(tool: str, text: str, kind: str = "error") -> None:
    """Print :func:`message` on stderr (plain text: a path is printed as it is, never read as markup)."""
    sys.stderr.write(message(tool, text, kind) + "\n")
    sys.stderr.flush()


def missing_file(path: object, what: str = "") -> str:
    """The one phrasing of a missing input: ``[what ]PATH: no such file``."""
    return f"{what + ' ' if what else ''}{path}: no such file"


def package_version() -> str:
    """The installed tttv2 distribution's version (else the source tree's ``tttv2.__version__``)."""
    from importlib import metadata

    try:
        return metadata.version("tttv2")
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        from tttv2 import __version__

        return __version__


class _Version(argparse.Action):
    """``--version``: ``<tool> <package version>`` and the schema versions, on one line (computed only when
    asked: reading the distribution's metadata costs milliseconds every other run would pay)."""

    def __init__(self, option_strings, dest, schemas: str = "", **kwargs):
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, **kwargs)
        self.schemas = schemas

    def __call__(self, parser, namespace, values, option_string=None):
        tool = parser.prog.split()[0]
        extra = f" ({self.schemas})" if self.schemas else ""
        sys.stdout.write(f"{tool} {package_version()}{extra}\n")
        parser.exit()


def width_argument(text: str) -> int:
    """``--width N``: an integer of at least :data:`MIN_WIDTH`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= {MIN_WIDTH}, got {text!r}") from None
    if value < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"expected an integer >= {MIN_WIDTH}, got {value}")
    return value


def add_common(
    p: argparse.ArgumentParser,
    *,
    version: str | None = "",
    width: bool = False,
    quiet_help: str = "no progress or summary lines (errors are still printed)",
    subcommand: bool = False,
) -> None:
    """The options every command has: ``-q/--quiet``, ``--debug``, ``--version`` (``version`` = the schema
    versions to print after the package version; ``None``: no ``--version``, as on a verb's own parser) and,
    for commands that print tables, ``--width N``. ``subcommand``: on a verb's parser, so that the option may
    follow the verb as well as precede it (its default then never overrides the value given before it)."""
    default = argparse.SUPPRESS if subcommand else None
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help=quiet_help,
    )
    p.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS if subcommand else False,
        help="show a traceback on internal errors",
    )
    if width:
        p.add_argument(
            "--width",
            type=width_argument,
            default=default,
            metavar="N",
            help=f"table width >= {MIN_WIDTH} (default: the terminal's; {PIPE_WIDTH} in a pipe)",
        )
    if version is not None:
        p.add_argument("--version", action=_Version, schemas=version, help="print the version and exit")


def table_width(width: int | None) -> int | None:
    """The width of a report or table: ``--width``, else the terminal's (``None``: rich asks), else
    :data:`PIPE_WIDTH` in a pipe, so a CI log gets the same columns from every tool."""
    if width:
        return width
    try:
        return None if sys.stdout.isatty() else PIPE_WIDTH
    except (AttributeError, ValueError):  # no stdout, or closed
        return PIPE_WIDTH


def output_argument(text: str) -> str:
    """The value of an output option: ``-`` (stdout) or a non-empty FILE."""
    if text == "":
        raise argparse.ArgumentTypeError("expected --FORMAT (stdout) or --FORMAT=FILE, got an empty FILE")
    return text


class OutputOption(argparse.Action):
    """``--FORMAT[=FILE]``: one output, given once (twice is a usage error, never "the last one wins")."""

    def __call__(self, parser, namespace, values, option_string=None):
        earlier = getattr(namespace, self.dest, None)
        if earlier is not None:
            parser.error(f"{option_string} given twice ({earlier} and {values}); give it once")
        setattr(namespace, self.dest, values)


def add_output(p: argparse.ArgumentParser, flag: str, help: str, dest: str | None = None) -> None:
    """An output option spelled ``--FORMAT[=FILE]`` (see :func:`normalise_argv`)."""
    kwargs = {"dest": dest} if dest else {}
    p.add_argument(flag, type=output_argument, action=OutputOption, metavar="FILE", help=help, **kwargs)


class HelpFormatter(argparse.HelpFormatter):
    """argparse's layout, with an output option shown as it is typed (``--json[=FILE]``, not ``--json FILE``
    or ``--json =FILE``), at the terminal's width (read here without ``shutil``, which argparse imports for it)."""

    def __init__(self, prog: str, **kwargs) -> None:
        kwargs.setdefault("width", terminal_columns() - 2)
        super().__init__(prog, **kwargs)

    def _format_action_invocation(self, action):
        if isinstance(action, OutputOption):
            return ", ".join(f"{s}[={action.metavar}]" for s in action.option_strings)
        return super()._format_action_invocation(action)

    def _format_usage(self, usage, actions, groups, prefix):
        text = super()._format_usage(usage, actions, groups, prefix)
        for action in actions:
            if isinstance(action, OutputOption):
                for s in action.option_strings:
                    text = re.sub(
                        rf"{re.escape(s)}\s+{re.escape(action.metavar)}\b", f"{s}[={action.metavar}]", text
                    )
        return text


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` gives it: ``COLUMNS``, else stdout's terminal, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):  # no stdout, closed, or not a terminal
            columns = 0
    return columns or 80


def normalise_argv(
    argv: Iterable[str],
    flags: Iterable[str],
    separate_file: Callable[[str], bool] = lambda word: False,
    on_separate: Callable[[str, str], None] | None = None,
) -> list[str]:
    """Spell every output flag ``--FORMAT=VALUE`` before argparse sees it, so a bare flag never takes the next
    argument: a bare ``--FORMAT`` (or ``--FORMAT -``) becomes ``--FORMAT=-`` (stdout), unless the next word is the old spelling's
    separate FILE (``separate_file(word)``: a command with no positional argument that could be meant), which
    is then joined (``on_separate(flag, word)`` is told, e.g. to print a deprecation line). ``--`` ends it."""
    flags = set(flags)
    words = list(argv)
    out: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            out.extend(words[i:])
            break
        if word in flags:
            following = words[i + 1] if i + 1 < len(words) else None
            if following == STDOUT or (
                following is not None and not following.startswith("-") and separate_file(following)
            ):
                if on_separate is not None and following != STDOUT:
                    on_separate(word, following)
                out.append(f"{word}={following}")
                i += 2
                continue
            word += "=" + STDOUT
        out.append(word)
        i += 1
    return out


def internal_error(tool: str, exc: BaseException, debug: bool) -> int:
    """A bug: the traceback only with ``--debug``, then one line; returns :data:`EXIT_INTERNAL`."""
    if debug:
        import traceback  # only here: the start-up path does not pay for it

        traceback.print_exception(exc)
    say(tool, f"{type(exc).__name__}: {exc} (run with --debug)", "internal error")
    return EXIT_INTERNAL
