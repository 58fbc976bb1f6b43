// Decoding loops that run a LogitsSource, a Matcher and a Sampler in lockstep, for hosts and the
// CLI: plain sampling with jump-forward (Generate), beam search under a grammar (BeamSearch) and
// speculative decoding with a draft source (SpeculativeGenerate). Every loop advances the matcher
// only by tokens its mask allows, so every finished output matches the constraint; randomness is
// CounterUniform / the Sampler's counters, so a run reproduces bit for bit. Choices are explained
// in docs/decoding.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/sampler.h"
#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

enum class FinishReason : std::uint8_t {
  kEos,     // the matcher accepted an EOS id
  kLength,  // max_tokens generated
};
const char* FinishReasonName(FinishReason r);  // "eos", "length"

struct GenerateOptions {
  SamplerConfig sampler = {};
  std::int32_t max_tokens = 256;  // generated tokens, EOS not counted
  // When the matcher forces bytes (ForcedBytes), append their canonical tokenisation with no
  // model call. The last token of a forced run is kept only if nothing but EOS can follow it
  // (otherwise it could merge with what comes next), so a run of one token is never forced.
  bool jump_forward = true;
  std::uint64_t sequence_id = 0;  // the Sampler's sequence counter
};

struct GenerateResult {
  std::vector<TokenId> tokens;  // generated ids, without the final EOS
  std::string text;             // their bytes
  FinishReason finish = FinishReason::kLength;
  std::int32_t model_calls = 0;    // LogitsSource calls
  std::int32_t forced_tokens = 0;  // tokens appended by jump-forward
  // Sum of log P(token) under the constrained model distribution (SampleResult::masked_logprob)
  // over the sampled tokens (the EOS included, forced tokens not).
  double logprob = 0.0;
};

// Samples one completion from `matcher`'s current state. The source sees prompt + generated ids,
// which are also the sampler's penalty history (as in `lockstep generate`).
// Errors: kInvalidArgument if the source's width is not the grammar's logits width; kInternal if
// the mask allows nothing before the end (a grammar bug) or the matcher rejects a drawn token.
Result<GenerateResult> Generate(LogitsSource& source, Matcher& matcher,
                                std::span<const TokenId> prompt, const GenerateOptions& options);

struct BeamOptions {
  std::int32_t beam_width = 4;
  // Hypotheses are ranked by sum(log p) / len^length_penalty, len = generated tokens without EOS
  // (at least 1); 0 ranks by the plain sum.
  float length_penalty = 1.0f;
  std::int32_t max_tokens = 256;
};

struct BeamHypothesis {
  std::vector<TokenId> tokens;  // without the final EOS
  std::string text;
  FinishReason finish = FinishReason::kEos;
  double logprob = 0.0;  // summed log P under the constrained (masked, T = 1) distribution
  double score = 0.0;    // logprob / len^length_penalty
};

struct BeamResult {
  std::vector<BeamHypothesis> hypotheses;  // best first, at most beam_width
  std::int32_t model_calls = 0;
  std::int32_t steps = 0;
};

// Deterministic beam search from `matcher`'s state (each beam forks it). Log-probabilities are
// log-softmax of the masked logits at temperature 1. Finished (EOS) hypotheses are collected
// until beam_width of them are in hand and no live beam can still beat the worst (exact bound:
// log p only falls), or max_tokens; live beams left at max_tokens count as kLength hypotheses.
// Ties go to the lower beam index, then the lower token id.
Result<BeamResult> BeamSearch(LogitsSource& source, const Matcher& matcher,
                              std::span<const TokenId> prompt, const BeamOptions& options);

struct SpeculativeOptions {
  SamplerConfig sampler = {};  // the rule both distributions go through (seed included)
  std::int32_t gamma = 4;      // draft tokens per round
  std::int32_t max_tokens = 256;
  std::uint64_t sequence_id = 0;
};

struct SpeculativeResult {
  std::vector<TokenId> tokens;  // without the final EOS
  std::string text;
  FinishReason finish = FinishReason::kLength;
  std::int32_t rounds = 0;        // target verification passes ("target calls")
  std::int32_t drafted = 0;       // draft tokens proposed
  std::int32_t accepted = 0;      // draft tokens accepted
  std::int32_t draft_calls = 0;   // draft LogitsSource calls
  std::int32_t target_calls = 0;  // target LogitsSource calls (one per scored position)
  double acceptance_rate() const { return drafted ? static_cast<double>(accepted) / drafted : 0; }
  // Tokens emitted (EOS included) per verification pass.
  double tokens_per_round() const;
};

// Speculative sampling: each round the draft proposes up to gamma tokens under the mask, drawn
// from p (the sampler's distribution of the draft's logits); the target gives q at every drafted
// position plus one; token i is kept with probability min(1, q/p), the first rejected one is
// replaced by a draw from normalised max(0, q - p) and the matcher rolled back past it; if all
// are kept, one more token is drawn from q. The output has exactly the distribution of sampling
// the target alone under the same sampler config. Both sources must have the grammar's width.
Result<SpeculativeResult> SpeculativeGenerate(LogitsSource& target, LogitsSource& draft,
                                              Matcher& matcher, std::span<const TokenId> prompt,
                                              const SpeculativeOptions& options);

}  // namespace lockstep
