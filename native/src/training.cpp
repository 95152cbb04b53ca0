// Fused training kernels: cross-entropy, log-softmax and softmax backward, RMSNorm / LayerNorm forward with
// statistics and their backward, SiLU / SwiGLU-gate backward, the row part of scaled dot-product attention
// (scores → probabilities with seeded dropout, and back), embedding backward, Gumbel-max sampling, dropout
// masks and the SGD / AdamW steps. Semantics: tttv2/ttnn/_kernels/training_reference.py, which the tests
// compare against.
//
// Calling convention (as module.cpp): inputs first, then scalars, then caller-allocated outputs; arrays
// must be C-contiguous CPU arrays of the exact dtype (no implicit conversion, TypeError otherwise); shape
// errors raise ValueError("<kernel>: ...") before any memory is touched; the GIL is released while the
// kernel runs. Row sums accumulate in double and round to float32, like the reference.
//
// Sizes, offsets and strides that come from Python are combined with checked arithmetic (a wrapped product
// would pass a bounds check and address memory far from the array). Arrays whose values decide addresses
// (class ids, embedding ids) are copied and validated while the GIL is held, and the kernel reads the copy:
// another Python thread may write the caller's array as soon as the GIL is released.
#include "training.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/tuple.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "fastmath.hpp"
#include "kernels.hpp"

namespace nb = nanobind;

namespace tttv2 {
namespace training {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr int kKeepShift = 64 - 24;  // dropout compares the top 24 bits with the threshold
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// SplitMix64's finaliser: bits of element `index` of the draw with `key` (see the reference module).
inline uint64_t random_bits(uint64_t key, uint64_t index) {
  uint64_t z = key + (index + 1) * kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// float32 → nearest bfloat16 (ties to even) kept as float32; NaN stays a quiet NaN. Branch-free (selects),
// so the optimizer loops that call it vectorise.
inline float round_bf16(float value) {
  const uint32_t bits = f32_bits(value);
  const uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) & 0xFFFF0000u;
  const uint32_t quiet = (bits | 0x00400000u) & 0xFFFF0000u;
  return bits_f32((bits & 0x7FFFFFFFu) > 0x7F800000u ? quiet : rounded);
}

inline float store(float value, bool bf16) { return bf16 ? round_bf16(value) : value; }

TTTV2_INLINE double sum_d(const float* __restrict x, size_t d) {
  double acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      acc[j] += static_cast<double>(x[i + j]);
    }
  }
  for (; i < d; ++i) {
    acc[0] += static_cast<double>(x[i]);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Σ a[i]·b[i] with each product rounded to float32 (as numpy's a * b), summed in double
TTTV2_INLINE double dot_d(const float* __restrict a, const float* __restrict b, size_t d) {
  double acc[8] = {};
  size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      acc[j] += static_cast<double>(a[i + j] * b[i + j]);
    }
  }
  for (; i < d; ++i) {
    acc[0] += static_cast<double>(a[i] * b[i]);
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

TTTV2_INLINE float max_f(const float* __restrict x, size_t d) {
  float lane[8];
  for (size_t j = 0; j < 8; ++j) {
    lane[j] = kNegInf;
  }
  size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    for (size_t j = 0; j < 8; ++j) {
      lane[j] = x[i + j] > lane[j] ? x[i + j] : lane[j];
    }
  }
  for (; i < d; ++i) {
    lane[0] = x[i] > lane[0] ? x[i] : lane[0];
  }
  float m = lane[0];
  for (size_t j = 1; j < 8; ++j) {
    m = lane[j] > m ? lane[j] : m;
  }
  return m;
}

// e[i] = exp(x[i] − m); returns Σ e in double
template <int W>
TTTV2_INLINE double exp_shifted(const float* __restrict x, float m, float* __restrict e, size_t d) {
  for (size_t i = 0; i < d; ++i) {
    e[i] = exp_f32<W>(x[i] - m);
  }
  return sum_d(e, d);
}

// --- losses and the softmax family -------------------------------------------------------------------------

template <int W>
TTTV2_INLINE void ce_forward_range(const float* x, const int64_t* t, float* loss, size_t begin, size_t end,
                                   size_t v) {
  std::vector<float> e(v);
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * v;
    const float m = max_f(xr, v);
    const double s = exp_shifted<W>(xr, m, e.data(), v);
    loss[r] = static_cast<float>(static_cast<double>(m) + std::log(s) - static_cast<double>(xr[t[r]]));
  }
}

template <int W>
TTTV2_INLINE void ce_backward_range(const float* x, const int64_t* t, const float* scale, size_t scale_step,
                                    float* dx, size_t begin, size_t end, size_t v) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * v;
    float* dr = dx + r * v;
    const float m = max_f(xr, v);
    const float inv = static_cast<float>(1.0 / exp_shifted<W>(xr, m, dr, v));
    const float sc = scale[r * scale_step];
    for (size_t j = 0; j < v; ++j) {
      dr[j] = sc * (dr[j] * inv);
    }
    dr[t[r]] = sc * ((exp_f32<W>(xr[t[r]] - m) * inv) - 1.0f);
  }
}

template <int W>
TTTV2_INLINE void log_softmax_range(const float* x, float* y, size_t begin, size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float m = max_f(xr, d);
    const double s = exp_shifted<W>(xr, m, yr, d);
    const float c = static_cast<float>(static_cast<double>(m) + std::log(s));
    for (size_t j = 0; j < d; ++j) {
      yr[j] = xr[j] - c;
    }
  }
}

template <int W>
TTTV2_INLINE void log_softmax_backward_range(const float* y, const float* dy, float* dx, size_t begin,
                                             size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* yr = y + r * d;
    const float* gr = dy + r * d;
    float* dr = dx + r * d;
    const float s = static_cast<float>(sum_d(gr, d));
    for (size_t j = 0; j < d; ++j) {
      dr[j] = gr[j] - exp_f32<W>(yr[j]) * s;
    }
  }
}

template <int W>
TTTV2_INLINE void softmax_backward_range(const float* y, const float* dy, float* dx, size_t begin, size_t end,
                                         size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* yr = y + r * d;
    const float* gr = dy + r * d;
    float* dr = dx + r * d;
    const float s = static_cast<float>(dot_d(gr, yr, d));
    for (size_t j = 0; j < d; ++j) {
      dr[j] = yr[j] * (gr[j] - s);
    }
  }
}

// --- norms
// ----------------------------------------------------------------------------------------------------

TTTV2_INLINE float rms_of(const float* __restrict x, size_t d, float eps) {
  return std::sqrt(static_cast<float>(dot_d(x, x, d) / static_cast<double>(d)) + eps);
}

template <int W>
TTTV2_INLINE void rms_forward_range(const float* x, const float* w, float eps, float* y, float* rms,
                                    size_t begin, size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    const float rr = rms_of(xr, d, eps);
    rms[r] = rr;
    const float inv = 1.0f / rr;
    if (w) {
      for (size_t j = 0; j < d; ++j) {
        yr[j] = (xr[j] * inv) * w[j];
      }
    } else {
      for (size_t j = 0; j < d; ++j) {
        yr[j] = xr[j] * inv;
      }
    }
  }
}

// dx for rows [begin, end); adds Σ_rows dy·x/rms into dw_acc[d] (double)
template <int W>
TTTV2_INLINE void rms_backward_range(const float* x, const float* w, const float* rms, float eps,
                                     const float* dy, float* dx, double* dw_acc, float* g, size_t begin,
                                     size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    const float* gr = dy + r * d;
    float* dr = dx + r * d;
    const float inv = 1.0f / (rms ? rms[r] : rms_of(xr, d, eps));
    for (size_t j = 0; j < d; ++j) {
      g[j] = (w ? gr[j] * w[j] : gr[j]) * inv;
    }
    const float c = static_cast<float>(dot_d(xr, g, d) / static_cast<double>(d)) * inv * inv;
    for (size_t j = 0; j < d; ++j) {
      dr[j] = g[j] - xr[j] * c;
      dw_acc[j] += static_cast<double>((gr[j] * xr[j]) * inv);
    }
  }
}

