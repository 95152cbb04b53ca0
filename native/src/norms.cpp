// Row reductions over the last dim of a [rows, d] float32 array: rms_norm, layer_norm, softmax.
//
// Every step is evaluated in the order the numpy reference defines (tttv2/ttnn/_kernels/reference.py: row_sum,
// rms_norm, layer_norm, softmax), so rms_norm and layer_norm give its bits and softmax differs only by its exp
// (docs/numerics.md §2). Change one side, change the other.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fastmath.hpp"
#include "kernels.hpp"

namespace tttv2 {
namespace {

constexpr size_t kLanes = 32;           // independent accumulators: the loops vectorise
constexpr size_t kChunk = kLanes * 16;  // values summed in float before moving to double

// Sum over a row of term(x[i]) (a float32 value, e.g. the square rounded to float32 like the reference's
// x * x). Each lane adds 16 terms in float32, then the lane sums are accumulated in double: accurate to
// a few 1e-8 relative, and twice as fast as converting every term to double. reference.row_sum is this order.
template <class Term>
TTTV2_INLINE double row_sum(const float* __restrict x, size_t d, Term term) {
  double total[kLanes] = {};
  size_t i = 0;
  for (; i + kChunk <= d; i += kChunk) {
    float acc[kLanes] = {};
    for (size_t k = 0; k < kChunk; k += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        acc[j] += term(x[i + k + j]);
      }
    }
    for (size_t j = 0; j < kLanes; ++j) {
      total[j] += static_cast<double>(acc[j]);
    }
  }
  for (; i < d; ++i) {
    total[i % kLanes] += static_cast<double>(term(x[i]));
  }
  double sum = 0.0;
  for (size_t j = 0; j < kLanes; ++j) {
    sum += total[j];
  }
  return sum;
}

TTTV2_INLINE double sum_values(const float* __restrict x, size_t d) {
  return row_sum(x, d, [](float v) { return v; });
}

TTTV2_INLINE double sum_squares(const float* __restrict x, size_t d) {
  return row_sum(x, d, [](float v) { return v * v; });
}

// (sum of c, sum of c^2) for c = x[i] - shift, one pass, same accumulation scheme as row_sum
TTTV2_INLINE void shifted_sums(const float* __restrict x, size_t d, float shift, double& sum,
                               double& sum_sq) {
  double total[kLanes] = {};
  double total_sq[kLanes] = {};
  size_t i = 0;
  for (; i + kChunk <= d; i += kChunk) {
    float acc[kLanes] = {};
    float acc_sq[kLanes] = {};
    for (size_t k = 0; k < kChunk; k += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        const float c = x[i + k + j] - shift;
        acc[j] += c;
        acc_sq[j] += c * c;
      }
    }
    for (size_t j = 0; j < kLanes; ++j) {
      total[j] += static_cast<double>(acc[j]);
      total_sq[j] += static_cast<double>(acc_sq[j]);
    }
  }
  for (; i < d; ++i) {
    const float c = x[i] - shift;
    total[i % kLanes] += static_cast<double>(c);
    total_sq[i % kLanes] += static_cast<double>(c * c);
  }
  sum = 0.0;
  sum_sq = 0.0;
  for (size_t j = 0; j < kLanes; ++j) {
    sum += total[j];
    sum_sq += total_sq[j];
  }
}

// sum of (x[i] - mean)^2 with the difference and the square rounded to float32
TTTV2_INLINE double sum_centred_squares(const float* __restrict x, float mean, size_t d) {
  return row_sum(x, d, [mean](float v) {
    const float c = v - mean;
    return c * c;
  });
}

