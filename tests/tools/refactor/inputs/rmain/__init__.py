"""Inputs in the style of tt-metal's real modules for which class and which topology the refactor generates
(issue 21, item 3): a helper class with its own entry before the module's class (Falcon-40B's attention), and
modules that run only on a Galaxy (the Llama-3 70B Galaxy demo)."""
