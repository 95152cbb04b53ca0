"""Pipeline parallelism: ``Pipeline(stages, mesh_device, micro_batches=M, schedule="gpipe"|"1f1b")``.

The mesh is cut into as many equal submeshes as there are stages (along the columns, else the rows); stage i's
parameters move to submesh i (replicated over its devices). Activations go forward and their gradients back
with the emulated point-to-point transfer ``ttnn.experimental.send_recv``, so every in-flight activation and
gradient occupies memory on the device that holds it.

``forward_backward(inputs, targets)`` splits the batch into M micro-batches and runs each stage's forward and
backward passes in the order of the schedule, then returns the mean loss; the gradients are those of the mean
loss over the whole batch (each micro-batch's loss is scaled by 1/M), so an optimizer step afterwards equals the
single-device step on the same batch.

* ``"gpipe"``: every stage runs the M forwards, then the M backwards. A stage keeps the activations of all M
  micro-batches at once.
* ``"1f1b"`` (PipeDream-flush): stage s runs ``S - 1 - s`` forwards to fill the pipe, then alternates one
  forward and one backward, then drains. A stage keeps at most ``S - s`` micro-batches of activations, so its
  peak memory is lower than GPipe's when M > S - s.

The emulator runs the stages one after another: in each round every stage takes its next step if what it needs
has arrived (a lock-step emulation of the concurrent pipeline); each device's memory follows its own stage.
``pipeline(inputs)`` runs a plain forward through all stages (the gradient flows back through ``send_recv``'s
backward rule), e.g. for evaluation.
"""

from __future__ import annotations

import numpy as np

from .... import ttnn
from ...autograd import no_grad
from ...device import MeshDevice
from ...distribution import from_numpy, to_numpy
from ...errors import ValidationError
from ...placement import PlacementReplicate
from ...tensor import Tensor
from ...types import DataType, Layout
from ..attention import RotaryEmbedding
from ..models import GPT, Llama, _LanguageModel
from ..module import Module, ModuleList, Parameter
from ..utils import item
from ._mesh import mesh_of

__all__ = ["Pipeline", "pipeline_stages", "schedule_steps"]

SCHEDULES = ("gpipe", "1f1b")


def schedule_steps(schedule: str, num_stages: int, micro_batches: int) -> list[list[tuple[str, int]]]:
    """Each stage's ordered steps, ``("F", m)`` / ``("B", m)`` for micro-batch m."""
    out = []
    for s in range(num_stages):
        if schedule == "gpipe":
            steps = [("F", m) for m in range(micro_batches)] + [("B", m) for m in range(micro_batches)]
        else:
            warmup = min(num_stages - 1 - s, micro_batches)
            steps = [("F", m) for m in range(warmup)]
            for m in range(micro_batches - warmup):
                steps += [("F", warmup + m), ("B", m)]
            steps += [("B", m) for m in range(micro_batches - warmup, micro_batches)]
        out.append(steps)
    return out


def checked_arguments(
    owner: str, stages, mesh_device, micro_batches, schedule: str
) -> tuple[MeshDevice, list]:
    """The mesh and the list of stages of a pipeline's constructor (``Pipeline``, ``RankPipeline``), after the checks
    both share: stages are ttnn.nn Modules, ``micro_batches`` a positive int, ``schedule`` a known one."""
    mesh = mesh_of(owner, mesh_device)
    stages = list(stages) if not isinstance(stages, Module) else [stages]
    if not stages or not all(isinstance(s, Module) for s in stages):
        raise ValidationError(
            f"{owner}: stages: expected a non-empty list of ttnn.nn.Modules, got {stages!r}"
        )
    if isinstance(micro_batches, bool) or not isinstance(micro_batches, int) or micro_batches < 1:
        raise ValidationError(f"{owner}: micro_batches: expected a positive int, got {micro_batches!r}")
    if schedule not in SCHEDULES:
        raise ValidationError(f"{owner}: schedule: expected one of {', '.join(SCHEDULES)}, got {schedule!r}")
    return mesh, stages


