// See small_matmul.hpp. The order of every output element's sum is fixed by K and the K block alone: within a
// K block, k = k0, k0 + 1, ... one float32 product and one float32 add each (no FMA: the project compiles
// with -ffp-contract=off, and the products are separate statements); vectors run across columns j only, so
// each lane keeps that order. Rows are independent (a row's result reads that row and the weight only), and
// columns are independent, so deduplicating rows and cutting columns between threads never changes a bit.
#include "small_matmul.hpp"

#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "kernels.hpp"
#include "unpack.hpp"

namespace nb = nanobind;

namespace {

constexpr size_t kTile = 32;    // columns whose sums stay in vector registers (a multiple of the 16-value block)
// Columns are taken a strip at a time: a panel of the strip's weight rows decoded (8192 float32 = 32 KiB), then
// multiplied into the R rows' sums for the strip (R x strip float32 <= 16 KiB: in L1 with the panel). Few rows
// take wide strips (whole cache lines of the weight, fewer passes); 32 rows take 128 columns.
constexpr size_t kPanelValues = 8192;
constexpr size_t kSumValues = 4096;
constexpr size_t kMinStrip = 128, kMaxStrip = 1024;
constexpr size_t kMaxRows = 32;  // one tile row: the largest left operand this kernel takes

enum class Kind { kFloat32, kBfloat16, kBfp8, kBfp4 };

struct Weight {
  Kind kind;
  const uint32_t* f32 = nullptr;   // float32 bits [K, N]
  const uint16_t* bf16 = nullptr;  // bfloat16 patterns [K, N]
  const uint8_t* exps = nullptr;   // block floats: [K, N / 16]
  const uint8_t* codes = nullptr;  // [K, N] (bfloat8_b) or [K, N / 2] (bfloat4_b)
  size_t cols = 0;                 // N
  uint32_t keep = 0xFFFFFFFFu;
  float step[256];
};

using F32In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using F32Out = nb::ndarray<float, nb::c_contig, nb::device::cpu>;
using AnyIn = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

[[noreturn]] void fail(const std::string& message) {
  throw nb::value_error(("small_matmul: " + message).c_str());
}

std::string shape_of(const AnyIn& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    s += (i ? ", " : "") + std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// Weight rows [k0, k1), columns [c0, c0 + width) (width <= strip; c0 and width multiples of 16 for block floats)
// as float32 bits in panel[(k - k0) * strip + j], the kept bits only; columns from width to strip are zeros.
template <int W>
TTTV2_INLINE void decode_panel(const Weight& w, size_t k0, size_t k1, size_t c0, size_t width, size_t strip,
                               uint32_t* __restrict panel) {
  constexpr size_t kB = tttv2::kBfpBlockValues;
  const size_t blocks = width / kB, row_blocks = w.cols / kB;
  // one loop nest per format (the format chosen once per panel), each simple enough to vectorise
  switch (w.kind) {
    case Kind::kFloat32:
      for (size_t k = k0; k < k1; ++k) {
        const uint32_t* __restrict src = w.f32 + k * w.cols + c0;
        uint32_t* __restrict out = panel + (k - k0) * strip;
        for (size_t j = 0; j < width; ++j) {
          out[j] = src[j] & w.keep;
        }
      }
      break;
    case Kind::kBfloat16:
      for (size_t k = k0; k < k1; ++k) {
        const uint16_t* __restrict src = w.bf16 + k * w.cols + c0;
        uint32_t* __restrict out = panel + (k - k0) * strip;
        for (size_t j = 0; j < width; ++j) {
          out[j] = (static_cast<uint32_t>(src[j]) << 16) & w.keep;
        }
      }
      break;
    case Kind::kBfp8:
      for (size_t k = k0; k < k1; ++k) {
        const uint8_t* e = w.exps + k * row_blocks + c0 / kB;
        const uint8_t* c = w.codes + k * w.cols + c0;
        uint32_t* out = panel + (k - k0) * strip;
        for (size_t b = 0; b < blocks; ++b) {
          tttv2::unpack_block<W>(c + b * kB, w.step[e[b]], w.keep, out + b * kB);
        }
      }
      break;
    case Kind::kBfp4:
      for (size_t k = k0; k < k1; ++k) {
        const uint8_t* e = w.exps + k * row_blocks + c0 / kB;
        const uint8_t* c = w.codes + k * (w.cols / 2) + c0 / 2;
        uint32_t* out = panel + (k - k0) * strip;
        size_t b = 0;
        for (; b + 2 <= blocks; b += 2) {
          tttv2::unpack_nibble_block_pair<W>(c + b * (kB / 2), w.step[e[b]], w.step[e[b + 1]], w.keep, out + b * kB);
        }
        if (b < blocks) {
          tttv2::unpack_nibble_block<W>(c + b * (kB / 2), w.step[e[b]], w.keep, out + b * kB);
        }
      }
      break;
  }
  if (width < strip) {
    for (size_t k = k0; k < k1; ++k) {
      std::fill(panel + (k - k0) * strip + width, panel + (k - k0 + 1) * strip, 0u);
    }
  }
}

// part[r][0:kTile] += a[r][k0 + k] * panel[k][0:kTile] for k = 0 .. kn - 1 in order, for RB rows (panel and part
// rows `strip` apart), the RB x kTile
// sums held in vector registers across the k loop (vectors over columns only).
template <int W>
struct Lanes {
  typedef float f __attribute__((vector_size(4 * W)));  // (inside a class: a dependent vector size works)
};

template <int W, int RB>
TTTV2_INLINE void multiply_panel(const float* const* rows, size_t k0, size_t kn, size_t strip,
                                 const float* __restrict panel, float* __restrict part) {
  using V = typename Lanes<W>::f;
  constexpr int kVecs = static_cast<int>(kTile) / W;
  V acc[RB][kVecs];
  for (int r = 0; r < RB; ++r) {
    for (int v = 0; v < kVecs; ++v) {
      std::memcpy(&acc[r][v], part + r * strip + v * W, sizeof(V));
    }
  }
  for (size_t k = 0; k < kn; ++k) {
    V wk[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      std::memcpy(&wk[v], panel + k * strip + v * W, sizeof(V));
    }
    for (int r = 0; r < RB; ++r) {
      const float x = rows[r][k0 + k];
      float lanes[W];
      std::fill(lanes, lanes + W, x);
      V xv;
      std::memcpy(&xv, lanes, sizeof(V));  // x in every lane (a broadcast)
      for (int v = 0; v < kVecs; ++v) {
        const V product = xv * wk[v];
        acc[r][v] = acc[r][v] + product;
      }
    }
  }
  for (int r = 0; r < RB; ++r) {
    for (int v = 0; v < kVecs; ++v) {
      std::memcpy(part + r * strip + v * W, &acc[r][v], sizeof(V));
    }
  }
}

// The strip width for R distinct rows (a multiple of kTile).
size_t strip_width(size_t nrows) {
  size_t strip = kMaxStrip;
  while (strip > kMinStrip && nrows * strip > kSumValues) {
    strip /= 2;
  }
  return strip;
}

// Column strips [t0, t1) (`strip` columns each) of out = rows @ weight for the R distinct rows: out_rows[r] is row
// r's output row. Scratch: the panel and three [R, strip] sums.
template <int W>
TTTV2_INLINE void small_matmul_tiles(const Weight& w, const float* const* rows, size_t nrows, size_t depth,
                                     size_t k_block, float* const* out_rows, size_t t0, size_t t1) {
  // sums of up to 8 vector registers per group of rows: 4 rows (AVX-512), 2 (AVX2), 1 (SSE)
  constexpr int kGroup = W / 4;
  const size_t strip = strip_width(nrows), panel_k = kPanelValues / strip;
  alignas(64) uint32_t panel[kPanelValues];
  alignas(64) float sums[3 * kSumValues];  // nrows * strip <= kSumValues (strip_width); on the stack: no allocation
  float* part = sums;
  float* acc = part + nrows * strip;
  float* rounded = acc + nrows * strip;
  const size_t block = k_block ? k_block : depth;
  const size_t strip_values = nrows * strip;
  for (size_t t = t0; t < t1; ++t) {
    const size_t c0 = t * strip, width = std::min(strip, w.cols - c0);
    const size_t tiles = (width + kTile - 1) / kTile;
    for (size_t b0 = 0; b0 < depth; b0 += block) {
      const size_t b1 = std::min(depth, b0 + block);
      std::fill(part, part + strip_values, 0.0f);
      for (size_t p0 = b0; p0 < b1; p0 += panel_k) {
        const size_t p1 = std::min(b1, p0 + panel_k);
        decode_panel<W>(w, p0, p1, c0, width, strip, panel);
        const float* values = reinterpret_cast<const float*>(panel);
        for (size_t tile = 0; tile < tiles; ++tile) {
          size_t r = 0;
          for (; r + kGroup <= nrows; r += kGroup) {
            multiply_panel<W, kGroup>(rows + r, p0, p1 - p0, strip, values + tile * kTile,
                                      part + r * strip + tile * kTile);
          }
          for (; r < nrows; ++r) {
            multiply_panel<W, 1>(rows + r, p0, p1 - p0, strip, values + tile * kTile, part + r * strip + tile * kTile);
          }
        }
      }
      if (b0 == 0) {
        std::memcpy(acc, part, strip_values * sizeof(float));
      } else {
        for (size_t i = 0; i < strip_values; ++i) {
          acc[i] = acc[i] + part[i];
        }
      }
      if (k_block) {  // bfloat16 destination registers: the running sum rounded after every K block
        tttv2::round_bfloat16(acc, rounded, strip_values);
        std::memcpy(acc, rounded, strip_values * sizeof(float));
      }
    }
    for (size_t i = 0; i < nrows; ++i) {
      std::memcpy(out_rows[i] + c0, acc + i * strip, width * sizeof(float));
    }
  }
}

TTTV2_DEFINE_MULTIVERSION(small_matmul_tiles,
                          (const Weight& w, const float* const* rows, size_t nrows, size_t depth, size_t k_block,
                           float* const* out_rows, size_t t0, size_t t1),
                          (w, rows, nrows, depth, k_block, out_rows, t0, t1))

// Multiply-adds per thread below which the product stays on the calling thread (a decode product of one
// distinct row over a 4096 x 1792 weight is 7.3 M: three threads at most).
constexpr size_t kMinWorkPerThread = size_t(1) << 21;

}  // namespace

void bind_small_matmul(nb::module_& m) {
  m.def(
      "small_matmul",
      [](F32In a, const std::string& kind, AnyIn w0, std::optional<AnyIn> w1, size_t k_block, uint32_t keep_mask,
         F32Out dst) {
        if (a.ndim() != 2) {
          fail("a must be 2-D [rows, K], got " + std::to_string(a.ndim()) + " dims");
        }
        const size_t m_rows = a.shape(0), depth = a.shape(1);
        if (m_rows > kMaxRows) {
          fail("a has " + std::to_string(m_rows) + " rows, at most 32 (one tile row) are taken");
        }
        if (depth == 0) {
          fail("a must have K >= 1 columns");
        }
        Weight w;
        w.keep = keep_mask;
        const bool block_float = kind == "bfloat8_b" || kind == "bfloat4_b";
        if (kind == "float32") {
          w.kind = Kind::kFloat32;
          if (w0.dtype() != nb::dtype<float>()) {
            fail("a float32 weight must be a float32 array");
          }
          w.f32 = static_cast<const uint32_t*>(w0.data());
        } else if (kind == "bfloat16") {
          w.kind = Kind::kBfloat16;
          if (w0.dtype() != nb::dtype<uint16_t>()) {
            fail("a bfloat16 weight must be its uint16 bit patterns");
          }
          w.bf16 = static_cast<const uint16_t*>(w0.data());
        } else if (block_float) {
          w.kind = kind == "bfloat8_b" ? Kind::kBfp8 : Kind::kBfp4;
          if (!w1 || w0.dtype() != nb::dtype<uint8_t>() || w1->dtype() != nb::dtype<uint8_t>()) {
            fail("a block float weight must be its uint8 exponents and codes");
          }
          w.exps = static_cast<const uint8_t*>(w0.data());
          w.codes = static_cast<const uint8_t*>(w1->data());
          tttv2::bfp_steps(w.kind == Kind::kBfp8 ? 7 : 3, w.step);
        } else {
          fail("kind must be float32, bfloat16, bfloat8_b or bfloat4_b, got '" + kind + "'");
        }
        if (w0.ndim() != 2 || w0.shape(0) != depth) {
          fail("the weight must be 2-D with " + std::to_string(depth) + " rows (a's K), got " + shape_of(w0));
        }
        w.cols = block_float ? w0.shape(1) * tttv2::kBfpBlockValues : w0.shape(1);
        if (block_float) {
          const size_t code_cols = w.kind == Kind::kBfp8 ? w.cols : w.cols / 2;
          if (w1->ndim() != 2 || w1->shape(0) != depth || w1->shape(1) != code_cols) {
            fail("the codes must be (" + std::to_string(depth) + ", " + std::to_string(code_cols) + "), got " +
                 shape_of(*w1));
          }
        } else if (w1) {
          fail("a " + kind + " weight is one array");
        }
        if (dst.ndim() != 2 || dst.shape(0) != m_rows || dst.shape(1) != w.cols) {
          fail("dst must be (" + std::to_string(m_rows) + ", " + std::to_string(w.cols) + ")");
        }
        const auto* d_lo = reinterpret_cast<const unsigned char*>(dst.data());
        const auto* a_lo = reinterpret_cast<const unsigned char*>(a.data());
        if (dst.nbytes() && a.nbytes() && d_lo < a_lo + a.nbytes() && a_lo < d_lo + dst.nbytes()) {
          fail("dst must not overlap a");
        }
        if (w.cols == 0 || m_rows == 0) {
          return;
        }
        // distinct rows (byte-equal rows share one computation), in order of first appearance
        const float* x = a.data();
        float* out = dst.data();
        const float* rows[kMaxRows];
        float* out_rows[kMaxRows];
        size_t first[kMaxRows];
        size_t nrows = 0;
        for (size_t i = 0; i < m_rows; ++i) {
          const float* row = x + i * depth;
          size_t same = nrows;
          for (size_t d = 0; d < nrows; ++d) {
            if (std::memcmp(rows[d], row, depth * sizeof(float)) == 0) {
              same = d;
              break;
            }
          }
          if (same == nrows) {
            rows[nrows] = row;
            out_rows[nrows] = out + i * w.cols;
            ++nrows;
          }
          first[i] = same;
        }
        const size_t strip = strip_width(nrows), strips = (w.cols + strip - 1) / strip;
        const size_t block = k_block && k_block < depth ? k_block : 0;
        {
          nb::gil_scoped_release release;
          const size_t per_strip = depth * nrows * strip;
          tttv2::parallel_for(strips, (kMinWorkPerThread + per_strip - 1) / per_strip, 1, [&](size_t t0, size_t t1) {
            small_matmul_tiles_best(w, rows, nrows, depth, block, out_rows, t0, t1);
          });
          for (size_t i = 0; i < m_rows; ++i) {
            float* target = out + i * w.cols;
            if (out_rows[first[i]] != target) {
              std::memcpy(target, out_rows[first[i]], w.cols * sizeof(float));
            }
          }
        }
      },
      nb::arg("a").noconvert(), nb::arg("kind"), nb::arg("w0").noconvert(), nb::arg("w1").noconvert().none(),
      nb::arg("k_block"), nb::arg("keep_mask"), nb::arg("dst").noconvert(),
      "dst[M, N] = a[M <= 32, K] @ weight[K, N] read from its storage, kind float32 (w0 float32 [K, N]), bfloat16 "
      "(w0 uint16 [K, N]) or bfloat8_b / bfloat4_b (w0 exponents uint8 [K, N/16], w1 codes [K, N] or [K, N/2]), "
      "the weight's float32 bits ANDed with keep_mask; per element, in each K block of k_block rows (0: one block), "
      "a sum over k in order of float32 products, the blocks added in float32 and (k_block > 0) rounded to "
      "bfloat16 after each.");
}
