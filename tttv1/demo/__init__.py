"""Demos of the TTTv1-style model (``python -m tttv1.demo.simple_text_demo``)."""
