// See storage.hpp. Every value is computed on its own from its stored bits (no accumulation), so the
// results never depend on how the work is cut between threads.
#include "storage.hpp"

#include <nanobind/ndarray.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "kernels.hpp"
#include "unpack.hpp"

namespace nb = nanobind;

namespace {

constexpr size_t kBlock = 16;

using U16In = nb::ndarray<const uint16_t, nb::c_contig, nb::device::cpu>;
using U8In = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
using F32Out = nb::ndarray<float, nb::c_contig, nb::device::cpu>;

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

template <class Out, class In>
void expect_disjoint(const char* kernel, const char* in_name, const Out& out, const In& in) {
  const auto* o = static_cast<const unsigned char*>(static_cast<const void*>(out.data()));
  const auto* i = static_cast<const unsigned char*>(static_cast<const void*>(in.data()));
  if (out.nbytes() && in.nbytes() && o < i + in.nbytes() && i < o + out.nbytes()) {
    fail(kernel, std::string("dst must not overlap ") + in_name);
  }
}

// Plain loops for the auto-vectoriser, compiled once per SIMD level (TTTV2_DEFINE_MULTIVERSION; W unused).
template <int W>
TTTV2_INLINE void bf16_unpack_range(const uint16_t* __restrict src, uint32_t* __restrict dst, size_t n,
                                    uint32_t keep) {
  for (size_t i = 0; i < n; ++i) {
    dst[i] = (static_cast<uint32_t>(src[i]) << 16) & keep;
  }
}

template <int W>
TTTV2_INLINE void bfp_unpack_rows(const uint8_t* __restrict exps, const uint8_t* __restrict codes,
                                  uint32_t* __restrict dst, size_t row_begin, size_t row_end, size_t cols,
                                  int mantissa_bits, bool nibbles, uint32_t keep) {
  float step[256];
  tttv2::bfp_steps(mantissa_bits, step);
  const size_t blocks = cols / kBlock;
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* e_row = exps + r * blocks;
    uint32_t* out = dst + r * cols;
    if (!nibbles) {
      const uint8_t* c_row = codes + r * cols;
      for (size_t b = 0; b < blocks; ++b) {
        tttv2::unpack_block<W>(c_row + b * kBlock, step[e_row[b]], keep, out + b * kBlock);
      }
      continue;
    }
    const uint8_t* c_row = codes + r * (cols / 2);
    size_t b = 0;
    for (; b + 2 <= blocks; b += 2) {
      tttv2::unpack_nibble_block_pair<W>(c_row + b * (kBlock / 2), step[e_row[b]], step[e_row[b + 1]], keep,
                                         out + b * kBlock);
    }
    if (b < blocks) {
      tttv2::unpack_nibble_block<W>(c_row + b * (kBlock / 2), step[e_row[b]], keep, out + b * kBlock);
    }
  }
}

TTTV2_DEFINE_MULTIVERSION(bf16_unpack_range, (const uint16_t* src, uint32_t* dst, size_t n, uint32_t keep),
                          (src, dst, n, keep))
TTTV2_DEFINE_MULTIVERSION(bfp_unpack_rows,
                          (const uint8_t* exps, const uint8_t* codes, uint32_t* dst, size_t begin, size_t end,
                           size_t cols, int m, bool nibbles, uint32_t keep),
                          (exps, codes, dst, begin, end, cols, m, nibbles, keep))

}  // namespace

void bind_storage(nb::module_& m) {
  m.def(
      "bf16_unpack",
      [](U16In src, uint32_t keep_mask, F32Out dst) {
        constexpr const char* k = "bf16_unpack";
        if (src.ndim() != dst.ndim() || src.size() != dst.size()) {
          fail(k, "dst must have the shape of src: expected " + shape_of(src) + ", got " + shape_of(dst));
        }
        for (size_t i = 0; i < src.ndim(); ++i) {
          if (src.shape(i) != dst.shape(i)) {
            fail(k, "dst must have the shape of src: expected " + shape_of(src) + ", got " + shape_of(dst));
          }
        }
        expect_disjoint(k, "src", dst, src);
        const uint16_t* in = src.data();
        uint32_t* out = reinterpret_cast<uint32_t*>(dst.data());
        const size_t n = src.size();
        nb::gil_scoped_release release;
        tttv2::parallel_for(n, tttv2::kOpMinElemsPerThread, kBlock, [&](size_t begin, size_t end) {
          bf16_unpack_range_best(in + begin, out + begin, end - begin, keep_mask);
        });
      },
      nb::arg("src").noconvert(), nb::arg("keep_mask"), nb::arg("dst").noconvert(),
      "bfloat16 bit patterns (uint16) to float32 in dst (same shape), the float32 bits ANDed with keep_mask.");

  m.def(
      "bfp_unpack_codes",
      [](U8In exponents, U8In codes, int mantissa_bits, bool nibbles, uint32_t keep_mask, F32Out dst) {
        constexpr const char* k = "bfp_unpack_codes";
        if (mantissa_bits != 7 && mantissa_bits != 3) {
          fail(k, "mantissa_bits must be 7 (bfloat8_b) or 3 (bfloat4_b), got " + std::to_string(mantissa_bits));
        }
        if (nibbles && mantissa_bits != 3) {
          fail(k, "4-bit codes hold a 3-bit magnitude: mantissa_bits must be 3 with nibbles=True");
        }
        if (dst.ndim() != 2 || dst.shape(1) % kBlock != 0) {
          fail(k, "dst must be 2-D [rows, cols] with cols a multiple of 16, got shape " + shape_of(dst));
        }
        const size_t rows = dst.shape(0), cols = dst.shape(1);
        const size_t code_cols = nibbles ? cols / 2 : cols;
        if (exponents.ndim() != 2 || exponents.shape(0) != rows || exponents.shape(1) != cols / kBlock) {
          fail(k, "exponents has the wrong shape: expected (" + std::to_string(rows) + ", " +
                      std::to_string(cols / kBlock) + "), got " + shape_of(exponents));
        }
        if (codes.ndim() != 2 || codes.shape(0) != rows || codes.shape(1) != code_cols) {
          fail(k, "codes has the wrong shape: expected (" + std::to_string(rows) + ", " + std::to_string(code_cols) +
                      "), got " + shape_of(codes));
        }
        expect_disjoint(k, "exponents", dst, exponents);
        expect_disjoint(k, "codes", dst, codes);
        if (cols == 0) {
          return;
        }
        const uint8_t* e = exponents.data();
        const uint8_t* c = codes.data();
        uint32_t* out = reinterpret_cast<uint32_t*>(dst.data());
        nb::gil_scoped_release release;
        tttv2::parallel_rows(
            rows, cols,
            [&](size_t begin, size_t end) {
              bfp_unpack_rows_best(e, c, out, begin, end, cols, mantissa_bits, nibbles, keep_mask);
            },
            tttv2::kOpMinElemsPerThread);
      },
      nb::arg("exponents").noconvert(), nb::arg("codes").noconvert(), nb::arg("mantissa_bits"),
      nb::arg("nibbles"), nb::arg("keep_mask"), nb::arg("dst").noconvert(),
      "Block floats to float32 in dst [rows, cols]: exponents uint8 [rows, cols/16]; codes one sign|magnitude "
      "byte per value [rows, cols], or (nibbles, bfloat4_b) two 4-bit sign|magnitude codes per byte "
      "[rows, cols/2], the even column in the low nibble; the float32 bits ANDed with keep_mask.");
}
