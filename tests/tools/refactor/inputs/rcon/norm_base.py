"""The base of the rcon norms, in its own file: it keeps what every norm reads (the epsilon from ModelArgs, the
memory config a decode output goes to), as tt-metal's norms keep ``self.norm_eps`` from their arguments."""

from rcon.lightweightmodule import LightweightModule


class TtNormBase(LightweightModule):
    def __init__(self, mesh_device, args):
        super().__init__()
        self.mesh_device = mesh_device
        self.norm_eps = args.norm_eps
        self.out_memcfg = args.get_model_config()["DECODE_RESIDUAL_MEMCFG"]
