"""Golden tests over the built-in tttv1/ model: the exact keys read by mlp.py and attention.py, their definitions
(both galaxy branches kept), the classification of every branch, the root parameters and the terminal ops.

The goldens live in tests/tools/fixtures/golden/tttv1_<module>.json. After an intended change to tttv1/ (or to the
tracer) regenerate them with:  python tests/tools/test_trace_tttv1.py --update
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tttv2_tools.trace_dependencies import MODE, STATIC, analyze

ROOT = Path(__file__).resolve().parents[2]
TT = ROOT / "tttv1" / "tt"
GOLDEN = Path(__file__).parent / "fixtures" / "golden"
MODULES = ("mlp", "attention")


def summary(module: str) -> dict:
    a = analyze(TT / f"{module}.py", TT / "model_config.py")
    members = {f"{r.kind}:{r.name}" for r in a.reads if r.kind != "key"}
    return {
        "keys_read": a.keys_read(),
        "members_read": sorted(members),
        "unresolved": sorted({f"{r.kind}:{r.name}" for r in a.reads if not r.resolved}),
        "definitions": {
            key: [
                {
                    "loc": d.loc,
                    "guards": [g.describe() for g in d.guards],
                    "kind": d.value_kind,
                    "params": d.params,
                    "live": d.live,
                    "live_when": d.live_when,
                }
                for d in defs
            ]
            for key, defs in a.definitions.items()
        },
        "branches": {b.id: b.classification for b in a.branches if b.side == "module"},
        "topology": {b.id: b.topology for b in a.branches if b.side == "module" and b.topology},
        "helper_branches": {b.id: b.classification for b in a.branches if b.side == "helper"},
        "roots": a.roots,
        "paths": a.paths,
        "construction_ops": a.construction_ops,
        "unknown": sorted(n for n in a.graph if n.startswith("unknown:")),
        "skipped": [f"{s.loc}: {s.what}: {s.reason}" for s in a.skipped],
    }


@pytest.fixture(scope="module", params=MODULES)
def pair(request):
    module = request.param
    return module, summary(module), json.loads((GOLDEN / f"tttv1_{module}.json").read_text())


def test_matches_golden(pair):
    module, got, want = pair
    for section in want:
        assert got[section] == want[section], (
            f"{module}: {section} changed (see the module docstring to update)"
        )


def test_both_galaxy_definitions_kept_and_everything_resolved(pair):
    module, got, _ = pair
    assert got["unresolved"] == [] and got["unknown"] == []
    two_sided = {
        k
        for k, defs in got["definitions"].items()
        if any(g == "self.is_galaxy" for d in defs for g in d["guards"])
        and any(g == "not (self.is_galaxy)" for d in defs for g in d["guards"])
    }
    if module == "attention":
        assert {"QKV_OUT_GATHERED_MEMCFG", "SELF_OUT_GATHERED_MEMCFG", "GATHER_USERS_MEMCFG"} <= two_sided
        assert len(got["keys_read"]) == 20
    else:
        assert got["keys_read"] == [
            "FF1_OUT_GATHERED_MEMCFG",
            "FF1_OUT_REDUCE_SCATTER_MEMCFG",
            "MLP_RS_CONFIG",
        ]
        assert "method:get_mlp_ff1_3_prg_config" in got["members_read"]


def test_classifications_roots_and_paths(pair):
    _, got, _ = pair
    assert STATIC in got["branches"].values() and MODE in got["branches"].values()
    assert "input:mode" in got["roots"]["mode"]
    assert "hw:num_devices" in got["roots"]["hardware"]
    assert got["paths"]["decode/galaxy"] != got["paths"]["decode/non-galaxy"]
    assert "ttnn.linear" in got["paths"]["prefill/non-galaxy"]


if __name__ == "__main__":  # pragma: no cover - maintenance entry point
    if "--update" in sys.argv:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        for name in MODULES:
            path = GOLDEN / f"tttv1_{name}.json"
            path.write_text(json.dumps(summary(name), indent=1, sort_keys=True) + "\n")
            print(f"wrote {path}")
