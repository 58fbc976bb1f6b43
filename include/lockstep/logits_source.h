// LogitsSource: anything that gives one float per vocabulary entry for a token context, for
// generation loops, the CLI demo and tests. Built-ins: UniformSource (seeded pseudo-random
// logits) here, NgramModel (lockstep/ngram_model.h). Hosts wrap their model in a subclass.
#pragma once

#include <cstdint>
#include <span>

#include "lockstep/types.h"

namespace lockstep {

class LogitsSource {
 public:
  virtual ~LogitsSource();
  // Floats per call: the model's logits width.
  virtual std::int32_t width() const = 0;
  // `context`: prompt and generated ids so far. Writes width() floats to `out` (which must hold
  // exactly width() floats; a source leaves `out` untouched if it does not).
  virtual void Logits(std::span<const TokenId> context, std::span<float> out) = 0;
};

// Seeded pseudo-random logits in [0, 8): a counter-based hash of (seed, context length, last
// token, id), so the same context always gives the same logits, with no state.
class UniformSource final : public LogitsSource {
 public:
  UniformSource(std::int32_t width, std::uint64_t seed);
  std::int32_t width() const override { return width_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override;

 private:
  std::int32_t width_;
  std::uint64_t seed_;
};

}  // namespace lockstep
