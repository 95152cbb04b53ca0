"""Deprecated: ``ttml`` (Tenstorrent's former training library) on top of ``tttv2.ttnn``.

Old scripts keep running: every name below forwards to the unified library and warns
(``DeprecationWarning``) with the name to use instead. docs/migrating_from_ttml.md maps each one.

===============================================  ====================================================
ttml name                                        use instead
===============================================  ====================================================
``ttml.autograd.AutoContext``                    ``ttnn.open_mesh_device`` / ``ttnn.nn.manual_seed``
``ttml.autograd.Tensor``                         ``ttnn.Tensor`` (``requires_grad``, ``.grad``, ``.backward()``)
``ttml.ops.loss.*``, ``ttml.ops.binary.*``       ``ttnn.cross_entropy_loss``, ``ttnn.mse_loss``, ``ttnn.multiply`` …
``ttml.optimizers.*``                            ``ttnn.optim.SGD`` / ``ttnn.optim.AdamW``
``ttml.models.*``                                ``ttnn.nn.Linear`` / ``ttnn.nn.GPT``
``ttml.common.data.CharTokenizer``               ``examples/nanogpt.py``'s tokenizer (a plain class)
``ttml.common.utils`` / ``ttml.common.config``   ``ttnn.nn.manual_seed``, ``ttnn.autograd.no_grad``, plain arguments
``ttml.modules.*``                               ``ttnn.nn.Module``, ``ttnn.nn.Linear``, ``ttnn.nn.parallel.*``
``ttml.ops.sample.sample_op``                    ``ttnn.sample``
``ttml.distributed.parallelize_module``          ``ttnn.nn.parallel.TensorParallel`` / ``ColumnParallelLinear`` …
``ttml.distributed.DistributedDataParallel``     ``ttnn.nn.parallel.DistributedDataParallel``
``ttml.core.distributed.synchronize_gradients``  ``ttnn.nn.parallel`` / ``ttnn.nn.utils.all_reduce_gradients_``
===============================================  ====================================================
"""

from __future__ import annotations

from tttv2 import ttnn as _ttnn

from . import autograd, common, core, distributed, models, modules, ops, optimizers
from ._deprecation import deprecated as _deprecated

_deprecated("the ttml package", "tttv2.ttnn (ttnn.nn, ttnn.optim, ttnn.autograd)", stacklevel=2)

Layout = _ttnn.Layout  # TTML re-exported ttnn's layout enum (ttml.Layout.TILE)

__all__ = ["Layout", "autograd", "common", "core", "distributed", "models", "modules", "ops", "optimizers"]
