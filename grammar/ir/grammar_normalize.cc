// NullableRules and Normalize: the IR passes every front end's output goes through before the
// runtime compiles it. Normalize rebuilds the grammar (never edits nodes in place), so shared or
// orphaned nodes in the input arena cannot confuse it, and it repeats its passes until nothing
// changes, which makes it idempotent.
#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/ir/grammar_ir.h"
#include "grammar/ir/ir_builder.h"
#include "grammar/regex/regex_parser.h"

namespace lockstep::grammar {
namespace {

// Inlining never builds trees taller than this, so recursive passes stay within the stack.
constexpr std::int32_t kMaxInlineHeight = 1000;

bool RegexNullable(const RegexAst& ast, std::int32_t id) {
  const RegexNode& n = ast.node(id);
  switch (n.kind) {
    case RegexNodeKind::kEmpty: return true;
    case RegexNodeKind::kClass: return false;
    case RegexNodeKind::kConcat:
      for (std::int32_t i = n.children_begin; i < n.children_end; ++i) {
        if (!RegexNullable(ast, ast.children[i])) return false;
      }
      return true;
    case RegexNodeKind::kAlternate:
      for (std::int32_t i = n.children_begin; i < n.children_end; ++i) {
        if (RegexNullable(ast, ast.children[i])) return true;
      }
      return false;
    case RegexNodeKind::kRepeat:
      return n.min == 0 || RegexNullable(ast, ast.children[n.children_begin]);
    case RegexNodeKind::kAnchor: return false;  // (a marker byte; only under anchor_markers)
  }
  return false;
}

[[gnu::noinline]] bool LexemeNullable(const std::string& pattern) {
  Result<RegexAst> ast = ParseRegex(pattern);
  return ast.ok() && RegexNullable(*ast, ast->root);
}

bool ExprNullable(const Grammar& g, ExprId id, const std::vector<bool>& nullable) {
  const Expr& e = g.expr(id);
  switch (e.kind) {
    case ExprKind::kEmpty: return true;
    case ExprKind::kLiteral: return e.text.empty();
    case ExprKind::kCharClass: return false;
    case ExprKind::kSpecialToken: return false;
    case ExprKind::kRuleRef: return nullable[e.rule];
    case ExprKind::kSequence:
      for (ExprId c : e.children) {
        if (!ExprNullable(g, c, nullable)) return false;
      }
      return true;
    case ExprKind::kChoice:
      for (ExprId c : e.children) {
        if (ExprNullable(g, c, nullable)) return true;
      }
      return false;
    case ExprKind::kRepeat:
      return e.min == 0 || (!e.children.empty() && ExprNullable(g, e.children[0], nullable));
    case ExprKind::kLexeme: return LexemeNullable(e.text);
    case ExprKind::kByteDfa: return e.dfa != nullptr && e.dfa->start != ByteDfa::kDead &&
                                    e.dfa->IsAccepting(e.dfa->start);
  }
  return false;
}

Status CheckIr(const Grammar& g) {
  const auto bad = [](const std::string& what) {
    return Status(StatusCode::kInvalidArgument, "malformed grammar IR: " + what);
  };
  if (g.root < 0 || static_cast<std::size_t>(g.root) >= g.rules.size()) return bad("no root");
  for (const Rule& r : g.rules) {
    if (r.body < 0 || static_cast<std::size_t>(r.body) >= g.exprs.size()) {
      return bad("rule '" + r.name + "' has no body");
    }
    if (r.unique_item < -1 || r.unique_item >= static_cast<RuleId>(g.rules.size())) {
      return bad("rule '" + r.name + "' has a unique_item out of range");
    }
    if (r.max_chars < -1) return bad("rule '" + r.name + "' has a negative max_chars");
  }
  for (const Expr& e : g.exprs) {
    for (ExprId c : e.children) {
      if (c < 0 || static_cast<std::size_t>(c) >= g.exprs.size()) return bad("child id");
    }
    if (e.kind == ExprKind::kRuleRef &&
        (e.rule < 0 || static_cast<std::size_t>(e.rule) >= g.rules.size())) {
      return bad("rule reference");
    }
    if (e.kind == ExprKind::kRepeat && e.children.size() != 1) return bad("repeat arity");
  }
  return Status::Ok();
}

// Rules on a cycle of references (including a rule that refers to itself), by an iterative
// Tarjan SCC so long rule chains cannot exhaust the stack.
std::vector<bool> CyclicRules(const std::vector<std::vector<RuleId>>& edges) {
  const std::size_t n = edges.size();
  std::vector<std::int32_t> index(n, -1), low(n, 0);
  std::vector<bool> on_stack(n, false), cyclic(n, false);
  std::vector<RuleId> stack;
  std::int32_t next = 0;
  for (std::size_t s = 0; s < n; ++s) {
    if (index[s] >= 0) continue;
    std::vector<std::pair<RuleId, std::size_t>> call = {{static_cast<RuleId>(s), 0}};
    index[s] = low[s] = next++;
    stack.push_back(static_cast<RuleId>(s));
    on_stack[s] = true;
    while (!call.empty()) {
      auto& [v, i] = call.back();
      if (i < edges[v].size()) {
        const RuleId w = edges[v][i++];
        if (w == v) cyclic[v] = true;
        if (index[w] < 0) {
          index[w] = low[w] = next++;
          stack.push_back(w);
          on_stack[w] = true;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const RuleId done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
      if (low[done] == index[done]) {
        std::vector<RuleId> scc;
        RuleId w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = false;
          scc.push_back(w);
        } while (w != done);
        if (scc.size() > 1) {
          for (RuleId r : scc) cyclic[r] = true;
        }
      }
    }
  }
  return cyclic;
}

void CollectRefs(const Grammar& g, ExprId id, std::vector<RuleId>* out) {
  const Expr& e = g.expr(id);
  if (e.kind == ExprKind::kRuleRef) out->push_back(e.rule);
  for (ExprId c : e.children) CollectRefs(g, c, out);
}

// Canonical text of an expression tree, the key for deduplicating rules; a reference is written
// as rule_of(its rule).
template <typename RuleOf>
void Key(const Grammar& g, ExprId id, std::string* out, const RuleOf& rule_of) {
  const Expr& e = g.expr(id);
  // Numbers as zigzag base-128 varints (self-delimiting; a tag after each keeps the text
  // unambiguous): most are small (kinds, counts, rule ids), one or two bytes where fixed-width
  // numbers took eight, so keys are a fraction as long to build, hash and compare.
  const auto num = [out](std::int64_t v, char tag) {
    std::uint64_t z = (static_cast<std::uint64_t>(v) << 1) ^ static_cast<std::uint64_t>(v >> 63);
    char bytes[11];
    int n = 0;
    for (; z >= 0x80; z >>= 7) bytes[n++] = static_cast<char>(z | 0x80);
    bytes[n++] = static_cast<char>(z);
    bytes[n++] = tag;
    out->append(bytes, static_cast<std::size_t>(n));
  };
  num(static_cast<int>(e.kind), '(');
  num(static_cast<std::int64_t>(e.text.size()), ':');
  out->append(e.text);
  for (const CodepointRange& r : e.ranges) {
    num(r.lo, '-');
    num(r.hi, ',');
  }
  num(e.kind == ExprKind::kRuleRef ? rule_of(e.rule) : e.rule, 'r');
  num(e.min, 'm');
  num(e.max, 'M');
  if (e.kind == ExprKind::kByteDfa) num(static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(e.dfa.get())), 'd');
  if (e.kind == ExprKind::kSpecialToken) {
    num(e.token_id, 't');
    num(e.negated ? 1 : 0, '!');
  }
  for (ExprId c : e.children) Key(g, c, out, rule_of);
  out->push_back(')');
}

// References between rules: who refers to whom, what the root reaches, and how many references
// from reachable rules each rule has.
struct RuleGraph {
  std::vector<std::vector<RuleId>> edges;
  std::vector<bool> reachable;
  std::vector<std::int32_t> uses;
};

RuleGraph AnalyzeRules(const Grammar& g) {
  const std::size_t n = g.rules.size();
  RuleGraph out;
  out.edges.resize(n);
  for (std::size_t r = 0; r < n; ++r) CollectRefs(g, g.rules[r].body, &out.edges[r]);
  out.reachable.assign(n, false);
  std::vector<RuleId> work = {g.root};
  out.reachable[g.root] = true;
  while (!work.empty()) {
    const RuleId r = work.back();
    work.pop_back();
    for (RuleId t : out.edges[r]) {
      if (!out.reachable[t]) {
        out.reachable[t] = true;
        work.push_back(t);
      }
    }
  }
  out.uses.assign(n, 0);
  for (std::size_t r = 0; r < n; ++r) {
    if (!out.reachable[r]) continue;
    for (RuleId t : out.edges[r]) ++out.uses[t];
  }
  return out;
}

// One round of the passes: old grammar in, new grammar out.
class Pass {
 public:
  Pass(const Grammar& g, const NormalizeOptions& options) : g_(g), options_(options) {}

