"""The Llama-3 70B Galaxy demo's fused collectives (issue 21, item 6) in our own fixtures: ``inputs/rfused/``
writes an MLP and the attention's value path in the demo's style (a CCL object owning semaphores and persistent
buffers, ``llama_rs_matmul`` / ``llama_reduce_scatter`` / ``all_reduce_async`` / ``llama_rs_create_heads`` /
``all_gather_concat`` in decode, ``reduce_scatter_async`` / ``all_gather_async`` in prefill). Each transforms with no
gap, and the generated module equals TTTv1 bit for bit on an emulated 8x4 mesh in decode (32 users) and prefill
(128 rows), each module with its own CCL object; TTTv1's output is checked against a torch reference too."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.tools.refactor.conftest import InputPackage, assert_identical, generated_class, importable_inputs
from tttv2 import ttnn
from tttv2_tools.refactor import generate

INPUTS = Path(__file__).parent / "inputs"
PACKAGE = "rfused"
inputs_importable = importable_inputs(PACKAGE)
_tttv1 = InputPackage(PACKAGE).tttv1
ROWS = {"decode": 32, "prefill": 128}


def _weights(args):
    g = torch.Generator().manual_seed(5)
    shapes = {
        "feed_forward.w1": (args.hidden_dim, args.dim),
        "feed_forward.w3": (args.hidden_dim, args.dim),
        "feed_forward.w2": (args.dim, args.hidden_dim),
        "attention.wq": (args.n_heads * args.head_dim, args.dim),
        "attention.wk": (args.n_kv_heads * args.head_dim, args.dim),
        "attention.wv": (args.n_kv_heads * args.head_dim, args.dim),
        "attention.wo": (args.dim, args.n_heads * args.head_dim),
    }
    return {f"layers.0.{k}.weight": torch.randn(s, generator=g) * 0.03 for k, s in shapes.items()}


def _input(mesh, args, mode, values):
    memory_config = args.model_config["FF_IN_MEMCFG"] if mode == "decode" else ttnn.DRAM_MEMORY_CONFIG
    return ttnn.from_torch(
        values,
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config,
        mesh_mapper=ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=args.cluster_shape),
    )


def _reference(module, sd, x):
    if module == "fused_mlp":
        w = {n: sd[f"layers.0.feed_forward.{n}.weight"] for n in ("w1", "w2", "w3")}
        return (torch.nn.functional.silu(x @ w["w1"].T) * (x @ w["w3"].T)) @ w["w2"].T
    return (x @ sd["layers.0.attention.wq.weight"].T) @ sd["layers.0.attention.wo.weight"].T


@pytest.mark.parametrize(
    ("module", "class_name"), [("fused_mlp", "TtFusedMLP"), ("fused_heads", "TtFusedHeads")]
)
def test_galaxy_fused_module_matches_tttv1_on_8x4(tmp_path, module, class_name):
    result = generate(INPUTS / PACKAGE / f"{module}.py", INPUTS / PACKAGE / "model_config.py")
    assert result.gaps == []
    generated = generated_class(result, result.modules[0].topology, tmp_path)
    tttv1 = _tttv1(module, class_name)
    model_args, fused_ccl = _tttv1("model_config", "ModelArgs"), _tttv1("fused_ccl", "FusedCCL")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
    try:
        args = model_args(mesh)
        sd = _weights(args)
        for mode, rows in ROWS.items():
            old = tttv1(mesh, args, sd, tt_ccl=fused_ccl(mesh, args, mode))
            new = generated.from_model_args(mesh, args, sd, tt_ccl=fused_ccl(mesh, args, mode))
            values = torch.from_numpy(
                np.random.default_rng(rows).standard_normal((1, 1, rows, args.dim)).astype(np.float32)
            )
            expected = old.forward(_input(mesh, args, mode, values), mode)
            assert_identical(expected, new.forward(_input(mesh, args, mode, values), mode), f"8x4 {mode}")
            got = ttnn.to_torch(
                expected,
                mesh_composer=ttnn.ConcatMesh2dToTensor(mesh, dims=(1, 3), mesh_shape=args.cluster_shape),
            )[:, :1].float()
            ref = _reference(module, sd, values)
            assert torch.corrcoef(torch.stack([got.flatten(), ref.flatten()]))[0, 1] > 0.999, (
                f"{module} {mode}"
            )
    finally:
        ttnn.close_mesh_device(mesh)


def test_galaxy_mlp_hands_the_prefetcher_its_loaded_weights(tmp_path):
    """The demo's modules hand the prefetcher their weights in ``__init__``, and it reads each one's device
    address. The generated ``from_model_args`` hands it the device tensors at that point, as TTTv1 does (it handed
    it unloaded LazyWeights: ``AttributeError: buffer_address``), and the forwards then use those same tensors."""
    result = generate(INPUTS / PACKAGE / "fused_mlp.py", INPUTS / PACKAGE / "model_config.py")
    assert result.gaps == []
    generated = generated_class(result, result.modules[0].topology, tmp_path)
    tttv1 = _tttv1("fused_mlp", "TtFusedMLP")
    model_args, fused_ccl = _tttv1("model_config", "ModelArgs"), _tttv1("fused_ccl", "FusedCCL")
    prefetcher_setup = _tttv1("prefetcher", "PrefetcherSetup")
    mesh = ttnn.open_mesh_device(ttnn.MeshShape(8, 4))
    try:
        args = model_args(mesh)
        sd = _weights(args)
        old_setup, new_setup = prefetcher_setup(mesh, 3), prefetcher_setup(mesh, 3)
        old = tttv1(mesh, args, sd, tt_ccl=fused_ccl(mesh, args, "decode"), prefetcher_setup=old_setup)
        new = generated.from_model_args(
            mesh, args, sd, tt_ccl=fused_ccl(mesh, args, "decode"), prefetcher_setup=new_setup
        )
        values = torch.from_numpy(
            np.random.default_rng(3).standard_normal((1, 1, 32, args.dim)).astype(np.float32)
        )
        expected = old.forward(_input(mesh, args, "decode", values), "decode")
        assert_identical(expected, new.forward(_input(mesh, args, "decode", values), "decode"), "8x4 decode")
        for setup, module in ((old_setup, old), (new_setup, new)):
            # in TTTv1's order, and the very tensors the forward reads
            assert setup.get_tensor_addrs() == [
                module.w1.buffer_address(),
                module.w3.buffer_address(),
                module.w2.buffer_address(),
            ]
            assert [t is w for t, w in zip(setup.tensors, (module.w1, module.w3, module.w2))] == [True] * 3
        # prefill: no prefetch, the weights stay lazy until the first forward
        plain = generated.from_model_args(mesh, args, sd, tt_ccl=fused_ccl(mesh, args, "prefill"))
        assert not plain.config.w1.is_loaded()
    finally:
        ttnn.close_mesh_device(mesh)


def test_construction_reads_of_a_stored_weight_are_the_device_tensor():
    """In from_model_args, a weight attribute handed to a call or read through is the device tensor; storing it,
    converting it and every other attribute keep what they are."""
    import libcst as cst

    from tttv2_tools.refactor.emit import materialise_reads

    src = (
        "legacy.w1 = _lazy_weight(t)\n"
        "setup.insert_tensor(legacy.w1)\n"
        "setup.insert_tensor(tensor=legacy.w2)\n"
        "width = legacy.w1.shape[-1]\n"
        "legacy.alias = legacy.w1\n"
        "legacy.ws.append(legacy.w1)\n"
        "both = list((legacy.w1, legacy.w2))\n"
        "loaded = _on_device(legacy.w1)\n"
        "setup.insert_tensor(legacy.dim)\n"
        "n = legacy.dim.bit_length()\n"
    )
    out = cst.Module(body=materialise_reads(list(cst.parse_module(src).body), {"w1", "w2"})).code
    assert out.splitlines() == [
        "legacy.w1 = _lazy_weight(t)",
        "setup.insert_tensor(_on_device(legacy.w1))",
        "setup.insert_tensor(tensor=_on_device(legacy.w2))",
        "width = _on_device(legacy.w1).shape[-1]",
        "legacy.alias = legacy.w1",
        "legacy.ws.append(legacy.w1)",
        "both = list((legacy.w1, legacy.w2))",
        "loaded = _on_device(legacy.w1)",
        "setup.insert_tensor(legacy.dim)",
        "n = legacy.dim.bit_length()",
    ]
    # no weights and no lazy locals: the statements as they are
    plain = list(cst.parse_module("f(legacy.w1)\n").body)
    assert materialise_reads(plain) == plain
