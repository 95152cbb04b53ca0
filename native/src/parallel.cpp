// Minimal fork/join helper for the row-parallel kernels: spawn (threads - 1) std::threads, run the first
// chunk on the calling thread, join. Kernels never throw, so there is nothing to propagate.
#include <algorithm>
#include <cstdlib>
#include <system_error>
#include <thread>
#include <vector>

#include "kernels.hpp"

namespace tttv2 {

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
  size_t threads = std::min(max_threads(), n / grain);
  if (threads <= 1) {
    fn(0, n);
    return;
  }
  // chunk = ceil(n / threads) rounded up to a multiple of align
  size_t chunk = (n + threads - 1) / threads;
  chunk = (chunk + align - 1) / align * align;
  std::vector<std::thread> workers;
  workers.reserve(threads - 1);
  size_t begin = chunk;
  for (; begin < n && workers.size() + 1 < threads; begin += chunk) {
    const size_t end = std::min(n, begin + chunk);
    try {
      workers.emplace_back(fn, begin, end);
    } catch (const std::system_error&) {
      fn(begin, end);  // could not start a thread: do the work here instead
    }
  }
  fn(0, std::min(n, chunk));
  if (begin < n) {  // rounding left a tail (only when align > 1)
    fn(begin, n);
  }
  for (auto& worker : workers) {
    worker.join();
  }
}

}  // namespace tttv2
