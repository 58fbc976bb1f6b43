// Builders of Grammar IR nodes (grammar_ir.h), one Expr each, for every producer of IR: the GBNF
// and Lark front ends (grammar/text), the IR passes (grammar/ir), and the JSON Schema and
// structured-format compilers. A builder fills the fields its kind uses and nothing else; the
// caller adds the node to its arena (Grammar::Add, or its own Add that also sets a location or
// checks a height), and simplifies first where it wants to (a one-child sequence, a never-matching
// choice). CopyTree copies a tree between arenas.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/ir/grammar_ir.h"

namespace lockstep::grammar {

// kEmpty, at `loc` (unknown by default: built in code).
inline Expr EmptyExpr(SourceLocation loc = {}) { return {.kind = ExprKind::kEmpty, .loc = loc}; }
// kLiteral: the bytes of `text` (UTF-8).
inline Expr LiteralExpr(std::string text) {
  return {.kind = ExprKind::kLiteral, .text = std::move(text)};
}
// kCharClass: one code point of `ranges` (sorted, disjoint; empty ranges match nothing).
inline Expr CharClassExpr(std::vector<CodepointRange> ranges) {
  return {.kind = ExprKind::kCharClass, .ranges = std::move(ranges)};
}
// kRuleRef to `rule` (-1 for a reference resolved once every rule is known).
inline Expr RuleRefExpr(RuleId rule) { return {.kind = ExprKind::kRuleRef, .rule = rule}; }
// kSequence or kChoice of `children`, as they are.
inline Expr ListExpr(ExprKind kind, std::vector<ExprId> children) {
  return {.kind = kind, .children = std::move(children)};
}
// kRepeat: `child` between `min` and `max` times (Expr::kUnbounded: no limit).
inline Expr RepeatExpr(ExprId child, std::int32_t min, std::int32_t max) {
  return {.kind = ExprKind::kRepeat, .children = {child}, .min = min, .max = max};
}
// kLexeme: a regex terminal (full match).
inline Expr LexemeExpr(std::string pattern) {
  return {.kind = ExprKind::kLexeme, .text = std::move(pattern)};
}
// kSpecialToken: the vocabulary's token whose text is `name` (a special token's name, or a
// token's exact bytes); `negated`: any one token but that one.
inline Expr SpecialTokenExpr(std::string name, bool negated = false) {
  return {.kind = ExprKind::kSpecialToken, .text = std::move(name), .negated = negated};
}
// kSpecialToken by id (GBNF <[ID]>); `negated`: any one token but that one.
inline Expr TokenIdExpr(std::int32_t id, bool negated = false) {
  return {.kind = ExprKind::kSpecialToken, .token_id = id, .negated = negated};
}
// kByteDfa: a terminal given as a ready automaton.
inline Expr ByteDfaExpr(std::shared_ptr<const ByteDfa> dfa) {
  return {.kind = ExprKind::kByteDfa, .dfa = std::move(dfa)};
}

// `e` with `children` replaced: every other field copied (the copy of a node whose children are
// rebuilt, without copying the old child list first).
inline Expr WithChildren(const Expr& e, std::vector<ExprId> children) {
  return {.kind = e.kind,
          .text = e.text,
          .ranges = e.ranges,
          .rule = e.rule,
          .children = std::move(children),
          .min = e.min,
          .max = e.max,
          .count = e.count,
          .token_id = e.token_id,
          .negated = e.negated,
          .dfa = e.dfa,
          .loc = e.loc};
}

// Copies the tree under `from.exprs[id]` into `to`, children before parents; returns the copy's
// id. Recurses as deep as the tree, with a small frame.
ExprId CopyTree(const Grammar& from, ExprId id, Grammar* to);

}  // namespace lockstep::grammar
