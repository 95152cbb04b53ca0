"""LazyWeight: a host array plus the conversion parameters that turn it into a device tensor on first use.

A module owns each of its weights: it fills the fields the user left unset (``with_defaults``, never overriding
a user choice) and calls ``get_device_weight()`` when it first needs the tensor. With ``cache_dir`` the converted
tensor is kept on disk under a name that holds a fingerprint of the source's *content* and of every conversion
parameter, so a changed checkpoint (same name, same shape, new values) can never be served from a stale file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tttv2 import ttnn

__all__ = ["LazyWeight"]

_CACHE_SUFFIX = ".tensorbin"
_REQUIRED_FOR_CONVERSION = ("device", "dtype", "layout")


def _is_torch_tensor(source) -> bool:
    """Duck-typed: the library never imports torch, but accepts its tensors."""
    return hasattr(source, "detach") and hasattr(source, "cpu") and hasattr(source, "numpy")


def host_array(source) -> np.ndarray:
    """The source as a numpy array (torch tensors are moved to the CPU; bfloat16/float16 become float32,
    which is exact)."""
    if _is_torch_tensor(source):
        t = source.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return t.contiguous().numpy()
    if isinstance(source, np.ndarray):
        return source
    raise TypeError(
        f"LazyWeight: source must be a numpy array or a torch tensor, got {type(source).__name__}"
    )


def _content_digest(source) -> str:
    """A hash of the source's bytes, its dtype and its shape (SHA-256: hardware-accelerated on current CPUs, ~3×
    faster than blake2b here)."""
    array = np.ascontiguousarray(host_array(source))
    h = hashlib.sha256()
    h.update(f"{array.dtype.str}|{array.shape}|".encode())
    h.update(memoryview(array).cast("B"))
    return h.hexdigest()


@dataclass(frozen=True)
class _ReleasedHost:
    """What a converted LazyWeight keeps of its host array after ``release_host``: the shape."""

    shape: tuple[int, ...]


@dataclass
class LazyWeight:
    """``LazyWeight(source, *, dtype=None, layout=None, memory_config=None, mesh_mapper_config=None,
    device=None, cache_dir=None, name=None, pad_value=0.0)``.

    ``source`` is a numpy array or a torch tensor (torch is never imported here). ``None`` fields are unset: the
    owning module resolves them. ``mesh_mapper_config=None`` at conversion time means "replicate".
    """

    source: Any
    _: KW_ONLY
    dtype: Any = None
    layout: Any = None
    memory_config: Any = None
    mesh_mapper_config: Any = None
    device: Any = None
    cache_dir: str | os.PathLike | None = None
    name: str | None = None
    pad_value: float = 0.0
    _value: Any = field(default=None, init=False, repr=False, compare=False)
    _digest: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = getattr(self.source, "shape", None)
        if shape is None or len(tuple(shape)) == 0:
            raise ValueError(
                f"LazyWeight: source must be an array with at least one dimension, got "
                f"{type(self.source).__name__} with shape {shape!r}"
            )
        if self.cache_dir is not None and not isinstance(self.cache_dir, (str, os.PathLike)):
            raise ValueError(f"LazyWeight: cache_dir must be a path, got {type(self.cache_dir).__name__}")

    # --- resolution -------------------------------------------------------------------------------------------

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.source.shape)

    def with_defaults(self, **defaults) -> LazyWeight:
        """A copy in which each given field is set only where this weight left it ``None``."""
        unknown = set(defaults) - {f.name for f in dataclasses.fields(self) if f.init}
        if unknown:
            raise ValueError(f"LazyWeight.with_defaults: unknown fields {sorted(unknown)}")
        to_set = {k: v for k, v in defaults.items() if getattr(self, k) is None}
        if not to_set:
            return self
        resolved = dataclasses.replace(self, **to_set)
        resolved._digest = self._digest  # same source, same content
        return resolved

    def missing_fields(self) -> list[str]:
        """Fields that must be set before ``get_device_weight()`` can convert."""
        return [name for name in _REQUIRED_FOR_CONVERSION if getattr(self, name) is None]

    # --- conversion ------------------------------------------------------------------------------------------

    def get_device_weight(self):
        """The device tensor: converted (or loaded from the cache) on the first call, memoised after."""
        if self._value is None:
            self._value = self._convert()
        return self._value

    def is_loaded(self) -> bool:
        return self._value is not None

    def release_host(self) -> None:
        """Drop the host array of a converted weight (its shape stays), so a model built block by block holds
        one block's host arrays at a time; the device tensor is all that is used after conversion."""
        if self._value is None:
            raise ValueError(
                f"LazyWeight {self.name or '(unnamed)'}: release_host before the weight is converted"
            )
        self.source = _ReleasedHost(self.shape)

    def cache_path(self) -> Path | None:
        """Where the converted tensor is (or will be) cached; None without ``cache_dir``."""
        if self.cache_dir is None:
            return None
        self._require_resolved()
        return Path(self.cache_dir) / f"{self._label()}.{self.fingerprint()}{_CACHE_SUFFIX}"

    def fingerprint(self) -> str:
        """Hash of the source's content and of every parameter that changes the converted tensor."""
        self._require_resolved()
        if self._digest is None:
            self._digest = _content_digest(self.source)
        h = hashlib.sha256()
        for part in (
            self._digest,
            self.dtype.name,
            self.layout.name,
            repr(self._memory_config()),
            repr(self.mesh_mapper_config),
            tuple(self.device.shape),
            repr(float(self.pad_value)),
        ):
            h.update(str(part).encode())
            h.update(b"|")
        return h.hexdigest()[:20]  # 80 bits: a file name, not a signature

    def _label(self) -> str:
        name = self.name or "weight"
        safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
        return f"{safe}.{self.dtype.name.lower()}.{self.layout.name.lower()}"

    def _require_resolved(self) -> None:
        missing = self.missing_fields()
        if missing:
            raise ValueError(
                f"LazyWeight {self.name or '(unnamed)'} of shape {list(self.shape)}: {', '.join(missing)} "
                "must be set before conversion (the owning module resolves them, or pass them explicitly)"
            )

    def _memory_config(self):
        return ttnn.DRAM_MEMORY_CONFIG if self.memory_config is None else self.memory_config

    def _mapper(self):
        if self.mesh_mapper_config is None:
            return ttnn.ReplicateTensorToMesh(self.device)
        return ttnn.create_mesh_mapper(self.device, self.mesh_mapper_config)

    def _to_ttnn(self, *, device, memory_config):
        """One conversion call: from_torch for torch sources, from_numpy for numpy ones."""
        common = dict(
            dtype=self.dtype,
            layout=self.layout,
            mesh_mapper=self._mapper(),
            device=device,
            memory_config=memory_config,
        )
        if _is_torch_tensor(self.source):
            return ttnn.from_torch(self.source, pad_value=self.pad_value, **common)
        if not hasattr(ttnn, "from_numpy"):  # pragma: no cover - real ttnn without numpy input
            raise TypeError(
                f"LazyWeight {self.name or '(unnamed)'}: this ttnn backend has no from_numpy; pass a torch tensor as source"
            )
        return ttnn.from_numpy(np.ascontiguousarray(self.source), **common)

    def _convert(self):
        self._require_resolved()
        memory_config = self._memory_config()
        path = self.cache_path()
        if path is None:
            return self._to_ttnn(device=self.device, memory_config=memory_config)
        if not path.is_file():
            host = self._to_ttnn(device=None, memory_config=None)
            _dump_atomically(path, host)
        else:
            host = ttnn.load_tensor(path)
        return ttnn.to_device(host, self.device, memory_config=memory_config)


def _dump_atomically(path: Path, host_tensor) -> None:
    """Write next to ``path`` under a unique temporary name, then rename: readers never see half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp{_CACHE_SUFFIX}")
    try:
        ttnn.dump_tensor(tmp, host_tensor)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
