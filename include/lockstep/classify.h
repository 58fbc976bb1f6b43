// Exact label distributions (`lockstep classify`, soft labels): for a constraint with finitely
// many completions (a choices list, a small regex), the probability of each completion under the
// constrained model, summed over every tokenisation the mask allows. For hosts, the CLI and
// tests; the algorithm is in docs/decoding.md.
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

struct ClassifyOptions {
  // The distribution each step is drawn from (default: temperature 1, no truncation, i.e. the
  // constrained model distribution); the Sampler's Distribution, renormalised in double.
  SamplerConfig sampler = {};
  // A prefix whose probability falls below this is not expanded; its mass is floor_mass.
  double floor = 1e-9;
  // Tree nodes (model calls) allowed; prefixes left unexpanded add to budget_mass.
  std::int64_t max_nodes = 100000;
  // Prefixes longer than this are not expanded (budget_mass).
  std::int32_t max_depth = 256;
};

struct LabelProbability {
  std::string label;
  double probability = 0;
  std::int64_t tokenizations = 0;  // distinct token paths that produced it (EOS not counted)
};

struct ClassifyResult {
  // With labels given: in their order, every one listed (probability 0 if never reached);
  // otherwise every completion reached, most probable first (ties by bytes).
  std::vector<LabelProbability> labels;
  double floor_mass = 0;   // mass of prefixes cut by the floor
  double budget_mass = 0;  // mass of prefixes left by the node or depth budget
  double other_mass = 0;   // completions that are not one of the given labels
  std::int64_t nodes = 0;  // prefixes expanded (= model calls)
  double total() const;    // sum of labels + the three masses: 1 up to rounding
};

// Expands the tree of token prefixes from `matcher`'s state, most probable prefix first, so the
// node budget leaves as little mass as possible. Each finished path (its EOS accepted) adds its
// probability to the label equal to its bytes. Errors: kInvalidArgument on a width mismatch or a
// bad option.
Result<ClassifyResult> Classify(LogitsSource& source, const Matcher& matcher,
                                std::span<const TokenId> prompt,
                                std::span<const std::string> labels,
                                const ClassifyOptions& options);

// A regex whose full matches are exactly `choices` (each escaped, joined by |). kInvalidArgument
// for an empty list or an empty choice.
Result<std::string> ChoicesRegex(std::span<const std::string> choices);

}  // namespace lockstep
