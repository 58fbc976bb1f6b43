// Sampler: turns one step's logits and grammar bitmask into a token, for generation loops and
// hosts. Stages, in order, each optional: logit bias -> repetition penalty -> frequency and
// presence penalties -> grammar mask (disallowed = -inf) -> temperature (T = 0 is the argmax of
// the masked, penalised logits) -> top-k -> top-p -> min-p -> renormalise -> draw. The mask comes
// before truncation, so truncation never leaves zero candidates. Randomness is counter-based: the
// draw depends only on (seed, sequence id, step), so a run reproduces bit for bit whatever the
// batch size, the thread count or the order in which sequences are sampled. Named presets
// (schemas/presets/presets.json) turn into configs with SamplerPreset.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

struct SamplerConfig {
  float temperature = 1.0f;  // <= 0 (or top_k == 1): greedy, the masked argmax, ties to lowest id
  std::int32_t top_k = 0;    // keep the k most likely allowed tokens (ties to lowest id); 0 = off
  float top_p = 1.0f;        // keep the smallest set of most likely tokens whose mass is >= top_p
                             // (ties at the cut are all kept); >= 1 = off
  float min_p = 0.0f;        // then keep tokens with p >= min_p * p_max; <= 0 = off
  std::uint64_t seed = 0;
  // Added to the logit of each listed id (ids outside the logits width are ignored); applied
  // first, so penalties see the biased logits.
  std::vector<std::pair<TokenId, float>> logit_bias = {};
  // CTRL repetition penalty theta over the distinct tokens of the history window: a positive
  // logit is divided by theta, a negative one multiplied. 1 (or <= 0) = off.
  float repetition_penalty = 1.0f;
  // Penalties look at the last `repetition_window` tokens of the history; 0 = all of it.
  std::int32_t repetition_window = 0;
  // z - count * frequency_penalty - (count > 0) * presence_penalty, count over the same window.
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
};

// The preset called `name` in `presets_json` (the format of schemas/presets/presets.json: an
// object "presets" of name -> {field: value}, fields named as in SamplerConfig, "logit_bias" an
// object of decimal id -> bias). kInvalidArgument for an unknown name, a malformed file or a
// bad field, with the JSON Pointer (or byte offset) of the problem as the location.
Result<SamplerConfig> SamplerPreset(std::string_view name, std::string_view presets_json);

struct SampleResult {
  TokenId token = kNoToken;  // kNoToken when the mask allows nothing (a caller error)
  // log P(token) under the distribution the draw used: masked, tempered, truncated and
  // renormalised; 0 for a greedy step.
  float logprob = 0.0f;
  // log P(token) under softmax of the masked logits at temperature 1 (the constrained model
  // distribution, before bias and penalties): logit - logsumexp(allowed logits).
  float masked_logprob = 0.0f;
  // Tokens the draw chose from (after truncation, including any whose probability underflowed
  // to 0); 1 for a greedy step.
  std::int32_t num_candidates = 0;
};

// Per-step log-probabilities of a chosen token, for reports (`generate --logprobs`).
struct TokenLogprobs {
  float raw_logprob = 0.0f;          // under softmax of the raw logits at T 1 (no mask, no edits)
  float constrained_logprob = 0.0f;  // under softmax of the masked raw logits at T 1
  float sampled_logprob = 0.0f;      // under the distribution the draw used (every stage)
  float entropy = 0.0f;              // nats, of the constrained distribution
  // The most likely allowed tokens under the constrained distribution, best first (ties to the
  // lowest id), with their constrained logprobs.
  std::vector<std::pair<TokenId, float>> top;
};

