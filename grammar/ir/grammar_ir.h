// Grammar IR: the one representation every grammar front end (GBNF, Lark-style EBNF, and later
// JSON Schema) produces and the pushdown runtime (automata/earley_*) consumes. Flat and
// integer-indexed like RegexAst: expressions live in one arena and refer to children by id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/ir/byte_dfa.h"
#include "grammar/base/deadline.h"
#include "grammar/regex/regex_ast.h"
#include "lockstep/status.h"

namespace lockstep::grammar {

using ExprId = std::int32_t;
using RuleId = std::int32_t;

enum class ExprKind : std::uint8_t {
  kEmpty,         // matches the empty string only
  kLiteral,       // the bytes of `text` (UTF-8), in order
  kCharClass,     // one code point from `ranges` (sorted, disjoint, non-adjacent, no surrogates;
                  // negation is resolved by the front end); empty ranges: matches nothing
  kRuleRef,       // the rule `rule`
  kSequence,      // children in order
  kChoice,        // any one child
  kRepeat,        // children[0] between min and max times (max == kUnbounded: no limit). A native
                  // counter: the runtime never expands it into copies
  kLexeme,        // a regex terminal: `text` is the pattern (lockstep regex syntax, full match)
  kSpecialToken,  // one token of the vocabulary, matched by id, never by bytes: `token_id` when
                  // >= 0 (GBNF <[128009]>), else the token whose text is `text` (a special
                  // token's name such as "<|eot_id|>", or a token's exact bytes such as "<br>").
                  // `negated`: any one token but that one (GBNF !<[ID]>, !<TEXT>), never EOS
  kByteDfa,       // a terminal given as a minimal byte automaton (`dfa`): built in code by the
                  // JSON Schema compiler (number ranges, string patterns intersected with lengths,
                  // property names outside a set). No text syntax: prints as /<dfa N states>/
};

struct SourceLocation {
  std::int32_t line = 0;    // 1-based; 0 when unknown (built in code)
  std::int32_t column = 0;  // 1-based, in bytes
};

struct Expr {
  static constexpr std::int32_t kUnbounded = -1;
  // (A field added here is also copied by WithChildren, ir_builder.h.)

  // Every field has an initializer, so that a builder may name only the fields its kind uses
  // (designated initializers, ir_builder.h).
  ExprKind kind = ExprKind::kEmpty;
  std::string text{};                    // kLiteral, kLexeme, kSpecialToken (by text)
  std::vector<CodepointRange> ranges{};  // kCharClass
  RuleId rule = -1;                      // kRuleRef
  std::vector<ExprId> children{};        // kSequence, kChoice, kRepeat (one child)
  std::int32_t min = 0;                  // kRepeat
  std::int32_t max = 0;                  // kRepeat; kUnbounded for * and +
  // kRepeat: stays a counter rule, never unrolled into the automaton, when the bounds count
  // (not ?, *, +). A JSON string's minLength/maxLength: a counter over one character takes its
  // positions from the vocabulary's counted view (automata/token/token_trie.h), where each unrolled
  // count would be a state of its own, walked over the whole vocabulary.
  bool count = false;
  std::int32_t token_id = -1;            // kSpecialToken by id
  bool negated = false;                  // kSpecialToken: every token but this one
  std::shared_ptr<const ByteDfa> dfa{};  // kByteDfa (shared, immutable)
  SourceLocation loc{};
};

struct Rule {
  std::string name;
  ExprId body = -1;
  SourceLocation loc;
  // The rule does not depend on the constraint being compiled (a JSON Schema's rules for "any
  // value"): lowering may take its automaton from an earlier compile with the same rule NFA. A
  // hint only: the cache is keyed by the rule's whole NFA, so a wrong hint costs memory, never
  // exactness.
  bool shared = false;
  // The rule is the item list of a JSON array whose items must be unique (uniqueItems over
  // string items, enforced at run time): this is the rule of its items, which its body calls
  // directly (never inlined, and this rule is never inlined or merged with another). When a
  // call of it completes into this rule, the parser drops the parse if the item's value equals
  // an earlier item's of the same list (automata/cfg/earley.h, "Unique items"). -1: none.
  RuleId unique_item = -1;
  // With unique_item: the item rule's calls of other rules (and its special tokens) each lead
  // to infinitely many values (open objects, arrays, strings: the schema compiler makes such
  // items only where that holds), so the item's values run out only along its own bytes (the
  // literals of items of any type). The item rule is then the item automaton itself, its calls
  // counted as infinitely many ways (CfgProgram::item_completions).
  bool unique_open_calls = false;
  // With unique_item: the items can run out of values along their calls too (closed objects:
  // a prefix may have only repeats of earlier items left to finish with), so masks search for a
  // new way to finish (CfgGrammar::FilterUniqueItems, automata/cfg/unique_search.h).
  bool unique_search = false;
  // The rule is one JSON string (its body a kByteDfa that spans the quotes) whose content may
  // have at most this many characters (code points), counted by the parser at run time: a
  // maxLength that would multiply a pattern's or a format's automaton past its state budget
  // (automata/cfg/earley.h, "String lengths"). Never inlined, never merged with a rule of
  // another bound. -1: none.
  std::int32_t max_chars = -1;
  // The rule is one JSON string (its body a kByteDfa that spans the quotes) whose value must be
  // an ECMAScript regular expression (`format: regex`), checked by the parser at run time, one
  // character at a time (automata/cfg/earley.h, "ECMAScript patterns"): its syntax is not
  // context-free (`{3,2}`, `[z-a]`, back references past the groups). Never inlined, never
  // merged with a rule without the check.
  bool ecma_pattern = false;
  // The rule stays a rule where it is referenced (never inlined into its callers, though it is
  // pure terminals): a JSON Schema's number value, whose positions are then the rule's own,
  // the same in every grammar that calls it, and composed at each call site
  // (CfgGrammar::ComputePosition) instead of walked there again.
  bool called = false;

