"""pytest plugin (registered as ``tttv2_ttnn``): ``--ttnn-emulator`` makes ``import ttnn`` load the emulator."""

from __future__ import annotations


def pytest_addoption(parser) -> None:
    group = parser.getgroup("tttv2")
    group.addoption(
        "--ttnn-emulator",
        action="store_true",
        default=False,
        help="make `import ttnn` resolve to tttv2.ttnn, the CPU mesh emulator, for this test run",
    )


def pytest_configure(config) -> None:
    if config.getoption("--ttnn-emulator", default=False):
        from tttv2 import ttnn

        ttnn.install_as_ttnn()
