"""tttv1: a compact TTTv1-style transformer (laid out like tt-metal's ``models/tt_transformers``).

It is the migration toolkit's built-in input and the "before" side of every equivalence test, so its modules
import ``ttnn`` exactly as TTTv1 code does. Which package that is, is decided by the import hook installed with
tttv2 (``_tttv2_ttnn_import``): Tenstorrent's real ``ttnn`` where it is importable, else the emulator
``tttv2.ttnn``; ``TTTV2_BACKEND=emulator|ttnn`` forces either. Importing this package changes nothing.
"""
