"""Point-to-point transfer between (sub)meshes: how pipeline stages pass activations forward and gradients back.

``ttnn.experimental.send_recv(t, mesh_device)`` emulates a socket pair over the ethernet fabric: device ``i`` of
``t``'s mesh sends its shard to device ``i`` of ``mesh_device`` (row-major order), which receives it into a
buffer of its own. The two meshes have the same shape and no device in common (typically two submeshes of one
mesh, e.g. the devices of two pipeline stages). The received copy is a new tensor allocated on the receiving
devices — the transfer shows up in their device memory — with the sender's dtype, layout and distribution; the
sender keeps its tensor. Values are copied exactly. The backward sends the gradient back the same way.
"""

from __future__ import annotations

from .._remote import full_stored_shards
from ..device import MeshDevice
from ..errors import op_error
from ..memory import MemoryConfig
from ..placement import TensorTopology
from ..tensor import Tensor
from ._common import expect, expect_tensor, ttnn_op

__all__: list[str] = []
__experimental__ = ["send_recv"]
__transformer__: list[str] = []


@ttnn_op("ttnn.experimental.send_recv")
def send_recv(
    input_tensor: Tensor, mesh_device: MeshDevice, *, memory_config: MemoryConfig | None = None
) -> Tensor:
    """Send each device's shard of ``input_tensor`` to the matching device of ``mesh_device`` (see the module
    docstring); returns the received tensor, on ``mesh_device`` (``memory_config``: the sender's by default)."""
    op = "ttnn.experimental.send_recv"
    tensor = expect_tensor(op, "input_tensor", input_tensor)
    sender = tensor.device()
    if not isinstance(mesh_device, MeshDevice):
        raise op_error(
            op, "mesh_device", "a ttnn.MeshDevice (the receiving mesh)", type(mesh_device).__name__
        )
    expect(mesh_device.is_open, op, "mesh_device", "an open mesh", f"{mesh_device}, which is closed")
    expect(
        tuple(mesh_device.shape.as_2d()) == tuple(sender.shape.as_2d()),
        op,
        "mesh_device",
        f"a receiving mesh of the sender's shape {list(sender.shape)}",
        f"shape {list(mesh_device.shape)}",
    )
    shared = {id(d) for d in sender.get_devices()} & {id(d) for d in mesh_device.get_devices()}
    expect(
        not shared,
        op,
        "mesh_device",
        "a mesh with no device in common with the sender's (a send goes to other devices)",
        f"{mesh_device}, which shares {len(shared)} device(s) with {sender}",
    )
    if memory_config is not None and not isinstance(memory_config, MemoryConfig):
        raise op_error(op, "memory_config", "a ttnn.MemoryConfig", repr(memory_config))
    topology = tensor.tensor_topology()
    if topology is not None and tuple(topology.distribution_shape) == tuple(sender.shape):
        topology = TensorTopology(mesh_device.shape, tuple(topology.placements()))
    return Tensor(
        full_stored_shards(tensor, op),  # a device of another rank sends over MPI
        tensor.dtype,
        tensor.layout,
        mesh_device,
        memory_config or tensor.memory_config(),
        topology,
        padded_shape=tensor._padded_shape,
        what=op,
        quantized=True,
    )
