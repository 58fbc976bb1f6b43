// Independent recognisers for the languages of the shipped grammars (schemas/grammars/*.gbnf),
// written by hand from the language descriptions in schemas/grammars/README.md, not from the
// grammar text: the oracles the grammar runtime's tests compare against. Each returns true iff
// the whole input (bytes, which must be valid UTF-8 where the language allows non-ASCII) is a
// sentence of the language.
#pragma once

#include <cstddef>
#include <string_view>

namespace lockstep::testing {

// Whitespace gaps in json.gbnf and tool_calls.gbnf hold at most this many characters.
inline constexpr std::size_t kJsonMaxWhitespaceRun = 64;
// The checkers give up (return false) beyond this many nested arrays/objects (JSON) or so many
// levels of recursion (the others), to keep their own recursion bounded; the grammars have no
// depth limit.
inline constexpr int kCheckerMaxDepth = 4000;

// RFC 8259 JSON text (any value at top level), plus json.gbnf's two restrictions: at most
// kJsonMaxWhitespaceRun whitespace characters per gap, and \u escapes that pair surrogates
// (a high \uD800-\uDBFF immediately followed by a low \uDC00-\uDFFF escape, never a low alone).
bool CheckJsonRfc8259(std::string_view text);

// arithmetic.gbnf (and arithmetic_leftrec.gbnf): numbers, + - * /, unary minus, parentheses,
// at most one space on either side of a binary operator.
bool CheckArithmetic(std::string_view text);

// c_call.gbnf: name(arg, ...) with an optional ";".
bool CheckCCall(std::string_view text);

// sql_select.gbnf: the SELECT subset.
bool CheckSqlSelect(std::string_view text);

// tool_calls.gbnf: [{"name": "<identifier>", "arguments": {...}}, ...].
bool CheckToolCalls(std::string_view text);

}  // namespace lockstep::testing