class Pipeline(Module):
    """Stages on submeshes, trained with micro-batches under a GPipe or 1F1B schedule (see the module docstring).

    ``stages``: modules applied in order (``pipeline_stages(model, n)`` cuts a ``ttnn.nn.GPT`` / ``Llama``);
    their parameters are moved to the stages' submeshes, so build the optimizer afterwards. ``loss_fn(output,
    target)`` (default ``ttnn.cross_entropy_loss``) runs on the last stage.
    """

    def __init__(
        self,
        stages,
        mesh_device: MeshDevice,
        micro_batches: int = 1,
        schedule: str = "gpipe",
        *,
        loss_fn=None,
    ) -> None:
        super().__init__()
        owner = "ttnn.nn.parallel.Pipeline"
        mesh, stages = checked_arguments(owner, stages, mesh_device, micro_batches, schedule)
        self.mesh = mesh
        self.submeshes = _stage_meshes(owner, mesh, len(stages))
        self.micro_batches = micro_batches
        self.schedule = schedule
        self.loss_fn = loss_fn if loss_fn is not None else ttnn.cross_entropy_loss
        placed: dict[int, tuple[int, Tensor]] = {}
        for index, (stage, sub) in enumerate(zip(stages, self.submeshes)):
            _place(owner, stage, sub, index, placed)
        self.stages = ModuleList(stages)
        self.last_losses: list[float] = []

    @property
    def num_stages(self) -> int:
        return len(self.stages)

    # --- plain forward --------------------------------------------------------------------------------------
    def forward(self, inputs) -> Tensor:
        """All stages in order on the whole batch; the output lives on the last stage's submesh."""
        x = self._input(inputs, 0)
        for index, stage in enumerate(self.stages):
            if index:
                x = ttnn.experimental.send_recv(x, self.submeshes[index])
            x = stage(x)
        return x

    # --- scheduled training step ----------------------------------------------------------------------------
    def forward_backward(self, inputs, targets) -> float:
        """One training step's forward and backward over M micro-batches (see the module docstring); returns the
        mean loss over the batch. Gradients add into ``.grad`` (zero them before, step the optimizer after)."""
        owner = "ttnn.nn.parallel.Pipeline.forward_backward"
        xs = self._split(owner, "inputs", inputs)
        ys = self._split(owner, "targets", targets)
        if len(xs[0]) != len(ys[0]):
            raise ValidationError(
                f"{owner}: targets: expected the batch size of inputs ({len(xs[0]) * self.micro_batches}), got "
                f"{len(ys[0]) * self.micro_batches}"
            )
        steps = schedule_steps(self.schedule, self.num_stages, self.micro_batches)
        last = self.num_stages - 1
        received: dict[tuple[int, int], Tensor] = {}
        outputs: dict[tuple[int, int], Tensor] = {}
        grads: dict[tuple[int, int], Tensor] = {}
        done: set[tuple[str, int, int]] = set()
        losses = [0.0] * self.micro_batches
        position = [0] * self.num_stages
        while any(position[s] < len(steps[s]) for s in range(self.num_stages)):
            progressed = False
            for s in range(self.num_stages):
                if position[s] == len(steps[s]):
                    continue
                kind, m = steps[s][position[s]]
                if kind == "F" and (s == 0 or ("F", s - 1, m) in done):
                    x = self._input(xs[m], 0) if s == 0 else received[(s, m)]
                    out = self.stages[s](x)
                    if s == last:
                        loss = self.loss_fn(out, self._target(ys[m]))
                        losses[m] = item(loss)
                        outputs[(s, m)] = ttnn.multiply(loss, 1.0 / self.micro_batches)
                    else:
                        outputs[(s, m)] = out
                        with no_grad():
                            nxt = ttnn.experimental.send_recv(out, self.submeshes[s + 1])
                        nxt.requires_grad = True
                        received[(s + 1, m)] = nxt
                elif kind == "B" and ("F", s, m) in done and (s == last or ("B", s + 1, m) in done):
                    out = outputs.pop((s, m))
                    out.backward(None if s == last else grads.pop((s, m)))
                    x = received.pop((s, m), None)
                    if s > 0:
                        with no_grad():
                            grads[(s - 1, m)] = ttnn.experimental.send_recv(x.grad, self.submeshes[s - 1])
                else:
                    continue
                done.add((kind, s, m))
                position[s] += 1
                progressed = True
            if not progressed:  # pragma: no cover - every schedule above is deadlock-free
                raise ValidationError(f"{owner}: the {self.schedule} schedule deadlocked")
        self.last_losses = losses
        return float(np.mean(losses))

    # --- generation -------------------------------------------------------------------------------------------
    @property
    def context(self) -> int:
        """The context length of the language model the stages were cut from (``pipeline_stages``)."""
        config = getattr(self.stages[0], "config", None)
        if config is None:
            raise ValidationError(
                "ttnn.nn.parallel.Pipeline: generation needs stages made by pipeline_stages()"
            )
        return config.block_size if hasattr(config, "block_size") else config.max_seq_len

    def generate(self, idx, max_new_tokens: int, temperature: float = 0.0, seed: int = 0) -> np.ndarray:
        """``ttnn.nn.GPT.generate`` through the stages (the model must come from :func:`pipeline_stages`)."""
        return _LanguageModel.generate(self, idx, max_new_tokens, temperature, seed)

    # --- data -------------------------------------------------------------------------------------------------
    def _split(self, owner: str, name: str, value) -> list[np.ndarray]:
        array = to_numpy(value) if isinstance(value, Tensor) else np.asarray(value)
        if array.ndim == 0 or array.shape[0] % self.micro_batches:
            raise ValidationError(
                f"{owner}: {name}: expected a batch (dim 0) divisible by micro_batches={self.micro_batches}, got "
                f"shape {list(array.shape)}"
            )
        return np.split(array, self.micro_batches)

    def _input(self, value, stage: int) -> Tensor:
        if isinstance(value, Tensor):
            return value
        return _to_mesh(np.asarray(value), self.submeshes[stage])

    def _target(self, value) -> Tensor:
        return _to_mesh(np.asarray(value), self.submeshes[-1])

    def extra_repr(self) -> str:
        meshes = ", ".join("x".join(map(str, m.shape)) for m in self.submeshes)
        return f"stages={self.num_stages} on [{meshes}], micro_batches={self.micro_batches}, schedule={self.schedule}"