// The row's largest and smallest values in one pass, and whether it holds a NaN (which both skip: a NaN still
// turns its own exp and hence the row sum into NaN, so the whole row comes out NaN exactly as with numpy's
// NaN-propagating max). Twice row_sum's lanes: max and min are exact in any grouping (only the sign of a zero
// maximum can differ, and x - (+0) and x - (-0) have the same exp).
TTTV2_INLINE float row_max_min(const float* __restrict x, size_t d, float& min_out, bool& has_nan) {
  constexpr size_t kMaxLanes = 2 * kLanes;
  float lane[kMaxLanes];
  float low[kMaxLanes];
  int32_t nan[kMaxLanes];
  for (size_t j = 0; j < kMaxLanes; ++j) {
    lane[j] = -std::numeric_limits<float>::infinity();
    low[j] = std::numeric_limits<float>::infinity();
    nan[j] = 0;
  }
  size_t i = 0;
  for (; i + kMaxLanes <= d; i += kMaxLanes) {
    for (size_t j = 0; j < kMaxLanes; ++j) {
      const float v = x[i + j];
      lane[j] = v > lane[j] ? v : lane[j];
      low[j] = v < low[j] ? v : low[j];
      nan[j] |= v != v;
    }
  }
  for (; i < d; ++i) {
    lane[0] = x[i] > lane[0] ? x[i] : lane[0];
    low[0] = x[i] < low[0] ? x[i] : low[0];
    nan[0] |= x[i] != x[i];
  }
  float m = lane[0];
  float mn = low[0];
  int32_t any_nan = nan[0];
  for (size_t j = 1; j < kMaxLanes; ++j) {
    m = lane[j] > m ? lane[j] : m;
    mn = low[j] < mn ? low[j] : mn;
    any_nan |= nan[j];
  }
  min_out = mn;
  has_nan = any_nan != 0;
  return m;
}

template <bool kWeight>
TTTV2_INLINE void rms_norm_rows(const float* __restrict x, const float* __restrict weight, float eps,
                                float* __restrict dst, size_t begin, size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    float* yr = dst + r * d;
    const float mean_sq = static_cast<float>(sum_squares(xr, d) / static_cast<double>(d));
    const float inv = 1.0f / std::sqrt(mean_sq + eps);
    for (size_t i = 0; i < d; ++i) {
      const float y = xr[i] * inv;
      yr[i] = kWeight ? y * weight[i] : y;
    }
  }
}

// The mean and 1 / sqrt(var + eps) of one row of layer_norm.
TTTV2_INLINE void layer_norm_stats(const float* __restrict xr, float eps, size_t d, float& mean, float& inv) {
  // One pass over the row for mean and variance, on values shifted by the row's first element:
  // var = E[c^2] - E[c]^2 with c = x - x[0] only cancels when the mean is far from x[0] (in units of
  // the standard deviation); then the variance is recomputed exactly around the mean (second pass),
  // as the reference does. NaN / inf rows take the second pass too and come out NaN like the reference.
  const float shift = xr[0];
  double sum_c = 0.0, sum_c2 = 0.0;
  shifted_sums(xr, d, shift, sum_c, sum_c2);
  const double mean_c = sum_c / static_cast<double>(d);
  double var = sum_c2 / static_cast<double>(d) - mean_c * mean_c;
  mean = static_cast<float>(static_cast<double>(shift) + mean_c);
  if (!(8.0 * var >= mean_c * mean_c)) {
    var = sum_centred_squares(xr, mean, d) / static_cast<double>(d);
  }
  inv = 1.0f / std::sqrt(static_cast<float>(var) + eps);
}

// With a weight or a bias, rows are normalised a few at a time: their statistics first, then the outputs column
// block by column block, so that each block of weight and bias is read once per group from the cache (with a
// 4096-wide row, x, weight, bias and the output row do not fit in the 48 KiB L1 together). Rows over 16 KiB: four
// at a time (x comes from L2 anyway); shorter rows: two with both weight and bias, else one (x stays in L1).
// Measured at 32 × 2048 … 8192 against one row at a time: 0.96× at 4096 and 0.84× at 8192 with both, 0.87× at
// 8192 with a weight only, the same elsewhere. The arithmetic of each value is the same either way.
constexpr size_t kColumnBlock = 512;

