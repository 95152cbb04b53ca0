"""The migration tools: trace-deps, the refactor codemod and collect-cases.

The sources live in ``tools/``; they are imported (and installed) as ``tttv2_tools`` so no generic top-level
``tools`` package is shipped. In a source checkout ``tttv2_tools`` is a symlink to this folder.
"""
