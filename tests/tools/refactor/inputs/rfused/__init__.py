"""Inputs in the style of tt-metal's Llama-3 70B Galaxy demo (``models/demos/llama3_70b_galaxy/tt/``): modules whose
collectives go through a CCL object that owns persistent buffers, semaphores and their double-buffer indices, and
call the demo's fused ops (``llama_rs_matmul``, ``llama_reduce_scatter``, ``all_reduce_async``,
``reduce_scatter_async``, ``llama_rs_create_heads``, ``all_gather_concat``) in decode and plain ops in prefill."""
