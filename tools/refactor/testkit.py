"""What the generated tests call: per module kind, how TTTv1 builds the module and feeds it, so that a generated
module can be run side by side with its TTTv1 original (outputs identical to the bit) and against the Hugging
Face module of its kind (PCC). It uses the library's own test helpers (``tttv2.testing``).

A generated test file holds its cases and three short tests; the knowledge of how TTTv1 calls each module
lives here, once. torch, transformers and tttv1 are imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tttv2 import ttnn
from tttv2.testing import assert_pcc
from tttv2.testing.cases import DECODE_ROWS, pcc_threshold
from tttv2.testing.host import to_host_rows

#: Catalogue models of the default case matrix (two per kind).
DEFAULT_MODELS = ("Llama-3.1-8B-tiny", "Qwen2.5-7B-tiny")
PREFILL_ROWS = 128


def load_generated(test_file: str, relative: str, class_name: str):
    """The class ``class_name`` of the generated module at ``relative`` (a path from the test file's folder)."""
    path = (Path(test_file).parent / relative).resolve()
    module = _exec_file(path, f"_tttv2_refactor_generated_{path.stem}_{abs(hash(str(path)))}")
    return getattr(module, class_name)


def load_legacy(test_file: str, relative: str, dotted: str, class_name: str):
    """The class ``class_name`` of the TTTv1 module the tests were generated from (``relative``: its path from
    the test file's folder): imported by its dotted name when that name resolves to this very file, else loaded
    from the file under a private name in the same package. Either way it is the input's own code, never a
    built-in module that happens to have the same file and class names."""
    path = (Path(test_file).parent / relative).resolve()
    if not path.is_file():
        raise ImportError(
            f"load_legacy: the TTTv1 module {path} (the input of tttv2-refactor) does not exist"
        )
    _tttv1()  # the ttnn import hook of TTTv1 modules
    module = _imported_as(dotted, path)
    if module is None:
        package = dotted.rpartition(".")[0]
        private = f"_tttv2_refactor_tttv1_{path.stem}_{abs(hash(str(path)))}"
        module = _exec_file(path, f"{package}.{private}" if package else private)
    if not isinstance(getattr(module, class_name, None), type):
        raise ImportError(f"load_legacy: {path} has no class {class_name}")
    return getattr(module, class_name)


def _imported_as(dotted: str, path: Path):
    """The module ``dotted`` when importing it gives the file ``path``, else None."""
    try:
        spec = importlib.util.find_spec(dotted)
    except (ImportError, ValueError):
        return None
    origin = getattr(spec, "origin", None)
    if not origin or not os.path.isfile(origin) or not os.path.samefile(origin, path):
        return None
    return importlib.import_module(dotted)


def _exec_file(path: Path, name: str):
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses resolve annotations through sys.modules
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return module


def assert_identical(expected, got, what: str = "output") -> None:
    """Same type, shape, dtype, memory config and the same bits on every device (lists element by element)."""
    if isinstance(expected, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), (
            f"{what}: {got!r} vs {expected!r}"
        )
        for i, (e, g) in enumerate(zip(expected, got)):
            assert_identical(e, g, f"{what}[{i}]")
        return
    if not isinstance(expected, ttnn.Tensor):
        assert got == expected, f"{what}: {got!r} != {expected!r}"
        return
    assert isinstance(got, ttnn.Tensor), f"{what}: expected a ttnn.Tensor, got {type(got).__name__}"
    assert list(got.shape) == list(expected.shape), (
        f"{what}: shape {list(got.shape)} != {list(expected.shape)}"
    )
    assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
    assert got.memory_config() == expected.memory_config(), f"{what}: memory config differs"
    for index, (e, g) in enumerate(zip(ttnn.get_device_tensors(expected), ttnn.get_device_tensors(got))):
        a, b = ttnn.to_numpy(e), ttnn.to_numpy(g)
        assert np.array_equal(a, b, equal_nan=True), f"{what}: device {index} differs"


def _tttv1():
    import tttv1

    return tttv1


@functools.lru_cache(maxsize=8)
def _args(mesh, model: str):
    from tttv2.testing.legacy import catalogue_state_dicts, tttv1_model_args

    _tttv1()
    args = tttv1_model_args(mesh, model, max_batch_size=1, max_seq_len=256)
    _, state_dict = catalogue_state_dicts(args)
    return args, state_dict


def _ccl(mesh):
    from tttv1.tt.ccl import TT_CCL

    return TT_CCL(mesh)


def _device(x: np.ndarray, mesh, *, memory_config=None, mapper=None):
    return ttnn.from_numpy(
        np.ascontiguousarray(x, dtype=np.float32),
        dtype=ttnn.bfloat16,
        layout=ttnn.TILE_LAYOUT,
        device=mesh,
        memory_config=memory_config or ttnn.DRAM_MEMORY_CONFIG,
        mesh_mapper=mapper or ttnn.ReplicateTensorToMesh(mesh),
    )


@dataclass
class Kit:
    """How TTTv1 builds, feeds and reads one kind of module."""

    kind: str
    tttv1_module: str  # the built-in TTTv1 module of this kind: it names the kind (see kind_of)
    tttv1_class: str
    models: tuple[str, ...] = DEFAULT_MODELS
    legacy: type | None = None  # the TTTv1 class under test (the codemod's input); None: the built-in one
    _built: dict = field(default_factory=dict, repr=False)

    # -- building ------------------------------------------------------------------------------
    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        raise NotImplementedError

    def legacy_class(self):
        if self.legacy is not None:
            return self.legacy
        _tttv1()
        return getattr(importlib.import_module(self.tttv1_module), self.tttv1_class)

    def pair(self, generated, mesh, model: str):
        """(ModelArgs, the TTTv1 module, the generated one) built from the same arguments; cached per mesh and
        model so that every mode of a case reuses them."""
        key = (id(mesh), model, generated)
        if key not in self._built:
            if len(self._built) > 4:
                self._built.clear()
            args, state_dict = _args(mesh, model)
            legacy = self.legacy_class()(**self.constructor_kwargs(mesh, args, state_dict))
            ours = generated.from_model_args(**self.constructor_kwargs(mesh, args, state_dict))
            self._built[key] = (mesh, args, legacy, ours)
        return self._built[key][1:]

    # -- running -------------------------------------------------------------------------------
    def calls(self, mesh, args, mode: str, seq_len: int):
        """Forward calls of one case: a list of (description, function making fresh (args, kwargs))."""
        raise NotImplementedError

    def assert_equivalent(self, generated, mesh, mode: str, seq_len: int, model: str) -> None:
        args, legacy, ours = self.pair(generated, mesh, model)
        for what, make in self.calls(mesh, args, mode, seq_len):
            call_args, call_kwargs = make()
            expected = legacy(*call_args, **call_kwargs)
            call_args, call_kwargs = make()
            got = ours(*call_args, **call_kwargs)
            assert_identical(expected, got, f"{self.kind} {mode} {what}")

    def assert_rejects(self, generated, mesh, other: str | None) -> None:
        """TTTv1's own constructor arguments for a mesh of the other topology: a ValueError naming ``other``."""
        import pytest

        args, state_dict = _args(mesh, DEFAULT_MODELS[0])
        with pytest.raises(ValueError, match=other or "mesh"):
            generated.from_model_args(**self.constructor_kwargs(mesh, args, state_dict))

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        raise NotImplementedError


class MLPKit(Kit):
    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return dict(
            mesh_device=mesh,
            tt_ccl=_ccl(mesh),
            args=args,
            state_dict=state_dict,
            weight_cache_path=None,
            layer_num=0,
            dtype=ttnn.bfloat8_b,
            model_config=args.get_model_config(),
        )

    def calls(self, mesh, args, mode: str, seq_len: int):
        x = np.random.default_rng(seq_len).standard_normal((1, 1, seq_len, args.dim)).astype(np.float32)
        return [(f"{seq_len} rows", lambda: ((self._input_from(x, args, mesh, mode), mode), {}))]

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        from tttv2.testing.legacy import catalogue_hf_module
        from tttv2.testing.references import hf_mlp, run_reference

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        rows = DECODE_ROWS if mode == "decode" else PREFILL_ROWS
        x = np.random.default_rng(5).standard_normal((1, 1, rows, args.dim)).astype(np.float32)
        out = module(self._input_from(x, args, mesh, mode), mode)
        reference = catalogue_hf_module(model, hf_mlp, "model.layers.0.mlp.")
        expected = run_reference(reference, x).reshape(rows, -1)
        assert_pcc(expected, _fractured_rows(out, args, rows), pcc_threshold("mlp"))

    def _input_from(self, x, args, mesh, mode):
        if args.is_galaxy:
            mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=args.cluster_shape)
            memory = args.model_config["MLP_ACT_MEMCFG"] if mode == "decode" else None
        else:
            mapper = None
            memory = args.model_config["SHARDED_MLP_INPUT_MEMCFG"] if mode == "decode" else None
        return _device(x, mesh, memory_config=memory, mapper=mapper)