template <bool kWeight, bool kBias>
TTTV2_INLINE void layer_norm_rows(const float* __restrict x, const float* __restrict weight,
                                  const float* __restrict bias, float eps, float* __restrict dst,
                                  size_t begin, size_t end, size_t d) {
  constexpr size_t kMaxGroup = 4;
  const size_t group = !(kWeight || kBias)         ? 1
                       : d * sizeof(float) > 16384 ? kMaxGroup
                       : kWeight && kBias          ? 2
                                                   : 1;
  if (d == 0) {
    return;
  }
  for (size_t r0 = begin; r0 < end; r0 += group) {
    const size_t rows = end - r0 < group ? end - r0 : group;
    float mean[kMaxGroup];
    float inv[kMaxGroup];
    for (size_t g = 0; g < rows; ++g) {
      layer_norm_stats(x + (r0 + g) * d, eps, d, mean[g], inv[g]);
    }
    const size_t block = group == 1 ? d : kColumnBlock;  // one row: one pass over it
    for (size_t c0 = 0; c0 < d; c0 += block) {
      const size_t len = d - c0 < block ? d - c0 : block;
      for (size_t g = 0; g < rows; ++g) {
        const float* __restrict xr = x + (r0 + g) * d + c0;
        float* __restrict yr = dst + (r0 + g) * d + c0;
        const float m = mean[g];
        const float s = inv[g];
        for (size_t i = 0; i < len; ++i) {
          float y = (xr[i] - m) * s;
          if (kWeight) {
            y = y * weight[c0 + i];
          }
          if (kBias) {
            y = y + bias[c0 + i];
          }
          yr[i] = y;
        }
      }
    }
  }
}

template <int W>
TTTV2_INLINE void rms_norm_range(const float* x, const float* weight, float eps, float* dst, size_t begin,
                                 size_t end, size_t d) {
  if (weight) {
    rms_norm_rows<true>(x, weight, eps, dst, begin, end, d);
  } else {
    rms_norm_rows<false>(x, nullptr, eps, dst, begin, end, d);
  }
}

template <int W>
TTTV2_INLINE void layer_norm_range(const float* x, const float* weight, const float* bias, float eps,
                                   float* dst, size_t begin, size_t end, size_t d) {
  if (weight && bias) {
    layer_norm_rows<true, true>(x, weight, bias, eps, dst, begin, end, d);
  } else if (weight) {
    layer_norm_rows<true, false>(x, weight, nullptr, eps, dst, begin, end, d);
  } else if (bias) {
    layer_norm_rows<false, true>(x, nullptr, bias, eps, dst, begin, end, d);
  } else {
    layer_norm_rows<false, false>(x, nullptr, nullptr, eps, dst, begin, end, d);
  }
}

// exp(x[i] - m) into y and the row sum, summed exactly as sum_values(y, d) sums (row_sum's lanes and chunks): the
// same bits as exp then sum, one read of the row fewer. kNormal: every x[i] - m is in [-87, 0], so exp_f32_normal
// gives exp_f32's bits.
template <int W, bool kNormal>
TTTV2_INLINE double exp_row_sum(const float* __restrict xr, float m, float* __restrict yr, size_t d) {
  const auto ex = [m](float v) {
    return kNormal ? exp_f32_normal<W>(v - m) : exp_f32<W, true>(v - m);
  };
  double total[kLanes] = {};
  size_t i = 0;
  for (; i + kChunk <= d; i += kChunk) {
    float acc[kLanes] = {};
    for (size_t k = 0; k < kChunk; k += kLanes) {
      for (size_t j = 0; j < kLanes; ++j) {
        const float e = ex(xr[i + k + j]);
        yr[i + k + j] = e;
        acc[j] += e;
      }
    }
    for (size_t j = 0; j < kLanes; ++j) {
      total[j] += static_cast<double>(acc[j]);
    }
  }
  for (size_t k = i; k < d; ++k) {  // the tail: exp as one vector loop, then summed as row_sum does
    yr[k] = ex(xr[k]);
  }
  for (; i < d; ++i) {
    total[i % kLanes] += static_cast<double>(yr[i]);
  }
  double sum = 0.0;
  for (size_t j = 0; j < kLanes; ++j) {
    sum += total[j];
  }
  return sum;
}

