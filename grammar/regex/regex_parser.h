// ParseRegex: the regex front end. Turns a JSON Schema `pattern` (the ECMA-262 subset that RE2
// shares, see schemas/regex/README.md) into a RegexAst for the byte-NFA compiler and the
// sampler used in tests. Errors are kInvalidRegex with location "offset N" and a caret snippet,
// or kResourceLimit when a repetition bound or the nesting depth is over budget.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/regex/regex_ast.h"
#include "grammar/base/utf8.h"
#include "lockstep/status.h"

namespace lockstep {

struct RegexParseOptions {
  // Largest bound allowed in {m}, {m,} and {m,n}; a larger one is kResourceLimit.
  std::int32_t max_repeat = 100000;
  // Deepest nesting of groups allowed; deeper is kResourceLimit (keeps recursion bounded).
  std::int32_t max_nesting_depth = 1000;
  // '^' and '$' anywhere, as kAnchor marker nodes (each one marker byte, and quantifiable like
  // an atom), instead of only where they cannot change the full-match language.
  bool anchor_markers = false;
};

Result<RegexAst> ParseRegex(std::string_view pattern, const RegexParseOptions& options = {});

// The error every front end reports for a bad regex: code kInvalidRegex (or `code`), location
// "offset N", and a message of `what` followed by a snippet of the pattern with a caret under
// byte `offset`.
// Sorts and merges `r` and drops surrogates; with `negate`, complements it over all scalar values
// first. The result follows CodepointRange's invariants (sorted, disjoint, non-adjacent).
std::vector<CodepointRange> NormalizeCodepointRanges(std::vector<CodepointRange> r, bool negate);

Status RegexError(std::string_view pattern, std::size_t offset, std::string_view what,
                  StatusCode code = StatusCode::kInvalidRegex);


}  // namespace lockstep
