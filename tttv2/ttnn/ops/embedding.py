"""``ttnn.embedding``: row lookup of token ids in a table, per device (the table may be split over devices)."""

from __future__ import annotations

import numpy as np

from ..errors import op_error
from ..memory import MemoryConfig
from ..placement import PlacementReplicate, PlacementShard, TensorTopology
from ..storage import is_storage
from ..tensor import Tensor
from ..types import DataType, Layout, TensorMemoryLayout
from ._common import expect_tensor, output_like, same_mesh, ttnn_op
from .data_movement import per_device

__all__ = ["embedding"]
__experimental__: list[str] = []
__transformer__: list[str] = []

_ID_DTYPES = (DataType.UINT32, DataType.BFLOAT16)
_WEIGHT_DTYPES = (DataType.BFLOAT16, DataType.BFLOAT8_B)


@ttnn_op("ttnn.embedding")
def embedding(
    input_tensor: Tensor,
    weight: Tensor,
    *,
    padding_idx: int | None = None,
    layout: Layout | None = None,
    embeddings_type=None,
    dtype: DataType | None = None,
    output_tensor=None,
    memory_config: MemoryConfig | None = None,
) -> Tensor:
    """Look up rows of ``weight`` ([vocab, dim] or [1, 1, vocab, dim]) for the ids in ``input_tensor``.

    Shapes follow ttnn: ids ``[S]`` → ``[S, dim]``; ids of rank ≥ 2 are read as ``[B, …, S]`` with
    ``B = shape[0]`` and ``S = shape[-1]`` (the middle dims must be 1) → ``[B, S, dim]``; so TTTv1's
    ``[1, 1, 1, S]`` token tensor gives ``[1, S, dim]`` (callers ``unsqueeze_to_4D`` it).
    The output layout defaults to the weight's layout and the dtype to the weight's (bfloat16 for a
    bfloat8_b table); a ROW_MAJOR output cannot be cast. Rows of ``padding_idx`` come out as zeros.
    Every id must be < vocab (or equal ``padding_idx``); the error names the offending id.
    """
    op = "ttnn.embedding"
    ids = expect_tensor(op, "input_tensor", input_tensor, dtypes=_ID_DTYPES)
    table = expect_tensor(op, "weight", weight, dtypes=_WEIGHT_DTYPES)
    same_mesh(op, input_tensor=ids, weight=table)
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    for name, t in (("input_tensor", ids), ("weight", table)):
        if t.is_sharded():
            raise op_error(
                op,
                name,
                "an interleaved tensor (embedding does not read sharded inputs)",
                t.memory_config().memory_layout.name,
            )
    wshape = list(table.shape)
    if len(wshape) < 2 or any(d != 1 for d in wshape[:-2]):
        raise op_error(op, "weight", "a [vocab, dim] or [1, 1, vocab, dim] table", wshape)
    vocab, dim = wshape[-2], wshape[-1]
    ishape = list(ids.shape)
    if len(ishape) > 2 and any(d != 1 for d in ishape[1:-1]):
        raise op_error(
            op,
            "input_tensor",
            "ids shaped [S], [B, S] or [B, 1, 1, S] (only dims 0 and -1 may exceed 1)",
            ishape,
        )
    out_layout = table.layout if layout is None else layout
    if not isinstance(out_layout, Layout):
        raise op_error(op, "layout", "a ttnn.Layout", repr(layout))
    natural = DataType.BFLOAT16 if table.dtype.is_block_float else table.dtype
    out_dtype = natural if dtype is None else dtype
    if not isinstance(out_dtype, DataType):
        raise op_error(op, "dtype", "a ttnn.DataType", repr(dtype))
    if out_layout is Layout.ROW_MAJOR and out_dtype is not natural:
        raise op_error(op, "dtype", f"{natural.name} (only a TILE_LAYOUT output can be cast)", out_dtype.name)
    if (
        out_layout is Layout.ROW_MAJOR
        and memory_config is not None
        and memory_config.memory_layout
        not in (
            TensorMemoryLayout.INTERLEAVED,
            TensorMemoryLayout.HEIGHT_SHARDED,
        )
    ):
        raise op_error(
            op,
            "memory_config",
            "interleaved or height-sharded for a ROW_MAJOR output",
            memory_config.memory_layout.name,
        )
    if padding_idx is not None and (
        isinstance(padding_idx, bool) or not isinstance(padding_idx, (int, np.integer))
    ):
        raise op_error(op, "padding_idx", "an int or None", repr(padding_idx))
    batch = 1 if len(ishape) == 1 else ishape[0]
    seq = ishape[-1]
    out_shape = (seq, dim) if len(ishape) == 1 else (batch, seq, dim)

    tokens = {}
    id_shards = ids.shards(op)  # held: the lookups below find their tokens by these arrays' ids
    for dev, id_shard in enumerate(id_shards):
        if id(id_shard) in tokens:
            continue
        raw = np.asarray(id_shard)
        if ids.dtype.is_float and not np.all(raw == np.trunc(raw)):
            raise op_error(op, "input_tensor", "integral token ids", "non-integer values")
        tok = raw.astype(np.int64).reshape(batch, seq)
        pad = np.zeros_like(tok, dtype=bool) if padding_idx is None else tok == padding_idx
        bad = ((tok < 0) | (tok >= vocab)) & ~pad
        if bad.any():
            first = int(tok[bad][0])
            raise op_error(
                op,
                "input_tensor",
                f"token ids in [0, {vocab}) (the weight has {vocab} rows)",
                f"id {first} on device {dev}",
            )
        tokens[id(id_shard)] = (np.where(pad, 0, tok), pad)

    def lookup(id_shard, w_shard):
        tok, pad = tokens[id(id_shard)]
        if is_storage(w_shard):  # only the looked-up rows are unpacked
            out = w_shard.take_rows(tok.reshape(-1)).reshape(*tok.shape, dim)
        else:
            out = np.asarray(w_shard, dtype=np.float32).reshape(vocab, dim)[tok]
        out[pad] = 0.0
        return out.reshape(out_shape)

    shards = per_device(lookup, id_shards, table.stored_shards(op))
    topology = _output_topology(ids, table, len(out_shape))
    return output_like(
        op, shards, ids, dtype=out_dtype, layout=out_layout, memory_config=memory_config, topology=topology
    )


