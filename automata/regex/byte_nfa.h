// ByteNfa: a Thompson NFA over bytes in flat arrays, compiled from a RegexAst; the input of the
// subset construction in automata/regex/dfa_builder.cc. Code-point classes become UTF-8 byte-range
// chains (split by encoded length and shared prefix), so the NFA accepts valid UTF-8 only.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/regex/regex_ast.h"
#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

enum class NfaStateKind : std::uint8_t {
  kMatch,  // accepting; no transitions
  kByte,   // a byte in [lo, hi] leads to out
  kEps,    // epsilon to out
  kSplit,  // epsilon to out and to out1
  kFail,   // no transitions (an empty class)
};

struct NfaState {
  NfaStateKind kind = NfaStateKind::kFail;
  std::uint8_t lo = 0;
  std::uint8_t hi = 0;
  StateId out = 0;
  StateId out1 = 0;
};

struct ByteNfa {
  static constexpr StateId kMatchState = 0;  // states[0] is the only kMatch state
  std::vector<NfaState> states;
  StateId start = 0;
};

// A UTF-8 byte-range sequence: byte k of an encoding lies in [lo[k], hi[k]], k < len.
struct Utf8Sequence {
  std::int32_t len = 0;
  std::uint8_t lo[4] = {};
  std::uint8_t hi[4] = {};
};

// Splits [lo, hi] (scalar values, no surrogates inside) into UTF-8 byte-range sequences whose
// union encodes exactly that range; appends them to `out` in increasing code-point order.
void SplitUtf8Range(char32_t lo, char32_t hi, std::vector<Utf8Sequence>* out);

// Compiles `ast` into a ByteNfa; kResourceLimit (naming max_nfa_states) when the NFA would
// exceed `max_nfa_states` states (counted repetitions expand into copies).
Result<ByteNfa> CompileAstToNfa(const RegexAst& ast, std::int32_t max_nfa_states);

}  // namespace lockstep