// The distribution after one stage of the pipeline, from Sampler::Trace.
struct StageDistribution {
  // "logits" (softmax of the raw logits at T 1), "logit_bias", "repetition",
  // "frequency_presence", "mask", "temperature", "top_k", "top_p", "min_p", "final".
  std::string name;
  bool enabled = true;         // false: the config skips this stage (probs equal the previous)
  std::vector<float> probs;    // one per logit, summing to 1 (0 for removed ids)
  // Truncation stages (top_k, top_p, min_p): the smallest probability, under the previous
  // stage's distribution, of a kept token (0 if nothing was cut), and the mass of the previous
  // distribution that the kept tokens hold (1 for other stages).
  float cutoff = 0.0f;
  double kept_mass = 1.0;
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
  // An empty history: bias applies, penalties do not.
  TokenId Sample(std::span<float> logits, const std::uint32_t* mask, std::uint64_t sequence_id,
                 std::uint64_t step);
  // `history`: the tokens generated so far (oldest first) for the penalties; only its last
  // config().repetition_window entries are read, ids outside the width are ignored. Costs
  // O(window) on top of the plain draw, never O(width).
  TokenId Sample(std::span<float> logits, const std::uint32_t* mask,
                 std::span<const TokenId> history, std::uint64_t sequence_id, std::uint64_t step);
  // As Sample (same token), plus log-probabilities; `logits` is only read (costs two copies into
  // scratch and one extra pass over the allowed logits).
  SampleResult SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                              std::uint64_t sequence_id, std::uint64_t step);
  SampleResult SampleDetailed(std::span<const float> logits, const std::uint32_t* mask,
                              std::span<const TokenId> history, std::uint64_t sequence_id,
                              std::uint64_t step);
  // The final distribution Sample draws from, by the same code: probs[i] = P(token i) after every
  // stage and the renormalisation, 0 for masked or truncated ids (a greedy config gives 1 on the
  // argmax). `probs` must have logits.size() entries. Returns the number of candidates (entries
  // the draw could pick), 0 if no token is allowed. Copies `logits`; meant for hosts and tests.
  std::int32_t Distribution(std::span<const float> logits, const std::uint32_t* mask,
                            std::span<const TokenId> history, std::span<float> probs);
  // The distribution after every stage, in pipeline order (see StageDistribution for the names).
  // Stage s is Distribution() of this sampler's config with the stages after s switched off, so
  // it is the sampler's own code, and the "final" stage equals Distribution(). Allocates; meant
  // for explanations and tests.
  std::vector<StageDistribution> Trace(std::span<const float> logits, const std::uint32_t* mask,
                                       std::span<const TokenId> history);
  // Log-probabilities of `token` (see TokenLogprobs) with the `top_n` best alternatives.
  // Allocates; meant for reports.
  TokenLogprobs Logprobs(std::span<const float> logits, const std::uint32_t* mask,
                         std::span<const TokenId> history, TokenId token, std::int32_t top_n);

 private:
  struct Draw {
    TokenId token = kNoToken;
    float logprob = 0.0f;
    std::int32_t num_candidates = 0;
  };
  // The whole pipeline on `logits` (overwritten). With `probs` non-null it writes the final
  // distribution there instead of drawing.
  Draw SampleImpl(std::span<float> logits, const std::uint32_t* mask,
                  std::span<const TokenId> history, std::uint64_t sequence_id, std::uint64_t step,
                  bool count_candidates, float* probs);
  // The pruned top-p/min-p path: exponentiates only the allowed logits near `max` (into the
  // compact candidate arrays) and returns true, with their count and the cut, when that cut is
  // provably the one the full pass would find; false (nothing decided) otherwise.
  bool PrunedCut(const float* x, const std::uint32_t* mask, std::int32_t width, float max,
                 std::int32_t* n, float* tau);
  // Logit bias, repetition, frequency and presence penalties, in place.
  void ApplyBiasAndPenalties(float* logits, std::int32_t width, std::span<const TokenId> history);
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
  // Penalty scratch: counts_[id] for the ids of the window (zero elsewhere between calls, reset
  // through touched_, the distinct ids seen).
  std::vector<std::int32_t> counts_;
  std::vector<TokenId> touched_;
};

}  // namespace lockstep
