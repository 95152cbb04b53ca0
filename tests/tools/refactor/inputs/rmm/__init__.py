"""A TTTv1-style package in the layout of tt-metal's T3000 demos: a model folder (``t3k/``) whose module imports a
program-config helper from another folder of the package (``common/``), which the refactor's analysis names by
its file name alone."""