template <int W>
TTTV2_INLINE void softmax_range(const float* __restrict x, float* __restrict dst, size_t begin, size_t end,
                                size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    float* yr = dst + r * d;
    float mn;
    bool has_nan;
    const float m = row_max_min(xr, d, mn, has_nan);
    // A row without NaN spanning at most 87 (every exp a normal float: most rows) takes the cheaper exp; the
    // test is false for rows with an infinity (inf - inf is NaN, -inf gives inf).
    const bool normal = !has_nan && m - mn <= 87.0f;
    const double sum = normal ? exp_row_sum<W, true>(xr, m, yr, d) : exp_row_sum<W, false>(xr, m, yr, d);
    const float inv = static_cast<float>(1.0 / sum);
    for (size_t k = 0; k < d; ++k) {
      yr[k] = yr[k] * inv;
    }
  }
}

TTTV2_DEFINE_MULTIVERSION(rms_norm_range,
                          (const float* x, const float* w, float eps, float* dst, size_t begin, size_t end,
                           size_t d),
                          (x, w, eps, dst, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(layer_norm_range,
                          (const float* x, const float* w, const float* b, float eps, float* dst,
                           size_t begin, size_t end, size_t d),
                          (x, w, b, eps, dst, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(softmax_range, (const float* x, float* dst, size_t begin, size_t end, size_t d),
                          (x, dst, begin, end, d))

}  // namespace

void rms_norm(const float* x, const float* weight, float eps, float* dst, size_t rows, size_t d) {
  parallel_rows(
      rows, d, [&](size_t begin, size_t end) { rms_norm_range_best(x, weight, eps, dst, begin, end, d); },
      kOpMinElemsPerThread);
}

// layer_norm takes a second thread from 2 × 64K values (32 × 4096 and 32 × 8192, the decode shapes), far below
// the other device-op kernels' 512K (kOpMinElemsPerThread): there one thread is bound by its core's L3 path
// (≈ 60–90 GB/s), and torch with two threads was 1.03–1.06× faster on an idle machine although its single thread
// is 1.8× slower than ours (docs/performance.md, branch `lnorm`). Rows go out in chunks of at most 16K values
// (four rows at 4096, four at 8192 after rounding to whole groups of four rows), so a worker descheduled by a busy
// core holds up one small chunk, and a call that took twice one thread's time makes the next ones run on the
// calling thread for a while (parallel_for's slow_call). From 512K values the call is cut like the other rows'.
constexpr size_t kLayerNormMinElemsPerThread = size_t(1) << 16;
constexpr size_t kLayerNormChunkElems = size_t(1) << 14;
constexpr size_t kLayerNormChunkAlign = 4;  // layer_norm_rows' largest row group
// A call slower than this per value (about twice one thread's time) found no free core: back off.
constexpr size_t kLayerNormSlowPicosPerValue = 300;

void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* dst, size_t rows,
                size_t d) {
  const auto range = [&](size_t begin, size_t end) {
    layer_norm_range_best(x, weight, bias, eps, dst, begin, end, d);
  };
  const size_t per_row = d ? d : 1;
  if (rows * per_row >= 2 * kOpMinElemsPerThread) {
    parallel_rows(rows, d, range, kOpMinElemsPerThread);
    return;
  }
  parallel_for(rows, (kLayerNormMinElemsPerThread + per_row - 1) / per_row, kLayerNormChunkAlign, range,
               std::max<size_t>(1, kLayerNormChunkElems / per_row),
               std::chrono::nanoseconds(rows * per_row * kLayerNormSlowPicosPerValue / 1000));
}

void softmax(const float* x, float* dst, size_t rows, size_t d) {
  parallel_rows(
      rows, d, [&](size_t begin, size_t end) { softmax_range_best(x, dst, begin, end, d); },
      kOpMinElemsPerThread);
}

}  // namespace tttv2
