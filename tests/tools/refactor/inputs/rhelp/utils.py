"""Small utilities (like tt-metal's utility_functions module): the analysis of a module never reads this file."""

import math

TILE = 32


def nearest_32(x):
    return math.ceil(x / TILE) * TILE


def _unused():
    return nearest_32(1)
