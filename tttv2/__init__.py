"""TTTv2 toolkit: the ttnn CPU mesh emulator (`tttv2.ttnn`), the TTTv2 module library and the migration tools."""

__version__ = "0.1.0"
__all__ = ["__version__"]
