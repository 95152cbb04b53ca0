"""The model files, named as in ``models/tt_transformers/tt``."""
