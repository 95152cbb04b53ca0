"""The public API is ``__all__``: every public module has one and every name in it exists; docs/api.md documents
each public module's ``__all__`` exactly (both ways); packages re-export nothing from a private module without
listing it; the seed-style namespaces re-export the module library's objects; the spellings importable before the
policy still import; ``tttv2.ttnn`` (which mirrors Tenstorrent's ttnn) is checked by its submodules' ``__all__``,
and its own training API (autograd, nn.parallel) by every exported name appearing in docs/."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import tttv2

ROOT = Path(__file__).resolve().parents[1]
API_DOC = ROOT / "docs" / "api.md"


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def _public_modules() -> dict[str, bool]:
    """Every public module under tttv2 (tttv2.ttnn apart) → whether it is a package."""
    found = {"tttv2": True}
    for info in pkgutil.walk_packages(tttv2.__path__, "tttv2."):
        if info.name.startswith("tttv2.ttnn") or _private(info.name):
            continue
        found[info.name] = info.ispkg
    return found


PUBLIC = _public_modules()


def _documented() -> dict[str, set[str]]:
    """docs/api.md: section ``## `module` `` → the backticked names at the start of its bullets."""
    sections: dict[str, set[str]] = {}
    current = None
    for line in API_DOC.read_text().splitlines():
        heading = re.fullmatch(r"## `([\w.]+)`", line)
        if heading:
            current = sections.setdefault(heading.group(1), set())
            continue
        if line.startswith("## "):
            current = None
        bullet = re.match(r"- ((?:`[^`]+`(?:, )?)+) — ", line)
        if current is not None and bullet:
            current.update(re.findall(r"`([^`]+)`", bullet.group(1)))
    return sections


DOCUMENTED = _documented()


@pytest.mark.parametrize("name", sorted(PUBLIC))
def test_public_module_has_all_and_every_name_exists(name):
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    assert len(set(module.__all__)) == len(module.__all__), f"{name}.__all__ lists a name twice"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"


def test_documented_api_equals_all_both_ways():
    assert set(DOCUMENTED) <= set(PUBLIC), (
        f"docs/api.md documents no such module: {set(DOCUMENTED) - set(PUBLIC)}"
    )
    for name, listed in DOCUMENTED.items():
        exported = set(importlib.import_module(name).__all__)
        assert listed == exported, (
            f"docs/api.md section {name}: documented but not in __all__ {sorted(listed - exported)}, "
            f"in __all__ but not documented {sorted(exported - listed)}"
        )


@pytest.mark.parametrize("name", sorted(set(PUBLIC) - set(DOCUMENTED)))
def test_an_undocumented_module_exports_only_what_its_package_documents(name):
    """A module without a section (a topology file, a subpackage) is documented through its package."""
    exported = set(importlib.import_module(name).__all__)
    package = name.rsplit(".", 1)[0]
    while package not in DOCUMENTED:
        assert "." in package, f"{name}: neither it nor a package above it has a section in docs/api.md"
        package = package.rsplit(".", 1)[0]
    documented = set(importlib.import_module(package).__all__)
    assert exported <= documented, (
        f"{name} exports {sorted(exported - documented)}, which {package} does not list"
    )


def test_every_public_name_is_documented_in_docs():
    text = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    for name in PUBLIC:
        for exported in importlib.import_module(name).__all__:
            assert f"`{exported}" in text or f"{exported}`" in text, f"{name}.{exported} is not in docs/"


@pytest.mark.parametrize("name", sorted(n for n, is_package in PUBLIC.items() if is_package))
def test_packages_list_what_they_re_export_from_private_modules(name):
    module = importlib.import_module(name)
    unlisted = [
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and _private(getattr(value, "__module__", "") or "")
        and attr not in module.__all__
    ]
    assert not unlisted, f"{name} re-exports {unlisted} from private modules without listing them in __all__"


@pytest.mark.parametrize("namespace", ["attention", "ffn", "normalization", "embeddings"])
def test_seed_namespaces_re_export_the_module_library(namespace):
    module = importlib.import_module(f"tttv2.{namespace}")
    modules = importlib.import_module("tttv2.modules")
    for name in module.__all__:
        assert getattr(module, name) is getattr(modules, name), (
            f"tttv2.{namespace}.{name} is not tttv2.modules.{name}"
        )
    assert (
        importlib.import_module("tttv2.patterns").DecoderLayer.__module__ == "tttv2.patterns._decoder_layer"
    )


