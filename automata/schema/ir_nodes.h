// One Grammar IR node of each kind that the JSON Schema compiler (schema_compile.cc,
// schema_lexical.cc) and the structured-section builder (automata/structured) emit, ready for
// Grammar::Add. Only the node itself: each builder keeps its own simplifications (dropping empty
// parts, folding parts that match nothing, bounds checks), which differ between them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "grammar/ir/grammar_ir.h"

namespace lockstep::schema {

inline grammar::Expr LiteralNode(std::string text) {
  grammar::Expr e;
  e.kind = grammar::ExprKind::kLiteral;
  e.text = std::move(text);
  return e;
}

inline grammar::Expr RuleRefNode(grammar::RuleId rule) {
  grammar::Expr e;
  e.kind = grammar::ExprKind::kRuleRef;
  e.rule = rule;
  return e;
}

inline grammar::Expr ByteDfaNode(std::shared_ptr<const ByteDfa> dfa) {
  grammar::Expr e;
  e.kind = grammar::ExprKind::kByteDfa;
  e.dfa = std::move(dfa);
  return e;
}

// `kind`: kSequence or kChoice.
inline grammar::Expr ListNode(grammar::ExprKind kind, std::vector<grammar::ExprId> children) {
  grammar::Expr e;
  e.kind = kind;
  e.children = std::move(children);
  return e;
}

// `max`: grammar::Expr::kUnbounded for no upper bound.
inline grammar::Expr RepeatNode(grammar::ExprId child, std::int32_t min, std::int32_t max) {
  grammar::Expr e;
  e.kind = grammar::ExprKind::kRepeat;
  e.children = {child};
  e.min = min;
  e.max = max;
  return e;
}

}  // namespace lockstep::schema
