// Products whose left operand is one tile row at most (M <= 32, every decode product): a[M, K] @ weight[K, N]
// with the weight read straight from its storage (float32, bfloat16 patterns, packed bfloat8_b / bfloat4_b
// blocks) and the math-fidelity truncation fused. The summation order of each output element is fixed, so a
// row's result depends only on that row and the weight (docs/numerics.md §3). Numpy reference: small_matmul in
// tttv2/ttnn/_kernels/reference.py.
#pragma once

#include <nanobind/nanobind.h>

void bind_small_matmul(nanobind::module_& m);
