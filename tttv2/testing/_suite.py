"""``TestSuite``: test the building blocks of a model against a reference, with a context manager and a fluent
builder::

    with TestSuite(model, reference=hf_model) as suite:
        suite.test(model.layers[0].attention).tolerance(pcc=0.99).expect(memory_mb=64)
        suite.test(model.layers[0].ffn, name="layer0_ffn")

The tests run when the block exits. Input shapes come from each block's resolved config (``dim``, ``vocab_size``,
``max_batch_size``); the reference of a block is the Hugging Face submodule at the same place in ``reference``
(``model.layers[i].attention`` → ``model.layers[i].self_attn``, ``ffn`` → ``mlp``, ``attention_norm`` →
``input_layernorm``, ``ffn_norm`` → ``post_attention_layernorm``, ``embedding`` → ``embed_tokens``, ``norm``,
``lm_head``), or a callable given with ``.reference(fn)``. Each test runs prefill and decode (``.modes(...)``):
an MLP, norm or LM head on random activations, an embedding on random ids, an attention on a prompt (prefill)
and then on one more token at the next position (decode, against the reference over the whole sequence). Each
check reports PCC, max absolute error, emulated device memory and wall time in a rich table; the failing checks
are all listed in one ``AssertionError``. ``track_coverage=True`` records the parameter values each block class
was tested with (``coverage_report(against=store)`` compares them with the cases collect-cases recorded).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from tttv2 import ttnn
from tttv2.modules import (
    MLP1D,
    MLP2D,
    Attention1D,
    Attention2D,
    Embedding1D,
    Embedding2D,
    LazyWeight,
    LMHead1D,
    LMHead2D,
    RMSNorm1D,
    RMSNorm2D,
)
from tttv2.testing._coverage import CoverageRecorder, coverage_report
from tttv2.testing.cases import DECODE_ROWS, pcc_threshold

__all__ = ["CheckResult", "ModuleTest", "TestSuite"]

_MIB = 1024 * 1024
_KINDS = (
    ((MLP1D, MLP2D), "mlp"),
    ((Attention1D, Attention2D), "attention"),
    ((RMSNorm1D, RMSNorm2D), "rmsnorm"),
    ((Embedding1D, Embedding2D), "embedding"),
    ((LMHead1D, LMHead2D), "lm_head"),
)
# where a block of a patterns.CausalLM sits in a Hugging Face causal LM
_HF_NAMES = {
    "embedding": "model.embed_tokens",
    "norm": "model.norm",
    "lm_head": "lm_head",
    "attention": "self_attn",
    "ffn": "mlp",
    "attention_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_LAYER_PARTS = ("attention", "ffn", "attention_norm", "ffn_norm")


def _kind(module) -> str:
    for classes, kind in _KINDS:
        if isinstance(module, classes):
            return kind
    raise TypeError(
        "TestSuite.test: module must be an MLP, attention, RMSNorm, embedding or LM head block (1D or 2D), "
        f"got {type(module).__name__}"
    )


@dataclass
class CheckResult:
    """One check: a test in one mode."""

    name: str
    block: str
    mode: str
    seq_len: int
    pcc: float | None = None
    max_error: float | None = None
    memory_mb: float | None = None
    wall_ms: float | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


class ModuleTest:
    """The builder ``suite.test(module)`` returns; every method returns the builder."""

    def __init__(self, suite: TestSuite, module, name: str, reference) -> None:
        self.suite, self.module, self.name = suite, module, name
        self.kind = _kind(module)
        self._reference = reference
        self._pcc: float | None = None
        self._max_error: float | None = None
        self._memory_mb: float | None = None
        self._latency_ms: float | None = None
        self._modes: tuple[str, ...] = ("prefill", "decode")
        self._seq_len: int | None = None

    def tolerance(self, max_error: float | None = None, *, pcc: float | None = None) -> ModuleTest:
        """Fail below ``pcc`` (default: the module kind's threshold) or above ``max_error`` (absolute)."""
        for label, value in (("max_error", max_error), ("pcc", pcc)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{self.name}.tolerance: {label} must be a positive number, got {value!r}")
        if pcc is not None and pcc > 1:
            raise ValueError(f"{self.name}.tolerance: pcc must be at most 1, got {pcc}")
        self._pcc, self._max_error = pcc, max_error
        return self

    def expect(self, *, memory_mb: float | None = None, latency_ms: float | None = None) -> ModuleTest:
        """Fail when a check uses more emulated device memory or more wall time than this."""
        for label, value in (("memory_mb", memory_mb), ("latency_ms", latency_ms)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"{self.name}.expect: {label} must be a positive number, got {value!r}")
        self._memory_mb, self._latency_ms = memory_mb, latency_ms
        return self

    def modes(self, *modes: str) -> ModuleTest:
        """Which of "prefill" / "decode" to check (default both)."""
        if not modes or any(m not in ("prefill", "decode") for m in modes):
            raise ValueError(f"{self.name}.modes: expected 'prefill' and/or 'decode', got {modes!r}")
        self._modes = tuple(dict.fromkeys(modes))
        return self

    def seq_len(self, seq_len: int) -> ModuleTest:
        """The prefill length (default 128; an attention needs a multiple of 128)."""
        if not isinstance(seq_len, int) or seq_len < 1 or (self.kind == "attention" and seq_len % 128):
            raise ValueError(
                f"{self.name}.seq_len: expected a positive int{' (a multiple of 128)' if self.kind == 'attention' else ''}, got {seq_len!r}"
            )
        self._seq_len = seq_len
        return self

    def reference(self, fn) -> ModuleTest:
        """A reference callable: numpy [1, S, dim] activations (token ids [1, S] for an embedding; the whole
        sequence up to the decoded token for an attention) → numpy [1, S, out]."""
        if not callable(fn):
            raise TypeError(f"{self.name}.reference: expected a callable, got {type(fn).__name__}")
        self._reference = fn
        return self

    # --- running --------------------------------------------------------------------------------------------

    def _threshold(self) -> float:
        if self._pcc is not None:
            return self._pcc
        mixed = self.kind == "mlp" and self.module.config.w1_w3_dtype == ttnn.bfloat4_b
        return pcc_threshold(self.kind, "mixed" if mixed else "uniform")

    def _length(self) -> int:
        if self._seq_len is not None:
            return self._seq_len
        return DECODE_ROWS if self.kind == "lm_head" else 128

    def run(self) -> list[CheckResult]:
        runner = _Runner(self)
        return [runner.check(mode) for mode in self._modes]


class _Runner:
    """Inputs, the module's outputs on the host and the reference's, for one ModuleTest."""

    def __init__(self, test: ModuleTest) -> None:
        self.test = test
        self.module = test.module
        self.cfg = test.module.config
        self.rng = np.random.default_rng(test.suite.seed)
        self.mesh = self.cfg.mesh_device
        self.prefix: np.ndarray | None = None  # the attention's prefilled prompt

    def check(self, mode: str) -> CheckResult:
        test = self.test
        seq_len = self.test._length() if mode == "prefill" else DECODE_ROWS
        result = CheckResult(test.name, type(self.module).__name__, mode, seq_len)
        try:
            reference = test.suite._reference_of(test)
            weights = self._load_weights()
            x = self._input(mode, seq_len)
            tracker = _memory_tracker(self.mesh)
            start = time.perf_counter()
            out = self._forward(mode, x)
            result.wall_ms = (time.perf_counter() - start) * 1000
            got = self._host(out, mode, seq_len)
            if tracker is not None:
                result.memory_mb = (weights + _activation_peak(tracker)) / _MIB
            expected = self._expected(reference, mode, x, seq_len)
        except (
            Exception
        ) as exc:  # a module or reference that fails is a failing check, reported with the rest
            result.failures.append(f"{type(exc).__name__}: {exc}")
            return result
        self._judge(result, expected, got)
        return result

    def _judge(self, result: CheckResult, expected: np.ndarray, got: np.ndarray) -> None:
        from tttv2.testing import pcc

        test = self.test
        if expected.shape != got.shape:
            result.failures.append(f"output shape {got.shape}, reference {expected.shape}")
            return
        result.pcc = pcc(expected, got)
        result.max_error = float(np.abs(expected.astype(np.float64) - got).max())
        threshold = test._threshold()
        if result.pcc < threshold:
            result.failures.append(f"PCC {result.pcc:.6f} < {threshold}")
        if test._max_error is not None and result.max_error > test._max_error:
            result.failures.append(f"max error {result.max_error:.4g} > {test._max_error}")
        if test._memory_mb is not None:
            if result.memory_mb is None:
                result.failures.append("device memory is unknown on this backend")
            elif result.memory_mb > test._memory_mb:
                result.failures.append(f"memory {result.memory_mb:.2f} MiB > {test._memory_mb} MiB")
        if test._latency_ms is not None and result.wall_ms > test._latency_ms:
            result.failures.append(f"wall time {result.wall_ms:.1f} ms > {test._latency_ms} ms")

    def _load_weights(self) -> int:
        """Convert the module's weights (and caches) now; their bytes on one device."""
        from tttv2.modules._module import lazy_weights_of

        total = 0
        for weight in lazy_weights_of(self.cfg):
            if (
                weight.missing_fields()
            ):  # a source the module does not run on (e.g. the LM head's unsplit one)
                continue
            tensor = ttnn.get_device_tensors(weight.get_device_weight())[0]
            total += _device_bytes(tensor)
        return total

    # --- inputs and outputs ------------------------------------------------------------------------------

    def _input(self, mode: str, seq_len: int) -> np.ndarray:
        kind = self.test.kind
        if kind == "embedding":
            return self.rng.integers(0, self.cfg.vocab_size, (1, 1, 1, seq_len)).astype(np.uint32)
        if kind == "attention" and mode == "decode":
            if self.prefix is None:  # decode attends to a prefilled prompt
                self._prefill_attention(self._input("prefill", self.test._length()))
            return self.rng.standard_normal((1, 1, DECODE_ROWS, self.cfg.dim)).astype(np.float32)
        return self.rng.standard_normal((1, 1, seq_len, self.cfg.dim)).astype(np.float32)

    def _rope(self):
        rope = getattr(self.test.suite.model, "rope", None)
        if rope is None:
            raise ValueError("testing an attention needs the model's rotary setup (model.rope)")
        return rope

    def _prefill_attention(self, x):
        self.prefix = x
        rot = self._rope().prefill_forward(0, x.shape[-2])
        return self.module.prefill_forward(LazyWeight(x), rot, user_id=0)

    def _forward(self, mode: str, x):
        if self.test.kind != "attention":
            step = self.module.decode_forward if mode == "decode" else self.module.prefill_forward
            return step(LazyWeight(x))
        if mode == "prefill":
            return self._prefill_attention(x)
        rope = self._rope()
        positions = np.full(rope.config.max_batch_size, self.prefix.shape[-2])
        rot = rope.decode_forward(rope.get_rot_idxs(positions))
        current = self.module.prepare_positions(np.full(self.cfg.max_batch_size, self.prefix.shape[-2]))
        return self.module.decode_forward(LazyWeight(x), current, rot)

    def _host(self, out, mode: str, seq_len: int) -> np.ndarray:
        kind = self.test.kind
        width = self.cfg.padded_vocab_size if kind == "lm_head" else self.cfg.dim
        full = _compose(out, width, self.mesh)
        rows = 1 if kind == "attention" and mode == "decode" else seq_len
        got = full.reshape(-1, full.shape[-1])[:rows]
        return got[:, : self.cfg.vocab_size] if kind == "lm_head" else got

    def _expected(self, reference, mode: str, x: np.ndarray, seq_len: int) -> np.ndarray:
        kind = self.test.kind
        if kind == "embedding":
            out = reference(x.reshape(1, -1).astype(np.int64))
            return np.asarray(out, dtype=np.float32).reshape(seq_len, -1)
        if kind == "attention" and mode == "decode":
            sequence = np.concatenate([self.prefix[0, 0], x[0, 0, :1]])[None]
            return np.asarray(reference(sequence), dtype=np.float32).reshape(len(sequence[0]), -1)[-1:]
        return np.asarray(reference(x[0]), dtype=np.float32).reshape(seq_len, -1)


def _device_bytes(tensor) -> int:
    from tttv2.ttnn.tensor import device_bytes

    return device_bytes(tensor.shape, tensor.dtype, tensor.layout, tensor.memory_config())


def _memory_tracker(mesh):
    """A started tracker of the emulated mesh's memory (None on a backend that has no memory report)."""
    try:
        from tttv2.ttnn.memory_tracker import MemoryTracker

        tracker = MemoryTracker(mesh)
    except Exception:  # Tenstorrent's ttnn, or a mesh the tracker does not know
        return None
    tracker.begin("test")
    return tracker


def _activation_peak(tracker) -> int:
    """Bytes the check added at its peak on the busiest device (DRAM + L1 over what was in use before)."""
    rows = tracker.end()
    return max(
        (r.dram_peak - (r.dram_used - r.dram_delta)) + (r.l1_peak - (r.l1_used - r.l1_delta)) for r in rows
    )


def _compose(out, width: int, mesh) -> np.ndarray:
    """The whole output on the host: the device tensors put side by side along the last dim according to how much
    of ``width`` each holds (all of it; split over every device, over the mesh columns, or over the mesh rows)."""
    parts = [np.asarray(ttnn.to_numpy(p), dtype=np.float32) for p in ttnn.get_device_tensors(out)]
    shape = tuple(int(d) for d in mesh.shape)
    rows, cols = shape if len(shape) == 2 else (1, int(np.prod(shape)))
    each = parts[0].shape[-1]
    if each == width:
        return parts[0]
    for pieces in (parts, parts[:cols], parts[::cols]):
        if each * len(pieces) == width:
            return np.concatenate(pieces, axis=-1)
    raise ValueError(
        f"the output is {each} wide per device; it does not compose to {width} on a {rows}x{cols} mesh"
    )


class TestSuite:
    """See the module docstring. ``model``: the model whose blocks are tested (a ``patterns.CausalLM`` or any
    object with the same attributes); ``reference``: a Hugging Face causal LM (or None when every test gives a
    reference callable); ``console``: where the table is printed (a ``rich.console.Console``)."""

    __test__ = False  # not a pytest test class

    def __init__(
        self, model, reference=None, *, track_coverage: bool = False, seed: int = 0, console=None
    ) -> None:
        self.model, self.reference = model, reference
        self.track_coverage = track_coverage
        self.seed = seed
        self.console = console
        self.results: list[CheckResult] = []
        self.coverage_records: set = set()
        self._pending: list[ModuleTest] = []
        self._names: set[str] = set()

    def __enter__(self) -> TestSuite:
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.run()
        return False

    def test(self, module, name: str | None = None, *, reference=None) -> ModuleTest:
        """Register a test of ``module`` (run on exit); returns the builder."""
        name = name or self._default_name(module)
        if name in self._names:
            raise ValueError(f"TestSuite.test: a test named {name!r} is already registered")
        self._names.add(name)
        test = ModuleTest(self, module, name, reference)
        self._pending.append(test)
        return test

    def run(self) -> list[CheckResult]:
        """Run the registered tests (the context manager does it on exit), print the table, and raise an
        ``AssertionError`` listing every failing check."""
        pending, self._pending = self._pending, []
        recorder = CoverageRecorder() if self.track_coverage else None
        if recorder is not None:
            recorder.__enter__()
        try:
            results = [result for test in pending for result in test.run()]
        finally:
            if recorder is not None:
                recorder.__exit__(None, None, None)
                self.coverage_records |= recorder.records
        self.results.extend(results)
        self.print(results)
        failed = [r for r in results if not r.passed]
        if failed:
            lines = [f"  {r.name} [{r.mode}]: {'; '.join(r.failures)}" for r in failed]
            raise AssertionError(
                f"TestSuite: {len(failed)} of {len(results)} checks failed:\n" + "\n".join(lines)
            )
        return results

    def coverage_report(self, against, *, modules=None):
        """Compare the parameter values tested (``track_coverage=True``) with the cases of a collect-cases store
        (a path) or a list of cases: a ``CoverageReport`` listing the untested values and combinations."""
        if not self.track_coverage:
            raise ValueError("TestSuite.coverage_report: construct the suite with track_coverage=True")
        return coverage_report(self.coverage_records, against, modules=modules)

    def table(self, results=None):
        from rich.table import Table

        table = Table(title="TestSuite")
        for column in (
            "test",
            "block",
            "mode",
            "seq",
            "PCC",
            "max error",
            "memory (MiB)",
            "wall (ms)",
            "result",
        ):
            table.add_column(  # values wrap, never end in "…": a CI log needs every name and number
                column,
                justify="right" if column not in ("test", "block", "mode", "result") else "left",
                overflow="fold",
            )
        for r in self.results if results is None else results:
            table.add_row(
                r.name,
                r.block,
                r.mode,
                str(r.seq_len),
                "" if r.pcc is None else f"{r.pcc:.6f}",
                "" if r.max_error is None else f"{r.max_error:.4g}",
                "" if r.memory_mb is None else f"{r.memory_mb:.2f}",
                "" if r.wall_ms is None else f"{r.wall_ms:.1f}",
                "pass" if r.passed else "FAIL: " + "; ".join(r.failures),
            )
        return table

    def print(self, results=None) -> None:
        from rich.console import Console

        from tttv2_tools._cli import table_width  # one width in a pipe for every tool (docs/cli.md)

        (self.console or Console(width=table_width(None))).print(self.table(results))

    # --- references ----------------------------------------------------------------------------------------

    def _locate(self, module) -> tuple[str, int | None]:
        """(part, layer index) of ``module`` in the model."""
        for part in ("embedding", "norm", "lm_head"):
            if getattr(self.model, part, None) is module:
                return part, None
        for index, layer in enumerate(getattr(self.model, "layers", ()) or ()):
            for part in _LAYER_PARTS:
                if getattr(layer, part, None) is module:
                    return part, index
        raise ValueError(
            f"{type(module).__name__} is not in the model (looked at embedding, layers[i].attention / ffn / "
            "attention_norm / ffn_norm, norm, lm_head); give it a reference callable"
        )

    def _default_name(self, module) -> str:
        try:
            part, index = self._locate(module)
        except ValueError:
            return f"{type(module).__name__}_{len(self._names)}"
        return part if index is None else f"layer{index}_{part}"

    def _reference_of(self, test: ModuleTest):
        if test._reference is not None:
            return test._reference
        if self.reference is None:
            raise ValueError("no reference: pass reference= to TestSuite or .reference(fn) to the test")
        part, index = self._locate(test.module)
        path = _HF_NAMES[part] if index is None else f"model.layers.{index}.{_HF_NAMES[part]}"
        hf_module = _hf_attribute(self.reference, path)
        if test.kind == "attention":
            return _HFAttention(
                hf_module,
                _hf_attribute(self.reference, "model.rotary_emb"),
                test.module.config.sliding_window,
            )
        return _HFModule(hf_module)


def _hf_attribute(model, path: str):
    obj = model
    for step in path.split("."):
        if step.isdigit():
            obj = obj[int(step)]
        elif hasattr(obj, step):
            obj = getattr(obj, step)
        elif step != "model":  # a base model (no ``.model``) holds the layers itself
            raise ValueError(f"the reference has no {path!r} (stopped at {step!r})")
    return obj


class _HFModule:
    """A torch module as a numpy → numpy reference (float32)."""

    def __init__(self, module) -> None:
        self.module = module

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import torch

        with torch.no_grad():
            return self.module(torch.as_tensor(x)).float().numpy()


class _HFAttention:
    """A Hugging Face attention over a whole sequence at positions 0.., causal (and windowed) mask."""

    def __init__(self, module, rotary, sliding_window: int | None) -> None:
        self.module, self.rotary, self.window = module, rotary, sliding_window

    def __call__(self, x: np.ndarray) -> np.ndarray:
        import torch

        hidden = torch.as_tensor(x).float()
        n = hidden.shape[1]
        allowed = torch.ones(n, n).tril().bool()
        if self.window is not None:
            allowed &= ~torch.ones(n, n).tril(-self.window).bool()
        mask = torch.zeros(n, n).masked_fill(~allowed, float("-inf"))[None, None]
        with torch.no_grad():
            cos, sin = self.rotary(hidden, torch.arange(n)[None])
            return self.module(hidden, position_embeddings=(cos, sin), attention_mask=mask)[0].numpy()
