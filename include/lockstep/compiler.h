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
  // Grammars: deepest nesting of rule predictions (a JSON bracket costs two levels). Input that
  // would nest deeper is rejected (the matcher reports kResourceLimit), never a stack overflow.
  std::int32_t max_nesting_depth = 10000;
  // Grammars with precompute_masks: threads for the per-position precomputation (0 = all cores).
  std::int32_t precompute_threads = 0;
};

struct CompiledGrammarStats {
  bool is_grammar = false;           // a context-free grammar (else a regex)
  std::int32_t dfa_states = 0;       // regex: including the dead state; grammar: all rule DFAs
  std::int32_t byte_classes = 0;
  std::int32_t accepting_states = 0;
  double compile_ms = 0;             // regex -> minimal byte DFA
  std::int32_t cached_masks = 0;     // states whose token mask is cached now
  std::int64_t mask_cache_bytes = 0;
  // Grammars only.
  std::int32_t rules = 0;             // after lowering (counter rules included)
  std::int32_t counter_rules = 0;     // native {m,n} counters
  std::int32_t positions = 0;         // rule positions whose token classes are computed
  std::int64_t accepted_tokens = 0;   // context-independent accepted, summed over positions
  std::int64_t uncertain_tokens = 0;  // (token, split) pairs checked against the stack
  std::int32_t signatures = 0;        // distinct parser states interned
};

class TokenTrie;
class CompiledGrammar;
class CfgGrammar;
namespace grammar {
struct Grammar;
}

// Holds a vocabulary and its token trie (built once, ~tens of ms for a 128k vocabulary) and
// compiles constraints against it. Thread-safe; compiled grammars keep what they need alive.
class GrammarCompiler {
 public:
  explicit GrammarCompiler(std::shared_ptr<const Vocabulary> vocab);
  ~GrammarCompiler();

  // Full-match semantics: the generated text as a whole matches `pattern`.
  Result<std::shared_ptr<const CompiledGrammar>> CompileRegex(
      std::string_view pattern, const CompileOptions& options = {}) const;

  // A context-free grammar in GBNF (llama.cpp's dialect) or Lark-style EBNF; `syntax` is
  // "auto" (GBNF if rules use "::="), "gbnf" or "lark". Parse errors are kInvalidGrammar with
  // line:column; see grammar/grammar_ir.h.
  Result<std::shared_ptr<const CompiledGrammar>> CompileGrammar(
      std::string_view text, const CompileOptions& options = {},
      std::string_view syntax = "auto") const;
  // A grammar already in the IR (what the JSON Schema compiler produces).
  Result<std::shared_ptr<const CompiledGrammar>> CompileGrammarIr(
      const grammar::Grammar& ir, const CompileOptions& options = {}) const;

  const Vocabulary& vocabulary() const { return *vocab_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocab_; }
  const std::shared_ptr<const TokenTrie>& trie() const { return trie_; }

 private:
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
};

class CompiledGrammar {
 public:
  class Impl;
  explicit CompiledGrammar(std::unique_ptr<Impl> impl);
  explicit CompiledGrammar(std::unique_ptr<CfgGrammar> cfg);
  ~CompiledGrammar();

  const Vocabulary& vocabulary() const;
  std::int32_t logits_width() const { return vocabulary().logits_width(); }
  // Fills the token masks of every state now (what `compile --stats` reports on).
  void PrecomputeAllMasks() const;
  CompiledGrammarStats Stats() const;
  const Impl& impl() const { return *impl_; }
  bool is_grammar() const { return cfg_ != nullptr; }
  const CfgGrammar& cfg() const { return *cfg_; }

 private:
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<CfgGrammar> cfg_;
};

}  // namespace lockstep