  // Set when the deadline passed during Run (whose result is then to be dropped).
  const Status& stopped() const { return stopped_; }

  Grammar Run() {
    const std::size_t n = g_.rules.size();
    // Reachable rules, reference counts and cycles.
    const RuleGraph graph = AnalyzeRules(g_);
    const std::vector<bool>& reachable = graph.reachable;
    const std::vector<std::int32_t>& uses = graph.uses;
    const std::vector<bool> cyclic = CyclicRules(graph.edges);
    inline_.assign(n, false);
    inlined_.assign(n, false);
    for (std::size_t r = 0; r < n; ++r) {
      inline_[r] = options_.inline_single_use && reachable[r] &&
                   static_cast<RuleId>(r) != g_.root && uses[r] == 1 && !cyclic[r];
    }
    // Rules kept whole stay rules (Rule::KeptWhole), and so does a unique-items list's item rule:
    // the parser checks the item's completion into the list (Rule::unique_item).
    for (std::size_t r = 0; r < n; ++r) {
      if (g_.rules[r].KeptWhole()) inline_[r] = false;
      if (g_.rules[r].unique_item >= 0) inline_[g_.rules[r].unique_item] = false;
    }
    height_.assign(g_.exprs.size(), -1);

    // Bodies of the rules that stay, in order; inlined rules are pulled in where referenced.
    // A rule whose inlining was refused for height keeps its body, rewritten afterwards.
    new_body_.assign(n, -1);
    out_.exprs.reserve(g_.exprs.size());
    for (bool progress = true; progress;) {
      progress = false;
      for (std::size_t r = 0; r < n; ++r) {
        if (!reachable[r] || new_body_[r] >= 0 || inlined_[r]) continue;
        if (inline_[r] && !kept_[r]) continue;
        if (options_.deadline.Poll()) {
          stopped_ = options_.deadline.Error("rule '" + g_.rules[r].name + "'");
          return Grammar();
        }
        new_body_[r] = Rewrite(g_.rules[r].body, 0);
        progress = true;
      }
      for (std::size_t r = 0; r < n; ++r) {
        if (reachable[r] && inline_[r] && !inlined_[r] && !kept_[r]) {
          // Its reference was not visited with room to inline (or not visited yet): keep it.
          kept_[r] = true;
          progress = true;
        }
      }
    }

    // Deduplicate rules whose rewritten bodies are identical (the first one, or root, stays).
    std::vector<RuleId> rep(n);
    for (std::size_t r = 0; r < n; ++r) rep[r] = static_cast<RuleId>(r);
    if (options_.dedupe_rules && !Dedupe(&rep)) return Grammar();
    // Renumber the surviving rules and point references at representatives.
    std::vector<RuleId> new_id(n, -1);
    Grammar result;
    for (std::size_t r = 0; r < n; ++r) {
      if (new_body_[r] < 0 || rep[r] != static_cast<RuleId>(r)) continue;
      new_id[r] = static_cast<RuleId>(result.rules.size());
      Rule rule = g_.rules[r];
      rule.body = new_body_[r];
      result.rules.push_back(std::move(rule));
    }
    for (Expr& e : out_.exprs) {
      if (e.kind == ExprKind::kRuleRef) e.rule = new_id[rep[e.rule]];
    }
    for (Rule& rule : result.rules) {
      if (rule.unique_item >= 0) rule.unique_item = new_id[rep[rule.unique_item]];
    }
    result.root = new_id[g_.root];
    // Copy the reachable trees, depth first, into the result arena.
    result.exprs.reserve(out_.exprs.size());
    for (Rule& rule : result.rules) rule.body = CopyTree(out_, rule.body, &result);
    return result;
  }

