"""RotarySetup: the cos/sin tables and transformation matrices, and the per-position lookups for decode.

Decode looks the rows up on device with ``ttnn.embedding`` by position index and height-shards them one user
per core, as ``rotary_embedding_llama`` wants. On a Galaxy (``num_devices == 32``) each mesh column serves its
own group of users, so positions and transformation matrices are split over the columns.
"""

from __future__ import annotations

import torch
import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.common import compute_gather_cos_sin, get_rot_transformation_mat, nearest_32


class RotarySetup(LightweightModule):
    def __init__(
        self,
        device,
        batch_size: int,
        head_dim: int,
        max_seq_len: int,
        rope_theta: float,
        rope_scaling=None,
        use_qk_fused: bool = False,
        datatype=ttnn.bfloat16,
    ):
        super().__init__()
        self.device = device
        self.head_dim = head_dim
        self.batch_size = batch_size
        self.use_qk_fused = use_qk_fused
        on_mesh = isinstance(device, ttnn._ttnn.multi_device.MeshDevice)
        self.is_mesh_device, self.num_devices = on_mesh, (device.get_num_devices() if on_mesh else 1)
        # on a Galaxy the users are dealt out over the mesh columns
        galaxy = self.num_devices == 32
        mesh_cols = list(device.shape)[1] if galaxy else 1
        self.batch_size_per_device_group = max(batch_size // mesh_cols, 1) if galaxy else batch_size
        self.core_grid = device.compute_with_storage_grid_size()
        replicate = ttnn.ReplicateTensorToMesh(device) if self.is_mesh_device else None

        # row p of each table holds cos / sin for position p; decode gathers rows with ttnn.embedding
        tables = compute_gather_cos_sin(
            dhead=head_dim, end=2 * max_seq_len, theta=rope_theta, rope_scaling=rope_scaling
        )
        self.cos_matrix, self.sin_matrix = (
            ttnn.from_torch(
                table, device=device, dtype=datatype, layout=ttnn.ROW_MAJOR_LAYOUT, mesh_mapper=replicate
            )
            for table in tables
        )

        # decode: one core per user of the device group, each holding one tile
        self.batch_grid = ttnn.num_cores_to_corerangeset(
            self.batch_size_per_device_group, self.core_grid, row_wise=True
        )
        split_users = galaxy and batch_size > 1
        copies = batch_size if split_users else self.batch_size_per_device_group
        # one 32x32 rotation tile per user, stacked along the rows
        decode_trans = torch.cat([get_rot_transformation_mat(dhead=ttnn.TILE_SIZE)] * copies, dim=2)
        per_user_tile = ttnn.create_sharded_memory_config(
            shape=(ttnn.TILE_SIZE, ttnn.TILE_SIZE),
            core_grid=self.batch_grid,
            strategy=ttnn.ShardStrategy.HEIGHT,
            orientation=ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True,
        )
        decode_mapper = None
        if self.is_mesh_device:
            decode_mapper = ttnn.ShardTensor2dMesh(
                device, dims=(None, 2) if split_users else (None, None), mesh_shape=list(device.shape)
            )
        self.transformation_mat = ttnn.from_torch(
            decode_trans,
            device=device,
            dtype=datatype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=per_user_tile,
            mesh_mapper=decode_mapper,
        )

        # prefill: a single head_dim x head_dim matrix in DRAM, shared by every device
        self.transformation_mat_prefill = ttnn.from_torch(
            get_rot_transformation_mat(dhead=head_dim),
            device=device,
            dtype=datatype,
            layout=ttnn.TILE_LAYOUT,
            memory_config=ttnn.DRAM_MEMORY_CONFIG,
            mesh_mapper=replicate,
        )

    def get_both_trans_mats(self):
        """The transformation matrices keyed by mode, as the attention modules look them up."""
        mats = {"decode": self.transformation_mat, "prefill": self.transformation_mat_prefill}
        assert all(m is not None for m in mats.values()), "transformation matrices are missing"
        return mats

    def get_rot_idxs(self, position_idxs, on_host=False):
        """Positions [B] → uint32 [1, B padded to 32]; on a Galaxy each mesh column gets its users' positions."""
        assert isinstance(position_idxs, torch.Tensor) and position_idxs.dim() == 1, (
            "expected a 1-D torch tensor"
        )
        assert position_idxs.numel() == 0 or int(position_idxs.min()) >= 0, "positions must be >= 0"
        n_users = position_idxs.shape[0]
        row = position_idxs.reshape(1, n_users)

        if self.num_devices == 32 and n_users > 1:
            # the columns each take their slice of the users, unpadded
            mapper = ttnn.ShardTensor2dMesh(self.device, dims=(None, 1), mesh_shape=list(self.device.shape))
        else:
            row = torch.nn.functional.pad(row, (0, nearest_32(n_users) - n_users), value=0)
            mapper = ttnn.ReplicateTensorToMesh(self.device)
        if not self.is_mesh_device:
            mapper = None

        placement = {} if on_host else {"device": self.device, "memory_config": ttnn.DRAM_MEMORY_CONFIG}
        return ttnn.as_tensor(
            row, dtype=ttnn.uint32, layout=ttnn.ROW_MAJOR_LAYOUT, mesh_mapper=mapper, **placement
        )

    def get_rot_mats(self, position_idxs, return_rot_idxs=False):
        """cos / sin rows for each user's position, height-sharded one user per core: ``[cos, sin]``."""
        if isinstance(position_idxs, torch.Tensor):
            rot_idxs = self.get_rot_idxs(position_idxs)
        else:
            rot_idxs = position_idxs
            assert len(rot_idxs.shape) == 2 and rot_idxs.shape[0] == 1, (
                "device position indices must have shape [1, batch]"
            )
        if rot_idxs.device() != self.device:
            rot_idxs = ttnn.to_device(rot_idxs, self.device, memory_config=ttnn.DRAM_MEMORY_CONFIG)

        users = self.batch_size_per_device_group
        per_user_rows = ttnn.create_sharded_memory_config(
            shape=(ttnn.TILE_SIZE, self.head_dim),
            core_grid=self.batch_grid,
            strategy=ttnn.ShardStrategy.HEIGHT,
            orientation=ttnn.ShardOrientation.ROW_MAJOR,
            use_height_and_width_as_shard_shape=True,
        )
        rot_mats = []
        for table in (self.cos_matrix, self.sin_matrix):
            rows = ttnn.embedding(rot_idxs, table, layout=ttnn.TILE_LAYOUT)  # [1, users, head_dim]
            # put the users on dim 1 so each one becomes its own (padded) tile: [1, users, 1, head_dim]
            rows = ttnn.transpose(ttnn.unsqueeze_to_4D(rows), 1, 2)
            if users % ttnn.TILE_SIZE != 0:
                rows = rows[:, :users, :, :]  # drop the padding users
            rot_mats.append(ttnn.interleaved_to_sharded(rows, per_user_rows))
        return (rot_mats, rot_idxs) if return_rot_idxs else rot_mats
