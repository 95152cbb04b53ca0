"""A whole causal language model assembled from the modules: embedding → N × (norm → attention → residual add →
norm → MLP → residual add) → final norm → LM head, with prefill, decode and greedy generation.

Split by topology like the modules it is made of:

* ``TransformerBlock1D`` / ``Decoder1D`` (1x1, 1x2, 1x8): the residual stream is fractured over the devices along
  dim; before each norm it is all-gathered (decode: into the next matmul's width-sharded layout), the attention
  and the MLP hand it back fractured. Embedding1D, RotarySetup1D, RMSNorm1D, Attention1D, MLP1D, LMHead1D.
* ``TransformerBlock2D`` / ``Decoder2D`` (Galaxy 8x4): the residual is fractured over the mesh columns and
  replicated over the rows; the norms are distributed (RMSNorm2D), attention and MLP are Attention2D and MLP2D.
  Embedding2D, RotarySetup2D, RMSNorm2D, Attention2D, MLP2D, LMHead2D.

``Decoder1D.from_model_args`` / ``Decoder2D.from_model_args`` build everything from TTTv1's ``ModelArgs`` and
state dict, so the model runs TTTv1's op sequence and produces TTTv1's logits. The host side (``prefill``,
``decode``, ``generate``) pads prompts, prepares positions and page tables and reads the logits back, as
TTTv1's generator does; it runs eagerly (no trace capture).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tttv2 import ttnn
from tttv2.modules import _ccl
from tttv2.modules._topology import mesh_shape, num_devices
from tttv2.modules.attention import Attention1D, Attention2D
from tttv2.modules.attention._shared import Tttv1CallShape
from tttv2.modules.embedding import Embedding1D, Embedding2D, Embedding2DConfig
from tttv2.modules.lazy_weight import LazyWeight, host_array
from tttv2.modules.lm_head import LMHead1D, LMHead2D, LMHead2DConfig
from tttv2.modules.mlp import MLP1D, MLP2D
from tttv2.modules.rmsnorm import RMSNorm1D, RMSNorm2D
from tttv2.modules.rope import RotarySetup1D, RotarySetup2D, RotarySetup2DConfig
from tttv2.modules.tt_ccl import get_tt_ccl

__all__ = ["Decoder1D", "Decoder2D", "TransformerBlock1D", "TransformerBlock2D", "padded_prefill_len"]

TILE = 32


def padded_prefill_len(seq_len: int) -> int:
    """Prefill lengths the kernels take: 128, then powers of two up to 1024, then multiples of 2048."""
    if seq_len <= 128:
        return 128
    if seq_len <= 1024:
        return 2 ** math.ceil(math.log2(seq_len))
    return -(-seq_len // 2048) * 2048


# --- blocks -------------------------------------------------------------------------------------------------


class _Block(Tttv1CallShape):
    """What both blocks share: TTTv1's call shape and weight loading."""

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def load_device_weights(self) -> None:
        for part in (self.attention_norm, self.attention, self.ff_norm, self.mlp):
            part.load_device_weights()


