// Reading device-format shards (tttv2/ttnn/storage.py): bfloat16 bit patterns and packed block floats
// unpacked straight into a float32 buffer, with the math-fidelity truncation (an AND of the float32 bits)
// applied on the way. Numpy references: bf16_unpack / bfp_unpack_codes in tttv2/ttnn/_kernels/reference.py.
#pragma once

#include <nanobind/nanobind.h>

void bind_storage(nanobind::module_& m);
