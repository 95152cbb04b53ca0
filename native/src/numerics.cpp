// Number-format kernels: float32 -> bfloat16 rounding and the block floating point formats
// bfloat8_b / bfloat4_b (see the format description at the top of reference.py).
//
// Everything here is bit-exact with the numpy reference. The code works on integer bit patterns and on
// exact float operations (scaling by powers of two, adding and subtracting 2^23), never on libm calls.
// The block kernels use GCC/Clang vector extensions with W lanes (see TTTV2_DEFINE_MULTIVERSION): a block
// of 16 values is 16 / W vectors.
#include <cstring>

#include "kernels.hpp"

#if defined(__GNUC__) && !defined(__clang__)
// vector types wider than the baseline ISA only ever live inside always-inline helpers
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace tttv2 {
namespace {

constexpr size_t kBlock = 16;              // values sharing one exponent
constexpr float kRoundMagic = 8388608.0f;  // 2^23: (q + 2^23) - 2^23 rounds 0 <= q < 2^22 to nearest-even

template <int W>
struct Vec {
  static_assert(W == 4 || W == 8 || W == 16, "W must be 4, 8 or 16 lanes");
  static constexpr int kPerBlock = static_cast<int>(kBlock) / W;
  typedef float f __attribute__((vector_size(4 * W)));
  typedef int32_t i __attribute__((vector_size(4 * W)));
  typedef uint16_t h __attribute__((vector_size(2 * W)));
  typedef uint8_t b __attribute__((vector_size(W)));
};

// uint8 <-> int32 lanes in two steps through uint16: GCC 12 turns a direct 8 <-> 32-bit
// __builtin_convertvector into scalar code, but each one-step widening / narrowing into SIMD.
template <int W>
TTTV2_INLINE typename Vec<W>::i widen_bytes(typename Vec<W>::b bytes) {
  return __builtin_convertvector(__builtin_convertvector(bytes, typename Vec<W>::h), typename Vec<W>::i);
}

template <int W>
TTTV2_INLINE typename Vec<W>::b narrow_to_bytes(typename Vec<W>::i values) {
  return __builtin_convertvector(__builtin_convertvector(values, typename Vec<W>::h), typename Vec<W>::b);
}

template <class V>
TTTV2_INLINE V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <class V>
TTTV2_INLINE void store(void* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

template <class V>
TTTV2_INLINE V vmax(V a, V b) {
  return a > b ? a : b;
}

#if defined(__clang__)
#define TTTV2_SWAP_LANES(V, v, ...) __builtin_shufflevector(v, v, __VA_ARGS__)
#else
#define TTTV2_SWAP_LANES(V, v, ...) __builtin_shuffle(v, V{__VA_ARGS__})
#endif

// max over the W lanes, broadcast to every lane (butterfly of lane swaps)
template <int W>
TTTV2_INLINE typename Vec<W>::i all_lanes_max(typename Vec<W>::i e) {
  using I = typename Vec<W>::i;
  if constexpr (W == 16) {
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  } else if constexpr (W == 8) {
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 4, 5, 6, 7, 0, 1, 2, 3));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 2, 3, 0, 1, 6, 7, 4, 5));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 1, 0, 3, 2, 5, 4, 7, 6));
  } else {
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 2, 3, 0, 1));
    e = vmax(e, TTTV2_SWAP_LANES(I, e, 1, 0, 3, 2));
  }
  return e;
}

// 2^k in every lane, for -126 <= k <= 127
template <int W>
TTTV2_INLINE typename Vec<W>::f pow2(typename Vec<W>::i k) {
  return reinterpret_cast<typename Vec<W>::f>((k + 127) << 23);
}

// 2^k as a float for -149 <= k <= 127 (denormal powers included, all exact)
TTTV2_INLINE float pow2f(int k) {
  if (k >= -126) {
    return bits_f32(static_cast<uint32_t>(k + 127) << 23);
  }
  return bits_f32(uint32_t(1) << (k + 149));
}

// ---------------------------------------------------------------------------------------------------
// bfloat16

// float32 -> bfloat16, round to nearest even, returned as float32 bits (bf16 bits << 16). NaN -> the
// canonical quiet NaN with the input sign (0x7fc0 / 0xffc0), like ml_dtypes; infinities stay
// infinities, overflow rounds to infinity, denormals round like any other value.
TTTV2_INLINE uint32_t bf16_round_bits(uint32_t bits) {
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const uint32_t qnan = (bits & 0x80000000u) | 0x7fc00000u;
  return (bits & 0x7fffffffu) > 0x7f800000u ? qnan : rounded;
}

