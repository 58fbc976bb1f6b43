// The decoding flags of `lockstep generate` (and the model loading shared with `classify`):
// --beam --length-penalty (beam search), --draft --gamma (speculative decoding), --guidance
// --negative-prompt (classifier-free guidance), --contrastive-weak --alpha --beta (contrastive
// decoding). generate.cc declares them with AddDecodingFlags, wraps its source with
// SetupDecoding and hands beam and speculative runs to RunDecoding.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "lockstep/compiler.h"
#include "lockstep/logits_source.h"
#include "lockstep/sampler.h"
#include "lockstep/status.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {

// Adds the value flags above to `value_flags`.
void AddDecodingFlags(std::set<std::string>* value_flags);
extern const char* const kDecodingFlagsHelp;

// The n-gram model prepared for `vocab` (trained at build time, or installed): the first file
// that exists of DataDirectory()/models/ngram-NAME.bin (an installed copy) and the build tree's
// models/ngram-NAME.bin; "" when there is neither.
std::string PrebuiltNgramModel(const Vocabulary& vocab);

// A logits source named on the command line: "uniform" (seeded), "ngram" (the model built for the
// vocabulary, or `ngram_model_path`, or one trained now on the shipped corpus), "ngramN" (N in
// 2..4: an order-N model trained now on the shipped corpus, a weaker model for --draft and
// --contrastive-weak), "scripted:FILE" (ScriptedSource), "replay:FILE" (ReplaySource), or a path
// to an n-gram model file. `flag` names the flag in errors.
Result<std::unique_ptr<LogitsSource>> LoadModel(std::string_view spec, const Vocabulary& vocab,
                                                std::uint64_t seed,
                                                const std::string& ngram_model_path,
                                                const std::string& flag);

enum class DecodingMode { kSample, kBeam, kSpeculative };

struct DecodingSetup {
  DecodingMode mode = DecodingMode::kSample;
  // The source the loop should call: the base model, wrapped by guidance and/or contrastive
  // decoding when asked. Owns the wrappers and the extra models.
  LogitsSource* source = nullptr;
  std::vector<std::unique_ptr<LogitsSource>> owned;
  std::unique_ptr<LogitsSource> draft;
};

// Reads the decoding flags and wraps `base`. kInvalidArgument naming the flag for a bad value or
// a bad combination (--beam with --draft).
Result<std::unique_ptr<DecodingSetup>> SetupDecoding(const Args& args, const Vocabulary& vocab,
                                                     LogitsSource& base,
                                                     const std::vector<TokenId>& prompt,
                                                     std::uint64_t seed);

// Runs beam search (prints the best min(count, B) hypotheses) or speculative decoding (count
// samples, and a summary of the acceptance rate on stderr). Output lines as `generate`'s, plus
// "logprob"/"score" (beam) or "acceptance_rate"/"tokens_per_target_call" (speculative). Returns
// the exit code.
int RunDecoding(const DecodingSetup& setup, const Args& args,
                const std::shared_ptr<const CompiledGrammar>& grammar,
                const std::vector<TokenId>& prompt, const SamplerConfig& config, std::int64_t count,
                std::int64_t max_tokens);

}  // namespace lockstep::cli
