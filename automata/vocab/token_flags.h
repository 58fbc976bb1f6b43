// Per-id questions about a vocabulary's tokens that every token automaton asks while it fills
// masks and accepts tokens, answered the same way for regexes (TokenDfa) and grammars
// (CfgGrammar).
#pragma once

#include <vector>

#include "lockstep/vocabulary.h"

namespace lockstep {

// One flag per id of `vocab`: whether the id is one of its end-of-sequence ids.
inline std::vector<bool> EosFlags(const Vocabulary& vocab) {
  std::vector<bool> flags(vocab.size(), false);
  for (TokenId id : vocab.eos_ids()) {
    if (id >= 0 && id < vocab.size()) flags[id] = true;
  }
  return flags;
}

// Whether `id` is text, matched by its bytes: a normal or byte token with at least one byte.
// Special tokens (and ids outside the vocabulary) are matched by id or not at all.
inline bool IsTextToken(const Vocabulary& vocab, TokenId id) {
  if (id < 0 || id >= vocab.size()) return false;
  const TokenKind k = vocab.Kind(id);
  return (k == TokenKind::kNormal || k == TokenKind::kByte) && !vocab.TokenBytes(id).empty();
}

}  // namespace lockstep