def _rmsnorm_kwargs(mesh, args, state_dict, weight_key="attention_norm") -> dict:
    """TTTv1's decoder builds its norms this way (decoder.py, make_norm)."""
    return dict(
        device=mesh,
        dim=args.dim,
        eps=args.norm_eps,
        state_dict=state_dict,
        state_dict_prefix=args.get_state_dict_prefix("", 0),
        weight_key=weight_key,
        weight_cache_path=None,
        weight_dtype=ttnn.bfloat16,
        add_unit_offset=args.rms_norm_add_unit_offset,
        is_distributed=args.is_distributed_norm,
        sharded_program_config=args.model_config["SHARDED_NORM_ATTN_PRGM_CFG"],
        sharded_output_config=args.model_config["SHARDED_ATTN_INPUT_MEMCFG"],
        ccl_topology=args.ccl_topology(),
        tt_ccl=_ccl(mesh),
    )


def _activations(args, rows: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 1, rows, args.dim)).astype(np.float32)


def _fractured(x, args, mesh, memory_config=None):
    """The residual stream: split over the mesh columns along dim (replicated over galaxy rows)."""
    mapper = ttnn.ShardTensor2dMesh(mesh, dims=(None, 3), mesh_shape=args.cluster_shape)
    return _device(x, mesh, memory_config=memory_config, mapper=mapper)