 private:
  // Merges rules whose bodies are equal once the references to rules already merged are read
  // as their representatives, to a fixpoint within the pass (the rule that stays is root, else
  // the first): a chain of rules that become equal one level at a time, each level's references
  // merged by the level below, took one pass per level, each rebuilding the whole grammar (a
  // JSONSchemaBench schema's 785,000 expressions, 0.3 s a pass, hundreds of passes). A rule's key
  // is recomputed when a rule it refers to is merged away. False (stopped_ set) when the deadline
  // passed.
  bool Dedupe(std::vector<RuleId>* rep_out) {
    std::vector<RuleId>& rep = *rep_out;
    const std::size_t n = rep.size();
    auto find = [&rep](RuleId r) {
      while (rep[r] != r) r = rep[r] = rep[rep[r]];
      return r;
    };
    std::vector<std::vector<RuleId>> users(n);  // the live rules whose bodies refer to a rule
    std::vector<RuleId> refs;
    for (std::size_t r = 0; r < n; ++r) {
      if (new_body_[r] < 0) continue;
      refs.clear();
      CollectRefs(out_, new_body_[r], &refs);
      std::sort(refs.begin(), refs.end());
      refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
      for (RuleId t : refs) users[t].push_back(static_cast<RuleId>(r));
    }
    std::unordered_map<std::string, RuleId> table;  // key -> the live rule with that key
    std::vector<std::string> keys(n);
    // The rules merged into each representative (itself included): when it is merged in turn,
    // the users of every one of them see a new key.
    std::vector<std::vector<RuleId>> members(n);
    for (std::size_t r = 0; r < n; ++r) members[r] = {static_cast<RuleId>(r)};
    // Each rule is in the queue at most once: the merges made while it waits are all read by
    // its one recomputation (a rule that refers to hundreds of rules merged one after another
    // was queued, and its whole body keyed, once per merge: 2 of a 4 s compile).
    std::deque<RuleId> work;
    std::vector<std::uint8_t> queued(n, 0);
    auto enqueue = [&](RuleId r) {
      if (!queued[r]) queued[r] = 1, work.push_back(r);
    };
    enqueue(g_.root);
    for (std::size_t r = 0; r < n; ++r) {
      if (new_body_[r] >= 0 && static_cast<RuleId>(r) != g_.root) enqueue(static_cast<RuleId>(r));
    }
    auto preferred = [this](RuleId a, RuleId b) { return a == g_.root || (b != g_.root && a < b); };
    // The item rules of lists of items of any type (Rule::unique_open_calls) are their own item
    // automata, checked at every byte into a state with few ways left: merged with the rule of
    // any value, which other values share, every nested value would be checked too.
    std::vector<std::uint8_t> open_item(n, 0);
    for (std::size_t r = 0; r < n; ++r) {
      if (g_.rules[r].unique_item >= 0 && g_.rules[r].unique_open_calls)
        open_item[g_.rules[r].unique_item] = 1;
    }
    std::string key;
    while (!work.empty()) {
      const RuleId r = work.front();
      work.pop_front();
      queued[r] = 0;
      if (find(r) != r) continue;  // merged away
      if (options_.deadline.Poll()) {
        stopped_ = options_.deadline.Error("rule '" + g_.rules[r].name + "'");
        return false;
      }
      key.clear();
      // (A unique-items list keys apart from every other rule: its item check is its own.)
      if (g_.rules[r].unique_item >= 0) key = "unique#" + std::to_string(r) + "#";
      if (g_.rules[r].unique_open_calls) key += "open#";
      if (g_.rules[r].unique_search) key += "search#";
      if (open_item[r]) key += "open-item#" + std::to_string(r) + "#";
      if (g_.rules[r].max_chars >= 0) key += "chars#" + std::to_string(g_.rules[r].max_chars) + "#";
      if (g_.rules[r].ecma_pattern) key += "ecma#";
      if (g_.rules[r].called) key += "called#";
      Key(out_, new_body_[r], &key, find);
      if (key == keys[r]) continue;
      if (auto old = table.find(keys[r]);
          !keys[r].empty() && old != table.end() && old->second == r) {
        table.erase(old);
      }
      auto [it, added] = table.emplace(key, r);
      if (added) {
        keys[r] = key;
        continue;
      }
      // (An entry whose rule's references were merged since holds a rule that is no longer a
      // representative, so it cannot equal a key just made; it is refreshed from the queue.)
      const RuleId s = it->second;
      const RuleId keep = preferred(r, s) ? r : s;
      const RuleId drop = keep == r ? s : r;
      rep[drop] = keep;
      it->second = keep;
      keys[keep] = key;
      keys[drop].clear();
      for (RuleId m : members[drop]) {
        for (RuleId u : users[m]) enqueue(u);
      }
      if (members[keep].size() < members[drop].size()) std::swap(members[keep], members[drop]);
      members[keep].insert(members[keep].end(), members[drop].begin(), members[drop].end());
      members[drop].clear();
    }
    for (std::size_t r = 0; r < n; ++r) rep[r] = find(static_cast<RuleId>(r));
    return true;
  }

