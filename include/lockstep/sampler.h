// Sampler: turns one step's logits and grammar bitmask into a token, for generation loops and
// hosts. Stages, in order: grammar mask (disallowed = -inf) -> temperature (T = 0 is the masked
// argmax) -> top-k -> top-p -> renormalise -> draw. The mask comes before truncation, so
// truncation never leaves zero candidates. Randomness is counter-based: the draw depends only on
// (seed, sequence id, step), so a run reproduces bit for bit whatever the batch size, the thread
// count or the order in which sequences are sampled. Later stages of the full pipeline (logit
// bias, penalties, min-p) slot in around the same core.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "lockstep/types.h"

namespace lockstep {

struct SamplerConfig {
  float temperature = 1.0f;  // <= 0 (or top_k == 1): greedy, the masked argmax, ties to lowest id
  std::int32_t top_k = 0;    // keep the k most likely allowed tokens (ties to lowest id); 0 = off
  float top_p = 1.0f;        // keep the smallest set of most likely tokens whose mass is >= top_p
                             // (ties at the cut are all kept); >= 1 = off
  std::uint64_t seed = 0;
};

struct SampleResult {
  TokenId token = kNoToken;  // kNoToken when the mask allows nothing (a caller error)
  // log P(token) under the distribution the draw used: masked, tempered, truncated and
  // renormalised; 0 for a greedy step.
  float logprob = 0.0f;
  // log P(token) under softmax of the masked logits at temperature 1 (the constrained model
  // distribution): logit - logsumexp(allowed logits).
  float masked_logprob = 0.0f;
  // Tokens the draw chose from (after truncation, including any whose probability underflowed
  // to 0); 1 for a greedy step.
  std::int32_t num_candidates = 0;
};

// The uniform double in [0, 1) for (seed, sequence, step): splitmix64-style mixing of the three
// counters. Exposed so tests and other samplers (beam, speculative) share the same stream.
double CounterUniform(std::uint64_t seed, std::uint64_t sequence_id, std::uint64_t step);

// One Sampler per thread: it owns scratch buffers. Which instance draws does not matter: equal
// configs give equal tokens for equal (logits, mask, sequence id, step).
class Sampler {
 public:
  // `width_hint` pre-sizes the scratch buffers; Sample never allocates for widths up to the
  // largest seen so far.
  explicit Sampler(const SamplerConfig& config = {}, std::int32_t width_hint = 0);

  const SamplerConfig& config() const { return config_; }

  // `logits`: one float per token of the logits width, used as scratch (overwritten). `mask`:
  // ceil(logits.size() / 32) words in the shared layout, or null for "all allowed". Logits must
  // not be NaN or +inf; -inf is fine. Returns kNoToken if no token is allowed.
  TokenId Sample(std::span<float> logits, const std::uint32_t* mask, std::uint64_t sequence_id,
                 std::uint64_t step);
  // As Sample (same token), plus log-probabilities; `logits` is only read (costs two copies into
  // scratch and one extra pass over the allowed logits).
  SampleResult SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                              std::uint64_t sequence_id, std::uint64_t step);

 private:
  struct Draw {
    TokenId token = kNoToken;
    float logprob = 0.0f;
    std::int32_t num_candidates = 0;
  };
  Draw SampleImpl(std::span<float> logits, const std::uint32_t* mask, std::uint64_t sequence_id,
                  std::uint64_t step, bool count_candidates);
  void Reserve(std::int32_t width);
  // Keeps the top_k best allowed entries of `logits` in cand_ids_/cand_vals_.
  std::int32_t SelectTopK(const float* logits, const std::uint32_t* mask, std::int32_t width,
                          std::int32_t k);
  // The largest tau such that the entries of p >= tau have mass >= target (0: keep all).
  float TopPThreshold(const float* p, std::int32_t n, double total, double target);

  SamplerConfig config_;
  std::int32_t capacity_ = 0;
  std::vector<TokenId> cand_ids_;
  std::vector<float> cand_vals_;
  std::vector<float> block_sums_;
  std::vector<float> boundary_;
  std::vector<std::pair<float, TokenId>> heap_;
  std::vector<double> bucket_mass_;
  std::vector<float> copy_;
};

}  // namespace lockstep
