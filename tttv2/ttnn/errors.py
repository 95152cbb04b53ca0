"""Exceptions raised by the emulator. Messages name the op, the argument, what was expected and what was given."""

from __future__ import annotations

__all__ = ["DeviceMemoryError", "TTNNError", "ValidationError", "op_error"]


class TTNNError(RuntimeError):
    """Base class of every error the emulator raises on purpose (real ttnn raises RuntimeError too)."""


class ValidationError(TTNNError, ValueError):
    """An argument, config or tensor does not satisfy what an op or constructor needs."""


class DeviceMemoryError(TTNNError, MemoryError):
    """An emulated device ran out of L1 or DRAM."""


def op_error(op: str, arg: str, expected: str, got: object) -> ValidationError:
    """Build the standard message: ``ttnn.linear: program_config: expected …, got …``."""
    return ValidationError(f"{op}: {arg}: expected {expected}, got {got}")
