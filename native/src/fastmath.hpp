// Inline, vectorisable float math shared by the kernels (no libm calls in hot loops).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels.hpp"

namespace tttv2 {

// a * b + c: one fused multiply-add in the AVX2 / AVX-512 versions of a kernel (W >= 8, see
// TTTV2_DEFINE_MULTIVERSION), two roundings in the baseline version. Only for approximations whose
// rounding does not have to match the reference bit for bit.
template <int W>
TTTV2_INLINE float madd(float a, float b, float c) {
#if TTTV2_MULTIVERSION
  if constexpr (W >= 8) {
    return __builtin_fmaf(a, b, c);
  }
#endif
  return a * b + c;
}

constexpr float kExpShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds |t| < 2^22 to an integer

// e^x = p · 2^n for float32 (the part shared by the exp functions below): n = round(x / ln 2), held in the low
// mantissa bits of `shifted` = x / ln 2 + kExpShifter, and p = e^r with |r| <= ln(2)/2 by its degree-7 Taylor
// polynomial (truncation error < 1e-8 relative). x must already be clamped to [-104, 104] (or NaN, which
// propagates).
template <int W>
TTTV2_INLINE float exp_poly(float x, float& shifted) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // 16 significant bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  shifted = madd<W>(x, kLog2e, kExpShifter);
  const float n = shifted - kExpShifter;
  float r = madd<W>(-n, kLn2Hi, x);
  r = madd<W>(-n, kLn2Lo, r);
  float p = 1.0f / 5040.0f;
  p = madd<W>(p, r, 1.0f / 720.0f);
  p = madd<W>(p, r, 1.0f / 120.0f);
  p = madd<W>(p, r, 1.0f / 24.0f);
  p = madd<W>(p, r, 1.0f / 6.0f);
  p = madd<W>(p, r, 0.5f);
  p = madd<W>(p, r, 1.0f);
  p = madd<W>(p, r, 1.0f);
  return p;
}

// exp_poly with n as an integer (ni)
template <int W>
TTTV2_INLINE float exp_split(float x, int32_t& ni) {
  float shifted;
  const float p = exp_poly<W>(x, shifted);
  ni = static_cast<int32_t>(f32_bits(shifted) - f32_bits(kExpShifter));
  return p;
}

// e^x for float32, within ~2 ulp of the correctly rounded result over the whole float range: p · 2^n from
// exp_split, 2^n applied as two exact power-of-two factors so that results in the denormal range and overflow to
// +inf are rounded correctly. NaN propagates; -inf gives 0.
// kNonPositive: the caller guarantees x <= 0 or NaN (softmax's x - max): the same result with one clamp instead
// of the symmetric one.
template <int W, bool kNonPositive = false>
TTTV2_INLINE float exp_f32(float x) {
  // e^-104 rounds to 0 and e^104 overflows to +inf. One symmetric clamp (two would become branches
  // that stop the loop from vectorising); the comparison is false for NaN, which passes through.
  if constexpr (kNonPositive) {
    x = x < -104.0f ? -104.0f : x;
  } else {
    x = std::fabs(x) > 104.0f ? std::copysign(104.0f, x) : x;
  }
  int32_t ni;
  const float p = exp_split<W>(x, ni);
  // n in [-150, 150] for the clamped x; split into two halves in [-75, 75] (normal powers of two)
  const int32_t n1 = ni >> 1;
  const int32_t n2 = ni - n1;
  const float s1 = bits_f32(static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = bits_f32(static_cast<uint32_t>(n2 + 127) << 23);
  return (p * s1) * s2;
}

// e^x for x in [-87, 87] (softmax's x - max on a row spanning at most 87, silu's -v for |v| <= 87; never NaN):
// exp_f32's bits. Every result in this range is a normal float (n in [-126, 126], and p > 1 when n = -126), so
// p · 2^n is exact and is made by adding n to p's exponent field, an integer addition instead of exp_f32's two
// multiplications (whose first product is exact and whose second rounds nothing for a normal result). The low 9
// bits of exp_poly's `shifted` hold n modulo 512 (kExpShifter's are zero), so n << 23 is shifted's bits << 23
// (modulo 2^32). Wrong for NaN (its payload bits are added too) and out-of-range x: the callers check first.
template <int W>
TTTV2_INLINE float exp_f32_normal(float x) {
  float shifted;
  const float p = exp_poly<W>(x, shifted);
  return bits_f32(f32_bits(p) + (f32_bits(shifted) << 23));
}

// e^x for callers that only use 1 + e^x (the sigmoid in silu): the same value as exp_f32 wherever 1 + e^x is not
// exactly 1, +inf where e^x overflows, NaN for NaN; below 2^-125 another value under 2^-124 (1 + either is 1). That
// lets it apply 2^n with one power of two (n clamped to [-125, 129]) instead of two: fewer operations per value,
// and the sum 1 + e^x, hence silu, rounds exactly as with exp_f32 (checked on 5M inputs at every SIMD level).
template <int W>
TTTV2_INLINE float exp_f32_plus_one_only(float x) {
  x = std::fabs(x) > 104.0f ? std::copysign(104.0f, x) : x;  // as in exp_f32
  int32_t ni;
  const float p = exp_split<W>(x, ni);
  int32_t nc = ni < -125 ? -125 : ni;
  nc = nc > 129 ? 129 : nc;
  // 2^(nc - 1): normal for nc <= 128, +inf for 129 (then e^x overflows anyway: x > 89 > ln(FLT_MAX))
  const float half_scale = bits_f32(static_cast<uint32_t>(nc + 126) << 23);
  return (p * half_scale) * 2.0f;  // p * 2^nc exactly, rounded once (to +inf on overflow) as exp_f32 rounds
}

}  // namespace tttv2
