// Number-format kernels: float32 -> bfloat16 rounding and the block floating point formats
// bfloat8_b / bfloat4_b (see the format description at the top of reference.py).
//
// Everything here is bit-exact with the numpy reference. The loops are written on integer bit patterns
// and exact float operations (scaling by powers of two, adding/subtracting 2^23), never on libm calls,
// so that the compiler can vectorise them.
#include <algorithm>
#include <cmath>

#include "kernels.hpp"

namespace tttv2 {
namespace {

constexpr size_t kBlock = 16;  // values sharing one exponent
constexpr float kRoundMagic = 8388608.0f;  // 2^23: (q + 2^23) - 2^23 rounds 0 <= q < 2^22 to nearest-even

// 2^k as a float for -149 <= k <= 127 (denormal powers included, all exact).
TTTV2_INLINE float pow2f(int k) {
  if (k >= -126) {
    return bits_f32(static_cast<uint32_t>(k + 127) << 23);
  }
  return bits_f32(uint32_t(1) << (k + 149));
}

// float32 -> bfloat16 bits, round to nearest even; NaN -> the canonical quiet NaN with the input sign
// (0x7fc0 / 0xffc0), like ml_dtypes. Infinities stay infinities; overflow rounds to infinity; denormals
// are rounded like any other value. Result is returned as float32 bits (bf16 bits << 16).
TTTV2_INLINE uint32_t bf16_round_bits(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const uint32_t qnan = (bits & 0x80000000u) | 0x7fc00000u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? qnan : rounded;
}

TTTV2_CLONES void round_bf16_range(const float* __restrict src, float* __restrict dst, size_t n) {
  const uint32_t* __restrict in = reinterpret_cast<const uint32_t*>(src);
  uint32_t* __restrict out = reinterpret_cast<uint32_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    out[i] = bf16_round_bits(in[i]);
  }
}

// Shared exponent of a block: the largest biased exponent among its finite values (non-finite values
// count as 0, i.e. they do not influence the block scale).
TTTV2_INLINE uint32_t block_exponent(const uint32_t* __restrict bits) {
  uint32_t lane[kBlock];
  for (size_t j = 0; j < kBlock; ++j) {
    const uint32_t e = (bits[j] >> 23) & 0xffu;
    lane[j] = e == 0xffu ? 0u : e;
  }
  uint32_t e = 0;
  for (size_t j = 0; j < kBlock; ++j) {
    e = std::max(e, lane[j]);
  }
  return e;
}

// Scale factors whose product is 2^-(E - 127 - (m - 1)): |x| * s1 * s2 is the exact quotient
// |x| / step of the reference whenever that quotient is a normal float (and < 2^-126 otherwise, where
// both round to magnitude 0). Two factors because 2^-step_exp alone can exceed the float range.
struct BlockScale {
  float s1, s2;   // multiply |x| by s1 then s2 to get the magnitude before rounding
  float step;     // 2^step_exp: the value of magnitude 1
};

TTTV2_INLINE BlockScale block_scale(uint32_t shared_exp, int mantissa_bits) {
  const int step_exp = static_cast<int>(shared_exp) - 127 - (mantissa_bits - 1);
  const int k = -step_exp;
  const int k1 = k / 2;
  return {pow2f(k1), pow2f(k - k1), pow2f(step_exp)};
}

// Rounded, saturated magnitudes of one block (as floats holding small integers). NaN and infinities
// saturate to max_mag, as in the reference.
TTTV2_INLINE void block_magnitudes(const float* __restrict x, const BlockScale& sc, float max_mag,
                             float* __restrict mag) {
  for (size_t j = 0; j < kBlock; ++j) {
    float q = (std::fabs(x[j]) * sc.s1) * sc.s2;
    q = q <= max_mag ? q : max_mag;  // also catches NaN and inf
    mag[j] = (q + kRoundMagic) - kRoundMagic;
  }
}

TTTV2_CLONES void bfp_pack_rows(const float* __restrict src, uint8_t* __restrict exps,
                                uint8_t* __restrict mants, size_t row_begin, size_t row_end, size_t cols,
                                int mantissa_bits) {
  const size_t nblocks = cols / kBlock;
  const float max_mag = static_cast<float>((1 << mantissa_bits) - 1);
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t b = 0; b < nblocks; ++b) {
      const float* x = src + r * cols + b * kBlock;
      const uint32_t* bits = reinterpret_cast<const uint32_t*>(x);
      const uint32_t shared = block_exponent(bits);
      const BlockScale sc = block_scale(shared, mantissa_bits);
      float mag[kBlock];
      block_magnitudes(x, sc, max_mag, mag);
      uint8_t* out = mants + r * cols + b * kBlock;
      for (size_t j = 0; j < kBlock; ++j) {
        const uint32_t m = static_cast<uint32_t>(mag[j]);
        const uint32_t sign = m != 0 ? (bits[j] >> 24) & 0x80u : 0u;
        out[j] = static_cast<uint8_t>(sign | m);
      }
      exps[r * nblocks + b] = static_cast<uint8_t>(shared);
    }
  }
}

