"""Errors collect-cases reports to the user as one clear message (never as a traceback)."""

from __future__ import annotations


class CollectCasesError(Exception):
    """Bad input or a state the tool refuses to work on; the message names the argument, what was expected and
    what was given."""


class StoreError(CollectCasesError):
    """The case store is missing, is not a store, is from a newer schema, or cannot be written."""


class TargetError(CollectCasesError):
    """A ``--target`` that does not import, names no class, or whose class has no ``forward`` / ``__call__``."""


class EmitError(CollectCasesError):
    """``emit`` refuses the test file (does not parse, ``--name`` is not a list, ...)."""
