"""Deprecated ``ttml.common.config``: TTML's YAML training configuration read into plain objects.

The attribute names and defaults are TTML's; ``update_config`` overrides only the keys a second YAML gives.
Use ``ttnn.nn.GPTConfig`` / ``ttnn.nn.LlamaConfig`` and plain arguments in new code.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from .._deprecation import deprecated

__all__ = ["DeviceConfig", "SchedulerConfig", "TrainingConfig", "TransformerConfig", "get_config"]


def get_config(path) -> dict:
    """The YAML file at ``path`` as a dict (TTML also looked in ``$TT_METAL_HOME/tt-train/configs``, which the
    emulator does not have: pass the file's path)."""
    deprecated("ttml.common.config.get_config", "yaml.safe_load(open(path)) and plain arguments")
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(
            f"ttml.common.config.get_config: path: expected a YAML file, got {str(path)!r}"
        )
    import yaml  # the ttml extra (pyyaml)

    config = yaml.safe_load(file.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise ValueError(
            f"ttml.common.config.get_config: {path}: expected a YAML mapping, got {type(config).__name__}"
        )
    return config


class _Section:
    """Attributes read from one section of the YAML config: ``FIELDS`` maps attribute → (key, type, default)."""

    SECTION = ""
    FIELDS: ClassVar[dict[str, tuple]] = {}

    def __init__(self, yaml_config: dict) -> None:
        deprecated(
            f"ttml.common.config.{type(self).__name__}", "plain arguments / ttnn.nn configs", stacklevel=4
        )
        for attr, (_, _, default) in self.FIELDS.items():
            setattr(self, attr, default)
        self._apply(self._section(yaml_config))

    def _section(self, yaml_config: dict) -> dict:
        if not isinstance(yaml_config, dict):
            raise TypeError(
                f"ttml.common.config.{type(self).__name__}: yaml_config: expected a dict, got "
                f"{type(yaml_config).__name__}"
            )
        section = yaml_config.get(self.SECTION, {}) if self.SECTION else yaml_config
        return section or {}

    def _apply(self, section: dict) -> None:
        for attr, (key, kind, _) in self.FIELDS.items():
            if key in section:
                value = section[key]
                try:
                    setattr(self, attr, value if kind is None or value is None else kind(value))
                except (TypeError, ValueError):
                    raise ValueError(
                        f"ttml.common.config.{type(self).__name__}: {self.SECTION or 'config'}.{key}: expected a "
                        f"{kind.__name__}, got {value!r}"
                    ) from None

    def update_config(self, yaml_config: dict) -> None:
        self._apply(self._section(yaml_config))


class DeviceConfig(_Section):
    SECTION = "device_config"
    FIELDS: ClassVar[dict[str, tuple]] = {
        "mesh_shape": ("mesh_shape", list, [1, 1]),
        "device_ids": ("device_ids", list, []),
        "enable_tp": ("enable_tp", bool, False),
        "enable_ddp": ("enable_ddp", bool, False),
    }

    def total_devices(self) -> int:
        rows, cols = self.mesh_shape
        return int(rows) * int(cols)


class TransformerConfig(_Section):
    """Read from the dict it is given (TTML passes ``training_config["transformer_config"]``)."""

    FIELDS: ClassVar[dict[str, tuple]] = {
        "runner_type": ("runner_type", str, "default"),
        "num_heads": ("num_heads", int, 6),
        "embedding_dim": ("embedding_dim", int, 384),
        "dropout_prob": ("dropout_prob", float, 0.2),
        "num_blocks": ("num_blocks", int, 6),
        "vocab_size": ("vocab_size", int, 96),
        "weight_tying": ("weight_tying", None, None),
        "max_sequence_length": ("max_sequence_length", int, 128),
        "intermediate_dim": ("intermediate_dim", None, None),
        "theta": ("theta", None, None),
        "num_groups": ("num_groups", None, 3),
        "rope": ("rope_scaling", None, None),
    }

    def update_config(self, yaml_config: dict) -> None:
        """TTML updates from ``{"transformer_config": {...}}`` (nothing happens without that key)."""
        if isinstance(yaml_config, dict) and "transformer_config" in yaml_config:
            self._apply(yaml_config["transformer_config"] or {})


class TrainingConfig(_Section):
    SECTION = "training_config"
    FIELDS: ClassVar[dict[str, tuple]] = {
        "batch_size": ("batch_size", int, 64),
        "steps": ("max_steps", int, 1000),
        "epochs": ("num_epochs", int, 1),
        "eval_every": ("eval_every", int, 200),
        "save_every": ("model_save_interval", int, 500),
        "gradient_accumulation_steps": ("gradient_accumulation_steps", int, 1),
        "checkpoint_dir": ("checkpoint_dir", str, "checkpoints"),
    }

    def __init__(self, yaml_config: dict) -> None:
        super().__init__(yaml_config)
        self.transformer_config = TransformerConfig(
            self._section(yaml_config).get("transformer_config") or {}
        )
        self.seq_len = self.transformer_config.max_sequence_length

    def update_config(self, yaml_config: dict) -> None:
        super().update_config(yaml_config)
        self.transformer_config.update_config(self._section(yaml_config))
        self.seq_len = self.transformer_config.max_sequence_length


class SchedulerConfig(_Section):
    SECTION = "scheduler_config"
    FIELDS: ClassVar[dict[str, tuple]] = {
        "max_lr": ("max_lr", float, 0.001),
        "min_lr": ("min_lr", float, 0.0),
        "warmup_steps": ("warmup_steps", int, 100),
        "hold_steps": ("hold_steps", int, 0),
    }

    def __init__(self, yaml_config: dict) -> None:
        super().__init__(yaml_config)
        training = yaml_config.get("training_config") or {}
        self.total_steps = int(training.get("total_steps", 1000))
