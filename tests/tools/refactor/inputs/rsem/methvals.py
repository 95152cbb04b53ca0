"""Methods used as values: chosen in __init__ and stored, or chosen in forward and called through a local."""

import ttnn


class Chosen:
    def __init__(self, mesh_device, args):
        self.args = args
        self.impl = self._galaxy if args.is_galaxy else self._flat

    def _galaxy(self, x):
        return ttnn.mul(x, 2.0)

    def _flat(self, x):
        return ttnn.mul(x, 3.0)

    def forward(self, x, mode):
        return self.impl(x)


class Picked:
    def __init__(self, mesh_device, args):
        self.args = args

    def _galaxy(self, x):
        return ttnn.mul(x, 2.0)

    def _flat(self, x):
        return ttnn.mul(x, 3.0)

    def forward(self, x, mode):
        fn = self._galaxy if self.args.is_galaxy else self._flat
        return fn(x)


class Dispatched:
    def __init__(self, mesh_device, args):
        self.args = args

    def _decode(self, x):
        return ttnn.mul(x, 2.0)

    def _prefill(self, x):
        return ttnn.add(x, 1.0)

    def forward(self, x, mode):
        return {"decode": self._decode, "prefill": self._prefill}[mode](x)


class Passed:
    def __init__(self, mesh_device, args):
        self.args = args

    def _flat(self, x):
        return ttnn.mul(x, 3.0)

    def forward(self, x, mode):
        steps = [self._flat]
        return steps[0](x)
