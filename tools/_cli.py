"""One command-line language for trace-deps, tttv2-refactor, collect-cases and tttv2-coverage (docs/cli.md).

What every command shares, written once:

- exit codes: 0 done, 1 needs a look, 2 bad input, usage or a refusal, 3 internal error, 130 interrupted;
- messages: ``<tool>: error: ...`` (``warning:``, ``note:``) on stderr, one line, paths printed literally;
- ``--json[=FILE]`` (and every ``--FORMAT[=FILE]``): stdout without FILE or with ``-``; a bare flag never takes
  a positional argument as its file (:func:`normalise_argv`);
- ``-q/--quiet``, ``--debug``, ``--version`` (the package version, plus schema versions) and ``--width`` for
  commands that print tables (:func:`add_common`), and one table width in a pipe (:func:`table_width`);
- one phrasing for a missing input file (:func:`missing_file`);
- a usage error is one line too, ``<tool>: error: <what> (see <tool> --help)`` (:class:`ArgumentParser`);
- one way to name what a command works on, ``MODULE[:CLASS]`` (:func:`split_target`): MODULE a file
  (``tttv1/tt/mlp.py``) or a dotted module (``tttv1.tt.mlp``, :func:`module_file` / :func:`dotted_module`);
- one way for a command that starts processes to catch SIGTERM / SIGHUP while they run (:func:`on_stop_signals`).

Kept light: trace-deps imports it on every start (no rich, no shutil, no importlib.metadata until
``--version``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

from tttv2_tools._output import INTERRUPTED

EXIT_OK = 0
EXIT_ATTENTION = 1  # something needs a look (--strict, --check, a failed case, a spot not transformed)
EXIT_USAGE = 2  # bad input, usage, or a refusal (an output that would replace a user's file, ...)
EXIT_INTERNAL = 3  # a bug in the tool: one line, --debug shows the traceback
EXIT_INTERRUPTED = INTERRUPTED  # Ctrl-C: 128 + SIGINT, as a shell reports it (tools/_output.py)

STDOUT = "-"
PIPE_WIDTH = 140  # the width of tables and reports when stdout is not a terminal (and no --width)
MIN_WIDTH = 20
STOP_SIGNALS = (
    "SIGTERM",
    "SIGHUP",
)  # `timeout`, `kill`, a closed terminal: what a command started must stop too


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


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser with the toolkit's help layout and one-line usage errors: ``<tool>: error: <what> (see
    <tool> [VERB] --help)`` on stderr, exit 2 (argparse prints the whole usage block first; a CI log or a
    script reading stderr wants the one line). Verbs' parsers are of this class too (argparse makes them so)."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # argparse's hook: never returns
        tool, _, verb = self.prog.partition(" ")
        where = f"{verb}: " if verb else ""
        self.exit(EXIT_USAGE, message_line(tool, f"{where}{message} (see {self.prog} --help)"))


def message_line(tool: str, text: str, kind: str = "error") -> str:
    """:func:`message` with its line end."""
    return message(tool, text, kind) + "\n"


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


# --- MODULE[:CLASS]: what a command works on -------------------------------------------------------------------

TARGET_FORM = "MODULE[:CLASS] (MODULE a file, tttv1/tt/mlp.py, or a dotted module, tttv1.tt.mlp)"


def _dotted_class(text: str) -> bool:
    return bool(text) and all(part.isidentifier() for part in text.split("."))


def split_target(word: str) -> tuple[str, str | None]:
    """``tttv1/tt/mlp.py:MLP`` or ``tttv1.tt.mlp:MLP`` -> ``(MODULE, "MLP")``; ``tttv1/tt/mlp.py`` -> ``(MODULE,
    None)`` (the command's default class). A word that names an existing file is that file, colon or not; a
    ``:`` followed by something that is not a class name (``mlp.py:``, ``mlp.py:3``) is a ValueError."""
    if os.path.isfile(word):
        return word, None
    module, sep, cls = word.rpartition(":")
    if not sep:
        return word, None
    if not module or not _dotted_class(cls):
        if "/" in cls or "\\" in cls:  # a colon inside a path (c:/x/mlp.py), not a class
            return word, None
        raise ValueError(f"{word!r}: expected {TARGET_FORM}")
    return module, cls


def is_dotted_module(text: str) -> bool:
    """``tttv1.tt.mlp`` (a module name), not ``tttv1/tt/mlp.py`` (a file)."""
    return not text.endswith(".py") and _dotted_class(text)


def module_file(text: str) -> Path:
    """The source file of MODULE: a path as given; a dotted module name found as ``cwd/a/b/c.py`` (or
    ``.../c/__init__.py``), else under its top package as Python would find it, without importing anything
    (``importlib.util.find_spec`` of a top-level name runs no code). A name found nowhere stays a path (the caller's
    "no such file" names it)."""
    path = Path(text)
    if not is_dotted_module(text) or path.exists():
        return path
    parts = text.split(".")
    roots = [Path.cwd()]
    from importlib.util import find_spec  # only for a dotted MODULE

    try:
        spec = find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots += [Path(loc).parent for loc in spec.submodule_search_locations]
    elif spec is not None and spec.origin and len(parts) == 1:
        return Path(spec.origin)
    for root in roots:
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return path


def config_is_module(config: Path) -> str:
    """The note trace-deps and tttv2-refactor print when CONFIG is MODULE itself (``trace-deps mlp.py mlp.py``)."""
    return (
        f"CONFIG {config} is MODULE itself, so no config was analysed: ModelArgs members (is_galaxy, ...) "
        "are not resolved and galaxy facts rest on attribute names alone"
    )


def names_module(word: str) -> bool:
    """Whether ``word`` is a MODULE[:CLASS] (a ``.py`` file, ``X:CLASS``, or a dotted module that exists as a
    ``.py`` file): after a bare output flag, such a word is the command's MODULE, never the old spelling's separate
    FILE. An existing ``r.json`` or ``notes.md`` is a file (the report an earlier run wrote), not a module."""
    try:
        text, name = split_target(word)
    except ValueError:
        return False
    if text.endswith(".py") or name is not None:
        return True
    if not is_dotted_module(text):
        return False
    found = module_file(text)  # an existing r.json or notes.md is that file, not a module
    return found.is_file() and found.suffix == ".py"


def dotted_module(path: os.PathLike | str) -> str:
    """``tttv1/tt/mlp.py`` -> ``tttv1.tt.mlp``: the file's name inside its packages (folders with an
    ``__init__.py``), as ``import`` names it."""
    path = Path(path).resolve()
    parts = [path.stem]
    folder = path.parent
    while (folder / "__init__.py").is_file():
        parts.append(folder.name)
        folder = folder.parent
    return ".".join(reversed(parts))


@contextlib.contextmanager
def on_stop_signals(handler: Callable):
    """While the block runs, SIGTERM and SIGHUP call ``handler`` (tttv2-run stops its ranks, collect-cases passes
    the signal on to the commands it recorded); the previous handlers are put back after it. Python runs signal
    handlers in the main thread only: in any other thread nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = [getattr(signal, name) for name in STOP_SIGNALS if hasattr(signal, name)]
    previous = {signum: signal.signal(signum, handler) for signum in signums}
    try:
        yield
    finally:
        for signum, previous_handler in previous.items():
            signal.signal(signum, previous_handler)
