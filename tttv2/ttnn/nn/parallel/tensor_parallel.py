"""``TensorParallel``: split a model's layers over the mesh and reduce its gradients.

``TensorParallel(model, mesh_device, cluster_axis=None)`` converts, in place, every ``ttnn.nn.GPTBlock`` /
``LlamaBlock`` of ``model`` into its tensor-parallel version (same weights), and for ``ttnn.nn.GPT`` /
``ttnn.nn.Llama`` also the token embedding (:class:`VocabParallelEmbedding`) and the LM head
(:class:`ColumnParallelLinear` with ``gather_output``) when the vocabulary divides by the TP size. A model
already built from the layers of ``ttnn.nn.parallel`` is wrapped as it is. The wrapper owns the gradient
reduction that makes the collectives' backward rules give the gradients of the loss (see reducer.py): norms and
other replicated parameters sum their devices' partial gradients, everything is divided by the group size.
"""

from __future__ import annotations

from ...errors import ValidationError
from ..blocks import GPTBlock as DenseGPTBlock
from ..blocks import LlamaBlock as DenseLlamaBlock
from ..layers import Embedding, Linear
from ..models import GPT, Llama
from ..module import Module
from ._mesh import group_size, mesh_of, resolve_axes
from ._wrapper import ParallelWrapper
from .blocks import GPTBlock, LlamaBlock
from .layers import ColumnParallelLinear, VocabParallelEmbedding
from .reducer import tensor_parallel_layers

__all__ = ["TensorParallel", "convert_to_tensor_parallel"]


def convert_to_tensor_parallel(model: Module, cluster_axis: int | None = None) -> Module:
    """Replace ``model``'s dense blocks (and a GPT's / Llama's embedding and head) by tensor-parallel ones, in
    place, on the mesh the model lives on; returns ``model``. Parameters are new tensors: build the optimizer
    afterwards."""
    owner = "ttnn.nn.parallel.TensorParallel"
    if isinstance(model, (GPT, Llama)) and model.config.weight_tying:
        raise ValidationError(
            f"{owner}: module: weight tying (the head reusing the embedding table) is not supported with tensor "
            "parallelism; build the model with weight_tying=False"
        )
    converters = {DenseGPTBlock: GPTBlock.from_dense, DenseLlamaBlock: LlamaBlock.from_dense}
    for _, parent in list(model.named_modules()):
        for name, child in list(parent.named_children()):
            convert = converters.get(type(child))
            if convert is not None:
                parent.add_module(name, convert(child, cluster_axis=cluster_axis))
    if isinstance(model, (GPT, Llama)):
        mesh = model.embed.weight.device()
        tp = group_size(mesh, resolve_axes(owner, mesh, cluster_axis))
        if model.config.vocab_size % tp == 0:
            if type(model.embed) is Embedding:
                model.embed = VocabParallelEmbedding.from_dense(model.embed, cluster_axis=cluster_axis)
            if type(model.lm_head) is Linear:
                model.lm_head = ColumnParallelLinear.from_dense(
                    model.lm_head, gather_output=True, cluster_axis=cluster_axis
                )
    return model


class TensorParallel(ParallelWrapper):
    """``TensorParallel(module, mesh_device, cluster_axis=None)``: tensor parallelism over the mesh or one axis of
    a 2-D mesh (see the module docstring). Inputs are replicated over the TP group; the loss is the same on every
    device of it. ``no_sync()``, ``check_parameters`` and ``assert_replicas_identical()`` work as in
    :class:`DistributedDataParallel`; wrap this module in one to add data parallelism on the other axis.
    """

    def __init__(
        self,
        module: Module,
        mesh_device,
        cluster_axis: int | None = None,
        *,
        bucket_cap_mb: float = 25.0,
        check_parameters: bool = False,
    ) -> None:
        owner = "ttnn.nn.parallel.TensorParallel"
        mesh = mesh_of(owner, mesh_device)
        resolve_axes(owner, mesh, cluster_axis)
        if not isinstance(module, Module):
            raise ValidationError(f"{owner}: module: expected a ttnn.nn.Module, got {type(module).__name__}")
        for name, p in module.named_parameters():
            if p.device() is not mesh:
                raise ValidationError(f"{owner}: parameter {name!r} lives on {p.device()}, not on {mesh}")
        convert_to_tensor_parallel(module, cluster_axis)
        if not tensor_parallel_layers(module):
            raise ValidationError(
                f"{owner}: module: found no tensor-parallel layer (ttnn.nn.parallel.*) and no GPTBlock / LlamaBlock "
                f"to convert in {type(module).__name__}"
            )
        super().__init__(owner, module, mesh, (), bucket_cap_mb, check_parameters)
        self.cluster_axis = cluster_axis
