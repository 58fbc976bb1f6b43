// GrammarCompiler and CompiledGrammar: the entry point that turns a constraint (for now a
// regex) into a token-level automaton over one vocabulary. A CompiledGrammar is immutable after
// compilation apart from its lazily filled, thread-safe mask cache, and is shared by any number
// of Matchers on any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

struct CompileOptions {
  // Budgets; exceeding one ends compilation with a kResourceLimit error.
  std::int32_t max_dfa_states = 100000;
  std::int32_t max_nfa_states = 1000000;
  std::int32_t max_repeat = 100000;
  // Per-state token masks are computed on first visit and cached (the default, fastest to the
  // first mask); true computes every state's mask at compile time.
  bool precompute_masks = false;
  // Cap on the memory of cached masks. States past it still get exact masks, computed per call.
  std::int64_t max_mask_cache_bytes = std::int64_t{512} << 20;
};

struct CompiledGrammarStats {
  std::int32_t dfa_states = 0;       // including the dead state
  std::int32_t byte_classes = 0;
  std::int32_t accepting_states = 0;
  double compile_ms = 0;             // regex -> minimal byte DFA
  std::int32_t cached_masks = 0;     // states whose token mask is cached now
  std::int64_t mask_cache_bytes = 0;
};

class TokenTrie;
class CompiledGrammar;

// Holds a vocabulary and its token trie (built once, ~tens of ms for a 128k vocabulary) and
// compiles constraints against it. Thread-safe; compiled grammars keep what they need alive.
class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const Vocabulary> vocab);
  ~GrammarCompiler();

  // Full-match semantics: the generated text as a whole matches `pattern`.
  Result<std::shared_ptr<const CompiledGrammar>> CompileRegex(
      std::string_view pattern, const CompileOptions& options = {}) const;

  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
};

class CompiledGrammar {
 public:
  class Impl;
  explicit CompiledGrammar(std::unique_ptr<Impl> impl);
  ~CompiledGrammar();

  const Vocabulary& vocabulary() const;
  std::int32_t logits_width() const { return vocabulary().logits_width(); }
  // Fills the token masks of every state now (what `compile --stats` reports on).
  void PrecomputeAllMasks() const;
  CompiledGrammarStats Stats() const;
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
