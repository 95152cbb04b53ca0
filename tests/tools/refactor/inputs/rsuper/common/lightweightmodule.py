"""The base class of tt-metal's TTTv1 modules: calling a module runs its forward."""


class LightweightModule:
    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)
