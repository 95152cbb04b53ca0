"""Helpers the sibling module imports relatively."""

import ttnn

LINKS_GALAXY = 4


def links_for(num_devices):
    return LINKS_GALAXY if num_devices == 32 else 1


def scaled(x, links):
    return ttnn.mul(x, float(links))
