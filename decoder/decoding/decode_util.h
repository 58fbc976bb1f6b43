// Internal helpers shared by the decoding loops (generate_loop.cc, beam_search.cc, speculative.cc,
// classify.cc): the logits-width check, the constrained log-softmax, inverse-CDF draws and EOS
// tests. Walks over a mask's allowed ids are mask_words::ForEachSetBit
// (automata/token/mask_words.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "automata/token/mask_words.h"
#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep::internal {

// kInvalidArgument when a logits source's width is not the grammar's logits width: "<name> width
// N differs from ...", located at `location` ("logits source"; "target" or "draft" for the
// speculative pair).
inline Status CheckSourceWidth(std::int32_t source_width, std::int32_t width,
                               const std::string& name = "logits source",
                               const std::string& location = "logits source") {
  if (source_width == width) return Status::Ok();
  return Status(StatusCode::kInvalidArgument,
                name + " width " + std::to_string(source_width) +
                    " differs from the grammar's logits width " + std::to_string(width),
                location);
}

// log sum exp of the allowed logits (-inf if none is allowed or all are -inf), in double.
inline double MaskedLogSumExp(std::span<const float> logits, const std::uint32_t* mask) {
  const std::int32_t width = static_cast<std::int32_t>(logits.size());
  double best = -std::numeric_limits<double>::infinity();
  mask_words::ForEachSetBit(mask, width,
                            [&](std::int32_t i) { best = std::max(best, double{logits[i]}); });
  if (!std::isfinite(best)) return best;
  double sum = 0;
  mask_words::ForEachSetBit(mask, width,
                            [&](std::int32_t i) { sum += std::exp(double{logits[i]} - best); });
  return best + std::log(sum);
}

// The index whose cumulative mass first exceeds u * total; entries <= 0 are never chosen.
// kNoToken if every entry is <= 0.
inline TokenId DrawFrom(std::span<const float> probs, double u) {
  double total = 0;
  for (float p : probs) total += p > 0 ? p : 0;
  if (!(total > 0)) return kNoToken;
  const double target = u * total;
  double cum = 0;
  TokenId last = kNoToken;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (!(probs[i] > 0)) continue;
    cum += probs[i];
    last = static_cast<TokenId>(i);
    if (cum > target) return last;
  }
  return last;
}

inline bool IsEos(const Vocabulary& vocab, TokenId id) {
  const auto& e = vocab.eos_ids();
  return std::find(e.begin(), e.end(), id) != e.end();
}

}  // namespace lockstep::internal
