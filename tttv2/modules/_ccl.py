"""The asynchronous collectives as the modules call them: semaphores from the config's ``tt_ccl`` (cycled per
axis), topology and tuning from the config's ``topology`` / ``ccl_*`` fields. ``cluster_axis=None`` spans
the whole mesh."""

from __future__ import annotations

from tttv2 import ttnn


def all_gather(x, config, *, dim: int, cluster_axis, memory_config, num_links: int):
    return ttnn.experimental.all_gather_async(
        x,
        persistent_output_buffer=None,
        dim=dim,
        multi_device_global_semaphore=config.tt_ccl.get_and_cycle_ag_semaphore_handles(cluster_axis),
        barrier_semaphore=config.tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis),
        num_links=num_links,
        topology=config.topology,
        memory_config=memory_config,
        cluster_axis=cluster_axis,
        chunks_per_sync=config.ccl_chunks_per_sync,
        num_workers_per_link=config.ccl_num_workers_per_link,
        num_buffers_per_channel=config.ccl_num_buffers_per_channel,
    )


def reduce_scatter(x, config, *, dim: int, cluster_axis, memory_config, num_links: int):
    return ttnn.experimental.reduce_scatter_minimal_async(
        x,
        persistent_output_buffers=None,
        dim=dim,
        multi_device_global_semaphore=config.tt_ccl.get_and_cycle_rs_semaphore_handles(cluster_axis),
        barrier_semaphore=config.tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis),
        num_links=num_links,
        memory_config=memory_config,
        intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=config.topology,
        cluster_axis=cluster_axis,
        chunks_per_sync=config.ccl_chunks_per_sync,
        num_workers_per_link=config.ccl_num_workers_per_link,
        num_buffers_per_channel=config.ccl_num_buffers_per_channel,
    )


def unchanged(x):
    """The identity, bound where a step does not apply (e.g. a collective on one device)."""
    return x
