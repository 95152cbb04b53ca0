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
        n_users, padded_width = tokens.shape
        lengths = [padded_width] * n_users if prompt_lens is None else prompt_lens
        slots = list(range(n_users)) if empty_slots is None else empty_slots
        users_per_model = max(n_users // self.data_parallel, 1)

        logits_out = torch.zeros(n_users, 1, self.model_args[0].vocab_size)
        for row, slot in enumerate(slots):
            n_tokens = int(lengths[row])
            # the data-parallel replica that owns this slot
            model_id = min(slot // users_per_model, self.data_parallel - 1)
            padded = get_padded_prefill_len(n_tokens)
            prompt = torch.zeros(1, padded, dtype=torch.long)
            prompt[0, :n_tokens] = tokens[row, :n_tokens]
            # with a page table the blocks locate the user's cache, so the model is told user 0
            user_page_table = (
                None
                if page_table is None
                else self._get_prefill_user_page_table(page_table, kv_cache, n_tokens, slot)
            )
            logits_out[row] = self.prefill_forward_single_user_text(
                prompt,
                page_table=user_page_table,
                user_id=slot if page_table is None else 0,
                last_token_idx=n_tokens - 1,
                kv_cache=None if kv_cache is None else kv_cache[model_id],
                model_id=model_id,
            )
        return logits_out

    def prefill_forward_single_user_text(
        self, tokens, page_table, user_id, last_token_idx, kv_cache=None, model_id=0
    ):
        model = self.model[model_id]
        args = self.model_args[model_id]
        if tokens.shape[-1] > args.max_prefill_chunk_size:
            return self._prefill_in_chunks(
                model, args.max_prefill_chunk_size, tokens, page_table, last_token_idx, kv_cache
            )

        x, rot_mats, tt_page_table, _ = model.prepare_inputs_prefill(tokens, page_table=page_table)
        tile_start, row_in_tile = divmod(last_token_idx, 32)
        tt_logits = model.ttnn_prefill_forward(
            x,
            rot_mats=rot_mats,
            user_id=user_id,
            page_table=tt_page_table,
            get_last_token=tile_start * 32,
            kv_cache=kv_cache,
        )
        logits = model.process_output_prefill(tt_logits, last_token_idx=row_in_tile)
        ttnn.deallocate(tt_logits)
        return logits

    def _prefill_in_chunks(self, model, chunk, tokens, page_table, last_token_idx, kv_cache):
        """Prefill a long prompt ``chunk`` tokens at a time; later chunks attend to the earlier ones through the
        paged KV cache, so a page table is mandatory. Chunks after the one holding the last real token are skipped."""
        total = tokens.shape[-1]
        assert page_table is not None, (
            "chunked prefill needs a page_table (the chunks meet in the paged KV cache)"
        )
        assert total % chunk == 0, f"prefill length {total} must be a multiple of the chunk {chunk}"
        block = self._block_size(kv_cache, model)

        # every chunk gets the whole user's page table, padded with zeros up to the padded prompt length
        missing_blocks = max(num_blocks_in_seq(total, block) - page_table.shape[1], 0)
        full_page_table = torch.cat([page_table, torch.zeros(1, missing_blocks, dtype=torch.int32)], dim=-1)

        final_chunk = last_token_idx // chunk
        tile_start, row_in_tile = divmod(last_token_idx % chunk, 32)
        for index in range(final_chunk + 1):
            lo, hi = index * chunk, (index + 1) * chunk
            x, rot_mats, tt_page_table, tt_chunk_page_table = model.prepare_inputs_prefill(
                tokens[:, lo:hi],
                start_pos=lo,
                page_table=full_page_table,
                chunk_page_table=page_table[:, lo // block : hi // block],
            )
            tt_logits = model.ttnn_prefill_forward(
                x,
                rot_mats=rot_mats,
                user_id=0,  # the page tables, not the user index, address the cache here
                page_table=tt_page_table,
                chunk_page_table=tt_chunk_page_table,
                chunk_start_idx=lo,
                get_last_token=tile_start * 32,
                kv_cache=kv_cache,
            )
            if index == final_chunk:
                return model.process_output_prefill(tt_logits, last_token_idx=row_in_tile)
            ttnn.deallocate(tt_logits)

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
        for model_id, model in enumerate(self.model):
            rows = slice(model_id * per_model, (model_id + 1) * per_model)
            device_inputs = model.prepare_inputs_decode(
                tokens[rows], start_pos[rows], None if page_table is None else page_table[rows]
            )
            tt_tokens, tt_pos, tt_rot_idxs, tt_page_table = device_inputs
            tt_logits = model.ttnn_decode_forward(
                tt_tokens,
                tt_pos,
                rot_mat_idxs=tt_rot_idxs,
                page_table=tt_page_table,
                kv_cache=None if kv_cache is None else kv_cache[model_id],
            )
            outputs.append(
                model.process_output_decode(tt_logits, B=per_model, S=1) if read_from_device else tt_logits
            )
        if not read_from_device:
            return outputs
        return torch.cat(outputs, dim=0)