# spellings importable before the public-API policy (main at the merge of the module and attention work)
EARLIER_SPELLINGS = [
    ("tttv2.modules", n)
    for n in [
        "MLP1D",
        "MLP2D",
        "TT_CCL",
        "Attention1D",
        "Attention1DConfig",
        "Attention2D",
        "Attention2DConfig",
        "Decoder1D",
        "Decoder2D",
        "Embedding1D",
        "Embedding1DConfig",
        "LMHead1D",
        "LMHead1DConfig",
        "LazyWeight",
        "MLP1DConfig",
        "MLP2DConfig",
        "PagedAttentionConfig",
        "RMSNorm1D",
        "RMSNorm1DConfig",
        "RMSNorm2D",
        "RMSNorm2DConfig",
        "RotarySetup1D",
        "RotarySetup1DConfig",
        "TransformerBlock1D",
        "TransformerBlock2D",
        "clear_tt_ccl_cache",
        "get_tt_ccl",
        "rope_tables",
        "rotation_tile",
    ]
] + [
    ("tttv2.modules.mlp", "MLP1D"),
    ("tttv2.modules.mlp.mlp_1d", "MLP1D"),
    ("tttv2.modules.mlp.mlp_1d", "MLP1DConfig"),
    ("tttv2.modules.mlp.mlp_2d", "MLP2D"),
    ("tttv2.modules.rmsnorm.rmsnorm_1d", "RMSNorm1D"),
    ("tttv2.modules.rmsnorm.rmsnorm_2d", "RMSNorm2D"),
    ("tttv2.modules.embedding.embedding_1d", "Embedding1D"),
    ("tttv2.modules.lm_head.lm_head_1d", "LMHead1D"),
    ("tttv2.modules.rope.rope_1d", "RotarySetup1D"),
    ("tttv2.modules.rope.rope_1d", "rope_tables"),
    ("tttv2.modules.attention", "PagedAttentionConfig"),
    ("tttv2.modules.attention.attention_1d", "Attention1D"),
    ("tttv2.modules.attention.attention_2d", "Attention2DConfig"),
    ("tttv2.modules.decoder", "padded_prefill_len"),
    ("tttv2.modules.lazy_weight", "LazyWeight"),
    ("tttv2.modules.tt_ccl", "CCL_CHUNKS_PER_SYNC"),
    ("tttv2.testing", "assert_pcc"),
    ("tttv2.testing.cases", "case_params"),
    ("tttv2.testing.host", "to_host"),
    ("tttv2.testing.legacy", "tttv1_model_args"),
    ("tttv2.testing.meshes", "MeshPool"),
    ("tttv2.testing.references", "hf_mlp"),
    ("tttv2", "__version__"),
    ("tttv2", "ttnn"),
]


@pytest.mark.parametrize(
    ("module", "name"), EARLIER_SPELLINGS, ids=[f"{m}.{n}" for m, n in EARLIER_SPELLINGS]
)
def test_earlier_spellings_still_import(module, name):
    assert hasattr(importlib.import_module(module), name)


def test_ttnn_by_all():
    """tttv2.ttnn mirrors Tenstorrent's ttnn: no file renamed; checked by its submodules' __all__."""
    ttnn = importlib.import_module("tttv2.ttnn")
    star_exported = [
        "device",
        "distributed_context",
        "distribution",
        "errors",
        "memory",
        "placement",
        "program_configs",
        "types",
    ]
    for name in star_exported:
        module = importlib.import_module(f"tttv2.ttnn.{name}")
        missing = [n for n in module.__all__ if not hasattr(ttnn, n)]
        assert not missing, f"tttv2.ttnn does not export {name}'s {missing}"
    for module in ttnn.ops.OP_MODULES:
        assert all(hasattr(ttnn, n) for n in module.__all__), module.__name__
    checked = 0
    for info in pkgutil.walk_packages(ttnn.__path__, "tttv2.ttnn."):
        module = importlib.import_module(info.name)
        for name in getattr(module, "__all__", ()):
            assert hasattr(module, name), f"{info.name}.__all__ names {name!r}, which it does not have"
            checked += 1
    assert checked > 300


# tttv2.ttnn packages that are this project's own API (TTML's place), not a mirror of Tenstorrent's ttnn
DOCUMENTED_TTNN_PACKAGES = ["tttv2.ttnn.autograd", "tttv2.ttnn.nn.parallel"]


@pytest.mark.parametrize("package", DOCUMENTED_TTNN_PACKAGES)
def test_training_api_names_are_documented(package):
    text = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    names = [package] + [
        info.name
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}.")
        if not _private(info.name)
    ]
    undocumented = [
        f"{name}.{exported}"
        for name in names
        if hasattr(importlib.import_module(name), "__all__")
        for exported in importlib.import_module(name).__all__
        if f"`{exported}" not in text and f"{exported}`" not in text
    ]
    assert not undocumented, f"not in docs/: {undocumented}"


def test_version_and_lazy_top_level():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert tttv2.__version__ == project["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", tttv2.__version__)
    assert tttv2.ModelFactory is importlib.import_module("tttv2.interfaces").ModelFactory
    with pytest.raises(AttributeError, match=r"module 'tttv2' has no attribute 'SwiGLU'"):
        _ = tttv2.SwiGLU
    code = "import sys, tttv2; print('tttv2.ttnn' in sys.modules, 'tttv2.modules' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]  # import tttv2 imports no subpackage