class RMSNormKit(Kit):
    """RMSNorm as DistributedNorm drives it on 1-D meshes: the gathered row, sharded in decode."""

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return _rmsnorm_kwargs(mesh, args, state_dict)

    def calls(self, mesh, args, mode: str, seq_len: int):
        x = _activations(args, seq_len, seq_len + 1)
        decode = mode == "decode"
        if args.is_distributed_norm(mode):  # galaxy / wide prefill: the norm sees this device's slice

            def make():
                return (_fractured(x, args, mesh), mode), {}
        else:
            memory = args.model_config["SHARDED_ATTN_INPUT_MEMCFG"] if decode else None

            def make():
                return (_device(x, mesh, memory_config=memory), mode), {
                    "in_sharded": decode,
                    "out_sharded": decode,
                }

        return [(f"{seq_len} rows", make)]

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        from tttv2.testing.legacy import catalogue_hf_module
        from tttv2.testing.references import hf_rmsnorm, run_reference

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        rows = DECODE_ROWS if mode == "decode" else PREFILL_ROWS
        x = _activations(args, rows, 9)
        (call_args, call_kwargs) = next(iter(self.calls(mesh, args, mode, rows)))[1]()
        call_args = (_device(x, mesh, memory_config=call_args[0].memory_config()), mode)
        out = module(*call_args, **call_kwargs)
        reference = catalogue_hf_module(model, hf_rmsnorm, "model.layers.0.input_layernorm.")
        expected = run_reference(reference, x).reshape(rows, -1)
        got = np.asarray(ttnn.to_numpy(ttnn.get_device_tensors(out)[0]), np.float32)
        assert_pcc(expected, got.reshape(-1, got.shape[-1])[:rows], pcc_threshold("rmsnorm"))