  std::int32_t Height(ExprId id) {
    if (height_[id] >= 0) return height_[id];
    std::int32_t h = 1;
    for (ExprId c : g_.expr(id).children) h = std::max(h, Height(c) + 1);
    return height_[id] = h;
  }

  ExprId Emit(Expr e) { return out_.Add(std::move(e)); }

  // Rewrites the old tree `id` into out_: inlines single-use rules and flattens. Kept lean (the
  // node is rebuilt in Build, out of line) since it recurses as deep as the trees go. An inlined
  // body counts one level deeper, so chains of rules that are bare references stay bounded too.
  ExprId Rewrite(ExprId id, std::int32_t depth) {
    const Expr& e = g_.expr(id);
    if (e.kind == ExprKind::kRuleRef && inline_[e.rule] && !inlined_[e.rule] &&
        !kept_[e.rule] && depth + 1 + Height(g_.rules[e.rule].body) <= kMaxInlineHeight) {
      inlined_[e.rule] = true;
      return Rewrite(g_.rules[e.rule].body, depth + 1);
    }
    std::vector<ExprId> kids;
    kids.reserve(e.children.size());
    for (ExprId c : e.children) kids.push_back(Rewrite(c, depth + 1));
    return Build(e, std::move(kids));
  }

  [[gnu::noinline]] ExprId Build(const Expr& e, std::vector<ExprId> kids) {
    if (!options_.flatten) return Emit(WithChildren(e, std::move(kids)));
    Expr out = WithChildren(e, {});
    switch (e.kind) {
      case ExprKind::kLiteral:
        if (e.text.empty()) out = EmptyExpr(e.loc);
        return Emit(std::move(out));
      case ExprKind::kSequence: {
        for (ExprId k : kids) {
          const ExprKind ck = out_.expr(k).kind;
          if (ck == ExprKind::kEmpty) continue;
          if (ck == ExprKind::kSequence) {
            const std::vector<ExprId> grand = out_.expr(k).children;  // Emit may reallocate
            for (ExprId gk : grand) AppendToSequence(gk, &out.children);
          } else {
            AppendToSequence(k, &out.children);
          }
        }
        return Collapse(std::move(out));
      }
      case ExprKind::kChoice: {
        for (ExprId k : kids) {
          const Expr& c = out_.expr(k);
          if (c.kind == ExprKind::kChoice) {
            out.children.insert(out.children.end(), c.children.begin(), c.children.end());
          } else {
            out.children.push_back(k);
          }
        }
        if (out.children.size() == 1) return out.children[0];
        return Emit(std::move(out));
      }
      case ExprKind::kRepeat: {
        const ExprKind ck = out_.expr(kids[0]).kind;
        if (e.min == 1 && e.max == 1) return kids[0];
        if (ck == ExprKind::kEmpty || e.max == 0) return Emit(EmptyExpr(e.loc));
        out.children = std::move(kids);
        return Emit(std::move(out));
      }
      default:
        out.children = std::move(kids);
        return Emit(std::move(out));
    }
  }

