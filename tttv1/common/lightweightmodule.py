"""The TTTv1 module base: no torch ``nn.Module`` machinery, calling the object calls ``forward``."""

from __future__ import annotations


class LightweightModule:
    """Base of every tttv1 module. Kept tiny on purpose: TTTv1 modules only need ``__call__ -> forward``."""

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)
