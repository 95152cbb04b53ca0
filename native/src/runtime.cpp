// Process-wide runtime of the kernels: the SIMD level they run at, and fork/join over a small persistent
// pool of worker threads.
//
// Starting a std::thread per call costs 15-70 µs on the machines we run on, as much as a whole kernel
// on a [32, 4096] tensor, so the workers are started once and parked on a condition variable between
// calls, after spinning for a while so that back-to-back kernels do not pay the wake-up latency.
//
// A parallel call is cut into a few chunks per thread, which the calling thread and the workers claim
// one at a time. The caller never waits for a worker to wake up: if the workers are slow to start (a
// busy machine, a parked thread), the caller claims the remaining chunks itself, so a call is never
// much slower than running it single-threaded.
//
// One parallel call at a time uses the pool; a concurrent caller (another Python thread) runs its
// kernel inline instead of waiting. A forked child gets a fresh pool. The pool is never destroyed:
// parked workers simply end with the process.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TTTV2_PAUSE() _mm_pause()
#else
#define TTTV2_PAUSE() std::this_thread::yield()
#endif

namespace tttv2 {
namespace {

// Workers spin 200 µs after a job before parking, so that they stay hot through the Python code between
// consecutive kernels; the caller waits up to 500 µs for chunks still running on workers before blocking.
// Both were counts of pause instructions (5,000 and 1,000): on the 2-core AMD EPYC we measure on, a pause
// is short, a worker parked between two kernels of a burst and, woken, came too late to take a chunk:
// silu_mul on [32, 4096] took 29 µs with one thread or two; spinning for a time, 16 µs with two.
constexpr std::chrono::microseconds kWorkerSpinTime{200};
constexpr std::chrono::microseconds kCallerSpinTime{500};
constexpr size_t kChunksPerThread = 2;  // (at most 8 threads: chunk counts fit the ticket's 16 bits)
// Waking a parked worker costs 10-50 µs (more on a busy or virtualised machine, where the woken thread
// may not get a core before the job is over). Jobs of at least kWakeFactor times the per-thread grain
// always wake parked workers; smaller ones only during a burst of parallel calls (the previous one ended
// less than kBurstGap ago), and otherwise use the workers still spinning, or run inline.
constexpr size_t kWakeFactor = 32;
constexpr std::chrono::nanoseconds kBurstGap = std::chrono::milliseconds(1);
// Two guarded calls in a row (parallel_for's slow_call: small kernels, a few tens of µs) that took longer than
// their slow_call, or that no worker helped, found no free core: a worker descheduled while holding a chunk, or a
// worker on the caller's core, spinning there while the caller waits for the core (on the shared 2-core VM under
// load: 230-250 µs for layer_norm calls of 18-38 µs). Guarded calls then run on the calling thread for kBackOff
// before trying the workers again, so that a busy machine costs them a few calls per kBackOff, not every call.
constexpr std::chrono::milliseconds kBackOff{100};

class Pool {
 public:
  explicit Pool(size_t workers) {
    for (size_t i = 0; i < workers; ++i) {
      try {
        std::thread(&Pool::work, this).detach();
        ++workers_;
      } catch (const std::system_error&) {
        break;  // run with the workers we have
      }
    }
  }

  size_t workers() const { return workers_; }

  // Whether guarded calls should run inline now (a recent guarded call found the workers descheduled).
  bool backing_off() const {
    return std::chrono::steady_clock::now().time_since_epoch().count() <
           back_off_until_.load(std::memory_order_relaxed);
  }

