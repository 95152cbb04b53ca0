"""Inputs in the style of tt-metal's real modules for the Zen on real code (issue 21, item 4): static choices
that the codemod used to leave in the generated forwards."""