  // Appends to a flattened sequence, merging adjacent literals.
  void AppendToSequence(ExprId k, std::vector<ExprId>* seq) {
    const Expr& c = out_.expr(k);
    if (c.kind == ExprKind::kEmpty) return;
    if (c.kind == ExprKind::kLiteral && !seq->empty() &&
        out_.expr(seq->back()).kind == ExprKind::kLiteral) {
      Expr merged = out_.expr(seq->back());
      merged.text += c.text;
      seq->back() = Emit(std::move(merged));
      return;
    }
    seq->push_back(k);
  }

  ExprId Collapse(Expr seq) {
    if (seq.children.empty()) return Emit(EmptyExpr(seq.loc));
    if (seq.children.size() == 1) return seq.children[0];
    return Emit(std::move(seq));
  }

  const Grammar& g_;
  const NormalizeOptions& options_;
  Status stopped_;
  Grammar out_;
  std::vector<bool> inline_, inlined_;
  std::vector<bool> kept_ = std::vector<bool>(g_.rules.size(), false);
  std::vector<std::int32_t> height_;
  std::vector<ExprId> new_body_;
};

// Whether another Pass over `g` (a Pass's output) could change it. A Pass's trees come out
// flattened and its rules deduplicated, so the next one changes something only through its
// other rule-level steps: a rule left unreachable, or a rule that became single-use (its users
// were merged). Saves the confirming round.
bool MayChangeAgain(const Grammar& g, const NormalizeOptions& options) {
  const std::size_t n = g.rules.size();
  const RuleGraph graph = AnalyzeRules(g);
  for (std::size_t r = 0; r < n; ++r) {
    if (!graph.reachable[r]) return true;
  }
  const std::vector<std::int32_t>& uses = graph.uses;
  const std::vector<std::vector<RuleId>>& edges = graph.edges;
  if (options.inline_single_use) {
    const std::vector<bool> cyclic = CyclicRules(edges);
    std::vector<bool> kept(n, false);  // (Rule::KeptWhole, and a list's item rule)
    for (std::size_t r = 0; r < n; ++r) {
      if (g.rules[r].KeptWhole()) kept[r] = true;
      if (g.rules[r].unique_item >= 0) kept[g.rules[r].unique_item] = true;
    }
    for (std::size_t r = 0; r < n; ++r) {
      if (static_cast<RuleId>(r) != g.root && uses[r] == 1 && !cyclic[r] && !kept[r]) return true;
    }
  }
  // No check for rules with identical bodies: the Pass that made `g` merged them to a fixpoint
  // (Dedupe keys each live rule with its references read as their representatives, and the
  // renumbering maps representatives one to one), so none are left. (Keying every body again
  // here was about 3% of a schema compile.)
  return false;
}

}  // namespace

std::vector<bool> NullableRules(const Grammar& g) {
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r] || g.rules[r].body < 0) continue;
      if (ExprNullable(g, g.rules[r].body, nullable)) {
        nullable[r] = true;
        changed = true;
      }
    }
  }
  return nullable;
}

