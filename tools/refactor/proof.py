"""Shadow verification of a ``--tests-out`` run (issue 21, item 5): once the modules and their tests are written,
the generated equivalence and topology tests run in a fresh interpreter (``python -m pytest``), so that the tool
never exits 0 on an output that does not match TTTv1 on the cases it can run.

Each case that fails becomes a :class:`Gap`: at the line of the generated module where it raised when the
traceback passes through one, else at the test (``test_mlp_1d.py::test_mlp_1d_matches_tttv1[1x8-decode-32]``),
with pytest's first line (the first difference, or what raised). A case that cannot run here is not a gap but a
note: a fixture the conftest does not provide, or TTTv1 itself raising on the case (the fixtures give it
arguments it does not support). For a module of the built-in ``tttv1`` package, ``tttv1.testing``'s fixtures are
loaded as a pytest plugin, so its cases run even when the tests folder has no ``conftest.py`` yet.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from .errors import Gap

#: The generated tests that compare with TTTv1 (the Hugging Face test is a tolerance check, not run here).
SELECTION = "matches_tttv1 or rejects_a_"
#: A run longer than this is stopped and reported as a gap.
TIMEOUT_S = 1800.0
_MISSING = (
    re.compile(r"needs `(\w+)`: no fixture of that name"),
    re.compile(r"fixture '(\w+)' not found"),
)
_TTTV1_RAISED = "itself raised on this case"


@dataclass
class Proof:
    """What one verification run found."""

    passed: list[str] = field(default_factory=list)  # test ids
    gaps: list[Gap] = field(default_factory=list)
    missing: dict[str, list[str]] = field(default_factory=dict)  # fixture -> test ids
    unsupported: list[str] = field(default_factory=list)  # test ids where TTTv1 itself raised
    failed: int = 0  # cases that failed (one gap may stand for several)
    seconds: float = 0.0

    def summary(self) -> str:
        ran = len(self.passed) + self.failed
        text = f"shadow verification: {len(self.passed)} of {ran} case(s) equal to TTTv1"
        if self.failed:
            text += f", {self.failed} FAILED"
        return text + f" ({self.seconds:.1f} s)"

    def notes(self) -> list[str]:
        out = []
        for name, ids in sorted(self.missing.items()):
            out.append(
                f"shadow verification: {len(ids)} case(s) not run: no fixture `{name}` (give it in the tests "
                "folder's conftest.py; docs/refactor.md, 'Generated tests')"
            )
        if self.unsupported:
            out.append(
                f"shadow verification: {len(self.unsupported)} case(s) not compared: TTTv1 itself raised on them "
                f"({', '.join(self.unsupported[:3])}{', ...' if len(self.unsupported) > 3 else ''})"
            )
        if not self.passed and not self.gaps:
            out.append("shadow verification: no case ran, so nothing was proven")
        return out


def plugins_for(dotted_module: str) -> list[str]:
    """The pytest plugins that give the generated tests their fixtures when the user's conftest does not: the
    built-in ``tttv1`` package ships its own."""
    return ["tttv1.testing"] if dotted_module.split(".")[0] == "tttv1" else []


def verify_tests(
    tests: list[Path],
    generated: list[Path],
    *,
    plugins: list[str] = (),
    roots: list[Path] = (),
    timeout: float = TIMEOUT_S,
) -> Proof:
    """Run the equivalence and topology tests of ``tests`` (written files) in a fresh interpreter from the
    current folder (as the user runs them: their ``conftest.py`` applies), ``roots`` after its path; the failures
    are located in ``generated`` (the modules under test) when their traceback passes through one."""
    proof = Proof()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tttv2-refactor-verify-") as folder:
        report = Path(folder) / "junit.xml"
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=short", "-k", SELECTION]
        for plugin in plugins:
            argv += ["-p", plugin]
        argv += [f"--junitxml={report}", "-o", "junit_family=xunit1", *map(str, tests)]
        path = os.pathsep.join([os.environ.get("PYTHONPATH", ""), *map(str, roots)]).strip(os.pathsep)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=path)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, check=False)
        except subprocess.TimeoutExpired:
            proof.gaps.append(
                Gap(
                    tests[0].name,
                    "verify",
                    f"the generated tests ran longer than {timeout:.0f} s and were stopped",
                )
            )
            proof.seconds = time.perf_counter() - start
            return proof
        cases = _read_junit(report) if report.is_file() else None
    proof.seconds = time.perf_counter() - start
    if cases is None:  # pytest did not get as far as a report: its own last line says why
        reason = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines() or ["no output"])[-1]
        proof.gaps.append(Gap(tests[0].name, "verify", f"the generated tests did not run: {reason[:300]}"))
        return proof
    names = {p.name for p in generated}
    failed: dict[tuple[str, str, str], list[str]] = {}  # (location, test file, first line) -> test ids
    for case_id, file_name, outcome, message, text in cases:
        if outcome == "passed":
            proof.passed.append(case_id)
            continue
        if outcome == "skipped":
            continue
        missing = next((m.group(1) for rx in _MISSING if (m := rx.search(message + "\n" + text))), None)
        if missing is not None:
            proof.missing.setdefault(missing, []).append(case_id)
        elif _TTTV1_RAISED in message:
            proof.unsupported.append(case_id)
        else:
            first = (message.strip().splitlines() or [outcome])[0][:400]
            if first == "collection failure":  # importing the test file raised: its last line says what
                first = ([ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")] or [first])[-1][
                    :400
                ]
                case_id = "collecting"
            line = _location(text, names)  # file:line in a generated module, else the test function
            key = (line or case_id.partition("[")[0], file_name or "the tests", line is not None)
            failed.setdefault(key, []).append((case_id, first))
    for (where, file_name, in_module), found in failed.items():  # one gap per place
        (first_id, first), more = found[0], len(found) - 1
        loc = where if in_module else f"{file_name}::{first_id}"
        which = f"case {first_id}" + (f" and {more} more" if more else "")
        proof.gaps.append(Gap(loc, "verify", f"{which} of {file_name}: {first}"))
        proof.failed += len(found)
    if done.returncode not in (0, 1, 5) and not proof.gaps and not proof.passed:
        reason = (done.stdout.strip().splitlines() or ["no output"])[-1]
        proof.gaps.append(
            Gap(
                tests[0].name,
                "verify",
                f"the generated tests did not run: pytest exited {done.returncode}: {reason[:300]}",
            )
        )
    return proof


def _read_junit(report: Path) -> list[tuple[str, str, str, str, str]] | None:
    """``(test id, test file name, outcome, message, text)`` of each test case pytest reported."""
    try:
        root = ET.parse(report).getroot()
    except ET.ParseError:
        return None
    out = []
    for case in root.iter("testcase"):
        name = case.get("name", "")
        file_name = Path(case.get("file") or "").name
        if not file_name:  # a collection error names the module in classname / name
            dotted = case.get("classname") or name
            file_name = dotted.rpartition(".")[2] + ".py" if dotted else ""
        outcome, message, text = "passed", "", ""
        for kind in ("failure", "error", "skipped"):
            child = case.find(kind)
            if child is not None:
                outcome = "skipped" if kind == "skipped" else "failed"
                message, text = child.get("message", ""), child.text or ""
                break
        out.append((name, file_name, outcome, message, text))
    return out


_FRAME = re.compile(r"^(?P<path>\S+\.py):(?P<line>\d+): in ", re.MULTILINE)


def _location(text: str, names: set[str]) -> str | None:
    """``file:line`` of the last frame of the traceback ``text`` that is in a generated module."""
    found = None
    for match in _FRAME.finditer(text):
        name = Path(match.group("path")).name
        if name in names:
            found = f"{name}:{match.group('line')}"
    return found


__all__ = ["SELECTION", "TIMEOUT_S", "Proof", "plugins_for", "verify_tests"]
