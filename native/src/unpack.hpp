// Decoding stored weights to float32 (shared by storage.cpp's unpack kernels and small_matmul.cpp, so both give
// the same bits): bfloat16 bit patterns and packed block floats, the float32 bits ANDed with a keep mask (the
// math-fidelity truncation). Helpers only; they are inlined into the multi-versioned kernels that call them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels.hpp"

namespace tttv2 {

constexpr size_t kBfpBlockValues = 16;

// step[e] = 2^(e - 127 - (m - 1)) >= 2^-133 for every biased exponent e: a normal power or a subnormal one,
// exact; a block float value is ±magnitude · step[E].
inline void bfp_steps(int mantissa_bits, float* step) {
  for (int e = 0; e < 256; ++e) {
    const int k = e - 127 - (mantissa_bits - 1);
    step[e] = k >= -126 ? bits_f32(static_cast<uint32_t>(k + 127) << 23) : bits_f32(uint32_t(1) << (k + 149));
  }
}

// One block of 16 sign|magnitude bytes: value = ±magnitude · step (an exact product, as bfp_unpack; for
// E = 255 it overflows to inf exactly like ldexp), the sign ORed in, then the kept bits.
TTTV2_INLINE void unpack_block(const uint8_t* __restrict sm, float step, uint32_t keep, uint32_t* __restrict out) {
  for (size_t j = 0; j < kBfpBlockValues; ++j) {
    const uint32_t c = sm[j];
    out[j] = (f32_bits(static_cast<float>(c & 0x7f) * step) | ((c & 0x80) << 24)) & keep;
  }
}

// bfloat4_b: a byte of two 4-bit sign|magnitude codes (sign in bit 3, the even column in the low nibble) to the
// two signed magnitudes as floats (-0.0 for a negative zero). ±magnitude · step is exact (or overflows to ±inf),
// so it has the bits of (magnitude · step) | sign that unpack_block computes.
struct NibblePairs {
  float values[256][2];
};

constexpr NibblePairs make_nibble_pairs() {
  NibblePairs table{};
  for (int byte = 0; byte < 256; ++byte) {
    for (int half = 0; half < 2; ++half) {
      const int code = (byte >> (4 * half)) & 0xF;
      const float magnitude = static_cast<float>(code & 0x7);
      table.values[byte][half] = (code & 0x8) ? -magnitude : magnitude;
    }
  }
  return table;
}

inline constexpr NibblePairs kNibblePairs = make_nibble_pairs();

// One bfloat4_b block (8 bytes, 16 codes), decoded like unpack_block: a table look-up per byte, then the
// products and the kept bits in one vectorisable loop.
TTTV2_INLINE void unpack_nibble_block(const uint8_t* __restrict pairs, float step, uint32_t keep,
                                      uint32_t* __restrict out) {
  float signed_magnitudes[kBfpBlockValues];
  for (size_t i = 0; i < kBfpBlockValues / 2; ++i) {
    std::memcpy(signed_magnitudes + 2 * i, kNibblePairs.values[pairs[i]], 2 * sizeof(float));
  }
  for (size_t j = 0; j < kBfpBlockValues; ++j) {
    out[j] = f32_bits(signed_magnitudes[j] * step) & keep;
  }
}

}  // namespace tttv2
