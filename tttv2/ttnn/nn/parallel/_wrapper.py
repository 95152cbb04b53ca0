"""The part ``DistributedDataParallel`` and ``TensorParallel`` share: a module wrapper that owns a
:class:`GradientReducer`, optionally checks that replicas stay identical, and reduces the reported loss."""

from __future__ import annotations

import numpy as np

from .... import ttnn
from ...device import MeshDevice
from ...errors import ValidationError
from ...tensor import Tensor
from ..module import Module
from ._mesh import collective_axis, group_size
from .layers import TensorParallelLayer
from .reducer import GradientReducer

__all__ = ["ParallelWrapper"]


class ParallelWrapper(Module):
    """``forward`` calls the wrapped ``module``; its gradients are reduced during ``backward`` (see reducer.py)."""

    def __init__(
        self,
        owner: str,
        module: Module,
        mesh: MeshDevice,
        data_axes: tuple[int, ...],
        bucket_cap_mb: float,
        check_parameters: bool,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise ValidationError(f"{owner}: module: expected a ttnn.nn.Module, got {type(module).__name__}")
        self.module = module
        self.mesh = mesh
        self.data_axes = data_axes
        self.check_parameters = bool(check_parameters)
        self.reducer = GradientReducer(owner, module, mesh, data_axes, bucket_cap_mb)

    @property
    def data_parallel_size(self) -> int:
        return group_size(self.mesh, self.data_axes)

    @property
    def tensor_parallel_size(self) -> int:
        return group_size(self.mesh, self.reducer.tp_axes)

    def forward(self, *args, **kwargs):
        if self.check_parameters:
            self.reducer.check_parameters()
        return self.module(*args, **kwargs)

    def no_sync(self):
        """``with model.no_sync():`` — backward passes inside keep their gradients local (accumulation); the next
        backward outside reduces the accumulated gradients."""
        return self.reducer.no_sync()

    def assert_replicas_identical(self) -> None:
        """Raise if any parameter differs between the devices that hold copies of it."""
        self.reducer.check_parameters()

    def reduce_loss(self, loss: Tensor) -> Tensor:
        """The mean of ``loss`` over the data-parallel group, on every device (differentiable; the gradients are
        the same as with the unreduced loss): what ``ttnn.nn.utils.item(loss)`` should print."""
        if self.data_parallel_size == 1:
            return loss
        total = ttnn.all_reduce(loss, cluster_axis=collective_axis(self.mesh, self.data_axes))
        return ttnn.multiply(total, 1.0 / self.data_parallel_size)

    def dense_state_dict(self, grads: bool = False) -> dict[str, np.ndarray]:
        """The parameters (``grads=True``: their gradients, where set) as whole host arrays in the layout of the
        unsplit model, named as in that model (no wrapper prefix): what a single-device model would hold."""
        model = self.module
        while isinstance(model, ParallelWrapper):
            model = model.module
        out = {}
        for name, p in model.named_parameters():
            t = p.grad if grads else p
            if t is None:
                continue
            prefix, _, leaf = name.rpartition(".")
            owner = model.get_submodule(prefix)
            if isinstance(owner, TensorParallelLayer):
                out[name] = owner.full_value(leaf, t)
            else:
                out[name] = np.array(t.shards(type(self).__name__)[0], dtype=np.float32)
        return out

    def extra_repr(self) -> str:
        return (
            f"mesh={'x'.join(map(str, self.mesh.shape))}, data_parallel={self.data_parallel_size}, "
            f"tensor_parallel={self.tensor_parallel_size}, buckets={len(self.reducer.buckets)}"
        )
