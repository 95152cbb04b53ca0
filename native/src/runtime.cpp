// Process-wide runtime of the kernels: the SIMD level they run at, and fork/join over a small persistent
// pool of worker threads.
//
// Fork/join over a small persistent pool of worker threads. Starting a std::thread per call costs
// 15-70 µs on the machines we run on, as much as a whole kernel on a [32, 4096] tensor, so the workers
// are started once and parked on a condition variable between calls (after a short spin, so that
// back-to-back kernels do not pay the wake-up latency).
//
// One parallel call at a time uses the pool; a concurrent caller (another Python thread) runs its
// kernel inline instead of waiting. A forked child gets a fresh pool. The pool is never destroyed:
// parked workers simply end with the process.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <unistd.h>

#include "kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TTTV2_PAUSE() _mm_pause()
#else
#define TTTV2_PAUSE() std::this_thread::yield()
#endif

namespace tttv2 {
namespace {

// ~20-50 µs of spinning after a job before a worker parks / the caller blocks
constexpr int kSpinIterations = 1000;

class Pool {
 public:
  explicit Pool(size_t workers) {
    for (size_t i = 0; i < workers; ++i) {
      try {
        std::thread(&Pool::work, this, i + 1).detach();
        ++workers_;
      } catch (const std::system_error&) {
        break;  // run with the workers we have
      }
    }
  }

  size_t workers() const { return workers_; }

  // Runs job(0) on the calling thread and job(1) .. job(parts - 1) on workers; returns when all are done.
  // Returns false without running anything when another thread is using the pool.
  bool run(size_t parts, const std::function<void(size_t)>& job) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) {
      return false;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      job_ = &job;
      parts_ = parts;
      remaining_.store(workers_, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    job(0);
    for (int i = 0; i < kSpinIterations && remaining_.load(std::memory_order_acquire) != 0; ++i) {
      TTTV2_PAUSE();
    }
    if (remaining_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [this] { return remaining_.load(std::memory_order_acquire) == 0; });
    }
    return true;
  }

 private:
  void work(size_t index) {
    uint64_t seen = 0;
    for (;;) {
      uint64_t current = generation_.load(std::memory_order_acquire);
      for (int i = 0; i < kSpinIterations && current == seen; ++i) {
        TTTV2_PAUSE();
        current = generation_.load(std::memory_order_acquire);
      }
      if (current == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        current = generation_.load(std::memory_order_acquire);
      }
      seen = current;
      if (index < parts_) {
        (*job_)(index);
      }
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);
        done_.notify_one();
      }
    }
  }

  std::mutex busy_;  // held by the thread running a parallel call
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<size_t> remaining_{0};
  const std::function<void(size_t)>* job_ = nullptr;
  size_t parts_ = 0;
  size_t workers_ = 0;
};

Pool* pool() {
  static std::mutex mu;
  static Pool* instance = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (instance == nullptr || owner != getpid()) {  // first use, or first use in a forked child
    instance = new Pool(max_threads() - 1);         // leaked on purpose (see the top of the file)
    owner = getpid();
  }
  return instance;
}

Simd detect_simd() {
  Simd level = Simd::kBaseline;
#if TTTV2_MULTIVERSION
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) {
    level = Simd::kAvx512;
  } else if (__builtin_cpu_supports("x86-64-v3")) {
    level = Simd::kAvx2;
  }
#endif
  // $TTTV2_SIMD=baseline|avx2|avx512 caps the level (e.g. to reproduce a slower machine)
  if (const char* env = std::getenv("TTTV2_SIMD")) {
    const Simd cap = std::strcmp(env, "baseline") == 0 ? Simd::kBaseline
                     : std::strcmp(env, "avx2") == 0   ? Simd::kAvx2
                                                       : Simd::kAvx512;
    level = std::min(level, cap);
  }
  return level;
}

std::atomic<Simd>& current_simd() {
  static std::atomic<Simd> level{max_simd_level()};
  return level;
}

}  // namespace

Simd max_simd_level() {
  static const Simd detected = detect_simd();
  return detected;
}

Simd simd_level() { return current_simd().load(std::memory_order_relaxed); }

void set_simd_level(Simd level) { current_simd().store(level, std::memory_order_relaxed); }

size_t max_threads() {
  static const size_t cached = [] {
    long wanted = 0;
    if (const char* env = std::getenv("TTTV2_NUM_THREADS")) {
      wanted = std::strtol(env, nullptr, 10);
    }
    if (wanted <= 0) {
      wanted = static_cast<long>(std::thread::hardware_concurrency());
    }
    return static_cast<size_t>(std::clamp(wanted, 1L, 8L));
  }();
  return cached;
}

void parallel_for(size_t n, size_t grain, size_t align, const std::function<void(size_t, size_t)>& fn) {
  grain = std::max<size_t>(grain, 1);
  align = std::max<size_t>(align, 1);
  size_t parts = std::min(max_threads(), n / grain);
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  Pool* workers = pool();
  parts = std::min(parts, workers->workers() + 1);
  // chunk = ceil(n / parts) rounded up to a multiple of align; parts * chunk >= n
  size_t chunk = (n + parts - 1) / parts;
  chunk = (chunk + align - 1) / align * align;
  const auto part = [&](size_t index) {
    const size_t begin = std::min(n, index * chunk);
    const size_t end = index + 1 == parts ? n : std::min(n, begin + chunk);
    if (begin < end) {
      fn(begin, end);
    }
  };
  if (parts <= 1 || !workers->run(parts, part)) {
    fn(0, n);
  }
}

}  // namespace tttv2
