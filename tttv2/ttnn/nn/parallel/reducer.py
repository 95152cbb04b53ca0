"""Gradient reduction of a model spread over a mesh, in size-capped buckets launched during backward.

What the gradients mean. Every device runs its own copy of the forward and ``loss.backward()`` seeds every
device's loss with 1, so autograd differentiates the *sum of the per-device losses*; the backward rules of the
collectives are the exact adjoints of that sum. The objective a user means is the *mean* over the devices of
the parallel group (the data-parallel replicas each hold the loss of their slice of the batch; the
tensor-parallel devices each hold the same, full loss). Over the active axes (data-parallel and
tensor-parallel), with N devices in the group:

* a parameter replicated along some active axes is one parameter with a copy per device: its gradient is the
  sum of the copies' gradients (``ttnn.all_reduce`` along those axes);
* every gradient is then divided by N (sum → mean).

For a plain data-parallel model this is the usual all-reduce mean. For tensor parallelism it gives a sharded
weight exactly the gradient of the unsharded one, and a replicated parameter (a norm, the position table) the
sum of the partial gradients its devices computed. Axes along which the model is neither data- nor
tensor-parallel carry identical copies and are left alone.

How. A hook on each parameter marks it ready once its gradient for this backward is complete; when every
parameter of a bucket is ready, the bucket's gradients are flattened into one row-major buffer, all-reduced
with one collective, scaled and split back — while the backward continues with the next layers (on hardware the
collective overlaps that compute; the emulator issues it at that point of the op stream). A callback at the
end of the backward reduces what is left (parameters the backward did not reach keep no gradient).

Gradient accumulation: ``with wrapper.no_sync():`` skips the reduction (gradients stay local) and a later
synchronised backward reduces the accumulated sum. A gradient that is still the reduced one of an earlier
backward is set aside and the new reduced gradient is added to it, so it is not reduced twice.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import numpy as np

from .... import ttnn
from ...autograd import no_grad, queue_callback
from ...device import MeshDevice
from ...errors import ValidationError
from ...tensor import Tensor
from ...types import Layout
from ..module import Module
from ._mesh import collective_axis, group_size, groups_along, replicated_axes

__all__ = ["GradientReducer", "tensor_parallel_layers"]

_MB = 1024 * 1024


def tensor_parallel_layers(module: Module) -> list[tuple[str, Module]]:
    """``(name, layer)`` of every tensor-parallel layer in ``module`` (they have a ``tp_axes`` attribute)."""
    return [(name, m) for name, m in module.named_modules() if getattr(m, "tp_axes", None) is not None]


class _Bucket:
    __slots__ = ("axis", "params", "reduce")

    def __init__(self, reduce: bool, axis: int | None) -> None:
        self.reduce = reduce  # False: the parameters are sharded along every active axis (only scaled)
        self.axis = axis
        self.params: list[Tensor] = []


class GradientReducer:
    """Installs the hooks that reduce ``module``'s gradients (see the module docstring) and checks replicas.

    ``data_axes``: the data-parallel mesh axes; the tensor-parallel axes come from the module's TP layers.
    ``bucket_cap_mb``: the largest bucket, in MiB of gradient (per device).
    """

    def __init__(
        self, owner: str, module: Module, mesh: MeshDevice, data_axes: tuple[int, ...], bucket_cap_mb: float
    ) -> None:
        self.owner = owner
        self.mesh = mesh
        if (
            isinstance(bucket_cap_mb, bool)
            or not isinstance(bucket_cap_mb, (int, float))
            or bucket_cap_mb <= 0
        ):
            raise ValidationError(
                f"{owner}: bucket_cap_mb: expected a positive number, got {bucket_cap_mb!r}"
            )
        self.bucket_cap_mb = float(bucket_cap_mb)
        self.data_axes = tuple(data_axes)
        layers = tensor_parallel_layers(module)
        tp_axes: set[int] = set()
        for name, layer in layers:
            if layer.mesh is not mesh:
                raise ValidationError(
                    f"{owner}: mesh_device: the tensor-parallel layer {name!r} lives on {layer.mesh}, not on {mesh}"
                )
            clash = set(layer.tp_axes) & set(self.data_axes)
            if clash:
                raise ValidationError(
                    f"{owner}: cluster_axis: the data-parallel axes {sorted(self.data_axes)} overlap the "
                    f"tensor-parallel axes {sorted(layer.tp_axes)} of {name!r}; put data parallelism on the other "
                    "axis of a 2-D mesh"
                )
            tp_axes.update(layer.tp_axes)
        self.tp_axes = tuple(sorted(tp_axes))
        self.active = tuple(sorted(set(self.data_axes) | tp_axes))
        self.count = group_size(mesh, self.active)
        self.layers = [layer for _, layer in layers]
        self.params: list[tuple[str, Tensor]] = []
        for name, p in module.named_parameters():
            if not p.requires_grad:
                continue
            if p.device() is not mesh:
                raise ValidationError(f"{owner}: parameter {name!r} lives on {p.device()}, not on {mesh}")
            self.params.append((name, p))
        for name, p in self.params:
            other = getattr(p, "_gradient_reducer", None)
            if other is not None and other is not self:
                raise ValidationError(
                    f"{owner}: module: parameter {name!r} is already reduced by {other.owner} (its gradients would be "
                    "reduced twice); wrap the model once, or call .reducer.remove() on the old wrapper first"
                )
        self.names = {id(p): name for name, p in self.params}
        self.by_id = {id(p): p for _, p in self.params}
        self.buckets = self._make_buckets(float(bucket_cap_mb) * _MB)
        self.bucket_of = {id(p): b for b in self.buckets for p in b.params}
        self.enabled = True
        self._synced: dict[int, weakref.ref] = {}  # the reduced gradient each parameter was given last
        self._reset_pass()
        self._handles = []
        for _, p in self.params:
            self._handles.append(p.register_hook(self._make_pre_hook(p)))
            self._handles.append(p.register_post_accumulate_grad_hook(self._post_hook))
        for _, p in self.params:
            p._gradient_reducer = self
        for layer in self.layers:
            object.__setattr__(layer, "_reducer", self)

    # --- buckets ------------------------------------------------------------------------------------------
    def _make_buckets(self, cap: float) -> list[_Bucket]:
        """Parameters in reverse order (the order their gradients complete), grouped by dtype and reduction
        group, a new bucket whenever the cap would be exceeded."""
        buckets: list[_Bucket] = []
        open_buckets: dict[tuple, tuple[_Bucket, float]] = {}
        for _, p in reversed(self.params):
            axes = tuple(sorted(replicated_axes(p) & set(self.active)))
            key = (p.dtype, axes)
            nbytes = float(np.prod(p.shape)) * p.dtype.element_bytes(Layout.ROW_MAJOR)
            current = open_buckets.get(key)
            if current is None or (current[1] + nbytes > cap and current[0].params):
                bucket = _Bucket(bool(axes), collective_axis(self.mesh, axes) if axes else None)
                buckets.append(bucket)
                current = (bucket, 0.0)
            current[0].params.append(p)
            open_buckets[key] = (current[0], current[1] + nbytes)
        return buckets

    # --- hooks ----------------------------------------------------------------------------------------------
    def _reset_pass(self) -> None:
        self._pass_open = False
        self._ready: set[int] = set()
        self._done: set[int] = set()
        self._stash: dict[int, Tensor] = {}
        self._reduced_buckets: set[int] = set()

    def _open_pass(self) -> None:
        if not self._pass_open:
            self._pass_open = True
            queue_callback(self._finish)

    def _make_pre_hook(self, p: Tensor):
        def hook(grad):
            if not self.enabled:
                return None
            self._open_pass()
            if id(p) in self._done:
                raise ValidationError(
                    f"{self.owner}: parameter {self.names[id(p)]!r} received a gradient after its bucket was "
                    "all-reduced in this backward (it is used again inside a checkpointed block?); run that "
                    "backward under no_sync() and reduce with a final synchronised one"
                )
            synced = self._synced.get(id(p))
            if p.grad is not None and synced is not None and p.grad is synced():
                self._stash[id(p)] = p.grad  # reduced before: add the new reduced gradient to it later
                p.grad = None
            return None

        return hook

    def _post_hook(self, p: Tensor) -> None:
        if not self.enabled:
            return
        self._open_pass()
        self._ready.add(id(p))
        bucket = self.bucket_of[id(p)]
        if all(id(q) in self._ready for q in bucket.params):
            self._reduce(bucket, bucket.params)

    def _finish(self) -> None:
        try:
            for bucket in self.buckets:
                if id(bucket) not in self._reduced_buckets:
                    ready = [p for p in bucket.params if id(p) in self._ready]
                    if ready:
                        self._reduce(bucket, ready)
            for key, old in self._stash.items():  # set aside but reached by no gradient: keep it
                if key not in self._done:
                    self.by_id[key].grad = old
        finally:
            self._reset_pass()

    # --- the reduction ------------------------------------------------------------------------------------------
    def _reduce(self, bucket: _Bucket, params: list[Tensor]) -> None:
        self._reduced_buckets.add(id(bucket))
        with no_grad():
            grads = [p.grad for p in params]
            if bucket.reduce and len(grads) > 1:
                reduced = self._split(
                    self._scaled(ttnn.all_reduce(_flatten(grads), cluster_axis=bucket.axis)), grads
                )
            elif bucket.reduce:
                reduced = [self._scaled(ttnn.all_reduce(grads[0], cluster_axis=bucket.axis))]
            else:
                reduced = [self._scaled(g) for g in grads]
            for p, g in zip(params, reduced):
                old = self._stash.get(id(p))
                p.grad = g if old is None else ttnn.add(old, g)
                self._synced[id(p)] = weakref.ref(p.grad)
                self._done.add(id(p))

    def _scaled(self, t: Tensor) -> Tensor:
        return t if self.count == 1 else ttnn.multiply(t, 1.0 / self.count)

    @staticmethod
    def _split(flat: Tensor, like: list[Tensor]) -> list[Tensor]:
        out, start = [], 0
        for g in like:
            size = int(np.prod(g.shape))
            piece = ttnn.reshape(ttnn.slice(flat, [0, start], [1, start + size]), tuple(g.shape))
            out.append(ttnn.to_layout(piece, g.layout) if g.layout is not Layout.ROW_MAJOR else piece)
            start += size
        return out

    # --- control --------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        previous = self.enabled
        self.enabled = False
        try:
            yield
        finally:
            self.enabled = previous

    def remove(self) -> None:
        """Unregister the hooks (the layers are no longer covered by this reducer)."""
        for handle in self._handles:
            handle.remove()
        self._handles.clear()
        for _, p in self.params:
            if getattr(p, "_gradient_reducer", None) is self:
                p._gradient_reducer = None
        for layer in self.layers:
            if getattr(layer, "_reducer", None) is self:
                object.__setattr__(layer, "_reducer", None)

    def check_parameters(self) -> None:
        """Raise if a parameter differs between the devices that hold copies of it (along any mesh axis where it
        is replicated): the optimizer steps must have kept every replica identical."""
        for name, p in self.params:
            shards = p.shards(self.owner)
            for axis in sorted(replicated_axes(p)):
                for group in groups_along(self.mesh, axis):
                    first = shards[group[0]]
                    for index in group[1:]:
                        if not np.array_equal(first, shards[index]):
                            raise ValidationError(
                                f"{self.owner}: parameter {name!r} differs between devices {int(group[0])} and "
                                f"{int(index)}, which hold copies of one replicated parameter (the replicas diverged)"
                            )


def _flatten(grads: list[Tensor]) -> Tensor:
    """One row-major ``[1, total]`` buffer holding the gradients one after another (per device)."""
    rows = []
    for g in grads:
        flat = g if g.layout is Layout.ROW_MAJOR else ttnn.to_layout(g, Layout.ROW_MAJOR)
        rows.append(ttnn.reshape(flat, (1, int(np.prod(g.shape)))))
    return ttnn.concat(rows, dim=-1)
