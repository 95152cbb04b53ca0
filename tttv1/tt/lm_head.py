"""The output projection (G3 style: ``args.get_lm_head_*`` methods, ``Mode`` enum, optional prefetcher).

The vocab is padded so every device gets whole tiles and split into chunks of at most
``max_columns_per_device`` columns (one DRAM-sharded matmul each). On a Galaxy the weight is split 2-D
(vocab over rows, dim over columns) and the column partial sums are all-reduced.
"""

from __future__ import annotations

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

        size_per_device = self.padded_vocab_size // (
            args.cluster_shape[0] if args.is_galaxy else self.num_devices
        )
        num_splits = math.ceil(size_per_device / max_columns_per_device)

        split_sizes = [min(size_per_device, max_columns_per_device)] * (num_splits - 1)
        split_sizes.append(size_per_device - sum(split_sizes))  # remaining columns

        # Split the output weights
        torch_output_weights = state_dict[f"{state_dict_prefix}output.weight"].permute(1, 0)
        if self.padded_vocab_size != self.vocab_size:
            torch_output_weights = torch.nn.functional.pad(
                torch_output_weights, (0, self.padded_vocab_size - self.vocab_size), "constant", 0
            )

        self.output_weights = []
        if args.is_galaxy:
            cache_file_name = (
                None
                if args.dummy_weights or weight_cache_path is None
                else weight_cache_path / "output_weight_2d"
            )
            self.output_weights.append(  # (2k, 16k) 128* 1024
                ttnn.as_tensor(
                    torch_output_weights.unsqueeze(0).unsqueeze(0),
                    dtype=dtype,
                    device=mesh_device,
                    mesh_mapper=ttnn.ShardTensor2dMesh(
                        mesh_device, dims=(3, 2), mesh_shape=args.cluster_shape
                    ),
                    layout=ttnn.TILE_LAYOUT,
                    memory_config=ttnn.DRAM_MEMORY_CONFIG,
                    cache_file_name=cache_file_name,
                )
            )
            split_sizes = [size_per_device]
        else:
            for i, split_size in enumerate(split_sizes):
                # Create a list to store the split tensors for each device
                device_splits = []
                for device in range(self.num_devices):
                    start = device * size_per_device + sum(split_sizes[:i])
                    end = start + split_size
                    device_splits.append(torch_output_weights[:, start:end])

                # Concatenate the splits from all devices
                combined_split = torch.cat(device_splits, dim=-1)

                cache_file_name = (
                    None
                    if args.dummy_weights or weight_cache_path is None
                    else weight_cache_path
                    / f"output_lm_head_{num_splits}_split_shard_{i}_{combined_split.shape[-1]}"
                )
                memory_config = args.create_dram_sharded_mem_config(
                    k=args.dim, n=math.ceil(combined_split.shape[-1] / self.num_devices)
                )
                self.output_weights.append(
                    ttnn.as_tensor(
                        combined_split,
                        device=mesh_device,
                        mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=-1),
                        layout=ttnn.TILE_LAYOUT,
                        dtype=dtype,
                        memory_config=memory_config,
                        cache_file_name=cache_file_name,
                    )
                )

        self.compute_kernel_config = ttnn.WormholeComputeKernelConfig(
            math_fidelity=ttnn.MathFidelity.HiFi2,
            math_approx_mode=False,
            fp32_dest_acc_en=False,
            packer_l1_acc=True,
        )
        self.program_configs = [
            args.get_lm_head_program_config(split_size, self.prefetcher) for split_size in split_sizes
        ]

    def forward(self, x: ttnn.Tensor, mode=Mode.DECODE):
        if isinstance(mode, str):
            mode = Mode(mode)
        outputs = []
        for weight, pc in zip(self.output_weights, self.program_configs):
            output = ttnn.linear(
                x,
                weight,
                compute_kernel_config=self.compute_kernel_config,
                program_config=pc,
                memory_config=self.args.get_lm_head_sharded_output_mem_config(self.prefetcher),
                dtype=self.args.lm_head_dtype or ttnn.bfloat8_b,
            )
            if output.is_sharded():
                output = ttnn.sharded_to_interleaved(
                    output, memory_config=self.args.get_lm_head_output_mem_config(mode, self.prefetcher)
                )
            outputs.append(output)

        # Concatenate the outputs
        output = ttnn.concat(
            outputs, dim=-1, memory_config=self.args.get_lm_head_output_mem_config(mode, self.prefetcher)
        )

        output = tt_all_reduce(
            output,
            mesh_device=self.mesh_device,
            tt_ccl=self.tt_ccl,
            cluster_axis=1,
            dim=3 if self.args.is_galaxy else 0,
            num_reduce_scatter_links=self.args.num_reduce_scatter_links,
            num_all_gather_links=self.args.num_all_gather_links,
            memory_config=ttnn.L1_MEMORY_CONFIG if mode == Mode.DECODE else ttnn.DRAM_MEMORY_CONFIG,
            dtype=self.args.lm_head_dtype or self.args.ccl_dtype,  # logits leave the device: keep their dtype
            sharded=False,
            use_composite=True,
        )

        return output
