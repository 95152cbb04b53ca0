"""Collectives of the TTTv1-style model: semaphore bookkeeping (TT_CCL) and the all-reduce / all-gather wrappers.

Whether a collective runs 1-D (N300/T3K: reduce-scatter only) or 2-D (Galaxy: all-gather then local reduce) is
decided at run time from the mesh shape, as TTTv1 does. ``tt_all_reduce`` accepts both the G2 keywords and the
extra G3 ones (``rs_memory_config``, ``chunks_per_sync``, ``num_workers_per_link``, ``subdevice_id``) that the
new MLP passes.
"""

from __future__ import annotations

import ttnn

# Ethernet links of each known system, as (links along mesh axis 0, links along mesh axis 1).
_LINKS_BY_SYSTEM = {
    # single chips: no fabric at all
    "N150": (0, 0),
    "P100": (0, 0),
    "P150": (0, 0),
    # 1-D meshes of Wormhole chips
    "N300": (1, 1),
    "T3K": (1, 1),
    "N150x4": (1, 1),
    # Blackhole boards
    "P300": (2, 2),
    "P150x4": (2, 2),
    "P150x8": (2, 2),
    # 2-D galaxies
    "TG": (4, 3),
    "BHGLX": (4, 3),
}

# TT_CCL keeps one semaphore bucket per "axis key"; an op on axis 1 uses bucket 1, anything else (axis 0 or no
# axis) shares bucket 2, and bucket 0 is allocated but never handed out.
_BUCKETS = 3


def get_num_links(mesh_device, cluster_axis=None):
    """Ethernet links per axis of the systems TTTv1 runs on (Galaxy (4, 3), N300/T3K (1, 1), single chip 0)."""
    from tttv1.tt.model_config import determine_device_name

    per_axis = _LINKS_BY_SYSTEM[determine_device_name(mesh_device)]
    # a collective spanning both axes is limited by the poorer one; never ask an op for zero links
    usable = min(per_axis) if cluster_axis is None else per_axis[cluster_axis]
    return max(usable, 1)


class _Alternator:
    """Two pre-built values handed out in turn: A, B, A, B, ..."""

    def __init__(self, first, second):
        self._pair = (first, second)
        self._turn = 0

    def take(self):
        value = self._pair[self._turn]
        self._turn = 1 - self._turn
        return value


class TT_CCL:
    """Double-buffered global semaphores per collective kind and axis (axis 0, axis 1, no axis).

    The handles rotate on every call, so the sequence a module sees depends on call order (stateful, as in TTTv1).
    """

    def __init__(self, mesh_device):
        self.mesh_device = mesh_device
        grid = mesh_device.compute_with_storage_grid_size()
        self.sub_device_crs = ttnn.CoreRangeSet(
            {ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(grid.x - 1, grid.y - 1))}
        )

        def semaphores(count):
            made = [ttnn.create_global_semaphore(mesh_device, self.sub_device_crs, 0) for _ in range(count)]
            return made[0] if count == 1 else made

        # barrier: one semaphore per use; all-gather: a pair; reduce-scatter: a triple — each double-buffered
        self._barrier = [_Alternator(semaphores(1), semaphores(1)) for _ in range(_BUCKETS)]
        self._gather = [_Alternator(semaphores(2), semaphores(2)) for _ in range(_BUCKETS)]
        self._scatter = [_Alternator(semaphores(3), semaphores(3)) for _ in range(_BUCKETS)]

    @staticmethod
    def _bucket(cluster_axis):
        return cluster_axis or 2  # None and 0 share the last bucket

    def get_num_links(self, cluster_axis=None):
        return get_num_links(self.mesh_device, cluster_axis)

    def get_and_cycle_barrier_semaphore_handle(self, cluster_axis=None):
        return self._barrier[self._bucket(cluster_axis)].take()

    def get_and_cycle_ag_semaphore_handles(self, cluster_axis=None):
        return self._gather[self._bucket(cluster_axis)].take()

    def get_and_cycle_rs_semaphore_handles(self, cluster_axis=None):
        return self._scatter[self._bucket(cluster_axis)].take()


def _fits(memory_config, tensor) -> bool:
    """A sharded config with an explicit shard spec only fits the tensor shape it was written for."""
    if memory_config is None or not memory_config.is_sharded() or memory_config.shard_spec is None:
        return True
    height = 1
    for d in tensor.padded_shape[:-1]:
        height *= d
    sh, sw = memory_config.shard_spec.shape
    n = memory_config.shard_spec.num_cores()
    if memory_config.memory_layout == ttnn.TensorMemoryLayout.WIDTH_SHARDED:
        return sh == height and sw * n >= tensor.padded_shape[-1] > sw * (n - 1)
    return sw == tensor.padded_shape[-1] and sh * n >= height > sh * (n - 1)


