// Lexical pieces of the JSON Schema compiler: the terminals of a schema's grammar, built as exact
// byte automata or native-counter IR (never floating-point shortcuts, never m copies of a node).
//
// Formatting policy for values (docs/json-schema.md):
// - strings are written with canonical escaping: `\"`, `\\`, `\b \f \n \r \t`, other control
//   characters below U+0020 as `\u00xx` (lowercase hex), everything else as raw UTF-8 (no `\/`, no
//   `\u` for printable characters). This is what `json.dumps(..., ensure_ascii=False)` writes;
// - an integer-valued number is written as an integer (`-?(0|[1-9][0-9]*)`), other numbers in plain
//   decimal (`-?(0|[1-9][0-9]*)\.[0-9]+`) when bounds or multipleOf apply; an unconstrained
//   `number` also accepts every JSON number syntax (fraction, exponent).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "automata/regex/regex_compiler.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/status.h"

namespace lockstep::schema {

struct LexicalOptions {
  // Budget on the states of one automaton (product constructions included): kResourceLimit past it.
  std::int32_t max_dfa_states = 100000;
  // Strings whose only constraint is `excluded` (the keys left to additionalProperties, `not:
  // {enum}`) are built directly from a trie of the excluded values (linear in their bytes) rather
  // than by the general product construction; false forces the general one (tests compare them).
  bool direct_exclusion = true;
  // A maxLength of at least this next to one pattern or format is not multiplied into its
  // automaton: the schema compiler counts the characters at run time instead (kResourceLimit
  // here). The product holds a state per count, so every count a string reaches is a position
  // of its own, walked over the vocabulary when first met (300-800 us each for a pattern of
  // letters and digits on Llama-3); the count at run time leaves one position per state of the
  // pattern. 0: always the product when it fits max_dfa_states (the GBNF export, which cannot
  // say a count).
  std::int32_t count_at_run_time_from = 64;
  // A pattern `^C{m,n}$` (one class, counted) as a native counter over C's characters, not one
  // automaton with a state per count (AddStringExpr). Only where the string is a value: a key
  // terminal, the items of a uniqueItems check and the instance checker need one automaton.
  bool count_class_patterns = false;
  // Past it, kResourceLimit (polled per automaton state while building; a format automaton
  // that was not finished is not cached).
  CompileDeadline deadline;
  // One compile's automata by constraint (CompileSchemaToGrammar sets it for the compile):
  // equal constraints give the same automaton object within the compile whatever the process's
  // cache (LexicalCache) holds or refuses, so the grammar, which normalisation merges by that
  // identity, does not depend on what the process compiled before. Null: the process's cache
  // only.
  struct Memo;
  Memo* memo = nullptr;
};

struct LexicalOptions::Memo {
  struct Entry {
    std::shared_ptr<const ByteDfa> dfa;  // null: `error`
    Status error;
  };
  std::unordered_map<std::string, Entry> entries;
};

// How many times the process's cache of lexical automata (LexicalCache, 64 MiB of transition
// tables) was emptied to keep a new one.
std::int64_t LexicalCacheFlushes();
// Tests: empties the cache and sets its budget (bytes of transition tables); returns the old
// budget. 0 keeps nothing.
std::size_t SetLexicalCacheBytesForTesting(std::size_t bytes);

// A bound as written in the schema: the JSON number text of `minimum` etc. (exact decimal).
struct DecimalBound {
  std::string value;  // e.g. "0", "-2.5", "1e3", "0.0001"
  bool exclusive = false;
};

struct NumberConstraint {
  bool integer = false;  // `type: integer`
  std::optional<DecimalBound> minimum;
  std::optional<DecimalBound> maximum;
  std::optional<std::string> multiple_of;  // JSON number text, > 0
  // Multiples the number must NOT be (`not: {multipleOf}`): JSON number texts, > 0.
  std::vector<std::string> not_multiples;
};

// Appends to `g` an expression matching exactly the JSON texts (under the formatting policy) of
// the numbers satisfying `c`. kUnsatisfiable when no number does; kUnsupported (with a message
// saying why) for what cannot be made exact.
// Always one kByteDfa node (shared for the unconstrained `number` and `integer`); sizes are a few
// states per bound digit times the multipleOf remainder count M (multipleOf 7: 7, 2.5: 25,
// 0.01: 1). kResourceLimit when M exceeds max_dfa_states; kInvalidArgument for a malformed bound
// or a multipleOf <= 0.
Result<grammar::ExprId> AddNumberExpr(grammar::Grammar* g, const NumberConstraint& c,
                                      const LexicalOptions& options = {});

struct StringConstraint {
  std::int64_t min_length = 0;             // code points
  std::optional<std::int64_t> max_length;  // code points
  std::optional<std::string> pattern;      // ECMA-262 subset (the regex front end); unanchored
  // More patterns the value must match too (allOf of several `pattern`s: the intersection).
  std::vector<std::string> also_patterns;
  std::optional<std::string> format;       // "date", "email", ... (see FormatSupported)
  std::vector<std::string> also_formats;   // more formats the value must have too
  std::vector<std::string> not_formats;    // formats the value must have none of (`not: {format}`)
  // Decoded values that must NOT match (property names already declared; `not: {enum}`).
  std::vector<std::string> excluded;
  // Patterns (same syntax and search semantics as `pattern`) the value must match NONE of: the
  // keys left to additionalProperties are those matching no patternProperties pattern; the
  // strings of `not: {pattern}`.
  std::vector<std::string> not_patterns;
};

// Appends an expression matching the whole JSON string token, quotes included, under canonical
// escaping, of exactly the string values satisfying `c`.
// Shapes: lengths only -> kSequence('"', kRepeat{min,max}(kChoice(kCharClass, kByteDfa escape)),
// '"') (native counter, no automaton); a pattern `^C{m,n}$` alone under
// LexicalOptions::count_class_patterns -> kSequence('"', kRepeat{m,n}(kCharClass C), '"') (with
// minLength/maxLength folded into the bounds); anything with pattern/format/excluded/not_patterns -> one
// kByteDfa (format alone: shared, built once per process; with lengths the automaton has about
// (maxLength + 1) x (pattern states) states, kResourceLimit past max_dfa_states).
// Patterns have JSON Schema's search semantics; '^'/'$' are honoured at the ends of top-level
// alternatives, elsewhere they are kUnsupported. Formats outside FormatSupported: kUnsupported.
Result<grammar::ExprId> AddStringExpr(grammar::Grammar* g, const StringConstraint& c,
                                      const LexicalOptions& options = {});

// The minimal automaton of the union of 1 to 8 string automata (kByteDfa expressions of
// AddStringExpr), run in parallel; kResourceLimit past max_states.
Result<ByteDfa> StringDfaUnion(const std::vector<const ByteDfa*>& parts, std::int32_t max_states);

// True for the formats AddStringExpr enforces exactly.
bool FormatSupported(std::string_view format);

// The automaton of a supported format over the decoded value's UTF-8 bytes (no quotes, no
// escaping), built once per process and shared; kUnsupported for other formats.
Result<std::shared_ptr<const ByteDfa>> FormatContentDfa(std::string_view format);

// Whether every value of `c`'s patterns and formats (`format: regex` among them left out, and its
// lengths and exclusions, which only narrow the set) is a valid ECMAScript pattern, so that
// `format: regex` beside them asserts nothing more. Decided exactly, by running the pattern
// checker (grammar/regex/ecma_pattern.h) over the automaton of their intersection, one product
// state per (automaton state, checker state): true when every value is a pattern, false when
// some value is not one; nullopt, undecided, when the walk meets a byte past ASCII or passes
// max_dfa_states before it knows. False when `c` has no pattern and no other format (every
// string: `[` is no pattern).
Result<std::optional<bool>> ValuesAreEcmaPatterns(const StringConstraint& c,
                                                  const LexicalOptions& options = {});

// Canonical renderings under the formatting policy (for enum/const literals and for tests).
std::string RenderJsonString(std::string_view utf8);
// Integers and integer-valued doubles as integers; other doubles as plain decimals (shortest
// round-trip digits, no exponent).
std::string RenderJsonNumber(const nlohmann::json& number);

}  // namespace lockstep::schema