Status Normalize(Grammar& g, const NormalizeOptions& options) {
  LOCKSTEP_RETURN_IF_ERROR(CheckIr(g));
  // Each round that changes anything removes a rule or shrinks a tree, so this terminates; the
  // bound is a safety net.
  const std::size_t max_rounds = g.rules.size() + g.exprs.size() + 4;
  for (std::size_t round = 0; round < max_rounds; ++round) {
    if (options.deadline.PassedNow()) {
      return options.deadline.Error("rule '" + g.rules[g.root].name + "' (normalising)");
    }
    Pass pass(g, options);
    Grammar next = pass.Run();
    if (!pass.stopped().ok()) return pass.stopped();
    const bool same = StructurallyEqual(next, g);
    g = std::move(next);
    if (same || !MayChangeAgain(g, options)) return Status::Ok();
  }
  return Status::Ok();
}

std::vector<bool> ReachableRules(const Grammar& g) {
  std::vector<bool> seen(g.rules.size(), false);
  if (g.root < 0 || static_cast<std::size_t>(g.root) >= g.rules.size()) return seen;
  std::vector<RuleId> work = {g.root};
  seen[g.root] = true;
  std::vector<ExprId> stack;  // explicit: expression trees may be deep
  while (!work.empty()) {
    const RuleId r = work.back();
    work.pop_back();
    if (g.rules[r].body >= 0) stack.push_back(g.rules[r].body);
    while (!stack.empty()) {
      const Expr& e = g.exprs[stack.back()];
      stack.pop_back();
      if (e.kind == ExprKind::kRuleRef && !seen[e.rule]) {
        seen[e.rule] = true;
        work.push_back(e.rule);
      }
      for (ExprId c : e.children) stack.push_back(c);
    }
  }
  return seen;
}

void DropUnreachableRules(Grammar& g) {
  if (g.root < 0 || static_cast<std::size_t>(g.root) >= g.rules.size()) return;
  const std::vector<bool> reachable = ReachableRules(g);
  if (std::all_of(reachable.begin(), reachable.end(), [](bool b) { return b; })) return;
  std::vector<RuleId> new_id(g.rules.size(), -1);
  Grammar out;
  for (std::size_t r = 0; r < g.rules.size(); ++r) {
    if (!reachable[r]) continue;
    new_id[r] = static_cast<RuleId>(out.rules.size());
    out.rules.push_back(g.rules[r]);
  }
  for (Rule& rule : out.rules) {
    if (rule.body >= 0) rule.body = CopyTree(g, rule.body, &out);
  }
  for (Expr& e : out.exprs) {
    if (e.kind == ExprKind::kRuleRef) e.rule = new_id[e.rule];
  }
  out.root = new_id[g.root];
  out.warnings = std::move(g.warnings);
  g = std::move(out);
}

}  // namespace lockstep::grammar
