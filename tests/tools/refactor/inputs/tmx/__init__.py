"""A model package that is not tttv1, laid out and written like tt-metal's ``models/tt_transformers``: its own
``ModelArgs`` (``hidden_size`` / ``intermediate_size``, ``cluster_shape``), its own CCL object, a ``Mode`` enum,
tt-metal's constructor signatures, and a module kind the toolkit has no recipe for (a MoE router). Its
``tests/conftest.py`` provides the fixtures the generated tests take their arguments from."""
