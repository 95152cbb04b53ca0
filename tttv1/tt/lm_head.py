"""The output projection (G3 style: ``args.get_lm_head_*`` methods, ``Mode`` enum, optional prefetcher).

The vocab is padded so every device gets whole tiles and split into chunks of at most
``max_columns_per_device`` columns (one DRAM-sharded matmul each). On a Galaxy the weight is split 2-D
(vocab over rows, dim over columns) and the column partial sums are all-reduced.
"""

from __future__ import annotations

import itertools
import math

import torch
import ttnn

from tttv1.common.lightweightmodule import LightweightModule
from tttv1.tt.ccl import tt_all_reduce
from tttv1.tt.common import Mode


class LMHead(LightweightModule):
    def __init__(
        self,
        args,
        mesh_device,
        tt_ccl,
        dtype,
        state_dict,
        state_dict_prefix,
        weight_cache_path,
        max_columns_per_device,
        prefetcher=None,
    ):
        super().__init__()
        self.args = args
        self.mesh_device = mesh_device
        self.tt_ccl = tt_ccl
        self.dtype = dtype
        self.vocab_size = args.vocab_size
        self.padded_vocab_size = args.padded_vocab_size
        self.num_devices = args.num_devices
        self.prefetcher = prefetcher

        # each device (each mesh row on a Galaxy) owns an equal run of the padded vocab, cut into column chunks
        owners = args.cluster_shape[0] if args.is_galaxy else self.num_devices
        size_per_device = self.padded_vocab_size // owners
        num_splits = math.ceil(size_per_device / max_columns_per_device)
        chunk_width = min(size_per_device, max_columns_per_device)
        split_sizes = [chunk_width] * (num_splits - 1) + [size_per_device - chunk_width * (num_splits - 1)]

        # [vocab, dim] -> [dim, padded vocab]
        weight = state_dict[f"{state_dict_prefix}output.weight"].T
        extra_rows = self.padded_vocab_size - self.vocab_size
        if extra_rows:
            weight = torch.cat([weight, weight.new_zeros(weight.shape[0], extra_rows)], dim=-1)
        cached = not args.dummy_weights and weight_cache_path is not None

        if args.is_galaxy:
            # one 2-D sharded weight: vocab over the mesh rows, dim over the columns
            self.output_weights = [
                ttnn.as_tensor(
                    weight[None, None],
                    dtype=dtype,
                    layout=ttnn.TILE_LAYOUT,
                    device=mesh_device,
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    mesh_mapper=ttnn.ShardTensor2dMesh(
                        mesh_device, dims=(3, 2), mesh_shape=args.cluster_shape
                    ),
                    cache_file_name=weight_cache_path / "output_weight_2d" if cached else None,
                )
            ]
            split_sizes = [size_per_device]
        else:
            self.output_weights = [
                self._upload_chunk(
                    weight, size_per_device, offset, width, num_splits, index, cached, weight_cache_path
                )
                for index, (offset, width) in enumerate(
                    zip(itertools.accumulate([0, *split_sizes[:-1]]), split_sizes)
                )
            ]

        self.compute_kernel_config = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2,
            math_approx_mode=False,
            fp32_dest_acc_en=False,
            packer_l1_acc=True,
        )
        self.program_configs = [
            args.get_lm_head_program_config(width, self.prefetcher) for width in split_sizes
        ]

    def _upload_chunk(
        self, weight, size_per_device, offset, width, num_splits, index, cached, weight_cache_path
    ):
        """Chunk ``index``: columns [offset, offset + width) of every device's vocab run, laid side by side so that
        sharding the last dim over the devices hands each its own columns."""
        pieces = [
            weight[:, device * size_per_device + offset : device * size_per_device + offset + width]
            for device in range(self.num_devices)
        ]
        chunk = torch.cat(pieces, dim=-1)
        total = chunk.shape[-1]
        return ttnn.as_tensor(
            chunk,
            dtype=self.dtype,
            layout=ttnn.TILE_LAYOUT,
            device=self.mesh_device,
            memory_config=self.args.create_dram_sharded_mem_config(
                k=self.args.dim, n=math.ceil(total / self.num_devices)
            ),
            mesh_mapper=ttnn.ShardTensorToMesh(self.mesh_device, dim=-1),
            cache_file_name=weight_cache_path / f"lm_head_chunk{index}_of{num_splits}_{total}"
            if cached
            else None,
        )

    def forward(self, x: ttnn.Tensor, mode=Mode.DECODE):
        if isinstance(mode, str):
            mode = Mode(mode)
        interleaved_out = self.args.get_lm_head_output_mem_config(mode, self.prefetcher)
        pieces = []
        for weight, program_config in zip(self.output_weights, self.program_configs):
            piece = ttnn.linear(
                x,
                weight,
                program_config=program_config,
                compute_kernel_config=self.compute_kernel_config,
                memory_config=self.args.get_lm_head_sharded_output_mem_config(self.prefetcher),
                dtype=self.args.lm_head_dtype or ttnn.bfloat8_b,
            )
            pieces.append(
                ttnn.sharded_to_interleaved(piece, memory_config=interleaved_out)
                if piece.is_sharded()
                else piece
            )
        logits = ttnn.concat(pieces, dim=-1, memory_config=interleaved_out)

        # sum the partial products over mesh axis 1 (on a Galaxy that axis split the dim)
        return tt_all_reduce(
            logits,
            mesh_device=self.mesh_device,
            tt_ccl=self.tt_ccl,
            cluster_axis=1,
            dim=3 if self.args.is_galaxy else 0,
            sharded=False,
            use_composite=True,
            memory_config=ttnn.L1_MEMORY_CONFIG if mode == Mode.DECODE else ttnn.DRAM_MEMORY_CONFIG,
            dtype=self.args.lm_head_dtype or self.args.ccl_dtype,  # the logits leave the device in this dtype
            num_reduce_scatter_links=self.args.num_reduce_scatter_links,
            num_all_gather_links=self.args.num_all_gather_links,
        )
