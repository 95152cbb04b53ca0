"""A pytest plugin for tests that run pytest in their own process (``pytester.runpytest_inprocess``): each nested
run keeps the installed packages and the library it imports.

pytester puts ``sys.modules`` back after every nested run, so a module a nested run imported first is dropped
and imported again by the next one. torch does not survive that: its C extension initialises a second time
(``SystemError: … bad call flags`` at ``import torch``), and the garbage collector then crashes the whole process
(exit 139, seen when the generated tests ran twice in one pytest process). A second ``tttv2.ttnn`` would also
make ``MeshDevice`` another class than the one the first run's objects have ("mesh_device must be a MeshDevice,
got MeshDevice"). So modules that live in the standard library, in site-packages or in the library's own
packages are kept from one nested run to the next; the rest (test files, conftests, fixture packages, generated
modules) is still dropped, as pytester intends."""

from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

import tttv2
import tttv2_tools

#: Folders whose modules a nested run keeps: the standard library, site-packages, the library and the tools.
KEPT_FOLDERS = tuple(
    {
        *(
            Path(sysconfig.get_paths()[key]).resolve()
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
        ),
        Path(tttv2.__file__).resolve().parent,
        Path(tttv2_tools.__file__).resolve().parent,
    }
)


def kept_across_nested_runs(name: str) -> bool:
    """Whether the module ``name`` stays in ``sys.modules`` after a nested run (pytester's own rule: zope and
    readline, plus the modules of ``KEPT_FOLDERS``)."""
    if name.startswith(("zope", "readline")):
        return True
    file = getattr(sys.modules.get(name), "__file__", None)
    if not file:
        return False
    path = Path(file).resolve()
    return any(path.is_relative_to(folder) for folder in KEPT_FOLDERS)


@pytest.fixture(autouse=True)
def _nested_runs_keep_installed_modules(request, monkeypatch):
    """For a test that uses ``pytester``: its nested runs restore ``sys.modules`` with
    :func:`kept_across_nested_runs` as the rule of what to keep."""
    if "pytester" not in request.fixturenames:
        return
    from _pytest.pytester import Pytester, SysModulesSnapshot

    monkeypatch.setattr(
        Pytester,
        "_Pytester__take_sys_modules_snapshot",
        lambda self: SysModulesSnapshot(preserve=kept_across_nested_runs),
    )