class TransformerBlock1D(_Block):
    """One decoder layer on a 1-D mesh. ``attention_norm`` / ``ff_norm`` take whole rows (width-sharded in
    decode); the fractured residual is all-gathered into their layout first (moved, on one device)."""

    def __init__(
        self,
        attention_norm: RMSNorm1D,
        attention: Attention1D,
        ff_norm: RMSNorm1D,
        mlp: MLP1D,
        *,
        output_dtype=ttnn.bfloat16,
    ) -> None:
        self.attention_norm, self.attention, self.ff_norm, self.mlp = attention_norm, attention, ff_norm, mlp
        self.output_dtype = output_dtype
        self._collectives = attention.config  # tt_ccl, topology and CCL tuning
        self._residual_decode = attention.config.decode_residual_memcfg
        self._gather = self._all_gather if num_devices(attention.config.mesh_device) > 1 else _moved

    def _all_gather(self, x, memory_config):
        return _ccl.all_gather(
            x, self._collectives, dim=3, cluster_axis=None, memory_config=memory_config, num_links=1
        )

    def decode_forward(self, x, current_pos, rot_mats, page_table=None, kv_cache=None):
        """[1, 1, 32, dim / devices] (the residual's width-sharded layout) → the same."""
        normed = self.attention_norm.decode_forward(
            self._gather(x, self.attention_norm.config.decode_memory_config)
        )
        attn = self.attention.decode_forward(
            normed, current_pos, rot_mats, page_table=page_table, kv_cache=kv_cache
        )
        residual = ttnn.add(x, attn, memory_config=self._residual_decode)
        ttnn.deallocate(attn)
        normed = self.ff_norm.decode_forward(self._gather(residual, self.ff_norm.config.decode_memory_config))
        out = self.mlp.decode_forward(normed)
        return ttnn.add(residual, out, memory_config=self._residual_decode, dtype=self.output_dtype)

    def prefill_forward(
        self,
        x,
        rot_mats,
        user_id=0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        """[1, 1, S, dim / devices] in DRAM → the same (``x`` is consumed)."""
        normed = self.attention_norm.prefill_forward(self._gather(x, ttnn.DRAM_MEMORY_CONFIG))
        attn = self.attention.prefill_forward(
            normed,
            rot_mats,
            user_id=user_id,
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            kv_cache=kv_cache,
        )
        residual = ttnn.add(x, attn, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        ttnn.deallocate(attn)
        x.deallocate(True)
        normed = self.ff_norm.prefill_forward(self._gather(residual, ttnn.DRAM_MEMORY_CONFIG))
        out = self.mlp.prefill_forward(normed)
        return ttnn.add(residual, out, memory_config=ttnn.DRAM_MEMORY_CONFIG, dtype=self.output_dtype)


class TransformerBlock2D(_Block):
    """One decoder layer on a Galaxy: distributed norms on the column-fractured residual, no gather."""

    def __init__(
        self,
        attention_norm: RMSNorm2D,
        attention: Attention2D,
        ff_norm: RMSNorm2D,
        mlp: MLP2D,
        *,
        residual_memcfg=ttnn.L1_MEMORY_CONFIG,
    ) -> None:
        self.attention_norm, self.attention, self.ff_norm, self.mlp = attention_norm, attention, ff_norm, mlp
        self._residual_decode = residual_memcfg
        self._mlp_decode_input = mlp.config.decode_input_memcfg

    def decode_forward(self, x, current_pos, rot_mats, page_table=None, kv_cache=None):
        """[1, 1, 32, dim / columns] per device → the same, bfloat16."""
        attn = self.attention.decode_forward(
            self.attention_norm.decode_forward(x),
            current_pos,
            rot_mats,
            page_table=page_table,
            kv_cache=kv_cache,
        )
        residual = ttnn.add(x, attn, memory_config=self._residual_decode, dtype=ttnn.bfloat16)
        ttnn.deallocate(attn)
        normed = ttnn.to_memory_config(
            self.ff_norm.decode_forward(residual), memory_config=self._mlp_decode_input
        )
        out = self.mlp.decode_forward(normed)
        return ttnn.add(residual, out, memory_config=self._residual_decode, dtype=ttnn.bfloat16)

    def prefill_forward(
        self,
        x,
        rot_mats,
        user_id=0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        kv_cache=None,
    ):
        """[1, 1, S, dim / columns] per device in DRAM → the same (``x`` is consumed)."""
        attn = self.attention.prefill_forward(
            self.attention_norm.prefill_forward(x),
            rot_mats,
            user_id=user_id,
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            kv_cache=kv_cache,
        )
        residual = ttnn.add(x, attn, memory_config=ttnn.DRAM_MEMORY_CONFIG, dtype=ttnn.bfloat16)
        ttnn.deallocate(attn)
        x.deallocate(True)
        out = self.mlp.prefill_forward(self.ff_norm.prefill_forward(residual))
        return ttnn.add(residual, out, memory_config=ttnn.DRAM_MEMORY_CONFIG, dtype=ttnn.bfloat16)


def _moved(x, memory_config):
    return ttnn.to_memory_config(x, memory_config)


# --- TTTv1 bridge: one decoder layer ---------------------------------------------------------------------------


def _tttv1_block_1d(
    mesh, tt_ccl, args, state_dict, cache_path, layer, mats, paged_attention_config, dtype, tensor_group
):
    """TTTv1's ``TransformerBlock`` of ``layer`` on a 1-D mesh, from the modules' ``from_model_args``
    (``tensor_group``: TTTv1's TensorGroup enum, imported by the caller)."""
    model_config = args.get_model_config()

    def norm(key, program_config, output_config):
        return RMSNorm1D.from_model_args(
            mesh,
            tt_ccl,
            args,
            state_dict,
            cache_path,
            layer,
            key,
            state_dict_prefix=args.get_state_dict_prefix("", layer),
            sharded_program_config=model_config[program_config],
            sharded_output_config=model_config[output_config],
        )

    precision = model_config["DECODERS_OPTIMIZATIONS"]
    activation = precision.get_tensor_dtype(decoder_id=layer, tensor=tensor_group.ACTIVATION)
    return TransformerBlock1D(
        norm("attention_norm", "SHARDED_NORM_ATTN_PRGM_CFG", "SHARDED_ATTN_INPUT_MEMCFG"),
        Attention1D.from_model_args(
            mesh,
            tt_ccl,
            args,
            state_dict,
            cache_path,
            layer,
            mats,
            paged_attention_config=paged_attention_config,
            dtype=dtype,
        ),
        norm("ffn_norm", "SHARDED_NORM_MLP_PRGM_CFG", "SHARDED_MLP_INPUT_MEMCFG"),
        MLP1D.from_model_args(mesh, tt_ccl, args, state_dict, cache_path, layer, dtype=dtype),
        output_dtype=activation or ttnn.bfloat16,
    )


def _tttv1_block_2d(mesh, tt_ccl, args, state_dict, cache_path, layer, mats, paged_attention_config, dtype):
    """TTTv1's ``TransformerBlock`` of ``layer`` on a Galaxy, from the modules' ``from_model_args``."""
    prefix = args.get_state_dict_prefix("", layer)

    def norm(key):
        return RMSNorm2D.from_model_args(
            mesh, tt_ccl, args, state_dict, cache_path, layer, key, state_dict_prefix=prefix
        )

    return TransformerBlock2D(
        norm("attention_norm"),
        Attention2D.from_model_args(
            mesh,
            tt_ccl,
            args,
            state_dict,
            cache_path,
            layer,
            mats,
            paged_attention_config=paged_attention_config,
            dtype=dtype,
        ),
        norm("ffn_norm"),
        MLP2D.from_model_args(mesh, tt_ccl, args, state_dict, cache_path, layer),
        residual_memcfg=args.get_model_config()["DECODE_RESIDUAL_MEMCFG"],
    )


# --- models -------------------------------------------------------------------------------------------------------


@dataclass
class _Dims:
    vocab_size: int
    max_batch_size: int
    max_seq_len: int
    max_prefill_chunk_size: int


class _Decoder:
    """Host-side glue and the layer loop both topologies share."""

    layers: list
    dims: _Dims
    mesh_device: object

    def _set_parts(
        self, embedding, rope, layers, norm, lm_head, vocab_size, max_seq_len, max_prefill_chunk_size
    ):
        self.embedding, self.rope, self.layers, self.norm, self.lm_head = (
            embedding,
            rope,
            layers,
            norm,
            lm_head,
        )
        attention = layers[0].attention.config
        self.mesh_device = attention.mesh_device
        self.dims = _Dims(
            vocab_size, attention.max_batch_size, max_seq_len, max_prefill_chunk_size or max_seq_len
        )

    def prepare_positions(self, positions) -> ttnn.Tensor:
        return self.layers[0].attention.prepare_positions(positions)

    def _decode_logits(self, logits) -> np.ndarray:
        """The gathered logits are on every device: read the first."""
        one = ttnn.get_device_tensors(logits)[0]
        return ttnn.to_numpy(one)[0, 0, :, : self.dims.vocab_size].astype(np.float32)

    def load_device_weights(self) -> None:
        for part in self._parts():
            part.load_device_weights()

    def _layers_decode(self, x, current_pos, rot_mats, page_table):
        for layer in self.layers:
            x = layer.decode_forward(x, current_pos, rot_mats, page_table=page_table)
        return x

    def _layers_prefill(self, x, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx):
        for layer in self.layers:
            x = layer.prefill_forward(
                x,
                rot_mats,
                user_id=user_id,
                page_table=page_table,
                chunk_page_table=chunk_page_table,
                chunk_start_idx=chunk_start_idx,
            )
        return x

    # --- host side -----------------------------------------------------------------------------------------

    def _ids(self, tokens: np.ndarray) -> ttnn.Tensor:
        return ttnn.from_numpy(
            np.asarray(tokens, dtype=np.uint32).reshape(1, 1, 1, -1),
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=self.mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def _replicated_int32(self, table):
        if table is None:
            return None
        return ttnn.from_numpy(
            np.asarray(table, dtype=np.int32),
            dtype=ttnn.int32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            device=self.mesh_device,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def prefill(
        self, tokens, *, user_id: int = 0, page_table=None, block_size: int | None = None
    ) -> np.ndarray:
        """One user's prompt (1-D token ids) → the logits of its last token [vocab] (float32). With a paged cache
        pass the user's ``page_table`` row [1, blocks] (``user_id`` is then 0, as the pages locate the user);
        prompts longer than ``max_prefill_chunk_size`` run in chunks against the paged cache (``block_size``)."""
        tokens = np.asarray(tokens).reshape(-1)
        n = tokens.size
        if n < 1 or n > self.dims.max_seq_len:
            raise ValueError(
                f"{type(self).__name__}.prefill: prompt length must be 1..{self.dims.max_seq_len}, got {n}"
            )
        padded = padded_prefill_len(n)
        prompt = np.zeros(padded, dtype=np.int64)
        prompt[:n] = tokens
        chunk = self.dims.max_prefill_chunk_size
        if padded <= chunk:
            tile_start, row = divmod(n - 1, TILE)
            logits = self.prefill_forward(
                self.embed_prefill(prompt),
                self.rot_mats_prefill(0, padded),
                user_id=user_id,
                page_table=self._replicated_int32(None if page_table is None else np.asarray(page_table)),
                last_token_tile=tile_start * TILE,
            )
            return self._prefill_logits(logits, row)
        if page_table is None or block_size is None:
            raise ValueError(
                f"{type(self).__name__}.prefill: a {padded}-token prompt exceeds max_prefill_chunk_size={chunk}: "
                "chunked prefill needs page_table and block_size (the chunks meet in the paged KV cache)"
            )
        if padded % chunk:
            raise ValueError(
                f"{type(self).__name__}.prefill: padded length {padded} is not a multiple of the chunk {chunk}"
            )
        table = np.asarray(page_table, dtype=np.int32).reshape(1, -1)
        blocks = -(-padded // block_size)
        full = np.zeros((1, max(blocks, table.shape[1])), dtype=np.int32)
        full[:, : table.shape[1]] = table
        final, in_chunk = divmod(n - 1, chunk)
        tile_start, row = divmod(in_chunk, TILE)
        for index in range(final + 1):
            lo, hi = index * chunk, (index + 1) * chunk
            logits = self.prefill_forward(
                self.embed_prefill(prompt[lo:hi]),
                self.rot_mats_prefill(lo, chunk),
                page_table=self._replicated_int32(full),
                chunk_page_table=self._replicated_int32(table[:, lo // block_size : hi // block_size]),
                chunk_start_idx=lo,
                last_token_tile=tile_start * TILE,
            )
        return self._prefill_logits(logits, row)

    def decode(self, tokens, positions, *, page_table=None) -> np.ndarray:
        """One step for every user: tokens [max_batch_size], the positions they are written at → logits
        [max_batch_size, vocab] (float32)."""
        tokens = np.asarray(tokens).reshape(-1)
        positions = np.asarray(positions).reshape(-1)
        users = self.dims.max_batch_size
        if tokens.size != users or positions.size != users:
            raise ValueError(
                f"{type(self).__name__}.decode: one token and one position per user ({users}), got "
                f"{tokens.size} tokens and {positions.size} positions"
            )
        ids = np.zeros(TILE, dtype=np.int64)
        ids[:users] = tokens
        logits = self.decode_forward(
            self.embed_decode(ids),
            self.prepare_positions(positions),
            self.rot_mats_decode(np.clip(positions, 0, None)),
            page_table=None if page_table is None else self.prepare_page_table(page_table),
        )
        return self._decode_logits(logits)[:users]

    def generate(
        self, prompts, max_new_tokens: int, *, page_table=None, block_size=None, return_logits=False
    ):
        """Greedy generation: prompts [max_batch_size, S] (every user the same length S) → tokens [users, new
        tokens] (and, with ``return_logits``, the logits [users, vocab] of every step)."""
        prompts = np.asarray(prompts)
        users, length = prompts.shape
        if users != self.dims.max_batch_size:
            raise ValueError(
                f"{type(self).__name__}.generate: prompts must have {self.dims.max_batch_size} rows, got {users}"
            )
        table = None if page_table is None else np.asarray(page_table, dtype=np.int32)
        first = np.stack(
            [
                self.prefill(
                    prompts[u],
                    user_id=u if table is None else 0,
                    page_table=None
                    if table is None
                    else self._prompt_pages(table[u : u + 1], length, block_size),
                    block_size=block_size,
                )
                for u in range(users)
            ]
        )
        logits = [first]
        positions = np.full(users, length, dtype=np.int64)
        for _ in range(max_new_tokens - 1):
            logits.append(self.decode(logits[-1].argmax(-1), positions, page_table=table))
            positions = positions + 1
        tokens = np.stack([step.argmax(-1) for step in logits], axis=1)
        return (tokens, logits) if return_logits else tokens

    def _prompt_pages(self, table, length, block_size):
        """The user's pages that the padded prompt covers (all of them for a chunked prefill)."""
        padded = padded_prefill_len(length)
        if padded > self.dims.max_prefill_chunk_size:
            return table
        return table[:, : -(-padded // block_size)]


class Decoder1D(_Decoder):
    """A causal LM on a 1-D mesh from its parts (see the module docstring)."""

    def __init__(
        self,
        embedding: Embedding1D,
        rope: RotarySetup1D,
        layers: list[TransformerBlock1D],
        norm: RMSNorm1D,
        lm_head: LMHead1D,
        *,
        vocab_size: int,
        max_seq_len: int,
        max_prefill_chunk_size: int | None = None,
    ) -> None:
        self._set_parts(
            embedding, rope, layers, norm, lm_head, vocab_size, max_seq_len, max_prefill_chunk_size
        )
        attention = layers[0].attention
        self._collectives = attention.config
        self._residual_decode = attention.config.decode_residual_memcfg
        self._head_input = lm_head.config.input_memcfg
        multi = num_devices(self.mesh_device) > 1
        self._gather = layers[0]._gather
        self._head_input_prefill = ttnn.interleaved_to_sharded if self._head_input.is_sharded() else _moved
        self._gather_logits = self._all_gather_logits if multi else _ccl.unchanged

    def _parts(self):
        return [self.embedding, self.rope, *self.layers, self.norm]

    def load_device_weights(self) -> None:
        super().load_device_weights()
        # LMHead1D.load_device_weights() also tries the unsplit source weight, which it never resolves: load the
        # per-device chunks it runs on instead
        for weight in self.lm_head.config.output_weights:
            weight.get_device_weight()

    # --- device side -------------------------------------------------------------------------------------------

    def embed_prefill(self, tokens) -> ttnn.Tensor:
        return self.embedding.prefill_forward(self._ids(tokens))

    def embed_decode(self, tokens) -> ttnn.Tensor:
        x = self.embedding.decode_forward(self._ids(tokens))
        return ttnn.to_memory_config(x, self._residual_decode)

    def rot_mats_prefill(self, start: int, seq_len: int) -> list:
        return self.rope.prefill_forward(start, seq_len)

    def rot_mats_decode(self, positions) -> list:
        return self.rope.decode_forward(self.rope.get_rot_idxs(positions))

    def prepare_page_table(self, page_table) -> ttnn.Tensor:
        return self._replicated_int32(page_table)

    def prefill_forward(
        self,
        x,
        rot_mats,
        user_id: int = 0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        last_token_tile: int = 0,
    ):
        """Embedded prompt [1, 1, S, dim / devices] → logits of the 32 rows from ``last_token_tile`` (row-major,
        DRAM, each device its share of the vocab)."""
        x = self._layers_prefill(x, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx)
        x = ttnn.slice(x, (0, 0, last_token_tile, 0), (1, 1, last_token_tile + TILE, x.shape[-1]))
        x = self.norm.prefill_forward(self._gather(x, ttnn.DRAM_MEMORY_CONFIG))
        logits = self.lm_head.prefill_forward(self._head_input_prefill(x, self._head_input))
        return ttnn.to_layout(logits, layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)

    def decode_forward(self, x, current_pos, rot_mats, page_table=None):
        """Embedded tokens [1, 1, 32, dim / devices] → logits [1, 1, 32, padded vocab] on every device."""
        x = self._layers_decode(x, current_pos, rot_mats, page_table)
        x = self.norm.decode_forward(self._gather(x, self.norm.config.decode_memory_config))
        logits = self.lm_head.decode_forward(ttnn.to_memory_config(x, self._head_input))
        return ttnn.untilize(self._gather_logits(logits), use_multicore=True)

    def _all_gather_logits(self, logits):
        cfg = self._collectives
        return ttnn.all_gather(logits, dim=3, num_links=1, topology=cfg.topology)

    # --- host side ---------------------------------------------------------------------------------------------

    def _prefill_logits(self, logits, row: int) -> np.ndarray:
        parts = [ttnn.to_numpy(t) for t in ttnn.get_device_tensors(logits)]
        full = np.concatenate(parts, axis=-1)
        return full[0, 0, row, : self.dims.vocab_size].astype(np.float32)

    # --- TTTv1 bridge --------------------------------------------------------------------------------------------

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        args,
        state_dict,
        weight_cache_path=None,
        *,
        paged_attention_config=None,
        dtype=ttnn.bfloat8_b,
    ) -> Decoder1D:
        """TTTv1's ``Transformer`` (with ``dtype`` as its weight dtype argument) built from the modules'
        ``from_model_args``: the same weights, configs and op sequence."""
        if args.is_galaxy:
            raise ValueError("Decoder1D cannot be used for Galaxy devices; use Decoder2D instead")
        from tttv1.tt.model_config import TensorGroup

        tt_ccl = get_tt_ccl(mesh_device)
        model_config = args.get_model_config()
        rope = RotarySetup1D.from_model_args(mesh_device, args)
        mats = rope.transformation_mats
        layers = [
            _tttv1_block_1d(
                mesh_device,
                tt_ccl,
                args,
                state_dict,
                weight_cache_path,
                i,
                mats,
                paged_attention_config,
                dtype,
                TensorGroup,
            )
            for i in range(args.n_layers)
        ]
        prefix = args.get_state_dict_prefix("", None)
        final_norm = RMSNorm1D.from_model_args(
            mesh_device,
            tt_ccl,
            args,
            state_dict,
            weight_cache_path,
            None,
            "norm",
            state_dict_prefix=prefix,
            sharded_program_config=model_config["SHARDED_NORM_LM_HEAD_PRGM_CFG"],
            sharded_output_config=model_config["LM_HEAD_INPUT_MEMCFG"],
            fp32_dest_acc_en=True,
        )
        return cls(
            Embedding1D.from_model_args(mesh_device, args, weight_cache_path, state_dict, ttnn.bfloat16),
            rope,
            layers,
            final_norm,
            LMHead1D.from_model_args(
                mesh_device,
                args,
                state_dict,
                prefix,
                weight_cache_path,
                args.max_columns_per_device_lm_head,
                dtype=dtype,
            ),
            vocab_size=args.vocab_size,
            max_seq_len=args.max_seq_len,
            max_prefill_chunk_size=args.max_prefill_chunk_size,
        )


class Decoder2D(_Decoder):
    """A causal LM on a Galaxy from its parts (see the module docstring)."""

    def __init__(
        self,
        embedding: Embedding2D,
        rope: RotarySetup2D,
        layers: list[TransformerBlock2D],
        norm: RMSNorm2D,
        lm_head: LMHead2D,
        *,
        vocab_size: int,
        max_seq_len: int,
        max_prefill_chunk_size: int | None = None,
        logits_gather_links: int = 2,
    ) -> None:
        self._set_parts(
            embedding, rope, layers, norm, lm_head, vocab_size, max_seq_len, max_prefill_chunk_size
        )
        attention = layers[0].attention
        self._rows, self._cols = mesh_shape(self.mesh_device)
        self._residual_decode = layers[0]._residual_decode
        self._logits_gather_links = logits_gather_links
        self._page_table_mapper = attention._page_table_decode_mapper

    def _parts(self):
        return [self.embedding, self.rope, *self.layers, self.norm, self.lm_head]

    # --- device side -------------------------------------------------------------------------------------------

    def embed_prefill(self, tokens) -> ttnn.Tensor:
        return self.embedding.prefill_forward(self._ids(tokens))

    def embed_decode(self, tokens) -> ttnn.Tensor:
        return ttnn.to_memory_config(self.embedding.decode_forward(self._ids(tokens)), self._residual_decode)

    def rot_mats_prefill(self, start: int, seq_len: int) -> list:
        return self.rope.prefill_forward(start, seq_len)

    def rot_mats_decode(self, positions) -> list:
        return self.rope.decode_forward(self.rope.get_rot_idxs(positions))

    def prepare_page_table(self, page_table) -> ttnn.Tensor:
        return LazyWeight(
            np.asarray(page_table, dtype=np.int32),
            dtype=ttnn.int32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            mesh_mapper_config=self._page_table_mapper,
            device=self.mesh_device,
        ).get_device_weight()

    def prefill_forward(
        self,
        x,
        rot_mats,
        user_id: int = 0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        last_token_tile: int = 0,
    ):
        """Embedded prompt [1, 1, S, dim / columns] → logits of the 32 rows from ``last_token_tile`` (row-major,
        DRAM, each mesh row its share of the vocab)."""
        x = self._layers_prefill(x, rot_mats, user_id, page_table, chunk_page_table, chunk_start_idx)
        x = ttnn.slice(x, (0, 0, last_token_tile, 0), (1, 1, last_token_tile + TILE, x.shape[-1]))
        logits = self.lm_head.prefill_forward(self.norm.prefill_forward(x))
        return ttnn.to_layout(logits, layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)

    def decode_forward(self, x, current_pos, rot_mats, page_table=None):
        """Embedded tokens [1, 1, 32, dim / columns] → logits [1, 1, 32, padded vocab] on every device."""
        x = self._layers_decode(x, current_pos, rot_mats, page_table)
        logits = self.lm_head.decode_forward(self.norm.decode_forward(x))
        logits = ttnn.all_gather(
            logits, dim=3, num_links=self._logits_gather_links, cluster_axis=0, topology=ttnn.Topology.Linear
        )
        return ttnn.untilize(logits, use_multicore=True)

    # --- host side ---------------------------------------------------------------------------------------------

    def _prefill_logits(self, logits, row: int) -> np.ndarray:
        devices = ttnn.get_device_tensors(logits)
        # every column holds the whole sum; the mesh rows hold consecutive runs of the vocab
        full = np.concatenate([ttnn.to_numpy(devices[r * self._cols]) for r in range(self._rows)], axis=-1)
        return full[0, 0, row, : self.dims.vocab_size].astype(np.float32)

    # --- TTTv1 bridge --------------------------------------------------------------------------------------------

    @classmethod
    def from_model_args(
        cls,
        mesh_device,
        args,
        state_dict,
        weight_cache_path=None,
        *,
        paged_attention_config=None,
        dtype=ttnn.bfloat8_b,
    ) -> Decoder2D:
        """TTTv1's ``Transformer`` on a Galaxy built from the modules' ``from_model_args`` (embedding, rotary setup
        and LM head from their configs): the same weights, configs and op sequence."""
        if not args.is_galaxy:
            raise ValueError(
                f"Decoder2D requires a Galaxy mesh (8x4), got {args.cluster_shape}; use Decoder1D instead"
            )
        from tttv1.tt.common import compute_gather_cos_sin

        tt_ccl = get_tt_ccl(mesh_device)
        cos, sin = compute_gather_cos_sin(
            dhead=args.head_dim,
            end=2 * args.max_seq_len,
            theta=args.rope_theta,
            rope_scaling=args.rope_scaling,
        )
        rope = RotarySetup2D.from_config(
            RotarySetup2DConfig(
                cos_matrix=LazyWeight(host_array(cos)),
                sin_matrix=LazyWeight(host_array(sin)),
                max_batch_size=args.max_batch_size,
                mesh_device=mesh_device,
            )
        )
        mats = rope.transformation_mats
        layers = [
            _tttv1_block_2d(
                mesh_device,
                tt_ccl,
                args,
                state_dict,
                weight_cache_path,
                i,
                mats,
                paged_attention_config,
                dtype,
            )
            for i in range(args.n_layers)
        ]
        top = args.get_state_dict_prefix("", None)
        cache_dir = None if args.dummy_weights or weight_cache_path is None else weight_cache_path
        embedding = LazyWeight(
            host_array(state_dict[f"{top}tok_embeddings.weight"]), cache_dir=cache_dir, name="tok_embeddings"
        )
        output = LazyWeight(
            np.ascontiguousarray(host_array(state_dict[f"{top}output.weight"]).T),
            cache_dir=cache_dir,
            name="output_weight_2d",
        )
        return cls(
            Embedding2D.from_config(
                Embedding2DConfig(
                    weights=embedding,
                    mesh_device=mesh_device,
                    weights_memcfg=args.get_model_config()["EMB_WEIGHTS_MEMCFG"],
                )
            ),
            rope,
            layers,
            RMSNorm2D.from_model_args(
                mesh_device, tt_ccl, args, state_dict, weight_cache_path, None, "norm", state_dict_prefix=top
            ),
            LMHead2D.from_config(
                LMHead2DConfig(
                    weight=output,
                    mesh_device=mesh_device,
                    topology=layers[0].attention.config.topology,
                    num_links=args.num_all_gather_links,
                    padded_vocab_size=args.padded_vocab_size,
                    weights_dtype=dtype,
                    output_dtype=args.lm_head_dtype or ttnn.bfloat8_b,
                )
            ),
            vocab_size=args.vocab_size,
            max_seq_len=args.max_seq_len,
            max_prefill_chunk_size=args.max_prefill_chunk_size,
            logits_gather_links=2,
        )
