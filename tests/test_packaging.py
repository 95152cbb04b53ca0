"""The package as users install it: a regular and an editable install, each into a fresh virtualenv.

What is checked in both: the migration tools import under their one name ``tttv2_tools`` and a plain
``import tools`` fails; everything under ``tools/`` and ``tttv2/`` is part of the package without being listed
(a regular wheel holds every file, an editable install finds modules created after it was installed); and
``import ttnn`` works through the hook the package installs.

How it stays fast and honest: the wheels are built by the project's own backend (scikit-build-core, called
through its PEP 517 hooks, exactly what ``pip install`` calls) from a copy of the sources, with the documented
option ``wheel.cmake=false``, which skips the C++ build (about 1.5 CPU-minutes); the emulator then runs its numpy
reference kernels (``TTTV2_KERNELS=reference``), which the native kernels are tested against elsewhere. The C++
part of the build is what this test session itself runs on: its environment is an editable install made by
``pip install -e ".[test]"``. Each fresh virtualenv has no pip and no third-party packages of its own; a ``.pth``
file lends it this environment's site-packages for numpy & co. (they come after the venv's own packages, so the
project itself can only be imported from the wheel under test). pip installs the wheels, with ``--no-deps``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "tttv2", "tools", "tttv1", "ttml", "import_hook", "native")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.so", "*.pyd")

CHECKS = """
import importlib, json, sys
report = {}
import tttv2_tools.trace_dependencies as trace
report["tools_file"] = trace.__file__
report["tools_twice"] = [m for m in sys.modules if m == "tools" or m.startswith("tools.")]
try:
    import tools
except ImportError as exc:
    report["import_tools"] = type(exc).__name__ + ": " + str(exc)
else:
    report["import_tools"] = "imported from " + str(tools.__file__)
for name in sys.argv[1:]:
    report[name] = importlib.import_module(name).VALUE
import ttnn, ttml  # TTML-style scripts start with these two lines
mesh = ttnn.open_mesh_device(ttnn.MeshShape(1, 2))
x = ttnn.from_numpy(__import__("numpy").ones((32, 32), "float32"), layout=ttnn.TILE_LAYOUT, device=mesh)
report["ttnn"] = [ttnn.__name__, ttnn.IS_TTTV2_EMULATOR, float(ttnn.to_numpy(ttnn.add(x, x))[0, 0])]
print(json.dumps(report))
"""


def _python(venv: Path) -> Path:
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _site_packages(venv: Path) -> Path:
    out = subprocess.run(
        [_python(venv), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def installs(tmp_path_factory):
    """{"regular": (venv, sources), "editable": (venv, sources)}: each built from its own copy of the sources."""
    made = {}
    for kind in ("regular", "editable"):
        base = tmp_path_factory.mktemp(kind)
        src = base / "src"
        src.mkdir()
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, src / name, ignore=IGNORE)
            else:
                shutil.copy2(ROOT / name, src / name)
        hook = "build_wheel" if kind == "regular" else "build_editable"
        build = _run(
            [
                sys.executable,
                "-c",
                f"import sys; from scikit_build_core.build import {hook}; "
                f"print({hook}(sys.argv[1], {{'wheel.cmake': 'false'}}))",
                str(base / "dist"),
            ],
            cwd=src,
        )
        assert build.returncode == 0, build.stdout + build.stderr
        wheel = base / "dist" / build.stdout.strip().splitlines()[-1]
        venv = base / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
        (_site_packages(venv) / "zz_test_dependencies.pth").write_text(
            sysconfig.get_paths()["purelib"] + "\n"
        )
        install = _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                _python(venv),
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                "--no-compile",
                wheel,
            ]
        )
        assert install.returncode == 0, install.stdout + install.stderr
        made[kind] = (venv, src, wheel)
    return made


def _check(venv: Path, cwd: Path, *modules: str, isolated: bool = True) -> dict:
    """Run CHECKS in the venv. ``isolated``: ``-I`` (no current directory on sys.path); else ``-E -s``, which
    keeps the current directory first on sys.path, as ``python -c`` and ``python -m pytest`` have it."""
    env = {"TTTV2_KERNELS": "reference", "PATH": str(_python(venv).parent)}
    flags = ["-I"] if isolated else ["-E", "-s"]
    out = _run([_python(venv), *flags, "-c", CHECKS, *modules], cwd=cwd, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_regular_install(installs, tmp_path):
    venv, src, wheel = installs["regular"]
    site = _site_packages(venv)
    # every file under tools/ and tttv2/ is in the wheel, under its one name, without being listed anywhere
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in (("tools", "tttv2_tools"), ("tttv2", "tttv2")):
        for path in (src / folder).rglob("*.py"):
            assert f"{package}/{path.relative_to(src / folder).as_posix()}" in names, path
    assert not any(n.startswith("tools/") for n in names)
    outside = _check(venv, tmp_path)
    assert outside["import_tools"] == "ModuleNotFoundError: No module named 'tools'"
    # run from the project root, `tools/` is within reach of `import tools`: the package refuses that name
    inside = _check(venv, ROOT, isolated=False)
    assert inside["import_tools"].startswith("ImportError: the migration tools are imported as `tttv2_tools`")
    for report in (outside, inside):
        assert Path(report["tools_file"]).is_relative_to(site)
        assert report["tools_twice"] == []
        assert report["ttnn"] == ["tttv2.ttnn", True, 2.0]
    # the console script of the main job runs from the wheel
    out = _run([venv / "bin" / "trace-deps", "--json"], cwd=tmp_path, env={"TTTV2_KERNELS": "reference"})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["module"].endswith("mlp.py")


def test_editable_install_serves_new_modules_from_the_sources(installs, tmp_path):
    venv, src, _ = installs["editable"]
    # created after the install: a new tools package and a new tttv2 package are importable at once
    (src / "tools" / "collect_cases_probe").mkdir()
    (src / "tools" / "collect_cases_probe" / "__init__.py").write_text("VALUE = 'tools'\n")
    (src / "tttv2" / "modules_probe").mkdir()
    (src / "tttv2" / "modules_probe" / "__init__.py").write_text("VALUE = 'tttv2'\n")
    report = _check(venv, tmp_path, "tttv2_tools.collect_cases_probe", "tttv2.modules_probe")
    assert report["tttv2_tools.collect_cases_probe"] == "tools" and report["tttv2.modules_probe"] == "tttv2"
    assert Path(report["tools_file"]) == src / "tools" / "trace_dependencies" / "__init__.py"
    assert report["tools_twice"] == []
    # an editable install puts the source root on sys.path: `tools` is found there and refuses the name
    assert report["import_tools"].startswith("ImportError: the migration tools are imported as `tttv2_tools`")
    assert report["ttnn"] == ["tttv2.ttnn", True, 2.0]
