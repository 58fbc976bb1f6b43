// CompileDeadline: the wall-clock deadline and the cancellation flag of one compile
// (CompileOptions::compile_timeout_ms and CompileOptions::cancel), for every long compile phase
// (schema expansion and emission, normalisation, lowering, determinisation and minimisation,
// format automata, mask precomputation). A phase polls it in its loops and, once it has passed,
// returns the kResourceLimit status it makes, located where the phase was, so that a compile
// ends soon after its deadline or its cancellation instead of running on.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "lockstep/status.h"

namespace lockstep {

class CompileDeadline {
 public:
  using Clock = std::chrono::steady_clock;

  // Never passes and is never cancelled.
  CompileDeadline() = default;
  // Passes `timeout_ms` from now (<= 0: no deadline) or once *cancel is true (null: no flag).
  CompileDeadline(std::int64_t timeout_ms, std::shared_ptr<const std::atomic<bool>> cancel)
      : timeout_ms_(timeout_ms > 0 ? timeout_ms : 0), cancel_(std::move(cancel)) {
    // (Capped at about 31 years, so that the end fits the clock's nanoseconds.)
    constexpr std::int64_t kMaxMs = 1'000'000'000'000;
    if (timeout_ms_ > 0) {
      end_ = Clock::now() + std::chrono::milliseconds(std::min(timeout_ms_, kMaxMs));
    }
  }

  bool active() const { return timeout_ms_ > 0 || cancel_ != nullptr; }

  // Whether the deadline has passed or the flag is set. Reads the clock and the flag on one
  // call in kStride (the others cost a decrement), so loops whose steps take well under a
  // microsecond can poll every step; once true it stays true. A copy polls on its own: give
  // each thread its own copy.
  bool Poll() const {
    if (expired_) return true;
    if (!active() || --countdown_ > 0) return false;
    countdown_ = kStride;
    return PassedNow();
  }
  // Reads the clock and the flag now (for loops whose steps are long).
  bool PassedNow() const {
    if (expired_) return true;
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      cancelled_ = expired_ = true;
    } else if (timeout_ms_ > 0 && Clock::now() >= end_) {
      expired_ = true;
    }
    return expired_;
  }

  // The error of a compile stopped at `location` (a JSON Pointer, "rule 'name'", ...): the
  // budget it ran out of, cancellation first when both apply.
  Status Error(std::string location) const {
    if (cancelled_ || (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed))) {
      return Status(StatusCode::kResourceLimit, "compile cancelled", std::move(location));
    }
    return Status(StatusCode::kResourceLimit,
                  "compile deadline of " + std::to_string(timeout_ms_) + " ms passed",
                  std::move(location));
  }

 private:
  static constexpr std::int32_t kStride = 64;

  std::int64_t timeout_ms_ = 0;
  Clock::time_point end_{};
  std::shared_ptr<const std::atomic<bool>> cancel_;
  mutable std::int32_t countdown_ = 1;  // the first poll reads the clock
  mutable bool expired_ = false;
  mutable bool cancelled_ = false;
};

}  // namespace lockstep
