"""Errors and the record of what could not be transformed."""

from __future__ import annotations

from dataclasses import dataclass


class RefactorError(Exception):
    """Base class of the codemod's own errors."""


class UsageError(RefactorError):
    """Bad input: a missing or unparsable file, no suitable class, a bad option. Exit code 2, one line."""


@dataclass(frozen=True)
class Gap:
    """Something the codemod could not transform, with where and why. Any gap makes the run exit 1; with
    ``--partial`` the files are still written, with a marker comment above each statement that came from
    ``loc`` (:mod:`markers`)."""

    loc: str  # file:line of the original code
    what: str
    reason: str

    def describe(self) -> str:
        return f"{self.loc}: {self.what}: {self.reason}"


MARKER = "# tttv2-refactor: NOT TRANSFORMED"
