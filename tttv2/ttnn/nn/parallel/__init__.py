"""``ttnn.nn.parallel``: training one model on many devices of a mesh — data, tensor and pipeline parallelism.

* :class:`DistributedDataParallel` + :func:`shard_batch`: replicas on the mesh (or one axis of it), each on a
  slice of the batch, gradients averaged in buckets during backward;
* :class:`TensorParallel` and the Megatron-style layers :class:`ColumnParallelLinear`, :class:`RowParallelLinear`,
  :class:`VocabParallelEmbedding`, and tensor-parallel :class:`GPTBlock` / :class:`LlamaBlock`: each layer's
  weights split over the devices, collectives inside the layers (their backward rules give the backward);
* :class:`Pipeline`: stages on submeshes, micro-batches under a GPipe or 1F1B schedule, activations and
  gradients moved with ``ttnn.experimental.send_recv``; :class:`RankPipeline`: the same with one stage per rank
  (``tttv2-run``), moved over ``ttnn.MeshSocket`` (docs/distributed.md).

DP and TP compose on a 2-D mesh (TP on one axis, DP on the other). See docs/training.md.
"""

from .blocks import GPTMLP, GPTBlock, GroupedQueryAttention, LlamaBlock, LlamaMLP, MultiHeadAttention
from .data_parallel import DistributedDataParallel, shard_batch
from .layers import ColumnParallelLinear, RowParallelLinear, TensorParallelLayer, VocabParallelEmbedding
from .pipeline import Pipeline, pipeline_stages, schedule_steps
from .rank_pipeline import RankPipeline
from .reducer import GradientReducer
from .tensor_parallel import TensorParallel, convert_to_tensor_parallel

__all__ = [
    "GPTMLP",
    "ColumnParallelLinear",
    "DistributedDataParallel",
    "GPTBlock",
    "GradientReducer",
    "GroupedQueryAttention",
    "LlamaBlock",
    "LlamaMLP",
    "MultiHeadAttention",
    "Pipeline",
    "RankPipeline",
    "RowParallelLinear",
    "TensorParallel",
    "TensorParallelLayer",
    "VocabParallelEmbedding",
    "convert_to_tensor_parallel",
    "pipeline_stages",
    "schedule_steps",
    "shard_batch",
]