def _nothing_to_exchange(mesh_device, cluster_axis) -> bool:
    """True on a lone chip, or when asked for axis 1 of a mesh that is a single row or column."""
    rows_cols = list(mesh_device.shape)
    return rows_cols == [1, 1] or (cluster_axis == 1 and 1 in rows_cols)


def _links(requested, tt_ccl, cluster_axis):
    """An explicit link count wins; otherwise ask the system table."""
    return tt_ccl.get_num_links(cluster_axis) if requested is None else requested


def _to_ccl_dtype(tensor, dtype, sharded, memory_config):
    """Typecast for the wire (through L1 interleaved), then back onto the sharded layout when it fits."""
    if tensor.dtype == dtype:
        return tensor
    tensor = ttnn.to_memory_config(tensor, ttnn.L1_MEMORY_CONFIG, dtype)
    if sharded and memory_config is not None and _fits(memory_config, tensor):
        tensor = ttnn.to_memory_config(tensor, memory_config, dtype)
    return tensor


def _gather(tensor, tt_ccl, dim, cluster_axis, num_links, topology, memory_config, chunks=10, workers=2):
    """``all_gather_async``; with ``cluster_axis=None`` the axis keyword is left out (a whole-ring gather)."""
    on_axis = {} if cluster_axis is None else {"cluster_axis": cluster_axis}
    return ttnn.experimental.all_gather_async(
        tensor,
        persistent_output_buffer=None,
        dim=dim,
        multi_device_global_semaphore=tt_ccl.get_and_cycle_ag_semaphore_handles(cluster_axis),
        barrier_semaphore=tt_ccl.get_and_cycle_barrier_semaphore_handle(cluster_axis),
        num_links=num_links,
        topology=topology,
        memory_config=memory_config,
        chunks_per_sync=chunks,
        num_workers_per_link=workers,
        num_buffers_per_channel=2,
        **on_axis,
    )


def tt_all_reduce(
    input_tensor,
    mesh_device,
    tt_ccl,
    cluster_axis=0,
    dim=0,
    num_reduce_scatter_links=None,
    num_all_gather_links=None,
    topology=ttnn.Topology.Linear,
    memory_config=None,
    sharded=False,
    dtype=ttnn.bfloat16,
    use_composite=False,
    rs_memory_config=None,
    chunks_per_sync=10,
    num_workers_per_link=2,
    subdevice_id=None,
):
    """Sum partial results over one mesh axis.

    Single device, or axis 1 of a 1×N mesh: nothing to do. 1-D meshes (N300/T3K): a reduce-scatter on ``dim`` —
    the result is fractured, which is what the residual stream wants. Galaxy: all-gather on ``dim`` then a
    local reduce (or reduce-scatter + all-gather when ``use_composite``), reshaped back to the input shape.
    """
    if _nothing_to_exchange(mesh_device, cluster_axis):
        return input_tensor

    rs_links = _links(num_reduce_scatter_links, tt_ccl, cluster_axis)
    ag_links = _links(num_all_gather_links, tt_ccl, cluster_axis)

    # the collectives want a rank-4 tensor whose two outer dims are 1: fold them into the rows
    shape_in = input_tensor.shape
    if (shape_in[0], shape_in[1]) != (1, 1):
        rows = shape_in[-4] * shape_in[-3] * shape_in[-2]
        input_tensor = ttnn.reshape(input_tensor, (1, 1, rows, shape_in[-1]))

    def scatter(tensor, out_memory_config, axis_args, extra):
        return ttnn.experimental.reduce_scatter_minimal_async(
            tensor,
            persistent_output_buffers=None,
            dim=dim,
            multi_device_global_semaphore=tt_ccl.get_and_cycle_rs_semaphore_handles(*axis_args),
            barrier_semaphore=tt_ccl.get_and_cycle_barrier_semaphore_handle(*axis_args),
            num_links=rs_links,
            memory_config=out_memory_config,
            intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
            topology=topology,
            chunks_per_sync=chunks_per_sync,
            num_workers_per_link=num_workers_per_link,
            num_buffers_per_channel=2,
            **extra,
        )

    if 1 in list(mesh_device.shape):
        # a line of chips: a reduce-scatter alone is the whole job (the caller keeps the result fractured)
        if input_tensor.is_sharded() and not sharded:
            interleaved = ttnn.sharded_to_interleaved(input_tensor, ttnn.L1_MEMORY_CONFIG)
            input_tensor.deallocate(True)
            input_tensor = interleaved
        out = scatter(
            input_tensor,
            rs_memory_config if memory_config is None else memory_config,
            (),
            {"subdevice_id": subdevice_id},
        )
        input_tensor.deallocate(True)
        return out

    # galaxy: a real all-reduce along cluster_axis
    input_tensor = _to_ccl_dtype(input_tensor, dtype, sharded, memory_config)
    if not sharded:  # the prefill case works out of DRAM
        input_tensor = ttnn.to_memory_config(input_tensor, ttnn.DRAM_MEMORY_CONFIG)
    landing = memory_config if sharded else ttnn.DRAM_MEMORY_CONFIG

    if use_composite:
        layout_before = input_tensor.memory_config()
        partial = scatter(input_tensor, landing, (cluster_axis,), {"cluster_axis": cluster_axis})
        summed = _gather(
            partial,
            tt_ccl,
            dim,
            cluster_axis,
            ag_links,
            topology,
            layout_before,
            chunks=chunks_per_sync,
            workers=num_workers_per_link,
        )
    else:
        stacked = _gather(
            input_tensor,
            tt_ccl,
            dim,
            cluster_axis,
            ag_links,
            topology,
            landing,
            chunks=chunks_per_sync,
            workers=num_workers_per_link,
        )
        if sharded:
            stacked = ttnn.to_memory_config(stacked, ttnn.L1_MEMORY_CONFIG)
        summed = ttnn.experimental.fast_reduce_nc(
            stacked,
            dims=[dim],
            output=None,
            compute_kernel_config=None,
            memory_config=ttnn.L1_MEMORY_CONFIG if sharded else ttnn.DRAM_MEMORY_CONFIG,
        )
        stacked.deallocate(True)

    return ttnn.reshape(summed, shape_in)


