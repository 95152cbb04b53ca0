"""The Galaxy demo's CCL object, in its style (``llama_ccl.py``'s ``TT_CCL``): it owns the global semaphores and
the persistent buffers, double-buffered per cluster axis, and every collective advances its axis's index. Decode
uses the fused ops, on the workers' sub-device of a loaded sub-device manager, with the prefetcher's global circular
buffer handed to the fused matmul (``prefetcher_common.py``); prefill the plain async ones."""

import torch
import ttnn


class FusedCCL:
    def __init__(self, mesh_device, args, mode):
        self.mesh_device = mesh_device
        self.mode = mode
        self.model_config = args.get_model_config()
        self.sub_device_id = ttnn.SubDeviceId(0)
        self.global_cb = None
        if mode == "decode":
            # the prefetcher's split, as TtLlamaPrefetcherSetup makes it: DRAM readers on column 0, workers beside
            readers = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(0, 7))])
            workers = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(6, 7))])
            manager = mesh_device.create_sub_device_manager(
                [ttnn.SubDevice([readers]), ttnn.SubDevice([workers])], 0
            )
            mesh_device.load_sub_device_manager(manager)
            self.sub_device_id = ttnn.SubDeviceId(1)
            mapping = [
                (
                    ttnn.CoreCoord(0, y),
                    ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(1, y), ttnn.CoreCoord(2, y))]),
                )
                for y in range(8)
            ]
            self.global_cb = ttnn.create_global_circular_buffer(mesh_device, mapping, 16 * 1088)
        crs = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(6, 7))])
        self.semaphores = [
            [ttnn.create_global_semaphore(mesh_device, crs, 0) for _ in range(2)] for _ in range(2)
        ]
        self.idx = [0, 0]
        rows, cols = args.cluster_shape
        mapper = ttnn.ShardTensor2dMesh(mesh_device, dims=(0, 1), mesh_shape=args.cluster_shape)
        interim = self.model_config["RS_INTERIM_MEMCFG"]
        self.rs_buffers = [
            ttnn.from_torch(
                torch.zeros((rows, cols, 32, 512 * interim.shard_spec.num_cores())),
                device=mesh_device,
                layout=ttnn.TILE_LAYOUT,
                dtype=ttnn.bfloat8_b,
                memory_config=interim,
                mesh_mapper=mapper,
            )
            for _ in range(2)
        ]
        self.concat_buffer = ttnn.from_torch(
            torch.zeros((rows, cols * 8, 32, 128)),
            device=mesh_device,
            layout=ttnn.ROW_MAJOR_LAYOUT,
            dtype=ttnn.bfloat16,
            mesh_mapper=mapper,
        )

    def _sem(self, axis):
        sem = self.semaphores[axis][self.idx[axis]]
        self.idx[axis] = (self.idx[axis] + 1) % 2
        return sem

    def double_matmul_reduce_scatter(self, x, w1, w3, memory_config, rs_memory_config, dtype=ttnn.bfloat8_b):
        buffer = self.rs_buffers[self.idx[1]]
        w1_out, w3_out, reduced = ttnn.experimental.llama_rs_matmul(
            x,
            w1,
            buffer,
            3,
            self._sem(1),
            1,
            self.mesh_device,
            self.model_config["NUM_LINKS"],
            self.sub_device_id,
            second_weight_tensor=w3,
            memory_config_rs=rs_memory_config,
            memory_config_mm=memory_config,
            dtype=dtype,
            global_cb=self.global_cb,
            topology=self.model_config["CCL_TOPOLOGY"],
        )
        w1_out.deallocate(True)
        return reduced, w3_out

    def reduce_scatter(self, x, memory_config, cluster_axis=1):
        if self.mode == "decode":
            return ttnn.experimental.llama_reduce_scatter(
                x,
                self.rs_buffers[self.idx[1]],
                3,
                self._sem(1),
                self.sub_device_id,
                cluster_axis=1,
                mesh_device=self.mesh_device,
                num_links=self.model_config["NUM_LINKS"],
                memory_config=memory_config,
            )
        return ttnn.experimental.reduce_scatter_async(
            x,
            3,
            cluster_axis=cluster_axis,
            mesh_device=self.mesh_device,
            from_remote_multi_device_global_semaphore=self._sem(cluster_axis),
            to_remote_multi_device_global_semaphore=self._sem(cluster_axis),
            math_op=ttnn.ReduceType.Sum,
            memory_config=memory_config,
            topology=ttnn.Topology.Linear,
            num_links=self.model_config["NUM_LINKS"],
            subdevice_id=self.sub_device_id,
        )

    def all_gather(self, x, cluster_axis, memory_config):
        return ttnn.experimental.all_gather_async(
            x,
            3,
            cluster_axis=cluster_axis,
            mesh_device=self.mesh_device,
            topology=ttnn.Topology.Linear,
            multi_device_global_semaphore=[self._sem(cluster_axis), self._sem(cluster_axis)],
            num_links=self.model_config["NUM_LINKS"],
            memory_config=memory_config,
        )

    def all_reduce(self, x, cluster_axis, memory_config):
        if self.mode == "decode":
            return ttnn.experimental.all_reduce_async(
                x,
                self.rs_buffers[0],
                cluster_axis,
                self.mesh_device,
                self._sem(cluster_axis),
                memory_config=memory_config,
                topology=self.model_config["CCL_TOPOLOGY"],
                subdevice_id=self.sub_device_id,
                use_optimal_ccl_for_llama=True,
            )
        scattered = self.reduce_scatter(x, memory_config, cluster_axis=cluster_axis)
        return self.all_gather(scattered, cluster_axis, memory_config)

    def create_heads(self, qkv, memory_config):
        return ttnn.experimental.llama_rs_create_heads(
            qkv,
            self.rs_buffers[self.idx[1]],
            3,
            self._sem(1),
            self.sub_device_id,
            1,
            self.mesh_device,
            num_heads=8,
            num_kv_heads=1,
            qkv_memory_config=memory_config,
        )

    def gather_heads(self, heads, memory_config):
        return ttnn.experimental.all_gather_concat(
            heads,
            self.concat_buffer,
            1,
            cluster_axis=1,
            mesh_device=self.mesh_device,
            multi_device_global_semaphore=self._sem(1),
            num_heads=8,
            memory_config=memory_config,
        )
