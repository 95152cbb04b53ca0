"""The emulator's layers (docs/emulator.md, "Layers"): lower modules reach higher ones only through
tttv2/ttnn/_upcalls.py, never by an import."""

from __future__ import annotations

import pytest

from tttv2 import ttnn
from tttv2.ttnn import _upcalls
from tttv2.ttnn.errors import ValidationError


def test_upcall_names_a_function_no_layer_provided():
    with pytest.raises(
        ValidationError, match=r"'no_such_op' is provided by a layer that has not been loaded"
    ):
        _upcalls.upcall("no_such_op")


def test_tensor_methods_reach_the_functions_the_upper_layers_provided():
    assert _upcalls.upcall("add") is ttnn.add
    assert _upcalls.upcall("to_torch") is ttnn.to_torch
    assert _upcalls.upcall("run_backward") is ttnn.autograd.engine.run_backward
    assert _upcalls.upcall("complete_sends") is ttnn.ops.sockets.complete_sends


def test_tttv2_distributed_loads_its_training_helper_on_first_use_and_names_a_missing_attribute():
    import tttv2.distributed as distributed
    from tttv2.distributed import _training

    assert distributed.all_reduce_gradients_ is _training.all_reduce_gradients_
    with pytest.raises(AttributeError, match=r"module 'tttv2.distributed' has no attribute 'no_such_name'"):
        distributed.no_such_name  # noqa: B018
