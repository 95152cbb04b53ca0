"""Llama 3 (3, 3.1 with llama3 rope scaling, 3.2 with tied embeddings) built from TTTv2's public blocks."""

from tttv2.models.llama3.config import Llama3Config
from tttv2.models.llama3.model import Llama3Model

__all__ = ["Llama3Config", "Llama3Model"]
