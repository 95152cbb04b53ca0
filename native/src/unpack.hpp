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

// Vectors of W lanes (inside a class: a dependent vector size works).
template <int W>
struct DecodeLanes {
  typedef uint8_t b __attribute__((vector_size(W)));
  typedef int32_t i __attribute__((vector_size(4 * W)));
  typedef uint32_t u __attribute__((vector_size(4 * W)));
  typedef float f __attribute__((vector_size(4 * W)));
};

typedef uint8_t Bytes16 __attribute__((vector_size(16)));

// One block of 16 sign|magnitude bytes: value = ±magnitude · step (an exact product, as bfp_unpack; for
// E = 255 it overflows to inf exactly like ldexp), the sign ORed in, then the kept bits. W values at a time.
template <int W>
TTTV2_INLINE void unpack_block_bytes(Bytes16 block, float step, uint32_t keep, uint32_t* __restrict out) {
  using L = DecodeLanes<W>;
  static_assert(kBfpBlockValues % W == 0, "W must divide the block");
  alignas(16) uint8_t sm[kBfpBlockValues];
  std::memcpy(sm, &block, sizeof(sm));  // (W = 16 reads the register itself; W < 16 loads parts of one store)
  for (size_t h = 0; h < kBfpBlockValues; h += W) {
    typename L::b bytes;
    if constexpr (W == 16) {
      bytes = block;
    } else {
      std::memcpy(&bytes, sm + h, sizeof(bytes));
    }
    const typename L::i magnitudes = __builtin_convertvector(bytes & 0x7f, typename L::i);
    const typename L::u signs = __builtin_convertvector(bytes & 0x80, typename L::u) << 24;
    const typename L::f values = __builtin_convertvector(magnitudes, typename L::f) * step;
    typename L::u bits;
    std::memcpy(&bits, &values, sizeof(bits));
    bits = (bits | signs) & keep;
    std::memcpy(out + h, &bits, sizeof(bits));
  }
}

template <int W>
TTTV2_INLINE void unpack_block(const uint8_t* __restrict sm, float step, uint32_t keep, uint32_t* __restrict out) {
  Bytes16 block;
  std::memcpy(&block, sm, sizeof(block));
  unpack_block_bytes<W>(block, step, keep, out);
}

// bfloat4_b: 4 bytes of two 4-bit sign|magnitude codes each (sign in bit 3, the even column in the low nibble), in
// the low half of `pairs`, to the 8 sign|magnitude bytes of bfloat8_b's layout (sign in bit 7), the even column's
// first: each byte spread to a 16-bit lane, its high nibble moved to the lane's high byte, the sign bit moved up.
TTTV2_INLINE uint64_t nibbles_to_sign_magnitude(uint64_t pairs) {
  uint64_t x = pairs & 0xFFFFFFFFu;
  x = (x | (x << 16)) & 0x0000FFFF0000FFFFull;
  x = (x | (x << 8)) & 0x00FF00FF00FF00FFull;
  x = (x & 0x000F000F000F000Full) | ((x << 4) & 0x0F000F000F000F00ull);  // codes, one per byte
  return ((x & 0x0808080808080808ull) << 4) | (x & 0x0707070707070707ull);
}

// One bfloat4_b block (8 bytes, 16 codes): widened to 16 sign|magnitude bytes in two 64-bit registers, then decoded
// by unpack_block_bytes.
template <int W>
TTTV2_INLINE void unpack_nibble_block(const uint8_t* __restrict pairs, float step, uint32_t keep,
                                      uint32_t* __restrict out) {
  uint64_t packed;
  std::memcpy(&packed, pairs, sizeof(packed));
  typedef uint64_t Halves __attribute__((vector_size(16)));
  // built in a register: two 8-byte stores read back as one 16-byte load would stall store forwarding
  const Halves halves = {nibbles_to_sign_magnitude(packed), nibbles_to_sign_magnitude(packed >> 32)};
  unpack_block_bytes<W>(reinterpret_cast<const Bytes16&>(halves), step, keep, out);
}

// Two consecutive bfloat4_b blocks (16 bytes, 32 codes) at once: the low and high nibbles split and interleaved in
// vector registers (even column from the low nibble), widened to sign|magnitude bytes, then decoded block by block.
template <int W>
TTTV2_INLINE void unpack_nibble_block_pair(const uint8_t* __restrict pairs, float step0, float step1, uint32_t keep,
                                           uint32_t* __restrict out) {
  Bytes16 packed;
  std::memcpy(&packed, pairs, sizeof(packed));
  const Bytes16 lo = packed & 0x0F, hi = packed >> 4;
  const Bytes16 first = __builtin_shuffle(lo, hi, Bytes16{0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23});
  const Bytes16 second =
      __builtin_shuffle(lo, hi, Bytes16{8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31});
  unpack_block_bytes<W>(((first & 0x08) << 4) | (first & 0x07), step0, keep, out);
  unpack_block_bytes<W>(((second & 0x08) << 4) | (second & 0x07), step1, keep, out + kBfpBlockValues);
}

}  // namespace tttv2