  // Whether the rule stays a rule wherever it is referenced, never inlined into its callers: a
  // unique-items list (its item calls are checked), a string of max_chars (its characters are
  // counted), an ecma_pattern string (its text is checked), a called rule. (A list's item rule
  // stays one too; the list says which.)
  bool KeptWhole() const { return unique_item >= 0 || max_chars >= 0 || ecma_pattern || called; }
};

struct Grammar {
  std::vector<Expr> exprs;
  std::vector<Rule> rules;
  RuleId root = -1;  // the start rule ("root" in GBNF, "start" in Lark)
  // What the parser accepted but a reader should know: "line:column: rule 'x' is never used
  // (unreachable from 'root')". Not part of the grammar's structure (StructurallyEqual ignores it).
  std::vector<std::string> warnings;

  const Expr& expr(ExprId id) const { return exprs[id]; }
  const Rule& rule(RuleId id) const { return rules[id]; }
  // Builders: append a node and return its id.
  ExprId Add(Expr e) {
    exprs.push_back(std::move(e));
    return static_cast<ExprId>(exprs.size() - 1);
  }
  RuleId FindRule(std::string_view name) const {
    for (std::size_t i = 0; i < rules.size(); ++i)
      if (rules[i].name == name) return static_cast<RuleId>(i);
    return -1;
  }
};

enum class GrammarSyntax : std::uint8_t {
  kAuto,  // GBNF if the first rule uses "::=", else Lark
  kGbnf,  // llama.cpp's GBNF
  kLark,  // Lark-style EBNF, %ignore-free subset
};

struct GrammarParseOptions {
  // Deepest nesting of groups accepted; deeper is kResourceLimit (never a stack overflow).
  std::int32_t max_nesting_depth = 1000;
  // Largest repetition bound accepted in {m,n}; larger is kResourceLimit.
  std::int32_t max_repeat = 100000;
  // Rules the start rule never reaches: kept, with a warning each in Grammar::warnings (llama.cpp
  // and XGrammar accept them, and grammars copied around carry them; compiling drops them).
  // false makes the first one an error (kInvalidGrammar at its line:column).
  bool allow_unused_rules = true;
};

// Parses grammar text into the IR. Errors are kInvalidGrammar with location "line:column" and a
// message that quotes the offending line with a caret; undefined rules, duplicate rules and a
// missing root ("root" for GBNF, "start" for Lark) are reported. Unused rules are warnings
// (GrammarParseOptions::allow_unused_rules).
Result<Grammar> ParseGbnf(std::string_view text, const GrammarParseOptions& options = {});
Result<Grammar> ParseLark(std::string_view text, const GrammarParseOptions& options = {});
Result<Grammar> ParseGrammar(std::string_view text, GrammarSyntax syntax = GrammarSyntax::kAuto,
                             const GrammarParseOptions& options = {});

// GBNF text that ParseGbnf reads back into a structurally equal grammar (round trip). Lexemes
// print as the Lark-compatible extension /regex/, special tokens as <[name]>.
std::string PrintGbnf(const Grammar& g);

// Same rules (by name, in order), same root, same expression trees (locations ignored).
bool StructurallyEqual(const Grammar& a, const Grammar& b);

// nullable[r]: rule r derives the empty string. Exact (fixpoint over the IR).
std::vector<bool> NullableRules(const Grammar& g);

struct NormalizeOptions {
  bool inline_single_use = true;  // inline rules referenced once (not the root, not recursive)
  bool dedupe_rules = true;       // merge rules with identical bodies
  bool flatten = true;            // flatten nested sequences/choices, merge adjacent literals,
                                  // drop kEmpty from sequences, fold repeat{1,1}
  // Past it, kResourceLimit naming the rule being rewritten (polled per rule and per round).
  CompileDeadline deadline;
};

// Rewrites `g` in place into an equivalent grammar (same language); removes rules that become
// unreachable. Keeps root. Idempotent.
Status Normalize(Grammar& g, const NormalizeOptions& options = {});

// reachable[r]: rule r is the root or referred to, transitively, from it (iterative: no recursion
// over the expression trees). All false for a grammar without a valid root.
std::vector<bool> ReachableRules(const Grammar& g);

// Removes the rules the root does not reach (and their expressions), renumbering the others in
// their order; nothing else changes. What compiling a parsed grammar does with unused rules.
void DropUnreachableRules(Grammar& g);

}  // namespace lockstep::grammar
