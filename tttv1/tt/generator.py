"""Generator: prefill each user (chunked when the prompt is longer than ``max_prefill_chunk_size``), then decode.

Only eager execution is emulated: ``enable_trace`` is accepted for API compatibility and runs eagerly.
"""

from __future__ import annotations

import torch
import ttnn

from tttv1.tt.common import get_block_size, get_padded_prefill_len, num_blocks_in_seq


class Generator:
    def __init__(self, model, model_args, mesh_device, tokenizer=None, formatter=None):
        """``model`` and ``model_args`` may be single objects or lists (one per data-parallel submesh)."""
        self.model = model if isinstance(model, list) else [model]
        self.model_args = model_args if isinstance(model_args, list) else [model_args]
        self.mesh_device = mesh_device
        self.tokenizer = tokenizer
        self.formatter = formatter
        self.data_parallel = len(self.model)
        self.prev_page_table = None

    # --- prefill ---------------------------------------------------------------------------------------------

    def prefill_forward_text(
        self, tokens: torch.Tensor, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None
    ):
        """tokens [B, S_max] (left-aligned, padded); returns last-token logits [B, 1, vocab] (float32)."""
        batch, batch_seq_len = tokens.shape
        if prompt_lens is None:
            prompt_lens = [batch_seq_len] * batch
        if empty_slots is None:
            empty_slots = list(range(batch))
        output_logits = torch.zeros(batch, 1, self.model_args[0].vocab_size)
        users_per_model = max(batch // self.data_parallel, 1)
        for idx, user_id in enumerate(empty_slots):
            model_id = min(user_id // users_per_model, self.data_parallel - 1)
            group_user_id = user_id % users_per_model if page_table is None else 0
            seq_len = int(prompt_lens[idx])
            last_token_idx = seq_len - 1
            prefill_seq_len = get_padded_prefill_len(seq_len)
            prefill_ids = torch.cat(
                [tokens[idx : idx + 1, :seq_len], torch.zeros(1, prefill_seq_len - seq_len).long()], dim=-1
            )
            if page_table is not None:
                page_table_user = self._get_prefill_user_page_table(page_table, kv_cache, seq_len, user_id)
            else:
                page_table_user = None
            logits = self.prefill_forward_single_user_text(
                prefill_ids,
                page_table=page_table_user,
                user_id=user_id if page_table is None else group_user_id,
                last_token_idx=last_token_idx,
                kv_cache=kv_cache[model_id] if kv_cache is not None else None,
                model_id=model_id,
            )
            output_logits[idx] = logits
        return output_logits

    def prefill_forward_single_user_text(
        self, tokens, page_table, user_id, last_token_idx, kv_cache=None, model_id=0
    ):
        model = self.model[model_id]
        args = self.model_args[model_id]
        prefill_len = tokens.shape[-1]
        use_chunked_prefill = prefill_len > args.max_prefill_chunk_size
        if use_chunked_prefill:
            # Chunked prefill requires paged attention: each chunk attends to the cached earlier chunks
            assert page_table is not None, "page_table must be provided for chunked prefill"
            chunk_size = args.max_prefill_chunk_size
            assert prefill_len % chunk_size == 0, (
                f"prefill length {prefill_len} must be a multiple of the chunk {chunk_size}"
            )
            block_size = self._block_size(kv_cache, model)
            last_token_idx_in_chunk = last_token_idx % chunk_size
            # Calculate which chunk contains the last_token_idx
            last_chunk_start = (last_token_idx // chunk_size) * chunk_size
            page_table_user = page_table
            # Pad page table to match number of blocks in seq_len
            num_padding_blocks = num_blocks_in_seq(prefill_len, block_size) - page_table_user.shape[1]
            page_table_user_padded = torch.cat(
                [page_table_user, torch.zeros(1, max(num_padding_blocks, 0), dtype=torch.int32)], dim=-1
            )
            CHUNK_USER_ID = 0

            for chunk_start in range(0, last_chunk_start + 1, chunk_size):
                chunk_end = chunk_start + chunk_size
                assert chunk_end <= prefill_len, "Chunk end should be less than seq_len"
                chunk_tokens = tokens[:, chunk_start:chunk_end]
                chunk_page_table = page_table_user[:, chunk_start // block_size : chunk_end // block_size]

                (
                    chunk_prefill_input,
                    chunk_rot_mats_prefill,
                    page_table_tt,
                    chunk_page_table_tt,
                ) = model.prepare_inputs_prefill(
                    chunk_tokens,
                    start_pos=chunk_start,
                    page_table=page_table_user_padded,
                    chunk_page_table=chunk_page_table,
                )
                tt_logits = model.ttnn_prefill_forward(
                    chunk_prefill_input,
                    rot_mats=chunk_rot_mats_prefill,
                    user_id=CHUNK_USER_ID,
                    page_table=page_table_tt,
                    chunk_page_table=chunk_page_table_tt,
                    chunk_start_idx=chunk_start,
                    get_last_token=(last_token_idx_in_chunk // 32) * 32,
                    kv_cache=kv_cache,
                )

                if chunk_start == last_chunk_start:
                    logits = model.process_output_prefill(
                        tt_logits, last_token_idx=(last_token_idx_in_chunk % 32)
                    )
                    return logits
                ttnn.deallocate(tt_logits)
        else:
            prefill_input, rot_mats_prefill, page_table_tt, _ = model.prepare_inputs_prefill(
                tokens,
                page_table=page_table,
            )

            tt_logits = model.ttnn_prefill_forward(
                prefill_input,
                rot_mats=rot_mats_prefill,
                user_id=user_id,
                page_table=page_table_tt,
                get_last_token=(last_token_idx // 32) * 32,
                kv_cache=kv_cache,
            )
            logits = model.process_output_prefill(tt_logits, last_token_idx=(last_token_idx % 32))
            ttnn.deallocate(tt_logits)
            return logits

    @staticmethod
    def _block_size(kv_cache, model) -> int:
        """Tokens per KV-cache block: from the external cache if one is given, else the model's paged config."""
        if kv_cache is not None:
            return get_block_size(kv_cache)
        return model.paged_attention_config.block_size

    def _get_prefill_user_page_table(self, page_table, kv_cache, prefill_len, user_id):
        """The user's row of the page table, cut to the blocks the (padded) prompt uses."""
        block_size = self._block_size(kv_cache[0] if kv_cache else None, self.model[0])
        num_blocks = num_blocks_in_seq(get_padded_prefill_len(prefill_len), block_size)
        return page_table[user_id : user_id + 1, :num_blocks]

    # --- decode ----------------------------------------------------------------------------------------------

    def decode_forward_text(
        self,
        tokens,
        start_pos,
        page_table=None,
        kv_cache=None,
        enable_trace=False,
        read_from_device=True,
    ):
        """tokens [B], start_pos [B] (the position each new token is written at) → logits [B, 1, vocab]."""
        assert self.data_parallel == 1 or tokens.shape[0] % self.data_parallel == 0
        per_model = tokens.shape[0] // self.data_parallel
        outputs = []
        for model_id in range(self.data_parallel):
            sl = slice(model_id * per_model, (model_id + 1) * per_model)
            model = self.model[model_id]
            tt_tokens, tt_current_pos, tt_rot_idxs, tt_page_table = model.prepare_inputs_decode(
                tokens[sl], start_pos[sl], page_table[sl] if page_table is not None else None
            )
            tt_logits = model.ttnn_decode_forward(
                tt_tokens,
                tt_current_pos,
                rot_mat_idxs=tt_rot_idxs,
                page_table=tt_page_table,
                kv_cache=kv_cache[model_id] if kv_cache is not None else None,
            )
            if not read_from_device:
                outputs.append(tt_logits)
                continue
            outputs.append(model.process_output_decode(tt_logits, B=per_model, S=1))
        if not read_from_device:
            return outputs
        return torch.cat(outputs, dim=0)
