// tttv2._native: the C++ kernels behind tttv2.ttnn. Each kernel has a numpy reference in
// tttv2/ttnn/_kernels/reference.py; tests/ttnn/test_native_kernels.py compares the two.
//
// Calling convention: inputs first, then scalar parameters, then the output array(s) `dst`, which the
// caller allocates (tttv2.ttnn._kernels does it with np.empty). Arrays are never converted implicitly:
// they must already be C-contiguous CPU arrays of the right dtype (float32, or uint8 for packed bfp
// data), otherwise nanobind raises TypeError. Shapes are all checked before any memory is touched and
// a mismatch raises ValueError("<kernel>: <argument> ..., expected ..., got ..."). The GIL is released
// while the kernel runs. Every bound here compares shapes of real arrays (no size arithmetic); an empty
// array returns before the row loops (its row count may be huge). The training kernels (training.cpp)
// also take sizes, offsets and ids from Python: see there for checked arithmetic and copied ids.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

#include "kernels.hpp"
#include "small_matmul.hpp"
#include "storage.hpp"
#include "training.hpp"

namespace nb = nanobind;

namespace {

using F32In = nb::ndarray<const float, nb::c_contig, nb::device::cpu>;
using F32Out = nb::ndarray<float, nb::c_contig, nb::device::cpu>;
using U8In = nb::ndarray<const uint8_t, nb::c_contig, nb::device::cpu>;
using U8Out = nb::ndarray<uint8_t, nb::c_contig, nb::device::cpu>;

constexpr size_t kBfpBlock = 16;

[[noreturn]] void fail(const char* kernel, const std::string& message) {
  throw nb::value_error((std::string(kernel) + ": " + message).c_str());
}

// Python tuple notation: (), (4,), (4, 16)
std::string shape_str(std::initializer_list<size_t> dims) {
  std::string s = "(";
  size_t i = 0;
  for (size_t dim : dims) {
    s += (i++ ? ", " : "") + std::to_string(dim);
  }
  return s + (dims.size() == 1 ? ",)" : ")");
}

template <class Array>
std::string shape_str(const Array& a) {
  std::string s = "(";
  for (size_t i = 0; i < a.ndim(); ++i) {
    s += (i ? ", " : "") + std::to_string(a.shape(i));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

template <class Array>
void expect_ndim(const char* kernel, const char* name, const Array& a, size_t ndim, const char* layout) {
  if (a.ndim() != ndim) {
    fail(kernel, std::string(name) + " must be " + std::to_string(ndim) + "-D " + layout + ", got shape " +
                     shape_str(a));
  }
}

template <class Array>
bool has_shape(const Array& a, std::initializer_list<size_t> dims) {
  if (a.ndim() != dims.size()) {
    return false;
  }
  size_t i = 0;
  for (size_t dim : dims) {
    if (a.shape(i++) != dim) {
      return false;
    }
  }
  return true;
}

template <class Array>
void expect_shape(const char* kernel, const char* name, const Array& a, std::initializer_list<size_t> dims) {
  if (!has_shape(a, dims)) {
    fail(kernel,
         std::string(name) + " has the wrong shape: expected " + shape_str(dims) + ", got " + shape_str(a));
  }
}

template <class Out, class In>
void expect_same_shape(const char* kernel, const char* name, const Out& out, const char* ref_name,
                       const In& ref) {
  bool same = out.ndim() == ref.ndim();
  for (size_t i = 0; same && i < ref.ndim(); ++i) {
    same = out.shape(i) == ref.shape(i);
  }
  if (!same) {
    fail(kernel, std::string(name) + " must have the shape of " + ref_name + ": expected " + shape_str(ref) +
                     ", got " + shape_str(out));
  }
}

// The kernels use restrict pointers: an output may not share memory with any input.
template <class Out, class In>
void expect_disjoint(const char* kernel, const char* out_name, const Out& out, const char* in_name,
                     const In& in) {
  const auto* o = static_cast<const unsigned char*>(static_cast<const void*>(out.data()));
  const auto* i = static_cast<const unsigned char*>(static_cast<const void*>(in.data()));
  if (out.nbytes() && in.nbytes() && o < i + in.nbytes() && i < o + out.nbytes()) {
    fail(kernel, std::string(out_name) + " must not overlap " + in_name);
  }
}

const char* simd_name(tttv2::Simd level) {
  switch (level) {
    case tttv2::Simd::kAvx512:
      return "avx512";
    case tttv2::Simd::kAvx2:
      return "avx2";
    default:
      return "baseline";
  }
}

void expect_mantissa_bits(const char* kernel, int mantissa_bits) {
  if (mantissa_bits != 7 && mantissa_bits != 3) {
    fail(kernel,
         "mantissa_bits must be 7 (bfloat8_b) or 3 (bfloat4_b), got " + std::to_string(mantissa_bits));
  }
}

void expect_bfp_matrix(const char* kernel, const char* name, size_t ndim, size_t cols,
                       const std::string& shape) {
  if (ndim != 2 || cols % kBfpBlock != 0) {
    fail(kernel,
         std::string(name) + " must be 2-D [rows, cols] with cols a multiple of 16, got shape " + shape);
  }
}

// Optional per-column parameter (weight / bias) of a row kernel: None, or shape (d,).
const float* optional_vector(const char* kernel, const char* name, const std::optional<F32In>& v, size_t d) {
  if (!v) {
    return nullptr;
  }
  expect_shape(kernel, name, *v, {d});
  return v->data();
}

template <class Out>
void expect_disjoint_optional(const char* kernel, const Out& out, const char* name,
                              const std::optional<F32In>& v) {
  if (v) {
    expect_disjoint(kernel, "dst", out, name, *v);
  }
}

}  // namespace

NB_MODULE(_native, m) {
  m.doc() = "C++ kernels of the tttv2.ttnn emulator (see tttv2/ttnn/_kernels/reference.py for semantics)";

  m.def(
      "simd_level", [] { return simd_name(tttv2::simd_level()); },
      "The instruction set the kernels run with: 'avx512' (x86-64-v4), 'avx2' (x86-64-v3) or 'baseline'.");
  m.def(
      "simd_levels",
      [] {
        nb::list levels;
        for (int i = 0; i <= static_cast<int>(tttv2::max_simd_level()); ++i) {
          levels.append(simd_name(static_cast<tttv2::Simd>(i)));
        }
        return levels;
      },
      "The levels this CPU supports (capped by $TTTV2_SIMD), lowest first.");
  m.def(
      "set_simd_level",
      [](const std::string& name) {
        const char* previous = simd_name(tttv2::simd_level());
        for (int i = 0; i <= static_cast<int>(tttv2::max_simd_level()); ++i) {
          if (name == simd_name(static_cast<tttv2::Simd>(i))) {
            tttv2::set_simd_level(static_cast<tttv2::Simd>(i));
            return previous;
          }
        }
        fail("set_simd_level",
             "level must be one of the supported levels (see simd_levels()), got '" + name + "'");
      },
      nb::arg("level"),
      "Run the kernels with another supported SIMD level (for tests); returns the previous one.");
  m.def("max_threads", &tttv2::max_threads,
        "Threads a kernel may use ($TTTV2_NUM_THREADS or the core count).");

  m.def(
      "round_bfloat16",
      [](F32In src, F32Out dst) {
        constexpr const char* k = "round_bfloat16";
        expect_same_shape(k, "dst", dst, "src", src);
        expect_disjoint(k, "dst", dst, "src", src);
        const float* in = src.data();
        float* out = dst.data();
        const size_t n = src.size();
        nb::gil_scoped_release release;
        tttv2::round_bfloat16(in, out, n);
      },
      nb::arg("src").noconvert(), nb::arg("dst").noconvert(),
      "Round float32 values to the nearest bfloat16 (ties to even), written as float32 into dst.");

  m.def(
      "bfp_pack",
      [](F32In src, int mantissa_bits, U8Out exponents, U8Out mantissas) {
        constexpr const char* k = "bfp_pack";
        expect_mantissa_bits(k, mantissa_bits);
        expect_bfp_matrix(k, "src", src.ndim(), src.ndim() == 2 ? src.shape(1) : 0, shape_str(src));
        const size_t rows = src.shape(0), cols = src.shape(1);
        expect_shape(k, "exponents", exponents, {rows, cols / kBfpBlock});
        expect_shape(k, "mantissas", mantissas, {rows, cols});
        expect_disjoint(k, "exponents", exponents, "src", src);
        expect_disjoint(k, "mantissas", mantissas, "src", src);
        expect_disjoint(k, "mantissas", mantissas, "exponents", exponents);
        if (cols == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = src.data();
        uint8_t* exps = exponents.data();
        uint8_t* mants = mantissas.data();
        nb::gil_scoped_release release;
        tttv2::bfp_pack(in, exps, mants, rows, cols, mantissa_bits);
      },
      nb::arg("src").noconvert(), nb::arg("mantissa_bits"), nb::arg("exponents").noconvert(),
      nb::arg("mantissas").noconvert(),
      "Pack float32 [rows, cols] into block floating point: shared exponents uint8 [rows, cols/16] and "
      "sign|magnitude bytes uint8 [rows, cols].");

  m.def(
      "bfp_unpack",
      [](U8In exponents, U8In mantissas, int mantissa_bits, F32Out dst) {
        constexpr const char* k = "bfp_unpack";
        expect_mantissa_bits(k, mantissa_bits);
        expect_bfp_matrix(k, "mantissas", mantissas.ndim(), mantissas.ndim() == 2 ? mantissas.shape(1) : 0,
                          shape_str(mantissas));
        const size_t rows = mantissas.shape(0), cols = mantissas.shape(1);
        expect_shape(k, "exponents", exponents, {rows, cols / kBfpBlock});
        expect_shape(k, "dst", dst, {rows, cols});
        expect_disjoint(k, "dst", dst, "exponents", exponents);
        expect_disjoint(k, "dst", dst, "mantissas", mantissas);
        if (cols == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const uint8_t* exps = exponents.data();
        const uint8_t* mants = mantissas.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::bfp_unpack(exps, mants, out, rows, cols, mantissa_bits);
      },
      nb::arg("exponents").noconvert(), nb::arg("mantissas").noconvert(), nb::arg("mantissa_bits"),
      nb::arg("dst").noconvert(), "Inverse of bfp_pack, written as float32 [rows, cols] into dst.");

  m.def(
      "bfp_quantize",
      [](F32In src, int mantissa_bits, F32Out dst) {
        constexpr const char* k = "bfp_quantize";
        expect_mantissa_bits(k, mantissa_bits);
        expect_bfp_matrix(k, "src", src.ndim(), src.ndim() == 2 ? src.shape(1) : 0, shape_str(src));
        expect_same_shape(k, "dst", dst, "src", src);
        expect_disjoint(k, "dst", dst, "src", src);
        const size_t rows = src.shape(0), cols = src.shape(1);
        if (cols == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = src.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::bfp_quantize(in, out, rows, cols, mantissa_bits);
      },
      nb::arg("src").noconvert(), nb::arg("mantissa_bits"), nb::arg("dst").noconvert(),
      "bfp_unpack(bfp_pack(src)) in one pass, written as float32 into dst.");

  m.def(
      "rms_norm",
      [](F32In x, std::optional<F32In> weight, double eps, F32Out dst) {
        constexpr const char* k = "rms_norm";
        expect_ndim(k, "x", x, 2, "[rows, d]");
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = optional_vector(k, "weight", weight, d);
        expect_same_shape(k, "dst", dst, "x", x);
        expect_disjoint(k, "dst", dst, "x", x);
        expect_disjoint_optional(k, dst, "weight", weight);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = x.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::rms_norm(in, w, static_cast<float>(eps), out, rows, d);
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("eps"),
      nb::arg("dst").noconvert(),
      "dst = x / sqrt(mean(x², last dim) + eps) · weight for x [rows, d], weight [d] or None.");

  m.def(
      "layer_norm",
      [](F32In x, std::optional<F32In> weight, std::optional<F32In> bias, double eps, F32Out dst) {
        constexpr const char* k = "layer_norm";
        expect_ndim(k, "x", x, 2, "[rows, d]");
        const size_t rows = x.shape(0), d = x.shape(1);
        const float* w = optional_vector(k, "weight", weight, d);
        const float* b = optional_vector(k, "bias", bias, d);
        expect_same_shape(k, "dst", dst, "x", x);
        expect_disjoint(k, "dst", dst, "x", x);
        expect_disjoint_optional(k, dst, "weight", weight);
        expect_disjoint_optional(k, dst, "bias", bias);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = x.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::layer_norm(in, w, b, static_cast<float>(eps), out, rows, d);
      },
      nb::arg("x").noconvert(), nb::arg("weight").none().noconvert(), nb::arg("bias").none().noconvert(),
      nb::arg("eps"), nb::arg("dst").noconvert(),
      "dst = (x − mean) / sqrt(var + eps) · weight + bias over the last dim of x [rows, d].");

  m.def(
      "softmax",
      [](F32In x, F32Out dst) {
        constexpr const char* k = "softmax";
        expect_ndim(k, "x", x, 2, "[rows, d]");
        expect_same_shape(k, "dst", dst, "x", x);
        expect_disjoint(k, "dst", dst, "x", x);
        const size_t rows = x.shape(0), d = x.shape(1);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = x.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::softmax(in, out, rows, d);
      },
      nb::arg("x").noconvert(), nb::arg("dst").noconvert(),
      "Stable softmax over the last dim of x [rows, d].");

  m.def(
      "rotary_interleaved",
      [](F32In x, F32In cos, F32In sin, int64_t inner, F32Out dst) {
        constexpr const char* k = "rotary_interleaved";
        expect_ndim(k, "x", x, 2, "[n, d]");
        const size_t n = x.shape(0), d = x.shape(1);
        if (d % 2 != 0) {
          fail(k, "x must have an even last dim (adjacent pairs), got shape " + shape_str(x));
        }
        expect_ndim(k, "cos", cos, 2, "[m, d]");
        const size_t rows = cos.shape(0);
        expect_shape(k, "cos", cos, {rows, d});
        expect_shape(k, "sin", sin, {rows, d});
        if (inner < 1) {
          fail(k, "inner must be >= 1, got " + std::to_string(inner));
        }
        if (rows == 0 && n != 0) {
          fail(k, "cos and sin need at least one row, got shape " + shape_str(cos));
        }
        expect_same_shape(k, "dst", dst, "x", x);
        expect_disjoint(k, "dst", dst, "x", x);
        expect_disjoint(k, "dst", dst, "cos", cos);
        expect_disjoint(k, "dst", dst, "sin", sin);
        if (d == 0) {
          return;  // nothing to write; the row count of an empty array may be huge
        }
        const float* in = x.data();
        const float* c = cos.data();
        const float* s = sin.data();
        float* out = dst.data();
        nb::gil_scoped_release release;
        tttv2::rotary_interleaved(in, c, s, out, n, d, rows, static_cast<size_t>(inner));
      },
      nb::arg("x").noconvert(), nb::arg("cos").noconvert(), nb::arg("sin").noconvert(), nb::arg("inner"),
      nb::arg("dst").noconvert(),
      "Rotary embedding on adjacent pairs; row i of x [n, d] uses row (i // inner) % m of cos/sin [m, d].");

  m.def(
      "silu_mul",
      [](F32In a, F32In b, F32Out dst) {
        constexpr const char* k = "silu_mul";
        expect_same_shape(k, "b", b, "a", a);
        expect_same_shape(k, "dst", dst, "a", a);
        expect_disjoint(k, "dst", dst, "a", a);
        expect_disjoint(k, "dst", dst, "b", b);
        const float* pa = a.data();
        const float* pb = b.data();
        float* out = dst.data();
        const size_t n = a.size();
        nb::gil_scoped_release release;
        tttv2::silu_mul(pa, pb, out, n);
      },
      nb::arg("a").noconvert(), nb::arg("b").noconvert(), nb::arg("dst").noconvert(),
      "dst = silu(a) · b element-wise (a, b and dst of one shape).");

  bind_training(m);
  bind_storage(m);
  bind_small_matmul(m);
}