def _to_mesh(array: np.ndarray, mesh: MeshDevice) -> Tensor:
    if array.dtype.kind in "iub":
        return from_numpy(
            array.astype(np.uint32), dtype=DataType.UINT32, layout=Layout.ROW_MAJOR, device=mesh
        )
    return from_numpy(array.astype(np.float32), dtype=DataType.FLOAT32, layout=Layout.TILE, device=mesh)


def _stage_meshes(owner: str, mesh: MeshDevice, count: int) -> list[MeshDevice]:
    """``count`` equal submeshes tiling the mesh, in row-major order: whole columns of devices first (1×8 → 1×2
    ×4), else whole rows, else smaller blocks (2×2 → four 1×1)."""
    rows, cols = mesh.shape.as_2d()
    shapes = [(rows, cols // count)] if cols % count == 0 else []
    shapes += [(rows // count, cols)] if rows % count == 0 else []
    shapes += [
        (r, c)
        for r in range(1, rows + 1)
        for c in range(1, cols + 1)
        if rows % r == 0 and cols % c == 0 and (rows // r) * (cols // c) == count
    ]
    if not shapes:
        raise ValidationError(
            f"{owner}: stages: expected a stage count that tiles the {rows}x{cols} mesh into equal submeshes (a "
            f"divisor of its {rows * cols} devices along its axes), got {count} stages"
        )
    return mesh.create_submeshes(ttnn.MeshShape(*shapes[0]))


def _place(
    owner: str, stage: Module, mesh: MeshDevice, index: int, placed: dict[int, tuple[int, Tensor]]
) -> None:
    """Move ``stage``'s parameters and buffers (and those of modules it references unregistered, like a shared
    rotary embedding) to ``mesh``, replicated; a parameter shared with another stage is refused."""
    moved: dict[int, Tensor] = {}
    modules = list(stage.modules())
    for m in list(modules):
        for value in m.__dict__.values():
            if isinstance(value, Module) and value not in modules:
                modules.extend(value.modules())
    for m in modules:
        for kind in ("_parameters", "_buffers"):
            registry = m.__dict__[kind]
            for name, t in list(registry.items()):
                if t is None:
                    continue
                if id(t) in moved:
                    registry[name] = moved[id(t)]
                    continue
                other = placed.get(id(t), (index, t))[0]
                if other != index:
                    raise ValidationError(
                        f"{owner}: stages: {type(m).__name__}.{name} is shared by stages {other} and {index} (e.g. "
                        "weight tying across stages); give each stage its own"
                    )
                new = _moved(owner, t, mesh, f"{type(m).__name__}.{name}")
                placed[id(t)] = placed[id(new)] = (index, t)  # holding t keeps its id from being reused
                moved[id(t)] = registry[name] = new


def _moved(owner: str, t: Tensor, mesh: MeshDevice, what: str) -> Tensor:
    if t.device() is mesh:
        return t
    top = t.tensor_topology()
    if top is not None and not all(isinstance(p, PlacementReplicate) for p in top.placements()):
        raise ValidationError(
            f"{owner}: stages: {what} is sharded ({top}); pipeline stages hold replicated parameters"
        )
    new = from_numpy(to_numpy(t), dtype=t.dtype, layout=t.layout, device=mesh)
    if isinstance(t, Parameter):
        return Parameter(new, requires_grad=t.requires_grad)
    return new


# --- cutting a language model into stages ------------------------------------------------------------------------


class _LanguageModelStage(Module):
    """A contiguous part of a GPT / Llama: optionally the embedding, some blocks, optionally the norm and head."""

    def __init__(self, model, blocks, first: bool, last: bool) -> None:
        super().__init__()
        self.kind = "gpt" if isinstance(model, GPT) else "llama"
        self.config = model.config
        if first:
            self.embed = model.embed
            if self.kind == "gpt":
                self.pos_embed = model.pos_embed
                self.drop = model.drop
        self.blocks = ModuleList(blocks)
        if self.kind == "llama" and blocks:
            rope = model.rope
            self.rope = RotaryEmbedding(
                rope.head_dim, rope.max_seq_len, rope.theta, device=model.embed.weight.device()
            )
            for block in blocks:
                object.__setattr__(block.attn, "rope", self.rope)
        self.first, self.last = first, last
        if last:
            self.norm = model.ln_f if self.kind == "gpt" else model.norm
            self.lm_head = model.lm_head

    def forward(self, x: Tensor) -> Tensor:
        if self.first:
            x = self.embed(x)
            if self.kind == "gpt":
                seq = x.shape[2]
                pos = self.pos_embed
                if seq < self.config.block_size:
                    pos = ttnn.slice(pos, [0, 0, 0, 0], [1, 1, seq, self.config.n_embd])
                x = self.drop(ttnn.add(x, pos))
        for block in self.blocks:
            x = block(x)
        if self.last:
            x = self.lm_head(self.norm(x))
        return x


def pipeline_stages(model: GPT | Llama, num_stages: int) -> list[Module]:
    """Cut a ``ttnn.nn.GPT`` or ``Llama`` into ``num_stages`` modules: the embedding goes with the first blocks,
    the final norm and head with the last ones, the blocks are spread as evenly as possible. The stages take
    over the model's modules (use the stages, not ``model``, from then on)."""
    owner = "ttnn.nn.parallel.pipeline_stages"
    if not isinstance(model, (GPT, Llama)):
        raise ValidationError(
            f"{owner}: model: expected a ttnn.nn.GPT or ttnn.nn.Llama, got {type(model).__name__}"
        )
    if isinstance(num_stages, bool) or not isinstance(num_stages, int) or num_stages < 1:
        raise ValidationError(f"{owner}: num_stages: expected a positive int, got {num_stages!r}")
    if model.config.weight_tying:
        raise ValidationError(
            f"{owner}: model: weight tying shares the embedding (first stage) with the head (last stage); build "
            "the model with weight_tying=False"
        )
    blocks = list(model.blocks)
    parts = np.array_split(np.arange(len(blocks)), num_stages)
    return [
        _LanguageModelStage(model, [blocks[i] for i in part], i == 0, i == num_stages - 1)
        for i, part in enumerate(parts)
    ]
