"""Errors that trace-deps reports to the user (never as a traceback)."""

from __future__ import annotations


class TraceError(Exception):
    """A problem with the input that stops the analysis; ``where`` is ``file:line[:col]`` when known."""

    def __init__(self, message: str, where: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.where}: {self.message}" if self.where else self.message
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text


class UsageError(TraceError):
    """Bad command-line usage or a missing/unreadable input file (exit code 2)."""
