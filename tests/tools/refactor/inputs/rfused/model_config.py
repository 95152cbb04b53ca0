"""A small Galaxy ModelArgs in the 70B demo's style: dim 2048 (a multiple of 1024), 8 query heads of 128 and one KV
head per mesh row (the fused head kernels' fixed layout), an 8-core ring for the decode shards, and a
``model_config`` dict of the memory configs the fused ops take."""

import ttnn

RING = 8


def _width(shard, crs):
    return ttnn.create_sharded_memory_config(
        shape=shard,
        core_grid=crs,
        strategy=ttnn.ShardStrategy.WIDTH,
        orientation=ttnn.ShardOrientation.ROW_MAJOR,
        use_height_and_width_as_shard_shape=True,
    )


def _row(n, y=0, x0=0):
    return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(x0, y), ttnn.CoreCoord(x0 + n - 1, y))])


class ModelArgs:
    def __init__(self, mesh_device, dim=2048, hidden_dim=4096):
        self.mesh_device = mesh_device
        self.num_devices = mesh_device.get_num_devices()
        self.is_galaxy = self.num_devices == 32
        self.cluster_shape = list(mesh_device.shape)
        self.dim, self.hidden_dim = dim, hidden_dim
        self.n_heads, self.n_kv_heads, self.head_dim = 64, 8, 128
        rows, cols = self.cluster_shape
        ring = _row(RING)
        sub_grids = ttnn.CoreRangeSet(
            [
                ttnn.CoreRange(ttnn.CoreCoord(1, 0), ttnn.CoreCoord(3, 7)),
                ttnn.CoreRange(ttnn.CoreCoord(5, 0), ttnn.CoreCoord(6, 7)),
            ]
        )
        qkv = (self.n_heads + 2 * self.n_kv_heads) * self.head_dim // rows
        self.model_config = {
            "NUM_LINKS": 1,
            "CCL_TOPOLOGY": ttnn.Topology.Linear,
            "FF_IN_MEMCFG": _width((32, dim // cols // RING), ring),
            "FF1_OUT_MEMCFG": _width((32, hidden_dim // rows // RING), ring),
            "RS_OUT_MEMCFG": _width((32, 32), _row(hidden_dim // rows // cols // 32, y=2)),
            "FF2_IN_MEMCFG": _width((32, hidden_dim // rows // RING), ring),
            "RS_INTERIM_MEMCFG": _width((32, 512), _row(4, y=1)),
            "RESIDUAL_MEMCFG": _width((32, dim // cols // 8), _row(8, y=3)),
            "QKV_OUT_MEMCFG": _width((32, qkv // RING), ring),
            "HEADS_MEMCFG": ttnn.MemoryConfig(
                ttnn.TensorMemoryLayout.HEIGHT_SHARDED,
                ttnn.BufferType.L1,
                ttnn.ShardSpec(sub_grids, [32, 128], ttnn.ShardOrientation.ROW_MAJOR),
            ),
            "WO_IN_MEMCFG": _width((32, self.n_heads * self.head_dim // rows // RING), ring),
        }

    def get_model_config(self):
        return self.model_config
