"""The migration tools: trace-deps, the refactor codemod and collect-cases, imported as ``tttv2_tools.*``.

The sources live in ``tools/``; the build maps that folder to the package ``tttv2_tools`` (regular and editable
installs alike), so there is one name per module and no generic top-level ``tools`` package. A source checkout
can still put ``tools/`` within reach of ``import tools`` (the project root is on ``sys.path`` when Python runs
from it, and editable installs add it); that second name is refused here.
"""

if __name__ != "tttv2_tools":
    raise ImportError(
        f"the migration tools are imported as `tttv2_tools` (e.g. `from tttv2_tools.trace_dependencies import "
        f"analyze`), not as `{__name__}`; install the project (`pip install -e .`) if tttv2_tools is missing",
        name=__name__,
    )
