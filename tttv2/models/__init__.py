"""Reference models written only with TTTv2's public API: templates for new models (see docs/library.md)."""

from tttv2.models import llama3, mistral

__all__ = ["llama3", "mistral"]