class DistributedNormKit(Kit):
    """DistributedNorm around TTTv1's RMSNorm, fed the fractured residual stream."""

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        from tttv1.tt.rmsnorm import RMSNorm

        norm = RMSNorm(**_rmsnorm_kwargs(mesh, args, state_dict))
        return dict(norm=norm, args=args, tt_ccl=_ccl(mesh), TG=args.is_galaxy)

    def calls(self, mesh, args, mode: str, seq_len: int):
        x = _activations(args, seq_len, seq_len + 2)
        memory = args.model_config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else None
        return [(f"{seq_len} rows", lambda: ((_fractured(x, args, mesh, memory), mode), {}))]

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        from tttv2.testing.legacy import catalogue_hf_module
        from tttv2.testing.references import hf_rmsnorm, run_reference

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        rows = DECODE_ROWS if mode == "decode" else PREFILL_ROWS
        x = _activations(args, rows, 11)
        memory = args.model_config["DECODE_RESIDUAL_MEMCFG"] if mode == "decode" else None
        out = module(_fractured(x, args, mesh, memory), mode)
        reference = catalogue_hf_module(model, hf_rmsnorm, "model.layers.0.input_layernorm.")
        expected = run_reference(reference, x).reshape(rows, -1)
        got = _fractured_rows(out, args, rows) if args.is_galaxy else _replicated_rows(out, rows)
        assert_pcc(expected, got, pcc_threshold("rmsnorm"))


class EmbeddingKit(Kit):
    """Token ids [1, 1, 1, S] (uint32, replicated) to rows split over the mesh columns along dim."""

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return dict(
            mesh_device=mesh, args=args, weight_cache_path=None, state_dict=state_dict, dtype=ttnn.bfloat16
        )

    def _tokens(self, args, seq_len: int, seed: int) -> np.ndarray:
        return (
            np.random.default_rng(seed)
            .integers(0, args.vocab_size, size=(1, 1, 1, seq_len))
            .astype(np.uint32)
        )

    def _ids(self, tokens, mesh):
        return ttnn.from_numpy(
            tokens, dtype=ttnn.uint32, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh)
        )

    def calls(self, mesh, args, mode: str, seq_len: int):
        tokens = self._tokens(args, seq_len, seq_len + 3)
        return [(f"{seq_len} tokens", lambda: ((self._ids(tokens, mesh),), {}))]

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        tokens = self._tokens(args, PREFILL_ROWS, 13)
        out = ttnn.unsqueeze_to_4D(module(self._ids(tokens, mesh)))
        from tttv2.testing.legacy import catalogue_state_dicts

        hf, _ = catalogue_state_dicts(args)
        table = np.asarray(hf["model.embed_tokens.weight"].float().numpy(), np.float32)
        expected = table[tokens.reshape(-1)]
        assert_pcc(expected, _fractured_rows(out, args, PREFILL_ROWS), pcc_threshold("embedding"))