def tt_all_gather(
    input_tensor,
    mesh_device,
    tt_ccl,
    cluster_axis,
    dim,
    num_links=None,
    memory_config=None,
    sharded=False,
    topology=ttnn.Topology.Linear,
    dtype=ttnn.bfloat16,
):
    """Concatenate shards over one mesh axis (``cluster_axis=None``: over the whole 1-D ring)."""
    if _nothing_to_exchange(mesh_device, cluster_axis):
        return input_tensor

    links = _links(num_links, tt_ccl, cluster_axis)
    source = input_tensor if sharded else ttnn.to_memory_config(input_tensor, ttnn.DRAM_MEMORY_CONFIG)
    source = _to_ccl_dtype(source, dtype, sharded, memory_config)
    gathered = _gather(source, tt_ccl, dim, cluster_axis, links, topology, memory_config)
    source.deallocate(True)
    return gathered


def tt_distributed_rmsnorm(inp, epsilon, gamma, mesh_device, tt_ccl, compute_kernel_config, num_links=None):
    """RMSNorm over a dim fractured across mesh columns: local stats, all-gather stats, normalise locally."""
    links = _links(num_links, tt_ccl, 1)

    local_stats = ttnn.rms_norm_pre_all_gather(
        inp, compute_kernel_config=compute_kernel_config, dtype=ttnn.bfloat16
    )
    # one 32-wide stats tile per row before the exchange
    local_stats = ttnn.reshape(local_stats, ttnn.Shape((1, 1, inp.shape[-2], 32)))
    all_stats = tt_all_gather(
        local_stats,
        mesh_device=mesh_device,
        tt_ccl=tt_ccl,
        dim=3,
        cluster_axis=1,
        num_links=links,
        memory_config=ttnn.DRAM_MEMORY_CONFIG,
    )
    normed = ttnn.rms_norm_post_all_gather(
        inp, all_stats, epsilon=epsilon, weight=gamma, compute_kernel_config=compute_kernel_config
    )
    all_stats.deallocate(True)
    return normed


def tt_sharded_distributed_rmsnorm(
    inp,
    epsilon,
    gamma,
    mesh_device,
    tt_ccl,
    ln_sharded_input_memcfg,
    ln_sharded_progcfg,
    ln_sharded_stats_memcfg,
    num_links=None,
):
    """The decode (sharded) form of :func:`tt_distributed_rmsnorm`."""
    columns = 1  # the norm's dim is fractured over the mesh columns
    links = _links(num_links, tt_ccl, columns)

    inp = ttnn.to_memory_config(inp, memory_config=ln_sharded_input_memcfg)
    local_stats = ttnn.rms_norm_pre_all_gather(inp, program_config=ln_sharded_progcfg)
    all_stats = _gather(local_stats, tt_ccl, 3, columns, links, ttnn.Topology.Linear, ln_sharded_stats_memcfg)
    normed = ttnn.rms_norm_post_all_gather(
        inp,
        epsilon=epsilon,
        weight=gamma,
        program_config=ln_sharded_progcfg,
        stats=all_stats,
    )
    all_stats.deallocate(True)
    return normed
