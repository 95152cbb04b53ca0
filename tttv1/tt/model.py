"""The whole model: embedding, decoder layers, final norm, LM head, and the host ↔ device input/output glue.

Inputs are prepared on host (tokens, positions, rotary indices, page table) and copied to the mesh; outputs
are gathered into torch logits. ``args.is_galaxy`` picks the output concat dims and gather axis (G2 style).
"""

from __future__ import annotations

import torch
import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import TT_CCL
from tttv1.tt.common import copy_host_to_device, get_prefill_rot_mat
from tttv1.tt.decoder import TransformerBlock
from tttv1.tt.distributed_norm import DistributedNorm
from tttv1.tt.embedding import Embedding
from tttv1.tt.lm_head import LMHead
from tttv1.tt.rmsnorm import RMSNorm
from tttv1.tt.rope import RotarySetup


class Transformer(LightweightModule):
    def __init__(
        self,
        args,
        dtype,
        mesh_device,
        state_dict,
        weight_cache_path,
        paged_attention_config=None,
        use_paged_kv_cache=False,
        attention_class=None,
        rope_setup_class=None,
    ):
        super().__init__()
        self.args = args
        self.mesh_device = mesh_device
        self.dtype = dtype
        self.paged_attention_config = paged_attention_config
        self.model_config = args.get_model_config()
        self.grid_size = args.max_grid_size
        self.n_layers = args.n_layers
        self.vocab_size = args.vocab_size
        assert self.vocab_size > 0

        # one set of CCL semaphores, shared by every module of the model
        self.tt_ccl = TT_CCL(mesh_device)
        top_level_prefix = args.get_state_dict_prefix("", None)

        self.embd = Embedding(
            mesh_device=mesh_device,
            args=args,
            weight_cache_path=weight_cache_path,
            state_dict=state_dict,
            dtype=ttnn.bfloat16,  # the table is kept row-major, which the embedding op wants in bf16
        )
        self.rope_setup = (rope_setup_class or RotarySetup)(
            device=mesh_device,
            batch_size=args.max_batch_size,
            head_dim=args.head_dim,
            max_seq_len=args.max_seq_len,
            rope_theta=args.rope_theta,
            rope_scaling=args.rope_scaling,
            use_qk_fused=args.use_qk_fused,
        )
        self.trans_mats_dict = self.rope_setup.get_both_trans_mats()

        block_kwargs = dict(
            args=args,
            mesh_device=mesh_device,
            tt_ccl=self.tt_ccl,
            dtype=dtype,
            state_dict=state_dict,
            weight_cache_path=weight_cache_path,
            transformation_mats=self.trans_mats_dict,
            paged_attention_config=paged_attention_config,
            use_paged_kv_cache=use_paged_kv_cache,
            attention_class=attention_class,
        )
        self.layers = [TransformerBlock(layer_num=index, **block_kwargs) for index in range(self.n_layers)]

        final_rmsnorm = RMSNorm(
            device=mesh_device,
            dim=args.dim,
            eps=args.norm_eps,
            state_dict=state_dict,
            state_dict_prefix=top_level_prefix,
            weight_key="norm",
            weight_cache_path=None if args.dummy_weights else weight_cache_path,
            weight_dtype=ttnn.bfloat16,
            add_unit_offset=args.rms_norm_add_unit_offset,
            is_distributed=args.is_distributed_norm,
            sharded_program_config=self.model_config["SHARDED_NORM_LM_HEAD_PRGM_CFG"],
            sharded_output_config=self.model_config["LM_HEAD_INPUT_MEMCFG"],
            ccl_topology=args.ccl_topology(),
            tt_ccl=self.tt_ccl,
        )
        self.norm = DistributedNorm(final_rmsnorm, args, self.tt_ccl, args.is_galaxy)
        self.lm_head = LMHead(
            args=args,
            mesh_device=mesh_device,
            tt_ccl=self.tt_ccl,
            dtype=dtype,
            state_dict=state_dict,
            state_dict_prefix=top_level_prefix,
            weight_cache_path=weight_cache_path,
            max_columns_per_device=args.max_columns_per_device_lm_head,
        )

    # --- inputs ------------------------------------------------------------------------------------------------

    def _replicated_int32(self, table):
        """A host int32 table (page tables) copied whole to every device, or None."""
        if table is None:
            return None
        return ttnn.from_torch(
            table,
            device=self.mesh_device,
            dtype=ttnn.int32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )

    def prepare_inputs_prefill(self, tokens, start_pos=0, page_table=None, chunk_page_table=None):
        """Host tokens [1, S] (and optional page tables) → device embeddings, rotary tables and page tables."""
        assert tokens.dim() == 2, "prefill tokens must be [1, seq_len]"
        n_tokens = tokens.shape[-1]
        tt_ids = ttnn.from_torch(
            tokens.reshape(1, 1, 1, n_tokens),
            device=self.mesh_device,
            dtype=ttnn.uint32,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device),
        )
        embedded = ttnn.unsqueeze_to_4D(self.embd(tt_ids))
        # cos/sin for the positions this call covers: start_pos .. start_pos + n_tokens - 1
        rot_mats = get_prefill_rot_mat(
            self.args.head_dim,
            self.mesh_device,
            n_tokens,
            self.args.rope_theta,
            self.args.rope_scaling,
            start_pos=start_pos,
        )
        return (
            embedded,
            rot_mats,
            self._replicated_int32(page_table),
            self._replicated_int32(chunk_page_table),
        )

    def prepare_inputs_decode(self, *inputs):
        """Build the decode inputs on host, copy them over, then embed on device."""
        on_host = self.prepare_decode_inputs_host(*inputs)
        return self.transform_decode_inputs_device(
            *copy_host_to_device(on_host, mesh_device=self.mesh_device)
        )

    def prepare_decode_inputs_host(self, tokens, current_pos, page_table=None):
        """Host-side ttnn tensors for one decode step: token ids padded to a 32-user tile, positions, rotary
        indices and the page table. With several users a Galaxy gives each mesh column its own share of the
        positions and of the page table rows."""
        n_users = tokens.shape[0]
        assert current_pos.shape[0] == n_users, "one position per token expected"
        assert self.args.max_batch_size == n_users, "decode runs exactly max_batch_size users"
        split_users = self.args.is_galaxy and n_users > 1

        ids = torch.zeros(32, dtype=tokens.dtype)
        ids[:n_users] = tokens.view(-1)
        tt_ids = ttnn.unsqueeze_to_4D(
            ttnn.from_torch(
                ids, device=None, dtype=ttnn.uint32, mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device)
            )
        )

        # inactive users carry negative positions; the rotary lookup clamps them to 0
        rope_idxs = self.rope_setup.get_rot_idxs(current_pos.clamp(min=0), on_host=True)

        def per_column(tensor, dim):
            return ttnn.from_torch(
                tensor,
                device=None,
                dtype=ttnn.int32,
                mesh_mapper=ttnn.ShardTensor2dMesh(
                    self.mesh_device,
                    dims=(None, dim) if split_users else (None, None),
                    mesh_shape=self.args.cluster_shape,
                ),
            )

        tt_pos = per_column(current_pos, 0)
        tt_page_table = None if page_table is None else per_column(page_table, -2)
        return tt_ids, tt_pos, rope_idxs, tt_page_table

    def transform_decode_inputs_device(self, tokens, current_pos, rope_idxs, page_table=None):
        """Embed the tokens on device and put them in the decode residual memory config."""
        residual = ttnn.unsqueeze_to_4D(self.embd(tokens))
        residual = ttnn.to_memory_config(residual, self.args.model_config["DECODE_RESIDUAL_MEMCFG"])
        return residual, current_pos, rope_idxs, page_table

    # --- outputs -------------------------------------------------------------------------------------------------

    def process_output_prefill(self, tt_out, last_token_idx):
        """Device logits of the 32-row tile holding the last prompt token → torch logits of that token [vocab]."""
        concat_dims = (3, 1) if self.args.is_galaxy else (1, -1)
        composer = ttnn.ConcatMesh2dToTensor(
            self.mesh_device, dims=concat_dims, mesh_shape=self.args.cluster_shape
        )
        full = ttnn.to_torch(tt_out, mesh_composer=composer)
        return full[0, 0, last_token_idx, : self.vocab_size]

    def process_output_decode(self, tt_out, B, S=1):
        """Decode logits, already gathered on every device → torch [B, S, vocab] (read from the first device)."""
        one_copy = ttnn.get_device_tensors(tt_out)[0] if self.args.num_devices > 1 else tt_out
        logits = ttnn.to_torch(one_copy).float()
        return logits[:, :, :B, : self.vocab_size].view(B, S, -1)

    # --- forwards --------------------------------------------------------------------------------------------------

    def ttnn_prefill_forward(
        self,
        x,
        rot_mats,
        user_id=0,
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        get_last_token=-1,
        kv_cache=None,
    ):
        """Prefill of one user: x [1, 1, S, dim / devices] → logits of the 32-row tile holding the last token."""
        return self.forward(
            x,
            current_pos=None,
            rot_mats=rot_mats,
            user_id=user_id,
            mode="prefill",
            page_table=page_table,
            chunk_page_table=chunk_page_table,
            chunk_start_idx=chunk_start_idx,
            get_last_token=get_last_token,
            kv_cache=kv_cache,
        )

    def ttnn_decode_forward(self, x, current_pos, rot_mat_idxs, page_table=None, kv_cache=None):
        """One decode step for all users; returns logits gathered on every device (ROW_MAJOR)."""
        tt_logits = self.forward(
            x,
            current_pos,
            rot_mats=self.rope_setup.get_rot_mats(rot_mat_idxs),
            mode="decode",
            page_table=page_table,
            kv_cache=kv_cache,
        )
        # every device needs the whole vocab row for sampling: gather the vocab shards, then go row-major
        if self.args.num_devices > 1:
            if self.args.is_galaxy:
                gather = dict(num_links=2, cluster_axis=0, topology=ttnn.Topology.Linear)
            else:
                gather = dict(num_links=1, topology=self.args.ccl_topology())
            tt_logits = ttnn.all_gather(tt_logits, dim=3, **gather)
        return ttnn.untilize(tt_logits, use_multicore=True)

    def forward(
        self,
        x: ttnn.Tensor,
        current_pos,
        rot_mats=None,
        user_id=0,
        mode="decode",
        page_table=None,
        chunk_page_table=None,
        chunk_start_idx=None,
        get_last_token=-1,
        kv_cache=None,
    ):
        for layer_index, layer in enumerate(self.layers):
            x = layer(
                x,
                current_pos,
                rot_mats,
                user_id,
                mode,
                page_table,
                chunk_page_table=chunk_page_table,
                chunk_start_idx=chunk_start_idx,
                kv_cache=None if kv_cache is None else kv_cache[layer_index],
            )

        if get_last_token == -1:
            if mode == "prefill":
                return x  # prefill that only fills the KV cache: no logits wanted
        else:
            # keep just the tile of 32 rows that contains the wanted token
            x = ttnn.slice(x, (0, 0, get_last_token, 0), (1, 1, get_last_token + 32, x.shape[-1]))

        x = self.norm(x, mode=mode)
        head_input_mem = self.model_config["LM_HEAD_INPUT_MEMCFG"]
        if mode == "prefill" and head_input_mem.is_sharded():
            x = ttnn.interleaved_to_sharded(x, head_input_mem)
        if mode == "decode" and not self.args.is_galaxy:
            x = ttnn.to_memory_config(x, head_input_mem)
        x = self.lm_head(x, mode=mode)
        if mode == "prefill":
            x = ttnn.to_layout(x, layout=ttnn.ROW_MAJOR_LAYOUT, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        return x
