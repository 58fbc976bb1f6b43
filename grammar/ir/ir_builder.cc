// CopyTree (ir_builder.h): the copy of one IR tree into another arena.
#include "grammar/ir/ir_builder.h"

namespace lockstep::grammar {
namespace {

// Out of line so that CopyTree's frame holds only its child list: the recursion goes as deep as
// the tree.
[[gnu::noinline]] ExprId AddCopy(const Expr& e, std::vector<ExprId> kids, Grammar* to) {
  return to->Add(WithChildren(e, std::move(kids)));
}

}  // namespace

ExprId CopyTree(const Grammar& from, ExprId id, Grammar* to) {
  std::vector<ExprId> kids;
  kids.reserve(from.exprs[id].children.size());
  for (ExprId c : from.exprs[id].children) kids.push_back(CopyTree(from, c, to));
  return AddCopy(from.exprs[id], std::move(kids), to);
}

}  // namespace lockstep::grammar
