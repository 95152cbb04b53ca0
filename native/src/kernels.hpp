// Pointer-level kernels of tttv2._native. No Python here: module.cpp validates the arrays, releases the
// GIL and calls these. Every kernel has a numpy twin in tttv2/ttnn/_kernels/reference.py, whose
// semantics it reproduces (bit-exactly for the number formats, to ~1e-6 relative for the rest).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>

// SIMD multi-versioning: each hot kernel is a template over W, the number of 32-bit lanes of the
// vectors it works with, and is compiled three times: W = 16 with the x86-64-v4 (AVX-512) instruction
// set, W = 8 with x86-64-v3 (AVX2, FMA) and W = 4 for baseline x86-64 (SSE2). The version to run is
// chosen at call time from simd_level() (the best level the CPU supports unless lowered with
// $TTTV2_SIMD or set_simd_level), so the extension runs on any x86-64 machine and the tests can exercise
// every version on one machine. Kernels written as plain loops ignore W and leave the vector width to the
// auto-vectoriser. FMA contraction is disabled globally (-ffp-contract=off) so every version rounds like
// the reference; only approximations (exp, see madd in fastmath.hpp) use FMA explicitly.
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__) && !defined(TTTV2_NO_MULTIVERSION)
#define TTTV2_MULTIVERSION 1
#define TTTV2_TARGET_AVX512 __attribute__((target("arch=x86-64-v4")))
#define TTTV2_TARGET_AVX2 __attribute__((target("arch=x86-64-v3")))
#else
#define TTTV2_MULTIVERSION 0
#endif

// Helpers called from a multi-versioned kernel must be inlined into it to be compiled for its target.
#if defined(__GNUC__)
#define TTTV2_INLINE inline __attribute__((always_inline))
#else
#define TTTV2_INLINE inline
#endif

// TTTV2_DEFINE_MULTIVERSION(name, (params), (args)) defines `void name_best(params)`, which calls the
// template `name<W>(args)` compiled for the current simd_level().
#if TTTV2_MULTIVERSION
#define TTTV2_DEFINE_MULTIVERSION(name, params, args)              \
  TTTV2_TARGET_AVX512 void name##_avx512 params { name<16> args; } \
  TTTV2_TARGET_AVX2 void name##_avx2 params { name<8> args; }      \
  void name##_baseline params { name<4> args; }                    \
  void name##_best params {                                        \
    switch (::tttv2::simd_level()) {                               \
      case ::tttv2::Simd::kAvx512:                                 \
        name##_avx512 args;                                        \
        return;                                                    \
      case ::tttv2::Simd::kAvx2:                                   \
        name##_avx2 args;                                          \
        return;                                                    \
      default:                                                     \
        name##_baseline args;                                      \
        return;                                                    \
    }                                                              \
  }
#else
#define TTTV2_DEFINE_MULTIVERSION(name, params, args) \
  void name##_best params { name<4> args; }
#endif

namespace tttv2 {

inline uint32_t f32_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float bits_f32(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

enum class Simd : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };
// The instruction set the kernels use now / the best one this CPU supports (capped by $TTTV2_SIMD).
Simd simd_level();
Simd max_simd_level();
// Switch the kernels to `level` (<= max_simd_level(), checked by the caller).
void set_simd_level(Simd level);

// Runs fn(begin, end) over [0, n) on up to max_threads() threads (the calling thread included), giving
// each thread at least `grain` items and chunk boundaries that are multiples of `align`. Small
// problems run inline on the calling thread. max_chunk (0: no limit) caps the items of a chunk, rounded up to
// align: the threads claim chunks one at a time, so finer chunks bound what a descheduled worker holds up.
// slow_call (0: off): a call that took longer found no free core, and the calls given a slow_call then run on the
// calling thread for a while (kBackOff in runtime.cpp). Which thread computes a chunk never changes its bits.
void parallel_for(size_t n, size_t grain, size_t align, const std::function<void(size_t, size_t)>& fn,
                  size_t max_chunk = 0, std::chrono::nanoseconds slow_call = std::chrono::nanoseconds(0));
// Number of threads kernels may use: $TTTV2_NUM_THREADS if set, else the hardware concurrency, capped at 8.
size_t max_threads();
// Work per thread below which a second thread costs more than it saves (measured on 2-core AVX-512
// machines): memory-bound kernels need ~32K float32 values per thread, compute-bound ones (exp, bfp
// rounding) ~8K.
constexpr size_t kMinElemsPerThread = size_t(1) << 15;
constexpr size_t kMinElemsPerThreadCompute = size_t(1) << 13;
// The same for the device-op kernels (rounding, block floats, norms, softmax, rotary, silu_mul), measured on
// the shared 2-core AMD EPYC (docs/performance.md, "Device-op kernels: thread threshold"): one thread against
// two at 32 rows × 2048 … 8192 (the decode shapes) and 64 … 256 rows × 4096. Under 512K values a second thread
// gave nothing (2 threads / 1 thread: 0.98-1.07 at 32 rows), or much worse: on a busy machine waking it cost up
// to 130 µs against ~5 µs of work (bfloat16 rounding of [32, 2048]) and silu_mul of [32, 8192] took 264 µs
// instead of 58. From 512K values (128 × 4096) it paid off (0.81-0.91 for rounding, silu_mul, rotary). So a
// call under 2 × 256K values runs on the calling thread, for compute-bound and memory-bound kernels alike.
// Training kernels keep the thresholds above (tuned with the training benchmark).
constexpr size_t kOpMinElemsPerThread = size_t(1) << 18;
// Row kernels: split rows so that each thread gets at least ~min_elems values.
inline void parallel_rows(size_t rows, size_t row_elems, const std::function<void(size_t, size_t)>& fn,
                          size_t min_elems = kMinElemsPerThread) {
  const size_t per_row = row_elems ? row_elems : 1;
  parallel_for(rows, (min_elems + per_row - 1) / per_row, 1, fn);
}

// numerics.cpp
void round_bfloat16(const float* src, float* dst, size_t n);
void bfp_pack(const float* src, uint8_t* exponents, uint8_t* mantissas, size_t rows, size_t cols,
              int mantissa_bits);
void bfp_unpack(const uint8_t* exponents, const uint8_t* mantissas, float* dst, size_t rows, size_t cols,
                int mantissa_bits);
void bfp_quantize(const float* src, float* dst, size_t rows, size_t cols, int mantissa_bits);

// norms.cpp (x and dst are [rows, d]; weight and bias are [d] or null)
void rms_norm(const float* x, const float* weight, float eps, float* dst, size_t rows, size_t d);
void layer_norm(const float* x, const float* weight, const float* bias, float eps, float* dst, size_t rows,
                size_t d);
void softmax(const float* x, float* dst, size_t rows, size_t d);

// elementwise.cpp
// x and dst are [n, d]; cos and sin are [m, d]; row i of x uses row (i / inner) % m of cos/sin.
void rotary_interleaved(const float* x, const float* cos, const float* sin, float* dst, size_t n, size_t d,
                        size_t m, size_t inner);
void silu_mul(const float* a, const float* b, float* dst, size_t n);

}  // namespace tttv2
