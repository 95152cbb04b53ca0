"""(being written)"""

__all__: list[str] = []
__experimental__: list[str] = []
__transformer__: list[str] = []
