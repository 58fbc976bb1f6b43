// The regex compiler: a pattern (JSON Schema `pattern` syntax) -> byte NFA -> subset DFA ->
// minimal ByteDfa (grammar/ir/byte_dfa.h), under budgets and the compile's deadline.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "grammar/base/deadline.h"
#include "grammar/ir/byte_dfa.h"
#include "lockstep/compiler.h"
#include "lockstep/status.h"

namespace lockstep {

// The regex compiler's options. Its budgets are CompileOptions' (lockstep/compiler.h), with
// CompileOptions' defaults: a regex constraint takes them from its compile through
// RegexOptionsFrom; grammar lexemes and schema terminals use the defaults (with their own
// max_dfa_states where they set one).
struct RegexCompileOptions {
  // DFA states after subset construction, before minimisation; exceeding it is a
  // kResourceLimit error, never an OOM.
  std::int32_t max_dfa_states = CompileOptions().max_dfa_states;
  std::int32_t max_nfa_states = CompileOptions().max_nfa_states;
  // Largest counted repetition bound accepted ({m,n} with n above it is kResourceLimit).
  std::int32_t max_repeat = CompileOptions().max_repeat;
  // Regex-only budgets. Deepest group nesting accepted (bounds the parser's recursion); deeper
  // is kResourceLimit.
  std::int32_t max_nesting_depth = 1000;
  // RegexParseOptions::anchor_markers: '^' and '$' anywhere, as the bytes 0xFE and 0xFF.
  bool anchor_markers = false;
  // Budget on the NFA-state entries of all state sets kept by the subset construction (memory
  // is about 4 bytes each); exceeding it is kResourceLimit.
  std::int64_t max_subset_elements = 20000000;
  // The compile this regex is part of: past it, kResourceLimit (polled per DFA state).
  CompileDeadline deadline;
};

// The options of a regex constraint compiled under `options` and `deadline`.
inline RegexCompileOptions RegexOptionsFrom(const CompileOptions& options,
                                            const CompileDeadline& deadline) {
  return {.max_dfa_states = options.max_dfa_states,
          .max_nfa_states = options.max_nfa_states,
          .max_repeat = options.max_repeat,
          .deadline = deadline};
}

// Compiles a regex (JSON Schema `pattern` syntax: ECMA-262 subset shared with RE2) into a
// minimal ByteDfa matching exactly the strings that FULLY match the pattern (a leading ^ and a
// trailing $ are accepted and change nothing). Errors: kInvalidRegex with location
// "offset N" and a snippet; kResourceLimit when a budget in `options` runs out.
Result<ByteDfa> CompileRegexToDfa(std::string_view pattern, const RegexCompileOptions& options = {});

// A golden-testable text form of `dfa`, independent of its byte-class numbering:
//   start 1
//   1: 61-62->2
//   2*:
// One line per live state; '*' marks accepting states; each maximal run of bytes with the same
// non-dead target is "lo-hi->t" (or "lo->t" for one byte), bytes in lowercase hex.
std::string DumpDfa(const ByteDfa& dfa);

// Checks the ByteDfa invariants (sizes, dead state, trimmed, accepting states grouped); returns
// an empty string if all hold, else a description of the first violation. For tests and fuzzing.
std::string CheckDfaInvariants(const ByteDfa& dfa);

}  // namespace lockstep