class LMHeadKit(Kit):
    """The LM head as TTTv1's model drives it: one 32-row tile of the final norm's output, in both modes."""

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return dict(
            args=args,
            mesh_device=mesh,
            tt_ccl=_ccl(mesh),
            dtype=ttnn.bfloat8_b,
            state_dict=state_dict,
            state_dict_prefix="",
            weight_cache_path=None,
            max_columns_per_device=args.max_columns_per_device_lm_head,
        )

    def _input(self, x, args, mesh, mode):
        head_input = args.model_config["LM_HEAD_INPUT_MEMCFG"]
        if args.is_galaxy:
            memory = head_input if (mode == "prefill" and head_input.is_sharded()) else None
            return _fractured(x, args, mesh, memory)
        return _device(x, mesh, memory_config=head_input)

    def calls(self, mesh, args, mode: str, seq_len: int):
        x = _activations(args, DECODE_ROWS, seq_len + 5)  # TTTv1 feeds the head one tile (model.py)
        return [("one tile", lambda: ((self._input(x, args, mesh, mode),), {"mode": mode}))]

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        from tttv2.testing.legacy import catalogue_state_dicts

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        x = _activations(args, DECODE_ROWS, 17)
        out = module(self._input(x, args, mesh, mode), mode=mode)
        hf, _ = catalogue_state_dicts(args)
        weight = hf.get("lm_head.weight", hf["model.embed_tokens.weight"])
        expected = x.reshape(DECODE_ROWS, -1) @ np.asarray(weight.float().numpy(), np.float32).T
        parts = [np.asarray(ttnn.to_numpy(p), np.float32) for p in ttnn.get_device_tensors(out)]
        if args.is_galaxy:
            columns = args.cluster_shape[1]
            parts = parts[::columns]  # mesh column 0: the vocab is split over the rows
        got = np.concatenate(parts, axis=-1).reshape(-1, parts[0].shape[-1] * len(parts))
        assert_pcc(expected, got[:DECODE_ROWS, : args.vocab_size], pcc_threshold("lm_head"))


@functools.lru_cache(maxsize=8)
def _rope(mesh, args):
    from tttv1.tt.rope import RotarySetup

    return RotarySetup(
        mesh, args.max_batch_size, args.head_dim, args.max_seq_len, args.rope_theta, args.rope_scaling
    )


class AttentionKit(Kit):
    """Attention as TTTv1's decoder calls it: prefill fills the KV cache, a decode step at the next position
    attends to it."""

    prompt = 40  # real tokens of the prefill; decode writes position 40

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return dict(
            mesh_device=mesh,
            tt_ccl=_ccl(mesh),
            args=args,
            state_dict=state_dict,
            weight_cache_path=None,
            layer_num=0,
            dtype=ttnn.bfloat8_b,
            transformation_mats=_rope(mesh, args).get_both_trans_mats(),
            configuration=args,
        )

    def _prefill(self, x, args, mesh, rows):
        import torch

        from tttv1.tt.common import get_prefill_rot_mat

        padded = np.zeros((1, 1, rows, args.dim), np.float32)
        padded[:, :, : x.shape[2]] = x
        rot = get_prefill_rot_mat(args.head_dim, mesh, rows, args.rope_theta, args.rope_scaling)
        del torch
        device_x = _fractured(padded, args, mesh) if args.is_galaxy else _device(padded, mesh)
        return (device_x, None, rot, 0, "prefill"), {}

    def _decode(self, x_row, args, mesh):
        import torch

        padded = np.zeros((1, 1, DECODE_ROWS, args.dim), np.float32)
        padded[:, :, :1] = x_row
        memory = None if args.is_galaxy else args.model_config["SHARDED_ATTN_INPUT_MEMCFG"]
        device_x = (
            _fractured(padded, args, mesh) if args.is_galaxy else _device(padded, mesh, memory_config=memory)
        )
        position = ttnn.from_torch(
            torch.tensor([self.prompt]),
            device=mesh,
            dtype=ttnn.int32,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        )
        rot = _rope(mesh, args).get_rot_mats(torch.tensor([self.prompt]))
        return (device_x, position, rot), {"mode": "decode"}

    def calls(self, mesh, args, mode: str, seq_len: int):
        x = _activations(args, self.prompt + 1, seq_len + 7)
        rows = seq_len if mode == "prefill" else PREFILL_ROWS
        out = [(f"prefill {rows} rows", lambda: self._prefill(x[:, :, : self.prompt], args, mesh, rows))]
        if mode == "decode":
            out.append(
                ("decode at the next position", lambda: self._decode(x[:, :, self.prompt :], args, mesh))
            )
        return out

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        """HF's attention of the whole sequence, causal: prefill rows, or (decode) the row of the new token."""
        import torch

        from tttv1 import catalogue
        from tttv2.testing.legacy import _hf_state_dict
        from tttv2.testing.references import _modeling, hf_rotary

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        x = _activations(args, self.prompt + 1, 23)
        config = catalogue.hf_config(model)
        config._attn_implementation = "sdpa"
        modeling, prefix = _modeling(config)
        reference = getattr(modeling, f"{prefix}Attention")(config, layer_idx=0)
        hf = _hf_state_dict(model, 0)
        weights = {
            k[len("model.layers.0.self_attn.") :]: v
            for k, v in hf.items()
            if k.startswith("model.layers.0.self_attn.")
        }
        reference.load_state_dict(weights, strict=True)
        reference = reference.float().eval()
        hidden = torch.as_tensor(x.reshape(1, self.prompt + 1, args.dim))
        positions = torch.arange(self.prompt + 1).reshape(1, -1)
        with torch.no_grad():
            cos_sin = hf_rotary(config)(hidden, positions)
            expected = (
                reference(hidden, position_embeddings=cos_sin, attention_mask=None)[0][0].float().numpy()
            )
        call_args, call_kwargs = self._prefill(x[:, :, : self.prompt], args, mesh, PREFILL_ROWS)
        out = module(*call_args, **call_kwargs)
        if mode == "prefill":
            got, want = _fractured_rows(out, args, self.prompt), expected[: self.prompt]
        else:
            call_args, call_kwargs = self._decode(x[:, :, self.prompt :], args, mesh)
            got, want = _fractured_rows(module(*call_args, **call_kwargs), args, 1), expected[self.prompt :]
        assert_pcc(want, got, pcc_threshold("attention"))


