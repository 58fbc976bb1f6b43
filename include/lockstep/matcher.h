// Matcher: the per-sequence runtime of a CompiledGrammar. It answers "which tokens may come
// next" as a bitmask and advances token by token; it is cheap to create, fork and roll back.
// The hot path (FillNextTokenBitmask, AcceptToken) never throws and does not allocate once the
// history has grown to the sequence length.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/types.h"

namespace lockstep {

// What one FillNextTokenBitmask did, to trace a slow fill to its cause (`lockstep bench
// --per-schema`). Grammars only; a regex fill leaves every count at zero.
struct FillTrace {
  std::int32_t positions_walked = 0;  // positions computed here by a walk of the token trie
  std::int32_t region_walks = 0;      //   of which through a shared string-body view
  std::int32_t parser_walks = 0;      //   of which by the local Earley parser (stack walk gave up)
  std::int32_t regions_built = 0;     // string-body views built for the vocabulary here
  std::int32_t positions_shared = 0;  // positions taken from the vocabulary's store
  std::int32_t full_walks = 0;        // masks by a walk of the whole trie over the full parser
  std::int32_t tail_nodes = 0;        // uncertain-tail trie nodes checked against the stack
  std::int32_t tails_reused = 0;      // positions whose tails' verdict was checked before
  std::int32_t unique_checks = 0;     // tokens run through the parser for uniqueItems
  std::int32_t unique_searches = 0;   //   of which searched for a new item (closed objects)
  // Tokens left out because the search for a new item ran past its budget
  // (CompileOptions::max_unique_search_bytes tried per fill): the mask may then miss a valid
  // token, never let a dead end through.
  std::int32_t unique_search_over = 0;
  std::int32_t length_checks = 0;     // tokens checked against a maxLength counted at run time
  std::int32_t key_states = 0;        // automaton states hashed here to key positions
  bool restored = false;              // a finished mask restored from the signature cache
  // The costliest thing the fill did: "full walk", "parser walk", "region build",
  // "region walk", "walk", "shared", "tails", "unique", "length", "restore" or "union".
  const char* Kind() const;
};

class TokenSequence;  // the grammar's automaton, for one sequence (not installed)
struct TokenStep;

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> grammar);
  Matcher(const Matcher& other);
  Matcher& operator=(const Matcher& other);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

  // Writes BitmaskWords(logits_width) words into `words` (bit i of word i/32 = token i allowed).
  // EOS ids are allowed exactly where the constraint may end; other special tokens and padding
  // ids never. After termination every bit is zero and the call returns false.
  bool FillNextTokenBitmask(std::span<std::uint32_t> words) const;
  // Advances by one token; false (state unchanged) if the token is not allowed. Accepting an
  // EOS id where the constraint may end terminates the matcher.
  bool AcceptToken(TokenId id);
  // Advances by raw bytes (one history step); false and unchanged if they lead nowhere.
  bool AcceptString(std::string_view bytes);
  // Undoes the last `n` accepted steps (tokens or strings); false if fewer were accepted.
  bool Rollback(std::int32_t n);
  // Number of accepted steps that Rollback can undo.
  std::int32_t NumSteps() const { return static_cast<std::int32_t>(history_.size()) - 1; }
  Matcher Fork() const { return *this; }
  void Reset();
  bool IsTerminated() const { return terminated_; }
  // True if the text so far is a complete match (EOS would be accepted now).
  bool CanEnd() const;
  // Bytes that every continuation must start with (jump-forward); stops where the automaton
  // branches or may end. Empty if nothing is forced. At most `max_bytes` bytes.
  std::string ForcedBytes(std::size_t max_bytes = 4096) const;
  // ForcedBytes as tokens, in the vocabulary's canonical tokenisation of those bytes, so that
  // the model is not pushed off its token distribution. The last token is kept back when a
  // longer vocabulary token could span it and what follows (the model picks that one), and any
  // bytes that do not end on a token boundary stay unforced. Every returned token is accepted
  // by AcceptToken in order.
  std::vector<TokenId> ForcedTokens() const;
  // Why the last failed Accept* failed when it was not a plain rejection (e.g. kResourceLimit
  // when the grammar's max_nesting_depth was reached); ok otherwise.
  const Status& last_error() const { return last_error_; }
  // Speculative decoding: how many of `draft` would be accepted in order, from the current
  // state, without changing it.
  std::int32_t ValidateDraft(std::span<const TokenId> draft) const;

  // The calling thread's trace of its last FillNextTokenBitmask (on any matcher).
  static const FillTrace& LastFillTrace();

  const CompiledGrammar& grammar() const { return *grammar_; }
  // Regex constraints: the byte-DFA state. Grammars: the number of Earley sets (a position).
  StateId state() const;

 private:
  // Records a step the sequence took (or not): true unless it was rejected.
  bool Take(const TokenStep& step);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<TokenSequence> seq_;  // the grammar's automaton, for this sequence
  Status last_error_;
  std::vector<StateId> history_;  // history_[0] = start; one entry per accepted step
  bool terminated_ = false;
  std::int32_t terminated_at_ = -1;  // history size when EOS was accepted
};

}  // namespace lockstep
