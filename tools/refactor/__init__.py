"""tttv2-refactor: the codemod that turns a TTTv1 module into TTTv2 ``*_1d.py`` / ``*_2d.py`` modules.

    from tttv2_tools.refactor import generate
    result = generate("tttv1/tt/mlp.py", "tttv1/tt/model_config.py")
    result.modules[0].code      # the text of mlp_1d.py

It uses trace-deps' analysis for every fact about the module (never a second copy of it) and libcst for every
rewrite, so the TTTv1 code it keeps keeps its comments.
"""

from .api import Generated, Result, generate
from .errors import Gap, RefactorError, UsageError

__all__ = ["Gap", "Generated", "RefactorError", "Result", "UsageError", "generate"]