TTTV2_INLINE void mean_rstd(const float* __restrict x, size_t d, float eps, float& mean, float& rstd) {
  mean = static_cast<float>(sum_d(x, d) / static_cast<double>(d));
  double acc = 0.0;
  for (size_t j = 0; j < d; ++j) {
    const float c = x[j] - mean;
    acc += static_cast<double>(c * c);
  }
  rstd = 1.0f / std::sqrt(static_cast<float>(acc / static_cast<double>(d)) + eps);
}

template <int W>
TTTV2_INLINE void ln_forward_range(const float* x, const float* w, const float* b, float eps, float* y,
                                   float* mean, float* rstd, size_t begin, size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    float mu, rs;
    mean_rstd(xr, d, eps, mu, rs);
    mean[r] = mu;
    rstd[r] = rs;
    for (size_t j = 0; j < d; ++j) {
      float v = (xr[j] - mu) * rs;
      if (w) {
        v = v * w[j];
      }
      if (b) {
        v = v + b[j];
      }
      yr[j] = v;
    }
  }
}

template <int W>
TTTV2_INLINE void ln_backward_range(const float* x, const float* w, const float* mean, const float* rstd,
                                    float eps, const float* dy, float* dx, double* dw_acc, double* db_acc,
                                    float* xhat, float* g, size_t begin, size_t end, size_t d) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * d;
    const float* gr = dy + r * d;
    float* dr = dx + r * d;
    float mu, rs;
    if (mean && rstd) {
      mu = mean[r];
      rs = rstd[r];
    } else {
      mean_rstd(xr, d, eps, mu, rs);
    }
    for (size_t j = 0; j < d; ++j) {
      xhat[j] = (xr[j] - mu) * rs;
      g[j] = w ? gr[j] * w[j] : gr[j];
    }
    const float a = static_cast<float>(sum_d(g, d) / static_cast<double>(d));
    const float bb = static_cast<float>(dot_d(g, xhat, d) / static_cast<double>(d));
    for (size_t j = 0; j < d; ++j) {
      dr[j] = rs * ((g[j] - a) - xhat[j] * bb);
      dw_acc[j] += static_cast<double>(gr[j] * xhat[j]);
      db_acc[j] += static_cast<double>(gr[j]);
    }
  }
}

// --- activations
// -----------------------------------------------------------------------------------------------

template <int W>
TTTV2_INLINE float sigmoid(float x) {
  return 1.0f / (1.0f + exp_f32<W>(-x));
}

template <int W>
TTTV2_INLINE void silu_backward_range(const float* x, const float* dy, float* dx, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const float s = sigmoid<W>(x[i]);
    dx[i] = dy[i] * (s * (1.0f + x[i] * (1.0f - s)));
  }
}

template <int W>
TTTV2_INLINE void gate_backward_range(const float* a, const float* b, const float* dh, float* da, float* db,
                                      float* h, size_t begin, size_t end) {
  for (size_t i = begin; i < end; ++i) {
    const float s = sigmoid<W>(a[i]);
    const float sw = a[i] * s;
    da[i] = (dh[i] * b[i]) * (s * (1.0f + a[i] * (1.0f - s)));
    db[i] = dh[i] * sw;
    h[i] = sw * b[i];
  }
}

// --- attention rows
// -----------------------------------------------------------------------------------------------

struct Attn {
  size_t heads, sq, sk;              // of the (chunk of the) score array [B, heads, sq, sk]
  size_t b0;                         // batch offset of the chunk in the full array (dropout indexing)
  const float* mask;                 // additive, or null
  size_t mask_sb, mask_sh, mask_si;  // its strides (0 where broadcast); the key dim is contiguous
  float scale;
  bool causal;
  bool dropout;
  uint64_t threshold;  // keep iff bits >> 40 >= threshold
  float keep_scale;    // 1 / (1 - p)
  uint64_t key;
};

// s[j] = raw[j]·scale + mask for score row r of the chunk; returns how many leading keys are live (causal:
// keys after the query are masked, so only j <= i is computed; the caller treats the rest as −inf)
TTTV2_INLINE size_t scores_row(const Attn& at, const float* __restrict raw, size_t r, float* __restrict s) {
  const size_t i = r % at.sq;
  const size_t h = (r / at.sq) % at.heads;
  const size_t b = r / (at.sq * at.heads) + at.b0;
  const float* mrow = at.mask ? at.mask + b * at.mask_sb + h * at.mask_sh + i * at.mask_si : nullptr;
  const size_t live = at.causal ? std::min(at.sk, i + 1) : at.sk;
  for (size_t j = 0; j < live; ++j) {
    float v = raw[j] * at.scale;
    if (mrow) {
      v = v + mrow[j];
    }
    s[j] = v;
  }
  return live;
}

// dropout multiplier of element j of score row r (global element index over the full array)
TTTV2_INLINE float keep_factor(const Attn& at, size_t r, size_t j) {
  const uint64_t index = (static_cast<uint64_t>(at.b0) * at.heads * at.sq + r) * at.sk + j;
  return (random_bits(at.key, index) >> kKeepShift) >= at.threshold ? at.keep_scale : 0.0f;
}

template <int W>
TTTV2_INLINE float row_lse(const float* s, float* e, size_t d) {
  const float m = max_f(s, d);
  if (!(m > kNegInf)) {
    return kNegInf;
  }
  const double total = exp_shifted<W>(s, m, e, d);
  return static_cast<float>(static_cast<double>(m) + std::log(total));
}

template <int W>
TTTV2_INLINE void attn_forward_range(const Attn& at, const float* raw, float* probs, float* lse, size_t begin,
                                     size_t end) {
  const size_t d = at.sk;
  for (size_t r = begin; r < end; ++r) {
    float* pr = probs + r * d;
    const size_t live = scores_row(at, raw + r * d, r, pr);
    std::fill(pr + live, pr + d, 0.0f);
    const float m = max_f(pr, live);
    if (!(m > kNegInf)) {  // no attendable key: zero probabilities
      std::fill(pr, pr + live, 0.0f);
      lse[r] = kNegInf;
      continue;
    }
    for (size_t j = 0; j < live; ++j) {
      pr[j] = exp_f32<W>(pr[j] - m);
    }
    const double total = sum_d(pr, live);
    lse[r] = static_cast<float>(static_cast<double>(m) + std::log(total));
    const float inv = static_cast<float>(1.0 / total);
    for (size_t j = 0; j < live; ++j) {
      pr[j] = pr[j] * inv;
    }
    if (at.dropout) {
      for (size_t j = 0; j < live; ++j) {
        pr[j] = pr[j] * keep_factor(at, r, j);
      }
    }
  }
}

template <int W>
TTTV2_INLINE void attn_backward_range(const Attn& at, const float* raw, const float* dpd, const float* lse,
                                      const float* glse, float* pd, float* ds, float* tmp, size_t begin,
                                      size_t end) {
  const size_t d = at.sk;
  for (size_t r = begin; r < end; ++r) {
    float* s = ds + r * d;  // scores, then dS
    float* p = pd + r * d;  // P, then P ⊙ Z
    const float* g = dpd + r * d;
    const size_t live = scores_row(at, raw + r * d, r, s);
    std::fill(p + live, p + d, 0.0f);
    std::fill(s + live, s + d, 0.0f);
    const float l = lse ? lse[r] : row_lse<W>(s, tmp, live);
    if (!(l > kNegInf)) {
      std::fill(p, p + live, 0.0f);
      std::fill(s, s + live, 0.0f);
      continue;
    }
    for (size_t j = 0; j < live; ++j) {
      p[j] = exp_f32<W>(s[j] - l);  // P
    }
    const float gl = glse ? glse[r] : 0.0f;
    if (at.dropout) {
      double u = 0.0;
      for (size_t j = 0; j < live; ++j) {
        const float z = keep_factor(at, r, j);
        const float pz = p[j] * z;
        u += static_cast<double>(pz * g[j]);
        s[j] = g[j] * z;  // Z ⊙ dPd
        tmp[j] = pz;
      }
      const float uf = static_cast<float>(u) - gl;
      for (size_t j = 0; j < live; ++j) {
        s[j] = p[j] * (s[j] - uf);
        p[j] = tmp[j];
      }
    } else {
      const float uf = static_cast<float>(dot_d(p, g, live)) - gl;
      for (size_t j = 0; j < live; ++j) {
        s[j] = p[j] * (g[j] - uf);
      }
    }
  }
}

