"""The ``tttv1`` side of equivalence tests: ModelArgs, converted state dicts and Hugging Face submodules of the
built-in catalogue models (seeded random weights, nothing downloaded). ``tttv1`` and torch are imported inside
the functions, so importing this file needs neither."""

from __future__ import annotations

import functools

__all__ = ["catalogue_hf_module", "catalogue_state_dicts", "tttv1_model_args"]


def tttv1_model_args(
    mesh_device, model_name: str, *, max_batch_size: int = 32, max_seq_len: int = 256, **kwargs
):
    """``tttv1.tt.model_config.ModelArgs`` of a catalogue model on ``mesh_device``."""
    from tttv1.tt.model_config import ModelArgs

    return ModelArgs(
        mesh_device, max_batch_size=max_batch_size, max_seq_len=max_seq_len, model_name=model_name, **kwargs
    )


@functools.cache
def _hf_state_dict(model_name: str, seed: int):
    from tttv1 import catalogue

    return catalogue.random_state_dict(model_name, seed=seed)


def catalogue_state_dicts(args, seed: int = 0) -> tuple[dict, dict]:
    """(Hugging Face state dict, tttv1's Meta-named state dict) of ``args``' catalogue model."""
    hf = _hf_state_dict(args.model_name, seed)
    return hf, args.load_state_dict(dict(hf))


def catalogue_hf_module(model_name: str, factory, prefix: str, seed: int = 0):
    """``factory(hf_config)`` (e.g. ``references.hf_mlp``) loaded with the catalogue weights under ``prefix``
    (e.g. ``"model.layers.0.mlp."``), float32, eval mode."""
    from tttv1 import catalogue

    module = factory(catalogue.hf_config(model_name))
    hf = _hf_state_dict(model_name, seed)
    weights = {k[len(prefix) :]: v for k, v in hf.items() if k.startswith(prefix)}
    module.load_state_dict(weights, strict=True)
    return module.float().eval()