TTTV2_CLONES void bfp_unpack_rows(const uint8_t* __restrict exps, const uint8_t* __restrict mants,
                                  float* __restrict dst, size_t row_begin, size_t row_end, size_t cols,
                                  int mantissa_bits) {
  const size_t nblocks = cols / kBlock;
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t b = 0; b < nblocks; ++b) {
      const int step_exp = static_cast<int>(exps[r * nblocks + b]) - 127 - (mantissa_bits - 1);
      const float step = pow2f(step_exp);  // exact: step_exp >= -133
      const uint8_t* in = mants + r * cols + b * kBlock;
      uint32_t* out = reinterpret_cast<uint32_t*>(dst + r * cols + b * kBlock);
      for (size_t j = 0; j < kBlock; ++j) {
        // magnitude * 2^step_exp is exact (or overflows to inf exactly like ldexp for exponent 255)
        const float v = static_cast<float>(in[j] & 0x7fu) * step;
        out[j] = f32_bits(v) | (static_cast<uint32_t>(in[j] & 0x80u) << 24);
      }
    }
  }
}

TTTV2_CLONES void bfp_quantize_rows(const float* __restrict src, float* __restrict dst, size_t row_begin,
                                    size_t row_end, size_t cols, int mantissa_bits) {
  const size_t nblocks = cols / kBlock;
  const float max_mag = static_cast<float>((1 << mantissa_bits) - 1);
  for (size_t r = row_begin; r < row_end; ++r) {
    for (size_t b = 0; b < nblocks; ++b) {
      const float* x = src + r * cols + b * kBlock;
      const uint32_t* bits = reinterpret_cast<const uint32_t*>(x);
      const BlockScale sc = block_scale(block_exponent(bits), mantissa_bits);
      float mag[kBlock];
      block_magnitudes(x, sc, max_mag, mag);
      uint32_t* out = reinterpret_cast<uint32_t*>(dst + r * cols + b * kBlock);
      for (size_t j = 0; j < kBlock; ++j) {
        // pack drops the sign of values that round to 0, so unpacking gives +0 for them
        const uint32_t sign = mag[j] != 0.0f ? bits[j] & 0x80000000u : 0u;
        out[j] = f32_bits(mag[j] * sc.step) | sign;
      }
    }
  }
}

}  // namespace

void round_bfloat16(const float* src, float* dst, size_t n) {
  parallel_for(n, kMinElemsPerThread * 2, 16, [&](size_t begin, size_t end) {
    round_bf16_range(src + begin, dst + begin, end - begin);
  });
}

void bfp_pack(const float* src, uint8_t* exponents, uint8_t* mantissas, size_t rows, size_t cols,
              int mantissa_bits) {
  parallel_rows(rows, cols, [&](size_t begin, size_t end) {
    bfp_pack_rows(src, exponents, mantissas, begin, end, cols, mantissa_bits);
  });
}

void bfp_unpack(const uint8_t* exponents, const uint8_t* mantissas, float* dst, size_t rows, size_t cols,
                int mantissa_bits) {
  parallel_rows(rows, cols, [&](size_t begin, size_t end) {
    bfp_unpack_rows(exponents, mantissas, dst, begin, end, cols, mantissa_bits);
  });
}

void bfp_quantize(const float* src, float* dst, size_t rows, size_t cols, int mantissa_bits) {
  parallel_rows(rows, cols, [&](size_t begin, size_t end) {
    bfp_quantize_rows(src, dst, begin, end, cols, mantissa_bits);
  });
}

}  // namespace tttv2
