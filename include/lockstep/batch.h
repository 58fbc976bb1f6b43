// BatchMaskFiller: fills the token masks of many matchers (one per sequence of a batch) into one
// contiguous [batch x stride] buffer, on a persistent pool of threads. Each matcher is filled by
// exactly one thread; different matchers may share a CompiledGrammar (its caches are
// thread-safe). The calling thread works too; idle workers spin briefly before sleeping, so
// per-step batches of microsecond fills do not pay a wake-up each time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "lockstep/matcher.h"

namespace lockstep {

class BatchMaskFiller {
 public:
  // `num_threads` including the caller; 0 = hardware concurrency.
  explicit BatchMaskFiller(int num_threads = 0);
  ~BatchMaskFiller();
  BatchMaskFiller(const BatchMaskFiller&) = delete;
  BatchMaskFiller& operator=(const BatchMaskFiller&) = delete;

  int num_threads() const;
  // Row i of `out` (words [i * stride, i * stride + BitmaskWords(width_i))) receives matcher i's
  // mask; `stride` >= the largest BitmaskWords of the matchers, and out.size() >= n * stride.
  // A null matcher leaves its row zero. Returns false (nothing written) on a size error.
  bool Fill(std::span<Matcher* const> matchers, std::span<std::uint32_t> out, std::size_t stride);

 private:
  struct Pool;
  std::unique_ptr<Pool> pool_;
};

}  // namespace lockstep
