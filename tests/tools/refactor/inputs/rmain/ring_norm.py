"""A norm wrapper in the Llama-3 70B Galaxy demo's style (``distributed_norm.py``): a ``TG`` flag next to the
arguments, Galaxy-only configs built in ``__init__``, and a forward that on a Galaxy calls a helper of another file
(``ring_ccl.ring_rmsnorm``) through the CCL object it was given and returns its ``(output, residual)`` pair, and
elsewhere calls the norm it wraps."""

import ttnn

from rmain.ring_ccl import ring_rmsnorm


class TtRingNorm:
    def __init__(self, norm, args, TG=False, tt_ccl=None):
        self.norm = norm
        self.args = args
        self.tt_ccl = tt_ccl
        if TG:
            self.ln_cfg = ttnn.WormholeComputeKernelConfig(
                math_fidelity=ttnn.MathFidelity.HiFi2,
                math_approx_mode=False,
                fp32_dest_acc_en=False,
                packer_l1_acc=False,
            )
        self.TG = TG

    def forward(self, x, res, mode):
        if self.TG:
            if mode == "decode":
                return ring_rmsnorm(
                    x,
                    epsilon=self.norm.eps,
                    gamma=self.norm.weight_distributed,
                    compute_kernel_config=self.ln_cfg,
                    tt_ccl=self.tt_ccl,
                )
            else:
                return ring_rmsnorm(
                    x,
                    epsilon=self.norm.eps,
                    gamma=self.norm.weight_distributed,
                    compute_kernel_config=self.ln_cfg,
                    tt_ccl=self.tt_ccl,
                )
        return self.norm(x, mode=mode), res