template <int W>
TTTV2_INLINE void round_bf16_range(const float* __restrict src, float* __restrict dst, size_t n) {
  const uint32_t* __restrict in = reinterpret_cast<const uint32_t*>(src);
  uint32_t* __restrict out = reinterpret_cast<uint32_t*>(dst);
  for (size_t i = 0; i < n; ++i) {
    out[i] = bf16_round_bits(in[i]);
  }
}

// ---------------------------------------------------------------------------------------------------
// block floating point
//
// The rounding of one block of 16 values (see reference.py):
//   E    = largest biased exponent of the block's finite values (inf/NaN count as 0),
//   step = 2^(E - 127 - (m - 1)),
//   mag  = min(rint(|x| / step), 2^m - 1), with NaN and inf saturating.
// |x| / step is computed as (|x| · 2^k1) · 2^k2 with k1 + k2 = -log2(step) and k1, k2 of the same sign:
// both factors are normal floats (2^-log2(step) alone can overflow), and the result equals the
// reference's correctly rounded quotient whenever that is a normal float; when it is not, both are
// below 2^-126 and round to magnitude 0.

template <int W>
struct BfpBlock {
  typename Vec<W>::i bits[Vec<W>::kPerBlock];  // input bits
  typename Vec<W>::f mag[Vec<W>::kPerBlock];   // rounded, saturated magnitudes (small integers)
  typename Vec<W>::i exponent;                 // E in every lane
};

template <int W>
TTTV2_INLINE BfpBlock<W> bfp_round_block(const float* x, int mantissa_bits, float max_mag) {
  using I = typename Vec<W>::i;
  using F = typename Vec<W>::f;
  constexpr int kN = Vec<W>::kPerBlock;
  BfpBlock<W> blk;
  I e_max = {};
  for (int v = 0; v < kN; ++v) {
    blk.bits[v] = load<I>(x + v * W);
    const I e = (blk.bits[v] >> 23) & 0xff;
    e_max = vmax(e_max, e == 0xff ? 0 : e);
  }
  blk.exponent = all_lanes_max<W>(e_max);
  const I k = (127 + (mantissa_bits - 1)) - blk.exponent;  // -log2(step), in [-121, 133]
  const I k1 = k >> 1;
  const F s1 = pow2<W>(k1);
  const F s2 = pow2<W>(k - k1);
  for (int v = 0; v < kN; ++v) {
    const F q = (reinterpret_cast<F>(blk.bits[v] & 0x7fffffff) * s1) * s2;
    const F clamped = q <= max_mag ? q : max_mag;  // also catches NaN and inf
    blk.mag[v] = (clamped + kRoundMagic) - kRoundMagic;
  }
  return blk;
}

template <int W>
TTTV2_INLINE void bfp_pack_blocks(const float* __restrict src, uint8_t* __restrict exps,
                                  uint8_t* __restrict mants, size_t block_begin, size_t block_end,
                                  int mantissa_bits) {
  using I = typename Vec<W>::i;
  const float max_mag = static_cast<float>((1 << mantissa_bits) - 1);
  for (size_t b = block_begin; b < block_end; ++b) {
    const BfpBlock<W> blk = bfp_round_block<W>(src + b * kBlock, mantissa_bits, max_mag);
    for (int v = 0; v < Vec<W>::kPerBlock; ++v) {
      const I mag = __builtin_convertvector(blk.mag[v], I);
      // sign bit of the input, dropped when the magnitude rounds to 0
      const I byte = ((blk.bits[v] >> 24) & 0x80 & (mag != 0)) | mag;
      store(mants + b * kBlock + v * W, narrow_to_bytes<W>(byte));
    }
    exps[b] = static_cast<uint8_t>(blk.exponent[0]);
  }
}

