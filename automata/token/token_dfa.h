// TokenDfa: the TokenAutomaton of regex constraints, a minimal byte DFA lifted to tokens. For
// each DFA state the set of tokens whose bytes keep the automaton alive is found by one walk of the token
// trie, on first visit, and cached in one aligned bitmask per state (thread-safe, lock-free).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "automata/regex/regex_compiler.h"
#include "automata/token/token_automaton.h"
#include "automata/token/token_trie.h"
#include "automata/vocab/token_flags.h"
#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

class TokenDfa final : public TokenAutomaton {
 public:
  TokenDfa(std::shared_ptr<const Vocabulary> vocab, std::shared_ptr<const TokenTrie> trie,
           ByteDfa dfa, const CompileOptions& options, double compile_ms);
  ~TokenDfa() override;

  // TokenAutomaton: a sequence is the DFA state after the text so far.
  const Vocabulary& vocabulary() const override { return *vocab_; }
  bool is_grammar() const override { return false; }
  std::unique_ptr<TokenSequence> NewSequence() const override;
  void PrecomputeAllMasks() const override;
  CompiledGrammarStats CompiledStats() const override { return Stats(); }
  std::vector<std::int64_t> AllowedTokensPerState() const override;

  const Vocabulary& vocab() const { return *vocab_; }
  const ByteDfa& dfa() const { return dfa_; }
  std::int32_t width() const { return width_; }
  std::size_t mask_words() const { return BitmaskWords(width_); }
  // Bitmask of `state` (PaddedBitmaskWords(width) words) from the cache, computing it on first
  // use; nullptr if the cache budget is spent (then use ComputeMask).
  const std::uint32_t* CachedMask(StateId state) const;
  // Exact mask of `state` into `out` (mask_words() words) by a trie walk; no caching.
  void ComputeMask(StateId state, std::span<std::uint32_t> out) const;
  // Runs a token's bytes from `state`: the next state, or kDead. EOS and other special tokens
  // are not bytes: callers handle them by id.
  StateId StepToken(StateId state, TokenId id) const {
    return dfa_.Run(state, vocab_->TokenBytes(id));
  }
  bool IsEos(TokenId id) const {
    return id >= 0 && id < static_cast<TokenId>(is_eos_.size()) && is_eos_[id];
  }
  bool IsTextToken(TokenId id) const { return lockstep::IsTextToken(*vocab_, id); }
  CompiledGrammarStats Stats() const;

 private:
  friend class ArtifactCodec;  // automata/artifact/artifact.cc reads and restores the mask cache
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const TokenTrie> trie_;
  ByteDfa dfa_;
  CompileOptions options_;
  double compile_ms_;
  std::int32_t width_;
  std::vector<bool> is_eos_;
  mutable std::unique_ptr<std::atomic<std::uint32_t*>[]> cache_;
  mutable std::atomic<std::int64_t> cache_bytes_{0};
  mutable std::atomic<std::int32_t> cached_masks_{0};
};

// The grammar's TokenDfa, or null when it is a grammar.
const TokenDfa* TokenDfaOf(const CompiledGrammar& g);

}  // namespace lockstep