// --- sampling and the optimizers
// ----------------------------------------------------------------------------------

void gumbel_argmax_range(const float* x, size_t v, double temperature, uint64_t key, uint32_t* out,
                         size_t begin, size_t end) {
  for (size_t r = begin; r < end; ++r) {
    const float* xr = x + r * v;
    size_t best = 0;
    if (temperature == 0.0) {
      float m = xr[0];
      for (size_t j = 1; j < v; ++j) {
        if (xr[j] > m) {
          m = xr[j];
          best = j;
        }
      }
    } else {
      double m = -std::numeric_limits<double>::infinity();
      for (size_t j = 0; j < v; ++j) {
        const uint64_t bits = random_bits(key, r * v + j);
        const double u = (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
        const double score = static_cast<double>(xr[j]) / temperature - std::log(-std::log(u));
        if (score > m || j == 0) {
          m = score;
          best = j;
        }
      }
    }
    out[r] = static_cast<uint32_t>(best);
  }
}

struct Sgd {
  float lr, momentum, dampening_c, weight_decay;  // dampening_c = 1 − dampening
  bool nesterov, first_step, bf16_param, bf16_buf;
};

// The scalars are copied to locals (the float stores could otherwise alias the struct's float members, which
// forces reloads) and the per-element choices are selects; the bfloat16 rounding flags are template
// parameters, because GCC does not unswitch a loop on that many invariant conditions. The SGD loops
// vectorise; the AdamW loop stays scalar (sqrt keeps errno semantics without -fno-math-errno).
template <bool kRoundP, bool kRoundB>
TTTV2_INLINE void sgd_loop(const Sgd& o, float* __restrict param, const float* __restrict grad,
                           float* __restrict buf, size_t begin, size_t end) {
  const float lr = -o.lr, mu = o.momentum, damp = o.dampening_c, wd = o.weight_decay;
  const bool nesterov = o.nesterov, first = o.first_step;
  const bool decay = wd != 0.0f;
  if (buf) {
    for (size_t i = begin; i < end; ++i) {
      const float p = param[i];
      const float g0 = grad[i];
      const float g = decay ? g0 + p * wd : g0;
      const float b = buf[i] * mu + g * damp;
      const float nb = first ? g : b;
      buf[i] = kRoundB ? round_bf16(nb) : nb;
      const float step = nesterov ? g + nb * mu : nb;
      const float np = p + step * lr;
      param[i] = kRoundP ? round_bf16(np) : np;
    }
  } else {
    for (size_t i = begin; i < end; ++i) {
      const float p = param[i];
      const float g0 = grad[i];
      const float g = decay ? g0 + p * wd : g0;
      const float np = p + g * lr;
      param[i] = kRoundP ? round_bf16(np) : np;
    }
  }
}

template <int W>
TTTV2_INLINE void sgd_range(const Sgd& o, float* param, const float* grad, float* buf, size_t begin,
                            size_t end) {
  if (o.bf16_param) {
    if (o.bf16_buf) {
      sgd_loop<true, true>(o, param, grad, buf, begin, end);
    } else {
      sgd_loop<true, false>(o, param, grad, buf, begin, end);
    }
  } else if (o.bf16_buf) {
    sgd_loop<false, true>(o, param, grad, buf, begin, end);
  } else {
    sgd_loop<false, false>(o, param, grad, buf, begin, end);
  }
}

struct Adam {
  float decay, w, one_minus_w, beta2, one_minus_beta2, bc2_sqrt, eps, neg_step_size;
  bool lerp_low;  // w < 0.5 (torch.lerp's two formulas)
  bool bf16_param, bf16_m, bf16_v, bf16_vmax;
};

template <bool kAmsgrad>
TTTV2_INLINE void adamw_loop(const Adam& o, float* __restrict param, const float* __restrict grad,
                             float* __restrict m, float* __restrict v, float* __restrict vmax, size_t begin,
                             size_t end) {
  const float decay = o.decay, w = o.w, omw = o.one_minus_w, beta2 = o.beta2, omb2 = o.one_minus_beta2;
  const float bc2 = o.bc2_sqrt, eps = o.eps, nss = o.neg_step_size;
  const bool low = o.lerp_low, rp = o.bf16_param, rm = o.bf16_m, rv = o.bf16_v, rx = o.bf16_vmax;
  for (size_t i = begin; i < end; ++i) {
    const float g = grad[i];
    const float p = param[i] * decay;
    const float mo = m[i];
    const float lo = mo + w * (g - mo);
    const float hi = g - (g - mo) * omw;
    const float mi = low ? lo : hi;
    float vi = v[i] * beta2 + (omb2 * g) * g;
    m[i] = store(mi, rm);
    v[i] = store(vi, rv);
    if (kAmsgrad) {
      vi = vmax[i] > vi ? vmax[i] : vi;
      vmax[i] = store(vi, rx);
    }
    const float denom = std::sqrt(vi) / bc2 + eps;
    param[i] = store(p + (nss * mi) / denom, rp);
  }
}

template <int W>
TTTV2_INLINE void adamw_range(const Adam& o, float* param, const float* grad, float* m, float* v, float* vmax,
                              size_t begin, size_t end) {
  if (vmax) {
    adamw_loop<true>(o, param, grad, m, v, vmax, begin, end);
  } else {
    adamw_loop<false>(o, param, grad, m, v, nullptr, begin, end);
  }
}

TTTV2_DEFINE_MULTIVERSION(ce_forward_range,
                          (const float* x, const int64_t* t, float* loss, size_t begin, size_t end, size_t v),
                          (x, t, loss, begin, end, v))
TTTV2_DEFINE_MULTIVERSION(ce_backward_range,
                          (const float* x, const int64_t* t, const float* scale, size_t step, float* dx,
                           size_t begin, size_t end, size_t v),
                          (x, t, scale, step, dx, begin, end, v))
TTTV2_DEFINE_MULTIVERSION(log_softmax_range, (const float* x, float* y, size_t begin, size_t end, size_t d),
                          (x, y, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(log_softmax_backward_range,
                          (const float* y, const float* dy, float* dx, size_t begin, size_t end, size_t d),
                          (y, dy, dx, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(softmax_backward_range,
                          (const float* y, const float* dy, float* dx, size_t begin, size_t end, size_t d),
                          (y, dy, dx, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(rms_forward_range,
                          (const float* x, const float* w, float eps, float* y, float* rms, size_t begin,
                           size_t end, size_t d),
                          (x, w, eps, y, rms, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(rms_backward_range,
                          (const float* x, const float* w, const float* rms, float eps, const float* dy,
                           float* dx, double* dw, float* g, size_t begin, size_t end, size_t d),
                          (x, w, rms, eps, dy, dx, dw, g, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(ln_forward_range,
                          (const float* x, const float* w, const float* b, float eps, float* y, float* mean,
                           float* rstd, size_t begin, size_t end, size_t d),
                          (x, w, b, eps, y, mean, rstd, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(ln_backward_range,
                          (const float* x, const float* w, const float* mean, const float* rstd, float eps,
                           const float* dy, float* dx, double* dw, double* db, float* xhat, float* g,
                           size_t begin, size_t end, size_t d),
                          (x, w, mean, rstd, eps, dy, dx, dw, db, xhat, g, begin, end, d))
TTTV2_DEFINE_MULTIVERSION(silu_backward_range,
                          (const float* x, const float* dy, float* dx, size_t begin, size_t end),
                          (x, dy, dx, begin, end))
TTTV2_DEFINE_MULTIVERSION(gate_backward_range,
                          (const float* a, const float* b, const float* dh, float* da, float* db, float* h,
                           size_t begin, size_t end),
                          (a, b, dh, da, db, h, begin, end))
TTTV2_DEFINE_MULTIVERSION(attn_forward_range,
                          (const Attn& at, const float* raw, float* probs, float* lse, size_t begin,
                           size_t end),
                          (at, raw, probs, lse, begin, end))
TTTV2_DEFINE_MULTIVERSION(attn_backward_range,
                          (const Attn& at, const float* raw, const float* dpd, const float* lse,
                           const float* glse, float* pd, float* ds, float* tmp, size_t begin, size_t end),
                          (at, raw, dpd, lse, glse, pd, ds, tmp, begin, end))
TTTV2_DEFINE_MULTIVERSION(sgd_range,
                          (const Sgd& o, float* param, const float* grad, float* buf, size_t begin,
                           size_t end),
                          (o, param, grad, buf, begin, end))
TTTV2_DEFINE_MULTIVERSION(adamw_range,
                          (const Adam& o, float* param, const float* grad, float* m, float* v, float* vmax,
                           size_t begin, size_t end),
                          (o, param, grad, m, v, vmax, begin, end))

// Row reductions with per-column sums (dgamma, dbeta): the rows are split into chunks by the shape alone (one per
// kMinElemsPerThread values, at most kColumnSumChunks), each accumulating its own double partials over its rows in
// order; the partials are added in chunk order. The chunks are handed to the threads, so the bits do not depend on
// the thread count (training_reference._column_sum defines the same order).
constexpr size_t kColumnSumChunks = 8;

template <class Fn>
void rows_with_column_sums(size_t rows, size_t d, size_t nsums, std::vector<double>& sums, Fn&& fn) {
  const size_t want = rows * std::max<size_t>(d, 1) / kMinElemsPerThread;
  const size_t chunks = std::max<size_t>(1, std::min({kColumnSumChunks, want, rows}));
  std::vector<double> partial(chunks * nsums * d, 0.0);
  parallel_for(chunks, 1, 1, [&](size_t c0, size_t c1) {
    std::vector<float> scratch(2 * d);
    for (size_t c = c0; c < c1; ++c) {
      fn(rows * c / chunks, rows * (c + 1) / chunks, partial.data() + c * nsums * d, scratch.data());
    }
  });
  sums.assign(nsums * d, 0.0);
  for (size_t c = 0; c < chunks; ++c) {
    for (size_t k = 0; k < nsums * d; ++k) {
      sums[k] += partial[c * nsums * d + k];
    }
  }
}

// --- bindings
// -----------------------------------------------------------------------------------------------------

using F32In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using F32Out = nb::ndarray<float, nb::c_contig, nb::device::cpu>;
using I64In = nb::ndarray<const int64_t, nb::c_contig, nb::device::cpu>;
using U32Out = nb::ndarray<uint32_t, nb::c_contig, nb::device::cpu>;

[[noreturn]] void fail(const char* kernel, const std::string& message) {
  throw nb::value_error((std::string(kernel) + ": " + message).c_str());
}

template <class Array>
std::string shape_of(const Array& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    s += (i ? ", " : "") + std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

template <class Array>
void expect_2d(const char* k, const char* name, const Array& a) {
  if (a.ndim() != 2) {
    fail(k, std::string(name) + " must be 2-D [rows, d], got shape " + shape_of(a));
  }
}

template <class Array>
void expect_shape(const char* k, const char* name, const Array& a, std::initializer_list<size_t> dims) {
  bool ok = a.ndim() == dims.size();
  size_t i = 0;
  for (size_t dim : dims) {
    ok = ok && a.shape(i++) == dim;
  }
  if (!ok) {
    std::string want = "(";
    i = 0;
    for (size_t dim : dims) {
      want += (i++ ? ", " : "") + std::to_string(dim);
    }
    want += dims.size() == 1 ? ",)" : ")";
    fail(k, std::string(name) + " has the wrong shape: expected " + want + ", got " + shape_of(a));
  }
}

template <class A, class B>
void expect_like(const char* k, const char* name, const A& a, const char* ref_name, const B& ref) {
  bool ok = a.ndim() == ref.ndim();
  for (size_t i = 0; ok && i < ref.ndim(); ++i) {
    ok = a.shape(i) == ref.shape(i);
  }
  if (!ok) {
    fail(k, std::string(name) + " must have the shape of " + ref_name + ": expected " + shape_of(ref) +
                ", got " + shape_of(a));
  }
}

// outputs may not share memory with inputs (or with each other)
template <class A, class B>
void expect_disjoint(const char* k, const char* a_name, const A& a, const char* b_name, const B& b) {
  const auto* pa = static_cast<const unsigned char*>(static_cast<const void*>(a.data()));
  const auto* pb = static_cast<const unsigned char*>(static_cast<const void*>(b.data()));
  if (a.nbytes() && b.nbytes() && pa < pb + b.nbytes() && pb < pa + a.nbytes()) {
    fail(k, std::string(a_name) + " must not overlap " + b_name);
  }
}

// a · b, or ValueError("<kernel>: <what> overflows ...") if the product does not fit in size_t
size_t checked_mul(const char* k, size_t a, size_t b, const char* what) {
  size_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) {
    fail(k, std::string(what) + " overflows: " + std::to_string(a) + " * " + std::to_string(b));
  }
  return out;
}

size_t checked_add(const char* k, size_t a, size_t b, const char* what) {
  size_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    fail(k, std::string(what) + " overflows: " + std::to_string(a) + " + " + std::to_string(b));
  }
  return out;
}

// The ids, copied (each value read once) and checked to lie in [0, n). The kernel must use the copy: the
// caller's array may change once the GIL is released.
std::vector<int64_t> checked_ids(const char* k, const I64In& ids, size_t n) {
  const int64_t* p = ids.data();
  std::vector<int64_t> out(ids.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t id = p[i];
    if (id < 0 || static_cast<uint64_t>(id) >= n) {
      fail(k, "id " + std::to_string(id) + " is out of range [0, " + std::to_string(n) + ")");
    }
    out[i] = id;
  }
  return out;
}

const float* opt_vector(const char* k, const char* name, const std::optional<F32In>& v, size_t d) {
  if (!v) {
    return nullptr;
  }
  expect_shape(k, name, *v, {d});
  return v->data();
}

const float* opt_rows(const char* k, const char* name, const std::optional<F32In>& v, size_t rows) {
  if (!v) {
    return nullptr;
  }
  expect_shape(k, name, *v, {rows});
  return v->data();
}

void bind_rows(nb::module_& t) {
  t.def(
      "cross_entropy_forward",
      [](F32In x, I64In target, F32Out loss) {
        constexpr const char* k = "cross_entropy_forward";
        expect_2d(k, "logits", x);
        const size_t rows = x.shape(0), v = x.shape(1);
        if (v == 0) {
          fail(k, "logits need at least one class, got shape " + shape_of(x));
        }
        expect_shape(k, "target", target, {rows});
        expect_shape(k, "dst", loss, {rows});
        expect_disjoint(k, "dst", loss, "logits", x);
        const std::vector<int64_t> ids = checked_ids(k, target, v);
        if (rows == 0) {
          return;  // nothing to write; a row's scratch would be sized by V, which may be huge
        }
        const float* px = x.data();
        const int64_t* pt = ids.data();
        float* out = loss.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, v, [&](size_t b, size_t e) { ce_forward_range_best(px, pt, out, b, e, v); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("logits").noconvert(), nb::arg("target").noconvert(), nb::arg("dst").noconvert(),
      "dst[r] = logsumexp(logits[r]) − logits[r, target[r]] for logits [rows, V], int64 target [rows].");

  t.def(
      "cross_entropy_backward",
      [](F32In x, I64In target, F32In scale, F32Out dx) {
        constexpr const char* k = "cross_entropy_backward";
        expect_2d(k, "logits", x);
        const size_t rows = x.shape(0), v = x.shape(1);
        if (v == 0) {
          fail(k, "logits need at least one class, got shape " + shape_of(x));
        }
        expect_shape(k, "target", target, {rows});
        if (!(scale.ndim() == 1 && (scale.shape(0) == rows || scale.shape(0) == 1))) {
          fail(k, "scale must have shape (1,) or (" + std::to_string(rows) + ",), got " + shape_of(scale));
        }
        expect_like(k, "dst", dx, "logits", x);
        expect_disjoint(k, "dst", dx, "logits", x);
        const std::vector<int64_t> ids = checked_ids(k, target, v);
        if (rows == 0) {
          return;  // nothing to write
        }
        const size_t step = scale.shape(0) == 1 ? 0 : 1;
        const float* px = x.data();
        const int64_t* pt = ids.data();
        const float* ps = scale.data();
        float* out = dx.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, v, [&](size_t b, size_t e) { ce_backward_range_best(px, pt, ps, step, out, b, e, v); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("logits").noconvert(), nb::arg("target").noconvert(), nb::arg("scale").noconvert(),
      nb::arg("dst").noconvert(),
      "dst = scale[r] · (softmax(logits[r]) − onehot(target[r])); scale (1,) or (rows,).");

  t.def(
      "log_softmax",
      [](F32In x, F32Out y) {
        constexpr const char* k = "log_softmax";
        expect_2d(k, "x", x);
        expect_like(k, "dst", y, "x", x);
        expect_disjoint(k, "dst", y, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* px = x.data();
        float* out = y.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, d, [&](size_t b, size_t e) { log_softmax_range_best(px, out, b, e, d); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("x").noconvert(), nb::arg("dst").noconvert(),
      "Stable log-softmax over the last dim of x [rows, d].");

  t.def(
      "log_softmax_backward",
      [](F32In y, F32In dy, F32Out dx) {
        constexpr const char* k = "log_softmax_backward";
        expect_2d(k, "y", y);
        expect_like(k, "dy", dy, "y", y);
        expect_like(k, "dst", dx, "y", y);
        expect_disjoint(k, "dst", dx, "y", y);
        expect_disjoint(k, "dst", dx, "dy", dy);
        const size_t rows = y.shape(0), d = y.shape(1);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* py = y.data();
        const float* pg = dy.data();
        float* out = dx.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, d, [&](size_t b, size_t e) { log_softmax_backward_range_best(py, pg, out, b, e, d); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("y").noconvert(), nb::arg("dy").noconvert(), nb::arg("dst").noconvert(),
      "dst = dy − exp(y) · Σ dy per row, for y = log_softmax(x) [rows, d].");

  t.def(
      "softmax_backward",
      [](F32In y, F32In dy, F32Out dx) {
        constexpr const char* k = "softmax_backward";
        expect_2d(k, "y", y);
        expect_like(k, "dy", dy, "y", y);
        expect_like(k, "dst", dx, "y", y);
        expect_disjoint(k, "dst", dx, "y", y);
        expect_disjoint(k, "dst", dx, "dy", dy);
        const size_t rows = y.shape(0), d = y.shape(1);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* py = y.data();
        const float* pg = dy.data();
        float* out = dx.data();
        nb::gil_scoped_release release;
        parallel_rows(rows, d,
                      [&](size_t b, size_t e) { softmax_backward_range_best(py, pg, out, b, e, d); });
      },
      nb::arg("y").noconvert(), nb::arg("dy").noconvert(), nb::arg("dst").noconvert(),
      "dst = y · (dy − Σ dy·y) per row, for y = softmax(x) [rows, d].");

  t.def(
      "rms_norm_forward",
      [](F32In x, std::optional<F32In> weight, double eps, F32Out y, F32Out rms) {
        constexpr const char* k = "rms_norm_forward";
        expect_2d(k, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = opt_vector(k, "weight", weight, d);
        expect_like(k, "dst", y, "x", x);
        expect_shape(k, "rms", rms, {rows});
        expect_disjoint(k, "dst", y, "x", x);
        expect_disjoint(k, "rms", rms, "x", x);
        expect_disjoint(k, "rms", rms, "dst", y);
        const float* px = x.data();
        float* py = y.data();
        float* pr = rms.data();
        const float e = static_cast<float>(eps);
        nb::gil_scoped_release release;
        parallel_rows(rows, d,
                      [&](size_t b, size_t en) { rms_forward_range_best(px, w, e, py, pr, b, en, d); });
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("eps"),
      nb::arg("dst").noconvert(), nb::arg("rms").noconvert(),
      "dst = x / rms · weight with rms[r] = sqrt(mean(x[r]²) + eps) written to rms [rows].");

  t.def(
      "rms_norm_backward",
      [](F32In x, std::optional<F32In> weight, std::optional<F32In> rms, double eps, F32In dy, F32Out dx,
         F32Out dweight) {
        constexpr const char* k = "rms_norm_backward";
        expect_2d(k, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = opt_vector(k, "weight", weight, d);
        const float* pr = opt_rows(k, "rms", rms, rows);
        expect_like(k, "dy", dy, "x", x);
        expect_like(k, "dx", dx, "x", x);
        expect_shape(k, "dweight", dweight, {d});
        expect_disjoint(k, "dx", dx, "x", x);
        expect_disjoint(k, "dx", dx, "dy", dy);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* px = x.data();
        const float* pg = dy.data();
        float* pdx = dx.data();
        float* pdw = dweight.data();
        const float e = static_cast<float>(eps);
        nb::gil_scoped_release release;
        std::vector<double> sums;
        rows_with_column_sums(rows, d, 1, sums, [&](size_t b, size_t en, double* acc, float* scratch) {
          rms_backward_range_best(px, w, pr, e, pg, pdx, acc, scratch, b, en, d);
        });
        for (size_t j = 0; j < d; ++j) {
          pdw[j] = static_cast<float>(sums[j]);
        }
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("rms").none().noconvert(),
      nb::arg("eps"), nb::arg("dy").noconvert(), nb::arg("dx").noconvert(), nb::arg("dweight").noconvert(),
      "RMSNorm backward: dx [rows, d] and dweight [d] (summed over rows); rms [rows] or None (recomputed).");

  t.def(
      "layer_norm_forward",
      [](F32In x, std::optional<F32In> weight, std::optional<F32In> bias, double eps, F32Out y, F32Out mean,
         F32Out rstd) {
        constexpr const char* k = "layer_norm_forward";
        expect_2d(k, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = opt_vector(k, "weight", weight, d);
        const float* b = opt_vector(k, "bias", bias, d);
        expect_like(k, "dst", y, "x", x);
        expect_shape(k, "mean", mean, {rows});
        expect_shape(k, "rstd", rstd, {rows});
        expect_disjoint(k, "dst", y, "x", x);
        expect_disjoint(k, "mean", mean, "dst", y);
        expect_disjoint(k, "rstd", rstd, "dst", y);
        expect_disjoint(k, "rstd", rstd, "mean", mean);
        const float* px = x.data();
        float* py = y.data();
        float* pm = mean.data();
        float* ps = rstd.data();
        const float e = static_cast<float>(eps);
        nb::gil_scoped_release release;
        parallel_rows(rows, d, [&](size_t bg, size_t en) {
          ln_forward_range_best(px, w, b, e, py, pm, ps, bg, en, d);
        });
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("bias").none().noconvert(),
      nb::arg("eps"), nb::arg("dst").noconvert(), nb::arg("mean").noconvert(), nb::arg("rstd").noconvert(),
      "dst = (x − mean)·rstd·weight + bias per row, writing mean [rows] and rstd [rows].");

  t.def(
      "layer_norm_backward",
      [](F32In x, std::optional<F32In> weight, std::optional<F32In> mean, std::optional<F32In> rstd,
         double eps, F32In dy, F32Out dx, F32Out dweight, F32Out dbias) {
        constexpr const char* k = "layer_norm_backward";
        expect_2d(k, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = opt_vector(k, "weight", weight, d);
        const float* pm = opt_rows(k, "mean", mean, rows);
        const float* ps = opt_rows(k, "rstd", rstd, rows);
        if ((pm == nullptr) != (ps == nullptr)) {
          fail(k, "mean and rstd must both be given or both be None");
        }
        expect_like(k, "dy", dy, "x", x);
        expect_like(k, "dx", dx, "x", x);
        expect_shape(k, "dweight", dweight, {d});
        expect_shape(k, "dbias", dbias, {d});
        expect_disjoint(k, "dx", dx, "x", x);
        expect_disjoint(k, "dx", dx, "dy", dy);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* px = x.data();
        const float* pg = dy.data();
        float* pdx = dx.data();
        float* pdw = dweight.data();
        float* pdb = dbias.data();
        const float e = static_cast<float>(eps);
        nb::gil_scoped_release release;
        std::vector<double> sums;
        rows_with_column_sums(rows, d, 2, sums, [&](size_t b, size_t en, double* acc, float* scratch) {
          ln_backward_range_best(px, w, pm, ps, e, pg, pdx, acc, acc + d, scratch, scratch + d, b, en, d);
        });
        for (size_t j = 0; j < d; ++j) {
          pdw[j] = static_cast<float>(sums[j]);
          pdb[j] = static_cast<float>(sums[d + j]);
        }
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("mean").none().noconvert(),
      nb::arg("rstd").none().noconvert(), nb::arg("eps"), nb::arg("dy").noconvert(),
      nb::arg("dx").noconvert(), nb::arg("dweight").noconvert(), nb::arg("dbias").noconvert(),
      "LayerNorm backward: dx [rows, d], dweight and dbias [d] (summed over rows); mean/rstd or None.");
}

void bind_elementwise(nb::module_& t) {
  t.def(
      "pointwise_loss",
      [](F32In pred, F32In target, int kind, F32Out dst) {
        constexpr const char* k = "pointwise_loss";
        if (kind != 0 && kind != 1) {
          throw nb::value_error("pointwise_loss: kind: expected 0 (squared) or 1 (absolute)");
        }
        expect_like(k, "target", target, "pred", pred);
        expect_like(k, "dst", dst, "pred", pred);
        expect_disjoint(k, "dst", dst, "pred", pred);
        expect_disjoint(k, "dst", dst, "target", target);
        const float* p = pred.data();
        const float* q = target.data();
        float* out = dst.data();
        const size_t n = pred.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThread, 16, [&](size_t b, size_t e) {
          if (kind == 0) {
            for (size_t i = b; i < e; ++i) {
              const float d = p[i] - q[i];
              out[i] = d * d;
            }
          } else {
            for (size_t i = b; i < e; ++i) out[i] = std::fabs(p[i] - q[i]);
          }
        });
      },
      nb::arg("pred").noconvert(), nb::arg("target").noconvert(), nb::arg("kind"), nb::arg("dst").noconvert(),
      "dst = (pred − target)² (kind 0) or |pred − target| (kind 1) element-wise.");
  t.def(
      "pointwise_loss_backward",
      [](F32In pred, F32In target, std::optional<F32In> grad, float scale, int kind, F32Out dst) {
        constexpr const char* k = "pointwise_loss_backward";
        if (kind != 0 && kind != 1) {
          throw nb::value_error("pointwise_loss_backward: kind: expected 0 (squared) or 1 (absolute)");
        }
        expect_like(k, "target", target, "pred", pred);
        expect_like(k, "dst", dst, "pred", pred);
        expect_disjoint(k, "dst", dst, "pred", pred);
        expect_disjoint(k, "dst", dst, "target", target);
        const float* g = nullptr;
        if (grad) {
          expect_like(k, "grad", *grad, "pred", pred);
          expect_disjoint(k, "dst", dst, "grad", *grad);
          g = grad->data();
        }
        const float* p = pred.data();
        const float* q = target.data();
        float* out = dst.data();
        const size_t n = pred.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThread, 16, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) {
            const float d = p[i] - q[i];
            const float deriv = kind == 0 ? 2.0f * d : static_cast<float>((d > 0.0f) - (d < 0.0f));
            const float gs = (g ? g[i] : 1.0f) * scale;
            out[i] = deriv * gs;
          }
        });
      },
      nb::arg("pred").noconvert(), nb::arg("target").noconvert(), nb::arg("grad").none().noconvert(),
      nb::arg("scale"), nb::arg("kind"), nb::arg("dst").noconvert(),
      "dst = loss'(pred − target) · (grad · scale): 2·d for kind 0, sign(d) for kind 1; grad None means 1.");
  t.def(
      "silu_backward",
      [](F32In x, F32In dy, F32Out dx) {
        constexpr const char* k = "silu_backward";
        expect_like(k, "dy", dy, "x", x);
        expect_like(k, "dst", dx, "x", x);
        expect_disjoint(k, "dst", dx, "x", x);
        expect_disjoint(k, "dst", dx, "dy", dy);
        const float* px = x.data();
        const float* pg = dy.data();
        float* out = dx.data();
        const size_t n = x.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThreadCompute, 16,
                     [&](size_t b, size_t e) { silu_backward_range_best(px, pg, out, b, e); });
      },
      nb::arg("x").noconvert(), nb::arg("dy").noconvert(), nb::arg("dst").noconvert(),
      "dst = dy · σ(x) · (1 + x · (1 − σ(x))) element-wise.");

  t.def(
      "swiglu_gate_backward",
      [](F32In a, F32In b, F32In dh, F32Out da, F32Out db, F32Out h) {
        constexpr const char* k = "swiglu_gate_backward";
        expect_like(k, "b", b, "a", a);
        expect_like(k, "dh", dh, "a", a);
        expect_like(k, "da", da, "a", a);
        expect_like(k, "db", db, "a", a);
        expect_like(k, "h", h, "a", a);
        for (const auto* out : {&da, &db, &h}) {
          expect_disjoint(k, "outputs", *out, "a", a);
          expect_disjoint(k, "outputs", *out, "b", b);
          expect_disjoint(k, "outputs", *out, "dh", dh);
        }
        expect_disjoint(k, "da", da, "db", db);
        expect_disjoint(k, "da", da, "h", h);
        expect_disjoint(k, "db", db, "h", h);
        const float *pa = a.data(), *pb = b.data(), *pg = dh.data();
        float *pda = da.data(), *pdb = db.data(), *ph = h.data();
        const size_t n = a.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThreadCompute, 16,
                     [&](size_t bg, size_t e) { gate_backward_range_best(pa, pb, pg, pda, pdb, ph, bg, e); });
      },
      nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("dh").noconvert(),
      nb::arg("da").noconvert(), nb::arg("db").noconvert(), nb::arg("h").noconvert(),
      "Gate h = silu(a)·b: da = dh·b·σ(a)(1 + a(1 − σ(a))), db = dh·silu(a), and h itself.");
}

// score arrays are [B, H, Sq, Sk]; the mask is given with its strides in elements (0 = broadcast)
Attn attn_params(const char* k, const F32In& raw, const std::optional<F32In>& mask,
                 const std::optional<std::tuple<int64_t, int64_t, int64_t>>& strides, size_t b0, double scale,
                 bool causal, uint64_t threshold, double keep_scale, uint64_t key, size_t total_b) {
  if (raw.ndim() != 4) {
    fail(k, "scores must be 4-D [B, H, Sq, Sk], got shape " + shape_of(raw));
  }
  Attn at{};
  at.heads = raw.shape(1);
  at.sq = raw.shape(2);
  at.sk = raw.shape(3);
  at.b0 = b0;
  if (checked_add(k, b0, raw.shape(0), "batch offset + batch") > total_b) {
    fail(k, "batch offset " + std::to_string(b0) + " + " + std::to_string(raw.shape(0)) +
                " exceeds the batch " + std::to_string(total_b));
  }
  // rows of the chunk (B·H·Sq) and of the full array; the chunk's scores exist, but with Sk = 0 they are empty
  checked_mul(k, checked_mul(k, raw.shape(0), at.heads, "scores rows"), at.sq, "scores rows");
  checked_mul(k, checked_mul(k, total_b, at.heads, "attention rows"), at.sq, "attention rows");
  at.mask = nullptr;
  if (mask) {
    if (!strides) {
      fail(k, "a mask needs its strides");
    }
    const auto [sb, sh, si] = *strides;
    if (sb < 0 || sh < 0 || si < 0) {
      fail(k, "mask strides must be >= 0");
    }
    // elements the mask must hold: 1 + the offset of the last element read, when any is read
    size_t last = 0;
    if (total_b > 0 && at.heads > 0 && at.sq > 0 && at.sk > 0) {
      last = checked_mul(k, total_b - 1, static_cast<size_t>(sb), "mask batch offset");
      last = checked_add(k, last, checked_mul(k, at.heads - 1, static_cast<size_t>(sh), "mask head offset"),
                         "mask offset");
      last = checked_add(k, last, checked_mul(k, at.sq - 1, static_cast<size_t>(si), "mask row offset"),
                         "mask offset");
      last = checked_add(k, last, at.sk, "mask offset");
    }
    if (mask->ndim() != 1 || mask->shape(0) < last) {
      fail(k, "the mask (flattened) must have at least " + std::to_string(last) +
                  " elements for its strides, got " + shape_of(*mask));
    }
    at.mask = mask->data();
    at.mask_sb = static_cast<size_t>(sb);
    at.mask_sh = static_cast<size_t>(sh);
    at.mask_si = static_cast<size_t>(si);
  }
  at.scale = static_cast<float>(scale);
  at.causal = causal;
  at.threshold = threshold;
  at.dropout = threshold > 0;
  at.keep_scale = static_cast<float>(keep_scale);
  at.key = key;
  return at;
}

void bind_attention(nb::module_& t) {
  t.def(
      "sdpa_row_forward",
      [](F32In raw, std::optional<F32In> mask, std::optional<std::tuple<int64_t, int64_t, int64_t>> strides,
         double scale, bool causal, uint64_t threshold, double keep_scale, uint64_t key, size_t b0,
         size_t total_b, F32Out probs, F32Out lse) {
        constexpr const char* k = "sdpa_row_forward";
        const Attn at =
            attn_params(k, raw, mask, strides, b0, scale, causal, threshold, keep_scale, key, total_b);
        expect_like(k, "probs", probs, "scores", raw);
        const size_t rows = raw.shape(0) * at.heads * at.sq;
        expect_shape(k, "lse", lse, {rows});
        expect_disjoint(k, "probs", probs, "scores", raw);
        expect_disjoint(k, "lse", lse, "probs", probs);
        if (mask) {
          expect_disjoint(k, "probs", probs, "mask", *mask);
        }
        const float* pr = raw.data();
        float* pp = probs.data();
        float* pl = lse.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, at.sk, [&](size_t b, size_t e) { attn_forward_range_best(at, pr, pp, pl, b, e); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("scores").noconvert(), nb::arg("mask").none().noconvert(), nb::arg("mask_strides").none(),
      nb::arg("scale"), nb::arg("causal"), nb::arg("threshold"), nb::arg("keep_scale"), nb::arg("key"),
      nb::arg("b0"), nb::arg("total_b"), nb::arg("probs").noconvert(), nb::arg("lse").noconvert(),
      "Attention rows: softmax(scores·scale + mask) with causal masking and seeded dropout → probs, lse.");

  t.def(
      "sdpa_row_backward",
      [](F32In raw, F32In dpd, std::optional<F32In> mask,
         std::optional<std::tuple<int64_t, int64_t, int64_t>> strides, std::optional<F32In> lse,
         std::optional<F32In> glse, double scale, bool causal, uint64_t threshold, double keep_scale,
         uint64_t key, size_t b0, size_t total_b, F32Out pd, F32Out ds) {
        constexpr const char* k = "sdpa_row_backward";
        const Attn at =
            attn_params(k, raw, mask, strides, b0, scale, causal, threshold, keep_scale, key, total_b);
        const size_t rows = raw.shape(0) * at.heads * at.sq;
        expect_like(k, "dpd", dpd, "scores", raw);
        const float* pl = opt_rows(k, "lse", lse, rows);
        const float* pgl = opt_rows(k, "grad_lse", glse, rows);
        expect_like(k, "pd", pd, "scores", raw);
        expect_like(k, "ds", ds, "scores", raw);
        expect_disjoint(k, "pd", pd, "scores", raw);
        expect_disjoint(k, "ds", ds, "scores", raw);
        expect_disjoint(k, "pd", pd, "dpd", dpd);
        expect_disjoint(k, "ds", ds, "dpd", dpd);
        expect_disjoint(k, "ds", ds, "pd", pd);
        if (at.sk == 0 || rows == 0) {
          return;  // pd and ds are empty (B·H·Sq or Sk may then be huge: no loop, no scratch)
        }
        const float* pr = raw.data();
        const float* pg = dpd.data();
        float* ppd = pd.data();
        float* pds = ds.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, at.sk,
            [&](size_t b, size_t e) {
              std::vector<float> tmp(at.sk);
              attn_backward_range_best(at, pr, pg, pl, pgl, ppd, pds, tmp.data(), b, e);
            },
            kMinElemsPerThreadCompute);
      },
      nb::arg("scores").noconvert(), nb::arg("dpd").noconvert(), nb::arg("mask").none().noconvert(),
      nb::arg("mask_strides").none(), nb::arg("lse").none().noconvert(),
      nb::arg("grad_lse").none().noconvert(), nb::arg("scale"), nb::arg("causal"), nb::arg("threshold"),
      nb::arg("keep_scale"), nb::arg("key"), nb::arg("b0"), nb::arg("total_b"), nb::arg("pd").noconvert(),
      nb::arg("ds").noconvert(),
      "Attention rows backward: dropped probabilities pd and dS = P ⊙ (Z ⊙ dPd − Σ Pd·dPd + grad_lse).");

  t.def(
      "dropout_mask",
      [](uint64_t threshold, double keep_scale, uint64_t key, uint64_t offset, F32Out dst) {
        float* out = dst.data();
        const size_t n = dst.size();
        const float s = static_cast<float>(keep_scale);
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThreadCompute, 16, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) {
            out[i] = (random_bits(key, offset + i) >> kKeepShift) >= threshold ? s : 0.0f;
          }
        });
      },
      nb::arg("threshold"), nb::arg("keep_scale"), nb::arg("key"), nb::arg("offset"),
      nb::arg("dst").noconvert(),
      "dst[i] = keep_scale if the top 24 bits of element offset + i of the draw `key` are >= threshold, else "
      "0.");
}

void bind_misc(nb::module_& t) {
  t.def(
      "embedding_backward",
      [](I64In ids, F32In grad, F32Out dst) {
        constexpr const char* k = "embedding_backward";
        expect_2d(k, "grad", grad);
        const size_t n = grad.shape(0), d = grad.shape(1);
        expect_shape(k, "ids", ids, {n});
        expect_2d(k, "dst", dst);
        if (dst.shape(1) != d) {
          fail(k, "dst must have " + std::to_string(d) + " columns, got shape " + shape_of(dst));
        }
        const size_t num = dst.shape(0);
        const std::vector<int64_t> rows = checked_ids(k, ids, num);
        expect_disjoint(k, "dst", dst, "grad", grad);
        const int64_t* pi = rows.data();
        const float* pg = grad.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        std::fill(out, out + num * d, 0.0f);
        // columns split over threads: every column accumulates its rows in id order (deterministic)
        parallel_for(d, std::max<size_t>(1, kMinElemsPerThread / std::max<size_t>(n, 1)), 16,
                     [&](size_t c0, size_t c1) {
                       for (size_t i = 0; i < n; ++i) {
                         float* row = out + static_cast<size_t>(pi[i]) * d;
                         const float* g = pg + i * d;
                         for (size_t c = c0; c < c1; ++c) {
                           row[c] += g[c];
                         }
                       }
                     });
      },
      nb::arg("ids").noconvert(), nb::arg("grad").noconvert(), nb::arg("dst").noconvert(),
      "dst[num, d] = 0, then dst[ids[i]] += grad[i] for every row i (in order).");

  t.def(
      "gumbel_argmax",
      [](F32In x, double temperature, uint64_t key, U32Out dst) {
        constexpr const char* k = "gumbel_argmax";
        expect_2d(k, "logits", x);
        const size_t rows = x.shape(0), v = x.shape(1);
        if (v == 0) {
          fail(k, "logits need at least one class, got shape " + shape_of(x));
        }
        if (!(temperature >= 0.0) || !std::isfinite(temperature)) {
          fail(k, "temperature must be finite and >= 0, got " + std::to_string(temperature));
        }
        expect_shape(k, "dst", dst, {rows});
        const float* px = x.data();
        uint32_t* out = dst.data();
        nb::gil_scoped_release release;
        parallel_rows(
            rows, v, [&](size_t b, size_t e) { gumbel_argmax_range(px, v, temperature, key, out, b, e); },
            kMinElemsPerThreadCompute);
      },
      nb::arg("logits").noconvert(), nb::arg("temperature"), nb::arg("key"), nb::arg("dst").noconvert(),
      "dst[r] = argmax_j(logits[r, j] / T + Gumbel noise of element r·V + j); T = 0: plain argmax.");

  t.def(
      "sgd_step",
      [](F32Out param, F32In grad, std::optional<F32Out> buf, double lr, double momentum, double dampening,
         bool nesterov, double weight_decay, bool first_step, bool bf16_param, bool bf16_buf) {
        constexpr const char* k = "sgd_step";
        expect_like(k, "grad", grad, "param", param);
        expect_disjoint(k, "param", param, "grad", grad);
        float* pb = nullptr;
        if (buf) {
          expect_like(k, "momentum_buffer", *buf, "param", param);
          expect_disjoint(k, "momentum_buffer", *buf, "param", param);
          expect_disjoint(k, "momentum_buffer", *buf, "grad", grad);
          pb = buf->data();
        }
        const Sgd o{static_cast<float>(lr),
                    static_cast<float>(momentum),
                    static_cast<float>(1.0 - dampening),
                    static_cast<float>(weight_decay),
                    nesterov,
                    first_step,
                    bf16_param,
                    bf16_buf};
        float* pp = param.data();
        const float* pg = grad.data();
        const size_t n = param.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThread, 16,
                     [&](size_t b, size_t e) { sgd_range_best(o, pp, pg, pb, b, e); });
      },
      nb::arg("param").noconvert(), nb::arg("grad").noconvert(),
      nb::arg("momentum_buffer").none().noconvert(), nb::arg("lr"), nb::arg("momentum"), nb::arg("dampening"),
      nb::arg("nesterov"), nb::arg("weight_decay"), nb::arg("first_step"), nb::arg("bf16_param"),
      nb::arg("bf16_buffer"),
      "One torch.optim.SGD step in place on param (and the momentum buffer, given iff momentum != 0).");

  t.def(
      "adamw_step",
      [](F32Out param, F32In grad, F32Out m, F32Out v, std::optional<F32Out> vmax, double lr, double beta1,
         double beta2, double eps, double weight_decay, double step_size, double bc2_sqrt, bool bf16_param,
         bool bf16_m, bool bf16_v, bool bf16_vmax) {
        constexpr const char* k = "adamw_step";
        expect_like(k, "grad", grad, "param", param);
        expect_like(k, "exp_avg", m, "param", param);
        expect_like(k, "exp_avg_sq", v, "param", param);
        expect_disjoint(k, "param", param, "grad", grad);
        expect_disjoint(k, "exp_avg", m, "param", param);
        expect_disjoint(k, "exp_avg", m, "grad", grad);
        expect_disjoint(k, "exp_avg_sq", v, "param", param);
        expect_disjoint(k, "exp_avg_sq", v, "grad", grad);
        expect_disjoint(k, "exp_avg_sq", v, "exp_avg", m);
        float* pvmax = nullptr;
        if (vmax) {
          expect_like(k, "max_exp_avg_sq", *vmax, "param", param);
          expect_disjoint(k, "max_exp_avg_sq", *vmax, "param", param);
          expect_disjoint(k, "max_exp_avg_sq", *vmax, "exp_avg_sq", v);
          expect_disjoint(k, "max_exp_avg_sq", *vmax, "exp_avg", m);
          pvmax = vmax->data();
        }
        const double w = 1.0 - beta1;
        const Adam o{static_cast<float>(1.0 - lr * weight_decay),
                     static_cast<float>(w),
                     static_cast<float>(1.0 - w),
                     static_cast<float>(beta2),
                     static_cast<float>(1.0 - beta2),
                     static_cast<float>(bc2_sqrt),
                     static_cast<float>(eps),
                     static_cast<float>(-step_size),
                     w < 0.5,
                     bf16_param,
                     bf16_m,
                     bf16_v,
                     bf16_vmax};
        float* pp = param.data();
        const float* pg = grad.data();
        float* pm = m.data();
        float* pv = v.data();
        const size_t n = param.size();
        nb::gil_scoped_release release;
        parallel_for(n, kMinElemsPerThread, 16,
                     [&](size_t b, size_t e) { adamw_range_best(o, pp, pg, pm, pv, pvmax, b, e); });
      },
      nb::arg("param").noconvert(), nb::arg("grad").noconvert(), nb::arg("exp_avg").noconvert(),
      nb::arg("exp_avg_sq").noconvert(), nb::arg("max_exp_avg_sq").none().noconvert(), nb::arg("lr"),
      nb::arg("beta1"), nb::arg("beta2"), nb::arg("eps"), nb::arg("weight_decay"), nb::arg("step_size"),
      nb::arg("bc2_sqrt"), nb::arg("bf16_param"), nb::arg("bf16_exp_avg"), nb::arg("bf16_exp_avg_sq"),
      nb::arg("bf16_max_exp_avg_sq"),
      "One torch.optim.AdamW step in place (step_size = lr/(1 − β1^t), bc2_sqrt = sqrt(1 − β2^t)).");
}

}  // namespace
}  // namespace training
}  // namespace tttv2

void bind_training(nb::module_& m) {
  nb::module_ t = m.def_submodule(
      "training", "Fused training kernels (see tttv2/ttnn/_kernels/training_reference.py for semantics)");
  tttv2::training::bind_rows(t);
  tttv2::training::bind_elementwise(t);
  tttv2::training::bind_attention(t);
  tttv2::training::bind_misc(t);
}
