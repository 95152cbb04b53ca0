"""Shared helpers of the TTTv1-style model (the counterpart of tt-metal's ``models/common``)."""
