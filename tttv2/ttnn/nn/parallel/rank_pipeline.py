"""Pipeline parallelism across ranks: ``RankPipeline(stages, mesh_device, micro_batches=M, schedule=...)``, one
stage per rank (docs/distributed.md).

Every rank builds the same stages (e.g. ``pipeline_stages(model, N)`` with the same seed) and keeps stage
``rank``: its parameters move to the rank's own mesh, the other stages are dropped. Activations go to the next
rank and their gradients come back over ``ttnn.MeshSocket`` pairs (one per direction between neighbours, built
in stage order), each device of a rank's mesh linked to the same device of its neighbour's mesh.

``forward_backward(inputs, targets)`` runs this rank's steps of the GPipe or 1F1B schedule
(:func:`~tttv2.ttnn.nn.parallel.pipeline.schedule_steps`) in order, receiving what a step needs when it needs
it; sends do not wait. Every rank passes the whole batch (only the first stage reads the inputs, only the last
the targets) and every rank returns the mean loss. The arithmetic of each stage is the single-process
:class:`~tttv2.ttnn.nn.parallel.Pipeline`'s, and the transfers copy bits, so N ranks train bit for bit like a
one-process Pipeline of N stages (tests/distributed/test_pipeline_ranks.py).
"""

from __future__ import annotations

import numpy as np

from .... import ttnn
from ....distributed import _mpi
from ...autograd import no_grad
from ...device import MeshCoordinate
from ...errors import ValidationError
from ...memory import CoreCoord
from ...tensor import Tensor
from ...types import BufferType
from ..module import Module
from ..utils import item
from .pipeline import Pipeline, _place, _to_mesh, checked_arguments, schedule_steps

__all__ = ["RankPipeline"]

FIFO_BYTES = 1 << 20  # a 1 MiB DRAM FIFO per socket: pages of any activation fit


class RankPipeline(Module):
    """One stage of a pipeline whose stages run in the ranks 0..N-1 (see the module docstring). ``stages``: all N
    stages (every rank builds them the same way); ``mesh_device``: this rank's mesh. Build the optimizer
    afterwards: ``parameters()`` are this rank's stage's."""

    def __init__(
        self,
        stages,
        mesh_device,
        micro_batches: int = 1,
        schedule: str = "gpipe",
        *,
        loss_fn=None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.RankPipeline"
        mesh, stages = checked_arguments(owner, stages, mesh_device, micro_batches, schedule)
        rank, size = int(ttnn.distributed_context_get_rank()), int(ttnn.distributed_context_get_size())
        if len(stages) != size:
            raise ValidationError(
                f"{owner}: stages: expected one stage per rank, got {len(stages)} stages for {size} rank(s) (start "
                f"the program with tttv2-run --np {len(stages)})"
            )
        self.mesh = mesh
        self.stage_index, self.num_stages = rank, size
        self.micro_batches, self.schedule = micro_batches, schedule
        self.loss_fn = loss_fn if loss_fn is not None else ttnn.cross_entropy_loss
        _place(owner, stages[rank], mesh, rank, {})
        self.stage = stages[rank]
        self.last_losses: list[float] = []
        self._sockets = self._connect()

    def _connect(self) -> dict:
        """The sockets this rank holds: ``forward_in``/``forward_out`` (activations) and ``backward_in``/
        ``backward_out`` (their gradients), built boundary by boundary in stage order on both sides."""
        links = [
            ttnn.SocketConnection(
                ttnn.MeshCoreCoord(c, CoreCoord(0, 0)), ttnn.MeshCoreCoord(c, CoreCoord(0, 0))
            )
            for c in (MeshCoordinate(r, k) for r, k in np.ndindex(*self.mesh.shape.as_2d()))
        ]
        memory = ttnn.SocketMemoryConfig(BufferType.DRAM, FIFO_BYTES)
        sockets = {}
        me = self.stage_index
        for left in (me - 1, me):  # the boundary before this stage, then the one after it
            if left < 0 or left + 1 >= self.num_stages:
                continue
            right = left + 1
            forward = ttnn.MeshSocket(self.mesh, ttnn.SocketConfig(links, memory, left, right))
            backward = ttnn.MeshSocket(self.mesh, ttnn.SocketConfig(links, memory, right, left))
            if me == left:
                sockets["forward_out"], sockets["backward_in"] = forward, backward
            else:
                sockets["forward_in"], sockets["backward_out"] = forward, backward
        return sockets

    def forward_backward(self, inputs, targets) -> float:
        """One training step's forward and backward of this rank's stage over M micro-batches; returns the mean
        loss over the batch (on every rank). Gradients add into ``.grad`` (zero them before, step after)."""
        owner = "ttnn.nn.parallel.RankPipeline.forward_backward"
        xs = Pipeline._split(self, owner, "inputs", inputs)
        ys = Pipeline._split(self, owner, "targets", targets)
        if len(xs[0]) != len(ys[0]):
            raise ValidationError(
                f"{owner}: targets: expected the batch size of inputs ({len(xs[0]) * self.micro_batches}), got "
                f"{len(ys[0]) * self.micro_batches}"
            )
        s, last = self.stage_index, self.num_stages - 1
        received: dict[int, Tensor] = {}
        outputs: dict[int, Tensor] = {}
        losses = np.zeros(self.micro_batches, dtype=np.float64)
        for kind, m in schedule_steps(self.schedule, self.num_stages, self.micro_batches)[s]:
            if kind == "F":
                if s == 0:
                    x = _to_mesh(np.asarray(xs[m]), self.mesh)
                else:
                    with no_grad():
                        x = self._sockets["forward_in"]._receive_new(owner)
                    x.requires_grad = True
                    received[m] = x
                out = self.stage(x)
                if s == last:
                    loss = self.loss_fn(out, _to_mesh(np.asarray(ys[m]), self.mesh))
                    losses[m] = item(loss)
                    outputs[m] = ttnn.multiply(loss, 1.0 / self.micro_batches)
                else:
                    outputs[m] = out
                    with no_grad():
                        ttnn.experimental.send_async(out, self._sockets["forward_out"])
            else:
                out = outputs.pop(m)
                if s == last:
                    out.backward()
                else:
                    with no_grad():
                        grad = self._sockets["backward_in"]._receive_new(owner)
                    out.backward(grad)
                x = received.pop(m, None)
                if s > 0:
                    with no_grad():
                        ttnn.experimental.send_async(x.grad, self._sockets["backward_out"])
        for socket in self._sockets.values():  # every send of this step was taken
            if socket.get_socket_endpoint_type() is ttnn.SocketEndpoint.SENDER:
                socket.synchronize()
        if self.num_stages > 1:  # the last stage's losses, to every rank
            gathered = _mpi.allgather_bytes(losses.view(np.uint8), f"{owner}: the losses of the last stage")
            losses = gathered[last].view(np.float64)
        self.last_losses = [float(v) for v in losses]
        return float(np.mean(self.last_losses))

    def forward(self, x):
        raise ValidationError(
            "ttnn.nn.parallel.RankPipeline: a stage runs only inside forward_backward (one stage per rank)"
        )

    def extra_repr(self) -> str:
        return (
            f"stage {self.stage_index} of {self.num_stages} on {'x'.join(map(str, self.mesh.shape))}, "
            f"micro_batches={self.micro_batches}, schedule={self.schedule}"
        )