class DecoderKit(AttentionKit):
    """A whole TransformerBlock on the fractured residual stream: prefill, then a decode step."""

    def constructor_kwargs(self, mesh, args, state_dict) -> dict:
        return dict(
            args=args,
            mesh_device=mesh,
            tt_ccl=_ccl(mesh),
            dtype=ttnn.bfloat8_b,
            state_dict=state_dict,
            layer_num=0,
            weight_cache_path=None,
            transformation_mats=_rope(mesh, args).get_both_trans_mats(),
        )

    def _prefill(self, x, args, mesh, rows):
        from tttv1.tt.common import get_prefill_rot_mat

        padded = np.zeros((1, 1, rows, args.dim), np.float32)
        padded[:, :, : x.shape[2]] = x
        rot = get_prefill_rot_mat(args.head_dim, mesh, rows, args.rope_theta, args.rope_scaling)
        return (_fractured(padded, args, mesh), None, rot, 0, "prefill"), {}

    def _decode(self, x_row, args, mesh):
        import torch

        padded = np.zeros((1, 1, DECODE_ROWS, args.dim), np.float32)
        padded[:, :, :1] = x_row
        device_x = _fractured(padded, args, mesh, args.model_config["DECODE_RESIDUAL_MEMCFG"])
        position = ttnn.from_torch(
            torch.tensor([self.prompt]),
            device=mesh,
            dtype=ttnn.int32,
            mesh_mapper=ttnn.ReplicateTensorToMesh(mesh),
        )
        rot = _rope(mesh, args).get_rot_mats(torch.tensor([self.prompt]))
        return (device_x, position, rot), {"mode": "decode"}

    def assert_matches_hf(self, generated, mesh, mode: str, model: str) -> None:
        """HF's decoder layer on the whole sequence (causal): the prefill rows, or the new token's row."""
        import torch

        from tttv1 import catalogue
        from tttv2.testing.legacy import _hf_state_dict
        from tttv2.testing.references import _modeling, hf_rotary

        args, _state_dict = _args(mesh, model)
        module = self.pair(generated, mesh, model)[2]  # the module the equivalence cases of this mesh use
        x = _activations(args, self.prompt + 1, 29)
        config = catalogue.hf_config(model)
        config._attn_implementation = "sdpa"
        modeling, prefix = _modeling(config)
        reference = getattr(modeling, f"{prefix}DecoderLayer")(config, layer_idx=0)
        hf = _hf_state_dict(model, 0)
        weights = {k[len("model.layers.0.") :]: v for k, v in hf.items() if k.startswith("model.layers.0.")}
        reference.load_state_dict(weights, strict=True)
        reference = reference.float().eval()
        hidden = torch.as_tensor(x.reshape(1, self.prompt + 1, args.dim))
        positions = torch.arange(self.prompt + 1).reshape(1, -1)
        with torch.no_grad():
            cos_sin = hf_rotary(config)(hidden, positions)
            out = reference(hidden, position_embeddings=cos_sin, attention_mask=None)
            expected = (out[0] if isinstance(out, tuple) else out)[0].float().numpy()
        call_args, call_kwargs = self._prefill(x[:, :, : self.prompt], args, mesh, PREFILL_ROWS)
        result = module(*call_args, **call_kwargs)
        if mode == "prefill":
            got, want = _fractured_rows(result, args, self.prompt), expected[: self.prompt]
        else:
            call_args, call_kwargs = self._decode(x[:, :, self.prompt :], args, mesh)
            got, want = _fractured_rows(module(*call_args, **call_kwargs), args, 1), expected[self.prompt :]
        assert_pcc(want, got, pcc_threshold("attention"))


