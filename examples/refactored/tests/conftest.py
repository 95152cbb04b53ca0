"""The fixtures the generated tests of tttv1 modules take their arguments from (docs/refactor.md, "Generated tests")."""

from tttv1.testing import *  # noqa: F403
