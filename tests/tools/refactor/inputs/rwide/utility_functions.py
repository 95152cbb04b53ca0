"""Hardware queries, as tt-metal's ``models/utility_functions.py`` has them (asked of the emulator here)."""

import ttnn


def is_grayskull():
    return "grayskull" in ttnn.get_arch_name()


def is_wormhole_b0():
    return "wormhole" in ttnn.get_arch_name()