def _replicated_rows(out, rows: int) -> np.ndarray:
    got = np.asarray(ttnn.to_numpy(ttnn.get_device_tensors(out)[0]), np.float32)
    return got.reshape(-1, got.shape[-1])[:rows]


def _fractured_rows(out, args, rows: int) -> np.ndarray:
    """A residual-stream output (split over the mesh along dim; replicated over galaxy rows) as [rows, dim]."""
    if args.is_galaxy:
        parts = ttnn.get_device_tensors(out)
        columns = args.cluster_shape[1]
        full = np.concatenate([np.asarray(ttnn.to_numpy(p), np.float32) for p in parts[:columns]], axis=-1)
        return full.reshape(-1, full.shape[-1])[:rows]
    parts = [np.asarray(ttnn.to_numpy(p), np.float32) for p in ttnn.get_device_tensors(out)]
    full = np.concatenate(parts, axis=-1)
    return full.reshape(-1, full.shape[-1])[:rows]


KITS: dict[str, Kit] = {
    "mlp": MLPKit("mlp", "tttv1.tt.mlp", "MLP"),
    "mlp_legacy": MLPKit("mlp", "tttv1.tt.mlp_legacy", "MLP"),
    "rmsnorm": RMSNormKit("rmsnorm", "tttv1.tt.rmsnorm", "RMSNorm"),
    "distributed_norm": DistributedNormKit(
        "distributed_norm", "tttv1.tt.distributed_norm", "DistributedNorm"
    ),
    "embedding": EmbeddingKit("embedding", "tttv1.tt.embedding", "Embedding"),
    "lm_head": LMHeadKit("lm_head", "tttv1.tt.lm_head", "LMHead"),
    "attention": AttentionKit("attention", "tttv1.tt.attention", "Attention"),
    "decoder": DecoderKit(
        "decoder", "tttv1.tt.decoder", "TransformerBlock", models=("Mistral-7B-tiny", "Qwen2.5-7B-tiny")
    ),
}


def kit(name: str, legacy: type | None = None) -> Kit:
    """The recipe of a module kind; with ``legacy``, for that TTTv1 class (the codemod's input, see
    :func:`load_legacy`) instead of the built-in one: the kit only says how to build and feed it."""
    if name not in KITS:
        raise ValueError(f"testkit.kit: unknown module kind {name!r} (known: {', '.join(sorted(KITS))})")
    if legacy is None:
        return KITS[name]
    return dataclasses.replace(KITS[name], legacy=legacy, _built={})


def kind_of(module_path: Path, class_name: str) -> str | None:
    """The kit of a TTTv1 module, from its file and class (None when the codemod has no test recipe)."""
    stem = module_path.stem
    for name, k in KITS.items():
        if k.tttv1_module.rsplit(".", 1)[-1] == stem and k.tttv1_class == class_name:
            return name
    return None


__all__ = [
    "KITS",
    "Kit",
    "assert_identical",
    "kind_of",
    "kit",
    "load_generated",
    "load_legacy",
    "to_host_rows",
]