template <int W>
TTTV2_INLINE void bfp_quantize_blocks(const float* __restrict src, float* __restrict dst, size_t block_begin,
                                      size_t block_end, int mantissa_bits) {
  using I = typename Vec<W>::i;
  using F = typename Vec<W>::f;
  const float max_mag = static_cast<float>((1 << mantissa_bits) - 1);
  for (size_t b = block_begin; b < block_end; ++b) {
    const BfpBlock<W> blk = bfp_round_block<W>(src + b * kBlock, mantissa_bits, max_mag);
    // step = 2^(E - 127 - (m - 1)) >= 2^-133 may be denormal: product of two normal powers, exact
    const I se = blk.exponent - (127 + (mantissa_bits - 1));
    const I se1 = se >> 1;
    const F step = pow2<W>(se1) * pow2<W>(se - se1);
    for (int v = 0; v < Vec<W>::kPerBlock; ++v) {
      // as unpacking the packed value would: magnitude 0 comes back as +0
      const I sign = blk.bits[v] & static_cast<int32_t>(0x80000000u) & (blk.mag[v] != 0.0f);
      store(dst + b * kBlock + v * W, reinterpret_cast<I>(blk.mag[v] * step) | sign);
    }
  }
}

template <int W>
TTTV2_INLINE void bfp_unpack_blocks(const uint8_t* __restrict exps, const uint8_t* __restrict mants,
                                    float* __restrict dst, size_t block_begin, size_t block_end,
                                    int mantissa_bits) {
  float step[256];  // 2^(E - 127 - (m - 1)) >= 2^-133, exact
  for (int e = 0; e < 256; ++e) {
    step[e] = pow2f(e - 127 - (mantissa_bits - 1));
  }
  using I = typename Vec<W>::i;
  using F = typename Vec<W>::f;
  for (size_t b = block_begin; b < block_end; ++b) {
    const float block_step = step[exps[b]];
    for (int v = 0; v < Vec<W>::kPerBlock; ++v) {
      const I m = widen_bytes<W>(load<typename Vec<W>::b>(mants + b * kBlock + v * W));
      // magnitude · step is exact (or, for E = 255, overflows to inf exactly like ldexp)
      const F value = __builtin_convertvector(m & 0x7f, F) * block_step;
      store(dst + b * kBlock + v * W, reinterpret_cast<I>(value) | ((m & 0x80) << 24));
    }
  }
}

TTTV2_DEFINE_MULTIVERSION(round_bf16_range, (const float* src, float* dst, size_t n), (src, dst, n))
TTTV2_DEFINE_MULTIVERSION(bfp_pack_blocks,
                          (const float* src, uint8_t* exps, uint8_t* mants, size_t begin, size_t end, int m),
                          (src, exps, mants, begin, end, m))
TTTV2_DEFINE_MULTIVERSION(bfp_quantize_blocks,
                          (const float* src, float* dst, size_t begin, size_t end, int m),
                          (src, dst, begin, end, m))
TTTV2_DEFINE_MULTIVERSION(bfp_unpack_blocks,
                          (const uint8_t* exps, const uint8_t* mants, float* dst, size_t begin, size_t end,
                           int m),
                          (exps, mants, dst, begin, end, m))

}  // namespace

void round_bfloat16(const float* src, float* dst, size_t n) {
  parallel_for(n, kOpMinElemsPerThread, kBlock, [&](size_t begin, size_t end) {
    round_bf16_range_best(src + begin, dst + begin, end - begin);
  });
}

// The bfp kernels work on the flat sequence of blocks (rows * cols / 16 of them, row-major): a block
// never straddles two rows because cols is a multiple of 16.
void bfp_pack(const float* src, uint8_t* exponents, uint8_t* mantissas, size_t rows, size_t cols,
              int mantissa_bits) {
  parallel_for(rows * cols / kBlock, kOpMinElemsPerThread / kBlock, 4, [&](size_t begin, size_t end) {
    bfp_pack_blocks_best(src, exponents, mantissas, begin, end, mantissa_bits);
  });
}

void bfp_unpack(const uint8_t* exponents, const uint8_t* mantissas, float* dst, size_t rows, size_t cols,
                int mantissa_bits) {
  parallel_for(rows * cols / kBlock, kOpMinElemsPerThread / kBlock, 4, [&](size_t begin, size_t end) {
    bfp_unpack_blocks_best(exponents, mantissas, dst, begin, end, mantissa_bits);
  });
}

void bfp_quantize(const float* src, float* dst, size_t rows, size_t cols, int mantissa_bits) {
  parallel_for(rows * cols / kBlock, kOpMinElemsPerThread / kBlock, 4, [&](size_t begin, size_t end) {
    bfp_quantize_blocks_best(src, dst, begin, end, mantissa_bits);
  });
}

}  // namespace tttv2