  // Runs job(0) .. job(chunks - 1), each exactly once, on the calling thread and the workers (parked
  // ones only if wake_parked); returns when all are done. Returns false without running anything when
  // another thread is using the pool. slow_call: see kBackOff (0: not guarded).
  bool run(size_t chunks, const std::function<void(size_t)>& job, bool wake_parked,
           std::chrono::nanoseconds slow_call) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) {
      return false;
    }
    uint64_t generation;
    size_t parked;
    {
      std::lock_guard<std::mutex> lock(mu_);
      parked = parked_;
      job_.store(&job, std::memory_order_relaxed);
      finished_.store(0, std::memory_order_relaxed);
      chunks_.store(chunks, std::memory_order_relaxed);
      generation = (ticket_.load(std::memory_order_relaxed) >> 32) + 1;
      ticket_.store(generation << 32 | static_cast<uint64_t>(chunks), std::memory_order_release);
    }
    const auto now = std::chrono::steady_clock::now();
    const bool wake = wake_parked || now - last_run_end_ < kBurstGap;
    if (wake) {
      wake_.notify_all();
    }
    size_t own = 0;
    while (claim_and_run(generation, /*front=*/true)) {
      ++own;
    }
    // The chunks still running are on workers that are awake: wait for them spinning (yielding the core
    // now and then, in case a worker was put on this one) rather than sleeping, since being woken up
    // again costs a scheduler round trip that can exceed the whole kernel on a busy machine.
    const auto spin_until = std::chrono::steady_clock::now() + kCallerSpinTime;
    for (int i = 0; finished_.load(std::memory_order_acquire) != chunks; ++i) {
      TTTV2_PAUSE();
      if ((i & 63) == 63) {
        if (std::chrono::steady_clock::now() > spin_until) {
          break;
        }
        std::this_thread::yield();
      }
    }
    if (finished_.load(std::memory_order_acquire) != chunks) {
      std::unique_lock<std::mutex> lock(mu_);
      done_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) == chunks; });
    }
    last_run_end_ = std::chrono::steady_clock::now();
    // Two calls in a row that were slow, or where the caller ran every chunk itself although the workers were
    // awake, mean the workers get no core of their own (a worker spinning on the caller's core takes the core
    // from the caller between calls: 41 % fewer layer_norm calls a second with one free core). A call that found
    // workers parked is not judged on their help (a woken worker may come after the last chunk), and one that
    // woke them is allowed twice the time (it pays their wake-up).
    if (slow_call.count() > 0) {
      const auto allowed = wake && parked > 0 ? 2 * slow_call : slow_call;
      const bool bad = last_run_end_ - now > allowed || (parked == 0 && own == chunks);
      slow_calls_ = bad ? slow_calls_ + 1 : 0;
      if (slow_calls_ >= 2) {
        back_off_until_.store((last_run_end_ + kBackOff).time_since_epoch().count(), std::memory_order_relaxed);
        slow_calls_ = 0;
      }
    }
    return true;
  }

 private:
  // The ticket packs the generation (bits 63-32), the first unclaimed chunk (31-16) and one past the last (15-0):
  // the caller claims chunks from the front, the workers from the back, so that with two threads each one
  // mostly gets the same rows call after call (and finds them in its own L2 when a kernel runs on the same data
  // again), while a slow worker still leaves the rest to the caller. Claiming is a compare-exchange on all
  // three, so a late worker can never take a chunk of a call that has finished (its chunks are all claimed) nor
  // of one it has not seen published.
  bool claim_and_run(uint64_t generation, bool front) {
    uint64_t ticket = ticket_.load(std::memory_order_acquire);
    size_t index;
    for (;;) {
      const uint64_t first = (ticket >> 16) & 0xffffu, end = ticket & 0xffffu;
      if ((ticket >> 32) != generation || first >= end) {
        return false;
      }
      if (ticket_.compare_exchange_weak(ticket, front ? ticket + (uint64_t(1) << 16) : ticket - 1,
                                        std::memory_order_acq_rel)) {
        index = front ? first : end - 1;
        break;
      }
    }
    (*job_.load(std::memory_order_relaxed))(index);
    if (finished_.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks_.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> lock(mu_);
      done_.notify_all();
    }
    return true;
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      uint64_t current = ticket_.load(std::memory_order_acquire) >> 32;
      // Spin for a fixed time, not a number of pauses: a pause lasts from a few to ~140 cycles depending
      // on the CPU (AMD's are short), and a worker that parks between two kernels of a burst is woken up
      // too late to take part in the next one. No yield here: on a busy machine a yielding spinner gives
      // its time slice away and is not running when the next job comes.
      const auto spin_until = std::chrono::steady_clock::now() + kWorkerSpinTime;
      for (int i = 0; current == seen; ++i) {
        TTTV2_PAUSE();
        if ((i & 63) == 63 && std::chrono::steady_clock::now() > spin_until) {
          break;
        }
        current = ticket_.load(std::memory_order_acquire) >> 32;
      }
      if (current == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        ++parked_;
        wake_.wait(lock, [&] { return (ticket_.load(std::memory_order_acquire) >> 32) != seen; });
        --parked_;
        current = ticket_.load(std::memory_order_acquire) >> 32;
      }
      seen = current;
      while (claim_and_run(seen, /*front=*/false)) {
      }
    }
  }

  std::mutex busy_;                                     // held by the thread running a parallel call
  std::chrono::steady_clock::time_point last_run_end_;  // guarded by busy_
  std::mutex mu_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> ticket_{0};
  std::atomic<size_t> finished_{0};
  std::atomic<size_t> chunks_{0};  // of the current call: written before the ticket that publishes it
  // written before the ticket that publishes it (release), read after claiming a chunk (acquire)
  std::atomic<const std::function<void(size_t)>*> job_{nullptr};
  size_t workers_ = 0;
  size_t parked_ = 0;      // workers waiting on wake_ (guarded by mu_)
  size_t slow_calls_ = 0;  // guarded calls in a row that were slow or got no help (guarded by busy_)
  std::atomic<std::chrono::steady_clock::rep> back_off_until_{0};  // steady_clock ticks
};

Pool* pool() {
  static std::mutex mu;
  static Pool* instance = nullptr;
  static pid_t owner = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (instance == nullptr || owner != getpid()) {  // first use, or first use in a forked child
    instance = new Pool(max_threads() - 1);        // leaked on purpose (see the top of the file)
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

void parallel_for(size_t n, size_t grain, size_t align, const std::function<void(size_t, size_t)>& fn,
                  size_t max_chunk, std::chrono::nanoseconds slow_call) {
  grain = std::max<size_t>(grain, 1);
  align = std::max<size_t>(align, 1);
  const size_t threads = std::min(max_threads(), n / grain);
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  Pool* workers = pool();
  if (workers->workers() == 0 || (slow_call.count() > 0 && workers->backing_off())) {
    fn(0, n);
    return;
  }
  // chunk = ceil(n / chunks) rounded up to a multiple of align, and at least grain / 2
  size_t chunks = std::min(n / std::max<size_t>(grain / 2, 1), threads * kChunksPerThread);
  size_t chunk = (n + chunks - 1) / chunks;
  if (max_chunk != 0 && chunk > max_chunk) {
    // finer chunks: a worker that is descheduled holds at most one of them, which the caller then waits for
    chunk = std::max(max_chunk, (n + 0xfffe) / 0xffff);  // (chunk counts fit the ticket's 16 bits)
  }
  chunk = (chunk + align - 1) / align * align;
  chunks = (n + chunk - 1) / chunk;
  const auto part = [&](size_t index) { fn(index * chunk, std::min(n, (index + 1) * chunk)); };
  if (!workers->run(chunks, part, n >= kWakeFactor * grain, slow_call)) {
    fn(0, n);
  }
}

}  // namespace tttv2
