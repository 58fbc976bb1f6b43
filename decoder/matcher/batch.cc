#include "lockstep/batch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep {
namespace {
inline void Pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}
}  // namespace

struct BatchMaskFiller::Pool {
  int threads = 1;
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<std::uint64_t> generation{0};
  std::atomic<int> pending{0};
  std::atomic<bool> stop{false};
  // The current job.
  std::span<Matcher* const> matchers;
  std::span<std::uint32_t> out;
  std::size_t stride = 0;
  std::atomic<std::size_t> next{0};

  void Work() {
    const std::size_t n = matchers.size();
    // Chunks of rows (about four per thread) keep the shared counter off the hot path while
    // still balancing uneven fills (a cached mask is a copy, a novel state a computation).
    const std::size_t chunk = std::max<std::size_t>(1, n / (4 * static_cast<std::size_t>(threads)));
    for (std::size_t b = next.fetch_add(chunk); b < n; b = next.fetch_add(chunk)) {
      const std::size_t e = std::min(n, b + chunk);
      for (std::size_t i = b; i < e; ++i) {
        std::uint32_t* row = out.data() + i * stride;
        if (matchers[i] == nullptr) {
          std::memset(row, 0, stride * sizeof(std::uint32_t));
        } else {
          matchers[i]->FillNextTokenBitmask({row, stride});
        }
      }
    }
  }

  void Loop() {
    std::uint64_t seen = 0;
    while (true) {
      // Spin for up to ~200 µs (batch steps come microseconds apart), then sleep.
      std::uint64_t g = generation.load(std::memory_order_acquire);
      auto spin_start = std::chrono::steady_clock::now();
      for (int spin = 0; g == seen && !stop.load(std::memory_order_relaxed); ++spin) {
        if ((spin & 255) == 255 &&
            std::chrono::steady_clock::now() - spin_start > std::chrono::microseconds(200)) {
          break;
        }
        Pause();
        g = generation.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return stop.load() || generation.load() != seen; });
        g = generation.load();
      }
      if (stop.load()) return;
      seen = g;
      Work();
      pending.fetch_sub(1, std::memory_order_acq_rel);
    }
  }
};

BatchMaskFiller::BatchMaskFiller(int num_threads) : pool_(std::make_unique<Pool>()) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_->threads = num_threads;
  for (int t = 1; t < num_threads; ++t) pool_->workers.emplace_back([p = pool_.get()] { p->Loop(); });
}

BatchMaskFiller::~BatchMaskFiller() {
  {
    std::lock_guard<std::mutex> lock(pool_->mu);
    pool_->stop.store(true);
  }
  pool_->cv.notify_all();
  for (auto& w : pool_->workers) w.join();
}

int BatchMaskFiller::num_threads() const { return pool_->threads; }

bool BatchMaskFiller::Fill(std::span<Matcher* const> matchers, std::span<std::uint32_t> out,
                           std::size_t stride) {
  for (Matcher* m : matchers) {
    if (m != nullptr && BitmaskWords(m->grammar().logits_width()) > stride) return false;
  }
  if (out.size() < matchers.size() * stride) return false;
  Pool& p = *pool_;
  p.matchers = matchers;
  p.out = out;
  p.stride = stride;
  p.next.store(0);
  const int helpers = static_cast<int>(p.workers.size());
  if (helpers == 0 || matchers.size() < 2) {
    p.Work();
    return true;
  }
  p.pending.store(helpers, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lock(p.mu);
    p.generation.fetch_add(1, std::memory_order_acq_rel);
  }
  p.cv.notify_all();
  p.Work();
  for (int spin = 0; p.pending.load(std::memory_order_acquire) != 0; ++spin) {
    if (spin < 100000) {
      Pause();
    } else {
      std::this_thread::yield();
    }
  }
  return true;
}

}  // namespace lockstep
