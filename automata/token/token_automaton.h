// What a compiled constraint is to the rest of the engine. A CompiledGrammar holds one
// TokenAutomaton: a regex's token DFA (TokenDfa, automata/token/token_dfa.h) or a grammar's
// positions and mask caches (CfgGrammar, automata/cfg/cfg_grammar.h). A Matcher holds one
// TokenSequence made by it: the state of one sequence, stepped by tokens and bytes.
//
// A sequence's steps are recorded by the Matcher as history entries (StateId), one per accepted
// step, the first from Start(): a regex's DFA state after the text so far, a grammar's count of
// Earley sets. Every question about the sequence names the entry it is asked at (the last one),
// and BackTo(entry) forgets what came after it, so a rollback is a truncation of the history.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

// The outcome of a token or of bytes at a history entry: rejected, taken (to entry `next`), or
// the end of the sequence (an end-of-sequence id where the constraint may end; `next` is the
// entry after it).
struct TokenStep {
  enum Kind : std::uint8_t { kRejected, kTaken, kEnded } kind = kRejected;
  StateId next = 0;
};

// The calling thread's FillTrace, written by the automata as a fill goes (Matcher::LastFillTrace).
FillTrace& CurrentFillTrace();

class TokenSequence {
 public:
  using Step = TokenStep;
  virtual ~TokenSequence() = default;
  virtual std::unique_ptr<TokenSequence> Clone() const = 0;

  // The history entry of the start.
  virtual StateId Start() const = 0;
  // The token mask at entry `at` into `out` (BitmaskWords(logits width) words). `self` is the
  // grammar this sequence runs (a grammar schedules background work for itself on a fill).
  virtual void Fill(StateId at, std::span<std::uint32_t> out,
                    const std::shared_ptr<const CompiledGrammar>& self) const = 0;
  // Token `id` at entry `at`. A parse that runs out of a budget on the way sets `error` (kResourceLimit) and rejects.
  virtual Step AcceptToken(StateId at, TokenId id, Status* error) = 0;
  // The bytes at entry `at`, as text: taken (to `next`) or rejected (`kRejected`).
  virtual Step AcceptBytes(StateId at, std::string_view bytes, Status* error) = 0;
  // Forgets every step after entry `at`.
  virtual void BackTo(StateId at) = 0;
  // Whether the constraint may end at entry `at`.
  virtual bool CanEnd(StateId at) const = 0;
  // The bytes every continuation from `at` starts with, up to `max_bytes` (none where the
  // constraint may end or take a special token).
  virtual std::string ForcedBytes(StateId at, std::size_t max_bytes) const = 0;
};

class TokenAutomaton {
 public:
  virtual ~TokenAutomaton() = default;
  virtual const Vocabulary& vocabulary() const = 0;
  virtual bool is_grammar() const = 0;
  virtual std::unique_ptr<TokenSequence> NewSequence() const = 0;
  // Fills the token masks of every state now (CompiledGrammar::PrecomputeAllMasks).
  virtual void PrecomputeAllMasks() const = 0;
  virtual CompiledGrammarStats CompiledStats() const = 0;
  // CompiledGrammar::AllowedTokensPerState.
  virtual std::vector<std::int64_t> AllowedTokensPerState() const { return {}; }
};

// The inside of a CompiledGrammar, for the engine's own layers (automata/, decoder/, capi/,
// tests): made from its automaton, and the automaton read back.
struct GrammarAccess {
  static std::shared_ptr<const CompiledGrammar> Make(std::unique_ptr<TokenAutomaton> automaton);
  static const TokenAutomaton& Automaton(const CompiledGrammar& g) { return *g.automaton_; }
  // The vocabulary's token trie the compiler built.
  static const std::shared_ptr<const TokenTrie>& Trie(const GrammarCompiler& c) { return c.trie_; }
};

}  // namespace lockstep
