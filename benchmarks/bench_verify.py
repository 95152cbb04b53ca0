"""Shadow verification's overhead on the tttv1 demo: the same demo plain and under ``collect-cases verify``.

The twins of tttv1's eight modules are generated once (``tttv2-refactor``, not timed). Then, alternating plain /
verified so that the load of a shared machine hits both alike, the demo runs plain and under ``collect-cases
verify`` with every twin (each verified run into a fresh store). Prints wall and CPU time (of the whole process
tree), their medians and the ratio (goal <= 2.5x: the twins do the same work again), and the calls checked.

    python benchmarks/bench_verify.py [--repeats 3] [--mesh T3K] [--max-new-tokens 16]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from _overhead import ROOT, print_ratios, timed

from tttv2_tools.collect_cases.store import CaseStore

MODULES = ("mlp", "mlp_legacy", "rmsnorm", "distributed_norm", "embedding", "lm_head", "attention", "decoder")


def _twins(out: Path, modules: tuple[str, ...] = MODULES) -> list[Path]:
    code = (
        "from tttv2_tools.refactor.cli import main\n"
        f"for m in {modules!r}:\n"
        f"    assert main([f'tttv1/tt/{{m}}.py', '--out', {str(out)!r}, '--quiet']) == 0, m\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    # the legacy MLP is not built by this demo (TTTV1_MLP_GENERATION=G1 builds it): its twin would check nothing
    return sorted(p for p in out.glob("*_[12]d.py") if not p.name.startswith("mlp_legacy"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--mesh", default="T3K")
    p.add_argument("--max-new-tokens", type=int, default=16)
    p.add_argument("--quick", action="store_true", help="one run on N150, 2 new tokens, the MLP's twins only")
    args = p.parse_args()
    if args.quick:
        args.repeats, args.mesh, args.max_new_tokens = 1, "N150", 2
    demo = [sys.executable, "-m", "tttv1.demo.simple_text_demo", "--mesh", args.mesh,
            "--max-new-tokens", str(args.max_new_tokens)]  # fmt: skip
    plain, verified, checked = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        twins = _twins(Path(tmp) / "twins", ("mlp",) if args.quick else MODULES)
        for i in range(args.repeats):
            store = Path(tmp) / f"run{i}.sqlite"
            plain.append(timed(demo))
            verify = [sys.executable, "-m", "tttv2_tools.collect_cases.cli", "verify", "--store", str(store)]
            for twin in twins:
                verify += ["--generated", str(twin)]
            verified.append(timed([*verify, "--", *demo]))
            with CaseStore(store) as s:
                rows = s.verifications()
            checked.append(sum(r.checked for r in rows))
            assert all(r.passed == r.checked for r in rows), "a verified call differed"
            print(
                f"run {i + 1}: plain {plain[-1][0]:.2f} s wall / {plain[-1][1]:.2f} s CPU, "
                f"verified {verified[-1][0]:.2f} s wall / {verified[-1][1]:.2f} s CPU, {checked[-1]} calls checked",
                flush=True,
            )
    print(f"demo: {' '.join(demo[1:])}")
    print(f"twins: {len(twins)} generated files ({', '.join(t.stem for t in twins)})")
    print_ratios(plain, verified, "verified", "goal <= 2.5x")


if __name__ == "__main__":
    main()
