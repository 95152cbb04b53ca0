// Element-wise kernels: interleaved rotary embedding and the SwiGLU gate silu(a) * b.
#include "fastmath.hpp"
#include "kernels.hpp"

namespace tttv2 {
namespace {

constexpr size_t kChunk = 512;  // even

template <int W>
TTTV2_INLINE void rotary_rows(const float* __restrict x, const float* __restrict cos,
                              const float* __restrict sin, float* __restrict dst, size_t begin, size_t end,
                              size_t d, size_t m, size_t inner) {
  for (size_t r = begin; r < end; ++r) {
    const size_t t = (r / inner) % m;
    const float* __restrict xr = x + r * d;
    const float* __restrict c = cos + t * d;
    const float* __restrict s = sin + t * d;
    float* __restrict yr = dst + r * d;
    // y = x * cos + swapped * sin with swapped = (-x1, x0, -x3, x2, ...): the reference's operations and
    // rounding (negation is exact). The swapped pairs go through a small buffer so that the multiply-adds
    // run as plain contiguous loops; written pairwise, GCC 12 turns them into vfmaddsub even with
    // -ffp-contract=off, which changes the rounding.
    float swapped[kChunk];
    for (size_t k0 = 0; k0 < d; k0 += kChunk) {
      const size_t len = d - k0 < kChunk ? d - k0 : kChunk;
      for (size_t k = 0; k < len; k += 2) {
        swapped[k] = -xr[k0 + k + 1];
        swapped[k + 1] = xr[k0 + k];
      }
      for (size_t k = 0; k < len; ++k) {
        yr[k0 + k] = xr[k0 + k] * c[k0 + k] + swapped[k] * s[k0 + k];
      }
    }
  }
}

template <int W>
TTTV2_INLINE void silu_mul_exact(const float* __restrict a, const float* __restrict b, float* __restrict dst,
                                 size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float v = a[i];
    dst[i] = v / (1.0f + exp_f32_plus_one_only<W>(-v)) * b[i];
  }
}

// silu(a) * b in blocks: first with exp_f32_normal, which gives exp_f32_plus_one_only's 1 + e^-v wherever
// |v| <= 87 (the same e^-v, or both under 2^-124 where 1 + e^-v is 1), and with the largest |v| of the block
// found on the way (as integer bits: a NaN's are larger than any number's); a block holding a larger |v|, an
// infinity or a NaN is then redone by silu_mul_exact. Same bits either way, fewer operations per value.
template <int W>
TTTV2_INLINE void silu_mul_range(const float* __restrict a, const float* __restrict b, float* __restrict dst,
                                 size_t n) {
  constexpr size_t kBlock = 256;
  constexpr size_t kLanes = 16;
  const uint32_t limit = f32_bits(87.0f);
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    uint32_t worst[kLanes] = {};
    for (size_t k = 0; k < kBlock; k += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        const float v = a[i + k + j];
        const uint32_t magnitude = f32_bits(v) & 0x7fffffffu;
        worst[j] = magnitude > worst[j] ? magnitude : worst[j];
        dst[i + k + j] = v / (1.0f + exp_f32_normal<W>(-v)) * b[i + k + j];
      }
    }
    uint32_t block_worst = 0;
    for (size_t j = 0; j < kLanes; ++j) {
      block_worst = worst[j] > block_worst ? worst[j] : block_worst;
    }
    if (block_worst > limit) {
      silu_mul_exact<W>(a + i, b + i, dst + i, kBlock);
    }
  }
  silu_mul_exact<W>(a + i, b + i, dst + i, n - i);
}

TTTV2_DEFINE_MULTIVERSION(rotary_rows,
                          (const float* x, const float* cos, const float* sin, float* dst, size_t begin,
                           size_t end, size_t d, size_t m, size_t inner),
                          (x, cos, sin, dst, begin, end, d, m, inner))
TTTV2_DEFINE_MULTIVERSION(silu_mul_range, (const float* a, const float* b, float* dst, size_t n),
                          (a, b, dst, n))

}  // namespace

void rotary_interleaved(const float* x, const float* cos, const float* sin, float* dst, size_t n, size_t d,
                        size_t m, size_t inner) {
  parallel_rows(
      n, d, [&](size_t begin, size_t end) { rotary_rows_best(x, cos, sin, dst, begin, end, d, m, inner); },
      kOpMinElemsPerThread);
}

void silu_mul(const float* a, const float* b, float* dst, size_t n) {
  parallel_for(n, kOpMinElemsPerThread, 16, [&](size_t begin, size_t end) {
    silu_mul_range_best(a + begin, b + begin, dst + begin, end - begin);
  });
}

}  // namespace tttv2
