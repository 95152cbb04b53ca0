// The fused training kernels (losses, norms with statistics, attention rows, optimizers, sampling):
// bound as the submodule tttv2._native.training. Numpy references: tttv2/ttnn/_kernels/training_reference.py.
#pragma once

#include <nanobind/nanobind.h>

void bind_training(nanobind::module_& m);