def _output_topology(ids: Tensor, table: Tensor, out_rank: int) -> TensorTopology:
    """Which output dim each mesh axis splits: the batch dim where the ids are split, the embedding dim where
    the table is split by columns (so ``to_torch`` with the matching composer reassembles the result)."""
    id_top, w_top = ids.tensor_topology(), table.tensor_topology()

    def mapped(top: TensorTopology, from_ids: bool) -> list:
        out = []
        for p in top.placements():
            if isinstance(p, PlacementShard) and from_ids:
                out.append(PlacementShard(0))
            elif isinstance(p, PlacementShard) and p.dim in (-1, len(table.shape) - 1):
                out.append(PlacementShard(out_rank - 1))
            else:
                out.append(PlacementReplicate())
        return out

    def replicated(top: TensorTopology) -> bool:
        return all(isinstance(p, PlacementReplicate) for p in top.placements())

    if replicated(id_top):
        return TensorTopology(w_top.distribution_shape, tuple(mapped(w_top, from_ids=False)))
    if replicated(w_top) or len(id_top.placements()) != len(w_top.placements()):
        return TensorTopology(id_top.distribution_shape, tuple(mapped(id_top, from_ids=True)))
    merged = [
        pi if isinstance(pi, PlacementShard) else pw
        for pi, pw in zip(mapped(id_top, True), mapped(w_top, False))
    ]
    return TensorTopology(id_top.distribution_shape, tuple(merged))
