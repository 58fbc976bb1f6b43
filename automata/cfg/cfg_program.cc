// Lowering of the grammar IR into CfgProgram: per rule a Thompson NFA over bytes, rule symbols
// and special-token symbols, determinised by subset construction; then global state numbering,
// byte classes, nullable and productive analysis.
#include "automata/cfg/cfg_program.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <span>

#include "automata/cfg/rule_edges.h"
#include "automata/regex/regex_compiler.h"
#include "automata/regex/byte_nfa.h"
#include "automata/regex/dfa_builder.h"

namespace lockstep {
namespace {

using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;

// Symbols of the rule NFAs: bytes [0, 256), rule r at 256 + 2r, special index i at 257 + 2i.
constexpr std::int32_t kRuleSymbolBase = 256;
inline std::int32_t RuleSymbol(std::int32_t r) { return kRuleSymbolBase + 2 * r; }
inline std::int32_t SpecialSymbol(std::int32_t i) { return kRuleSymbolBase + 2 * i + 1; }

struct NEdge {
  std::int32_t lo;
  std::int32_t hi;
  std::int32_t to;
};
struct NState {
  std::vector<NEdge> edges;
  std::vector<std::int32_t> eps;
};

struct PendingRule {
  CfgProgram::RuleInfo info;
  ExprId body = -1;                // kDfa rules
  const ByteDfa* direct = nullptr;  // a kDfa rule that is exactly this automaton (no NFA pass)
  std::shared_ptr<const ByteDfa> direct_owner;  // keeps it alive (the lowered-form cache key)
};

// A kByteDfa terminal with more states than this gets a rule of its own whose states are the
// automaton's, copied as they are (it is already minimal and deterministic), instead of being
// inlined into its caller's NFA and determinised again with every compile (a date-time format
// automaton has about 11,000 states).
constexpr std::int32_t kDirectDfaStates = 256;

// A counted repetition that RegularRepeat turns into a byte automaton may have up to this many
// times max_unrolled_states states.
constexpr std::int32_t kRegularRepeatFactor = 4;

std::string Loc(const grammar::SourceLocation& loc) {
  if (loc.line <= 0) return {};
  return std::to_string(loc.line) + ":" + std::to_string(loc.column);
}

// Calls f(lo, hi, target) for the maximal byte ranges of state s of `dfa` with one live target,
// in byte order: one table lookup per run of adjacent bytes in one class, not one per byte (a
// format automaton has tens of thousands of states).
class DfaRanges {
 public:
  explicit DfaRanges(const ByteDfa& dfa) : dfa_(dfa) {
    for (int b = 0; b < 256; ++b) {
      if (b > 0 && dfa.byte_class[b] == dfa.byte_class[b - 1]) {
        runs_.back().hi = b;
      } else {
        runs_.push_back({b, b, dfa.byte_class[b]});
      }
    }
  }
  template <typename F>
  void ForEach(StateId s, F&& f) const {
    const StateId* row = dfa_.next.data() + static_cast<std::size_t>(s) * dfa_.num_classes;
    std::int32_t lo = -1, hi = -1;
    StateId cur = ByteDfa::kDead;
    for (const Run& run : runs_) {
      const StateId t = row[run.cls];
      if (t == cur && t != ByteDfa::kDead && hi + 1 == run.lo) {
        hi = run.hi;
        continue;
      }
      if (cur != ByteDfa::kDead) f(lo, hi, cur);
      cur = t;
      lo = run.lo;
      hi = run.hi;
    }
    if (cur != ByteDfa::kDead) f(lo, hi, cur);
  }

 private:
  struct Run {
    std::int32_t lo, hi, cls;
  };
  const ByteDfa& dfa_;
  std::vector<Run> runs_;
};

struct SharedDfa;

class Lowering {
 public:
  Lowering(const grammar::Grammar& g, const Vocabulary& vocab, const CfgCompileOptions& options)
      : pure_memo_(g.exprs.size() + g.rules.size(), -1),
        size_memo_(g.exprs.size(), -1),
        g_(g),
        vocab_(vocab),
        options_(options) {}

  Result<CfgProgram> Run();

 private:
  // Run's steps, in order. Lowers every rule into dstates_ (the grammar's, then the counter
  // rules and their children appended meanwhile).
  Status LowerRules();
  // RuleInfo::nullable: the rules that can finish without a byte (a least fixpoint, by worklist).
  // `edges` and `starts`: the lowered states' rule edges and rule starts (rule_edges.h).
  Status ComputeNullable(const RuleEdgeIndex& edges, const RuleStarts& starts,
                         CfgProgram* p) const;
  // The states and rules that can finish, to a fixpoint (the rest is trimmed by AssignByteClasses
  // and FillTables); kUnsatisfiable when the root cannot. A counter whose child cannot finish
  // repeats it 0 times.
  Status ComputeProductive(const RuleEdgeIndex& edges, const RuleStarts& starts, CfgProgram* p,
                           std::vector<std::uint8_t>* prod_state,
                           std::vector<std::uint8_t>* prod_rule) const;
  // One byte-class table for all rules: the intervals between the bytes where some state's
  // productive target changes.
  void AssignByteClasses(const std::vector<std::uint8_t>& prod_state, CfgProgram* p) const;
  // The global tables (transitions, flags, rule and special-token edges), productive edges only.
  void FillTables(const std::vector<std::uint8_t>& prod_state,
                  const std::vector<std::uint8_t>& prod_rule, CfgProgram* p) const;

  // Two budgets, each named with the option that raises it: one rule's automaton (its NFA may
  // take 4 times as many states) within max_states (CompileOptions::max_dfa_states), all rule
  // automata together within max_program_states (CompileOptions::max_program_states).
  std::string RuleOverBudget(std::int32_t rule, const char* what) const {
    return "rule '" + rules_[rule].info.name + "': its " + what + " exceeds max_dfa_states (" +
           std::to_string(options_.max_states) +
           " states; raise CompileOptions::max_dfa_states, lockstep --max-states)";
  }
  Status CheckProgramStates(std::int32_t rule) const {
    if (static_cast<std::int64_t>(dstates_.size()) <= options_.max_program_states) {
      return Status::Ok();
    }
    return Status(StatusCode::kResourceLimit,
                  "the grammar's rule automata together exceed max_program_states (" +
                      std::to_string(options_.max_program_states) + " states, reached in rule '" +
                      rules_[rule].info.name +
                      "'; raise CompileOptions::max_program_states, lockstep "
                      "--max-program-states)");
  }

  // NFA states are pooled across the rules of one compile (their edge lists keep their capacity).
  std::int32_t NewState() {
    if (nfa_live_ < nfa_.size()) {
      nfa_[nfa_live_].edges.clear();
      nfa_[nfa_live_].eps.clear();
    } else {
      nfa_.emplace_back();
    }
    ++nfa_live_;
    if (static_cast<std::int32_t>(nfa_live_) > options_.max_states * 4) overflow_ = true;
    return static_cast<std::int32_t>(nfa_live_ - 1);
  }
  void Edge(std::int32_t from, std::int32_t lo, std::int32_t hi, std::int32_t to) {
    nfa_[from].edges.push_back({lo, hi, to});
  }
  void Eps(std::int32_t from, std::int32_t to) { nfa_[from].eps.push_back(to); }

  bool IsPureTerminal(ExprId e);
  // A rule whose body only uses terminals and other such rules (never itself): inlined at its
  // references when small, so token masks see through it (fewer rule boundaries, fewer
  // uncertain tokens).
  bool IsPureTerminalRule(grammar::RuleId r);
  // Fills pure_memo_ for every node reachable from `node` (expressions are nodes [0, E), rules
  // [E, E + R)), depth first with an explicit stack: chains of rules can be deeper than the
  // C++ stack.
  void ComputePure(std::int64_t node);
  std::vector<std::int8_t> pure_memo_;  // per node: -1 unknown, 0 no, 1 yes, 2 on the DFS path
  // Estimated NFA states of `e` with its pure-terminal rule references inlined, saturating at
  // kSizeCap. Memoised per expression and computed without recursion: pure rules form a DAG
  // whose shared parts (a schema's chain of optional-member rules, each referring twice to the
  // next) would otherwise be counted once per path, 2^n times for n members.
  std::int64_t EstimateSize(ExprId e);
  std::vector<std::int64_t> size_memo_;  // per expression, -1 unknown
  Status Build(ExprId e, std::int32_t from, std::int32_t* to, int depth);
  Status BuildRepeat(const Expr& x, ExprId e, std::int32_t from, std::int32_t* to, int depth);
  // A counted repetition of pure terminals too big to unroll, whose body can restart where it
  // could also go on or can match empty (`([^x]+){0,99}`): its minimal byte automaton, when
  // that has at most kRegularRepeatFactor * max_unrolled_states states; null otherwise (it stays
  // a counter rule).
  Result<std::shared_ptr<const ByteDfa>> RegularRepeat(const Expr& x, ExprId e, int depth);
  std::map<ExprId, std::shared_ptr<const ByteDfa>> regular_repeat_;  // null: stays a counter
  // The minimal automaton of the NFA states [mark, nfa_live_) from start to end; null if they
  // hold a rule or special-token edge or the automaton would exceed `max_states` states.
  std::shared_ptr<const ByteDfa> FragmentDfa(std::size_t mark, std::int32_t start, std::int32_t end,
                                             std::int32_t max_states);
  // Copies `dfa` into the NFA between `from` and a new end state.
  void EmitDfa(const ByteDfa& dfa, std::int32_t from, std::int32_t* to);
  Result<TokenId> ResolveToken(const Expr& x) const;
  Result<std::int32_t> SpecialIndex(const Expr& x);
  std::int32_t AddRule(PendingRule r) {
    rules_.push_back(std::move(r));
    return static_cast<std::int32_t>(rules_.size() - 1);
  }
  Status Determinise(std::int32_t rule, std::int32_t nfa_start, std::int32_t nfa_end);
  // Rules marked shared (grammar::Rule::shared): the determinised automaton of an NFA seen in an
  // earlier compile is taken from a process-wide cache keyed by the NFA (rule symbols numbered
  // by first appearance). LowerShared appends it and returns true on a hit; otherwise it leaves
  // the key in shared_key_ for StoreShared, called after Determinise.
  bool LowerShared(std::int32_t rule, std::int32_t nfa_start, std::int32_t nfa_end);
  void StoreShared(std::size_t first_state);
  // Appends a shared automaton as rule `rule`'s states, its rule edges mapped through `refs`.
  void AppendShared(std::int32_t rule, const SharedDfa& dfa,
                    std::span<const std::int32_t> refs);
  std::vector<std::int32_t> shared_key_;
  std::vector<std::int32_t> shared_refs_;  // ordinal -> rule of the NFA just keyed
  bool shared_keyed_ = false;
  void CopyDfa(std::int32_t rule, const ByteDfa& dfa, const std::shared_ptr<const ByteDfa>& owner);
  std::map<const ByteDfa*, std::int32_t> direct_rule_of_;

  // The deadline's error, located at the rule being lowered (or the whole grammar's analysis).
  Status DeadlineError() const {
    if (current_rule_ < 0) {
      return options_.deadline.Error("the grammar (nullable and productive rules)");
    }
    return options_.deadline.Error("rule '" + rules_[current_rule_].info.name + "'");
  }
  std::int32_t current_rule_ = -1;

  const grammar::Grammar& g_;
  const Vocabulary& vocab_;
  const CfgCompileOptions& options_;
  std::vector<PendingRule> rules_;
  std::map<ExprId, std::int32_t> aux_rule_of_expr_;
  std::map<ExprId, std::int32_t> counter_rule_of_expr_;
  std::map<std::pair<TokenId, bool>, std::int32_t> special_index_;  // (token, negated)
  std::vector<TokenId> specials_;
  std::vector<std::uint8_t> special_negated_;
  std::vector<NState> nfa_;  // the NFA of the rule being lowered: its first nfa_live_ states
  std::size_t nfa_live_ = 0;
  bool overflow_ = false;

  // Per-rule DFAs, in global numbering once appended. A state's edges are ranges of three
  // pools, written once when the state is finished (a vector per state and kind cost a
  // compile an allocation and a free per state, a tenth of a tool schema's compile).
  struct ByteRange {
    std::int32_t lo, hi, to;
  };
  using SymEdge = std::pair<std::int32_t, std::int32_t>;
  struct DState {
    std::int32_t rule = 0;
    bool accepting = false;
    std::uint32_t bytes_at = 0, nts_at = 0, sps_at = 0;
    std::uint32_t num_bytes = 0, num_nts = 0, num_sps = 0;
  };
  std::vector<DState> dstates_;
  std::vector<ByteRange> byte_pool_;  // [lo, hi] -> target, sorted, disjoint, per state
  std::vector<SymEdge> nt_pool_;         // (rule, target), sorted by rule, per state
  std::vector<SymEdge> sp_pool_;         // (special, target), per state
  std::span<const ByteRange> Bytes(const DState& d) const {
    return {byte_pool_.data() + d.bytes_at, d.num_bytes};
  }
  std::span<const SymEdge> Nts(const DState& d) const {
    return {nt_pool_.data() + d.nts_at, d.num_nts};
  }
  std::span<const SymEdge> Sps(const DState& d) const {
    return {sp_pool_.data() + d.sps_at, d.num_sps};
  }
  // Starts d's ranges at the pools' ends: what is appended to them until the next Begin is d's.
  void BeginEdges(DState& d) const {
    d.bytes_at = static_cast<std::uint32_t>(byte_pool_.size());
    d.nts_at = static_cast<std::uint32_t>(nt_pool_.size());
    d.sps_at = static_cast<std::uint32_t>(sp_pool_.size());
  }
  void EndEdges(DState& d) const {
    d.num_bytes = static_cast<std::uint32_t>(byte_pool_.size()) - d.bytes_at;
    d.num_nts = static_cast<std::uint32_t>(nt_pool_.size()) - d.nts_at;
    d.num_sps = static_cast<std::uint32_t>(sp_pool_.size()) - d.sps_at;
  }
};

bool Lowering::IsPureTerminal(ExprId e) {
  if (pure_memo_[e] < 0) ComputePure(e);
  return pure_memo_[e] == 1;
}

bool Lowering::IsPureTerminalRule(grammar::RuleId r) {
  const std::int64_t node = static_cast<std::int64_t>(g_.exprs.size()) + r;
  if (pure_memo_[node] < 0) ComputePure(node);
  return pure_memo_[node] == 1;
}

void Lowering::ComputePure(std::int64_t root) {
  const auto num_exprs = static_cast<std::int64_t>(g_.exprs.size());
  const auto num_rules = static_cast<std::int64_t>(g_.rules.size());
  // A node's dependencies: an expression's children, a reference's rule, a rule's body.
  auto for_each_dep = [&](std::int64_t n, auto&& f) {
    if (n >= num_exprs) {
      const ExprId body = g_.rules[n - num_exprs].body;
      if (body >= 0) f(body);
      return;
    }
    const Expr& x = g_.expr(static_cast<ExprId>(n));
    if (x.kind == ExprKind::kRuleRef) {
      if (x.rule >= 0 && x.rule < num_rules) f(num_exprs + x.rule);
    } else if (x.kind == ExprKind::kSequence || x.kind == ExprKind::kChoice ||
               x.kind == ExprKind::kRepeat) {
      for (ExprId c : x.children) f(c);
    }
  };
  // A node met again while on the DFS path is on a cycle of references: not pure (that is
  // the recursion the rule definition excludes), and so is every node on that cycle.
  std::vector<std::pair<std::int64_t, bool>> stack = {{root, false}};
  while (!stack.empty()) {
    auto& [n, expanded] = stack.back();
    if (!expanded) {
      if (pure_memo_[n] >= 0) {  // done, or on the path (a cycle: read as 0 by the parent)
        stack.pop_back();
        continue;
      }
      expanded = true;
      pure_memo_[n] = 2;
      const std::int64_t self = n;
      for_each_dep(self, [&](std::int64_t d) {
        if (pure_memo_[d] < 0) stack.push_back({d, false});
      });
      continue;
    }
    const std::int64_t self = n;
    stack.pop_back();
    bool pure = true;
    if (self < num_exprs) {
      const Expr& x = g_.expr(static_cast<ExprId>(self));
      if (x.kind == ExprKind::kSpecialToken) pure = false;
      if (x.kind == ExprKind::kRuleRef && (x.rule < 0 || x.rule >= num_rules)) pure = false;
      if (x.kind == ExprKind::kRepeat && x.count) pure = false;  // a counter rule
    } else if (g_.rules[self - num_exprs].body < 0 || g_.rules[self - num_exprs].KeptWhole()) {
      pure = false;  // (a rule kept whole is never inlined: grammar::Rule::KeptWhole)
    }
    for_each_dep(self, [&](std::int64_t d) { pure = pure && pure_memo_[d] == 1; });
    pure_memo_[self] = pure ? 1 : 0;
  }
}

// Size estimates saturate here: far above any budget, and sums of two never overflow.
constexpr std::int64_t kSizeCap = std::int64_t{1} << 40;
std::int64_t SatAdd(std::int64_t a, std::int64_t b) { return std::min(kSizeCap, a + b); }
std::int64_t SatMul(std::int64_t a, std::int64_t b) {
  return a != 0 && b > kSizeCap / a ? kSizeCap : std::min(kSizeCap, a * b);
}

std::int64_t Lowering::EstimateSize(ExprId root) {
  if (size_memo_[root] >= 0) return size_memo_[root];
  // The expression a node's size depends on besides its children: an inlined rule's body.
  auto inlined_body = [&](const Expr& x) -> ExprId {
    if (x.kind != ExprKind::kRuleRef || x.rule < 0 ||
        x.rule >= static_cast<std::int32_t>(g_.rules.size()) || !IsPureTerminalRule(x.rule)) {
      return -1;
    }
    return g_.rules[x.rule].body;
  };
  // Post-order without recursion; pure rules are never recursive, so this is a DAG walk.
  std::vector<std::pair<ExprId, bool>> stack = {{root, false}};
  while (!stack.empty()) {
    auto [e, expanded] = stack.back();
    if (size_memo_[e] >= 0) {
      stack.pop_back();
      continue;
    }
    const Expr& x = g_.expr(e);
    if (!expanded) {
      stack.back().second = true;
      if (const ExprId b = inlined_body(x); b >= 0 && size_memo_[b] < 0) {
        stack.push_back({b, false});
      }
      if (x.kind == ExprKind::kSequence || x.kind == ExprKind::kChoice ||
          x.kind == ExprKind::kRepeat) {
        for (ExprId c : x.children)
          if (size_memo_[c] < 0) stack.push_back({c, false});
      }
      continue;
    }
    stack.pop_back();
    std::int64_t size = 0;
    switch (x.kind) {
      case ExprKind::kEmpty:
        size = 1;
        break;
      case ExprKind::kLiteral:
        size = static_cast<std::int64_t>(x.text.size()) + 1;
        break;
      case ExprKind::kCharClass:
        size = 4 * static_cast<std::int64_t>(x.ranges.size()) + 8;
        break;
      case ExprKind::kLexeme:
        size = 64;
        break;
      case ExprKind::kByteDfa:
        size = x.dfa ? SatAdd(SatMul(2 * static_cast<std::int64_t>(x.dfa->num_states),
                                     x.dfa->num_classes),
                              8)
                     : 8;
        break;
      case ExprKind::kRuleRef: {
        const ExprId b = inlined_body(x);
        size = b >= 0 ? size_memo_[b] : 2;
        break;
      }
      case ExprKind::kRepeat: {
        const std::int64_t copies = x.max == Expr::kUnbounded ? std::int64_t{x.min} + 1 : x.max;
        size = SatAdd(SatMul(size_memo_[x.children[0]], std::max<std::int64_t>(copies, 1)), 2);
        break;
      }
      default:
        size = 2;
        for (ExprId c : x.children) size = SatAdd(size, size_memo_[c]);
        break;
    }
    size_memo_[e] = size;
  }
  return size_memo_[root];
}

Result<TokenId> Lowering::ResolveToken(const Expr& x) const {
  if (x.token_id >= 0) {
    if (x.token_id >= vocab_.size() || vocab_.Kind(x.token_id) == TokenKind::kUnused) {
      return Status(StatusCode::kInvalidGrammar,
                    "token id " + std::to_string(x.token_id) + " is not in the vocabulary (" +
                        std::to_string(vocab_.size()) + " ids)",
                    Loc(x.loc));
    }
    return x.token_id;
  }
  // A special token by name, a token by its text in the file, or the one token its text encodes
  // to (llama.cpp's rule for <TEXT>).
  const TokenId named = vocab_.FindToken(x.text);
  if (named != kNoToken && (vocab_.IsSpecial(named) || vocab_.TokenBytes(named) == x.text)) {
    return named;
  }
  Result<std::vector<TokenId>> ids = vocab_.Encode(x.text);
  if (ids.ok() && ids->size() == 1) return ids->front();
  std::string why = ids.ok() ? " (its text encodes to " + std::to_string(ids->size()) + " tokens)"
                             : "";
  return Status(StatusCode::kInvalidGrammar,
                "token '" + x.text + "' is not one token of the vocabulary" + why, Loc(x.loc));
}

Result<std::int32_t> Lowering::SpecialIndex(const Expr& x) {
  LOCKSTEP_ASSIGN_OR_RETURN(TokenId id, ResolveToken(x));
  const std::pair<TokenId, bool> key{id, x.negated};
  auto it = special_index_.find(key);
  if (it != special_index_.end()) return it->second;
  std::int32_t idx = static_cast<std::int32_t>(specials_.size());
  specials_.push_back(id);
  special_negated_.push_back(x.negated ? 1 : 0);
  special_index_[key] = idx;
  return idx;
}

Status Lowering::Build(ExprId e, std::int32_t from, std::int32_t* to, int depth) {
  if (options_.deadline.Poll()) return DeadlineError();
  if (depth > 10000) {
    return Status(StatusCode::kResourceLimit, "grammar expression nested too deeply",
                  Loc(g_.expr(e).loc));
  }
  if (overflow_) {
    return Status(StatusCode::kResourceLimit,
                  RuleOverBudget(current_rule_, "NFA (4 per DFA state)"), Loc(g_.expr(e).loc));
  }
  const Expr& x = g_.expr(e);
  switch (x.kind) {
    case ExprKind::kEmpty:
      *to = from;
      return Status::Ok();
    case ExprKind::kLiteral: {
      std::int32_t cur = from;
      for (unsigned char c : x.text) {
        std::int32_t n = NewState();
        Edge(cur, c, c, n);
        cur = n;
      }
      *to = cur;
      return Status::Ok();
    }
    case ExprKind::kCharClass: {
      std::int32_t end = NewState();
      std::vector<Utf8Sequence> seqs;
      for (const CodepointRange& r : x.ranges) SplitUtf8Range(r.lo, r.hi, &seqs);
      for (const Utf8Sequence& q : seqs) {
        std::int32_t cur = from;
        for (std::int32_t k = 0; k < q.len; ++k) {
          std::int32_t n = k + 1 == q.len ? end : NewState();
          Edge(cur, q.lo[k], q.hi[k], n);
          cur = n;
        }
      }
      *to = end;
      return Status::Ok();
    }
    case ExprKind::kRuleRef: {
      if (x.rule < 0 || x.rule >= static_cast<std::int32_t>(g_.rules.size())) {
        return Status(StatusCode::kInvalidGrammar, "reference to an undefined rule", Loc(x.loc));
      }
      if (IsPureTerminalRule(x.rule) && EstimateSize(e) <= options_.max_unrolled_states &&
          (current_rule_ < 0 || rules_[current_rule_].info.unique_item != x.rule)) {
        return Build(g_.rules[x.rule].body, from, to, depth + 1);
      }
      std::int32_t n = NewState();
      Edge(from, RuleSymbol(x.rule), RuleSymbol(x.rule), n);
      *to = n;
      return Status::Ok();
    }
    case ExprKind::kSpecialToken: {
      Result<std::int32_t> idx = SpecialIndex(x);
      if (!idx.ok()) return idx.status();
      std::int32_t n = NewState();
      Edge(from, SpecialSymbol(*idx), SpecialSymbol(*idx), n);
      *to = n;
      return Status::Ok();
    }
    case ExprKind::kSequence: {
      std::int32_t cur = from;
      for (ExprId c : x.children) LOCKSTEP_RETURN_IF_ERROR(Build(c, cur, &cur, depth + 1));
      *to = cur;
      return Status::Ok();
    }
    case ExprKind::kChoice: {
      std::int32_t end = NewState();
      for (ExprId c : x.children) {
        std::int32_t s = NewState();
        Eps(from, s);
        std::int32_t t;
        LOCKSTEP_RETURN_IF_ERROR(Build(c, s, &t, depth + 1));
        Eps(t, end);
      }
      *to = end;
      return Status::Ok();
    }
    case ExprKind::kRepeat:
      return BuildRepeat(x, e, from, to, depth);
    case ExprKind::kLexeme:
    case ExprKind::kByteDfa: {
      const ByteDfa* dfa = x.dfa.get();
      ByteDfa compiled;
      if (x.kind == ExprKind::kLexeme) {
        RegexCompileOptions ro;
        ro.deadline = options_.deadline;
        Result<ByteDfa> r = CompileRegexToDfa(x.text, ro);
        if (!r.ok() && options_.deadline.PassedNow()) return DeadlineError();
        if (!r.ok()) {
          return Status(StatusCode::kInvalidGrammar,
                        "bad regex terminal /" + x.text + "/: " + r.status().message(),
                        Loc(x.loc));
        }
        compiled = std::move(*r);
        dfa = &compiled;
      } else if (dfa == nullptr) {
        return Status(StatusCode::kInvalidGrammar, "DFA terminal without an automaton", Loc(x.loc));
      } else if (dfa->num_states > kDirectDfaStates) {
        auto it = direct_rule_of_.find(dfa);
        std::int32_t r;
        if (it != direct_rule_of_.end()) {
          r = it->second;
        } else {
          PendingRule pr;
          pr.info.kind = CfgProgram::RuleKind::kDfa;
          pr.info.name = "(dfa " + std::to_string(dfa->num_states) + " states)";
          pr.direct = dfa;
          pr.direct_owner = x.dfa;
          r = AddRule(std::move(pr));
          direct_rule_of_[dfa] = r;
        }
        std::int32_t n = NewState();
        Edge(from, RuleSymbol(r), RuleSymbol(r), n);
        *to = n;
        return Status::Ok();
      }
      EmitDfa(*dfa, from, to);
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInternal, "unknown expression kind", Loc(x.loc));
}

void Lowering::EmitDfa(const ByteDfa& dfa, std::int32_t from, std::int32_t* to) {
  std::int32_t end = NewState();
  *to = end;
  if (dfa.start == ByteDfa::kDead) return;  // matches nothing: end unreachable
  std::vector<std::int32_t> map(dfa.num_states, -1);
  for (StateId s = 1; s < dfa.num_states; ++s) map[s] = NewState();
  Eps(from, map[dfa.start]);
  const DfaRanges ranges(dfa);
  for (StateId s = 1; s < dfa.num_states; ++s) {
    if (dfa.IsAccepting(s)) Eps(map[s], end);
    ranges.ForEach(
        s, [&](std::int32_t lo, std::int32_t hi, StateId t) { Edge(map[s], lo, hi, map[t]); });
  }
}

std::shared_ptr<const ByteDfa> Lowering::FragmentDfa(std::size_t mark, std::int32_t start,
                                                     std::int32_t end, std::int32_t max_states) {
  // As a ByteNfa: state 0 matches, state 1 + (v - mark) is v's entry, a chain of splits over
  // v's byte edges, epsilon edges and (at `end`) the match.
  ByteNfa nfa;
  const std::size_t n = nfa_live_ - mark;
  nfa.states.resize(1 + n);
  nfa.states[ByteNfa::kMatchState].kind = NfaStateKind::kMatch;
  auto entry = [&](std::size_t v) { return static_cast<StateId>(1 + (v - mark)); };
  auto push = [&](const NfaState& st) {
    nfa.states.push_back(st);
    return static_cast<StateId>(nfa.states.size() - 1);
  };
  std::vector<StateId> alts;
  for (std::size_t v = mark; v < nfa_live_; ++v) {
    alts.clear();
    for (const NEdge& ed : nfa_[v].edges) {
      if (ed.lo >= kRuleSymbolBase) return nullptr;
      NfaState b;
      b.kind = NfaStateKind::kByte;
      b.lo = static_cast<std::uint8_t>(ed.lo);
      b.hi = static_cast<std::uint8_t>(ed.hi);
      b.out = entry(static_cast<std::size_t>(ed.to));
      alts.push_back(push(b));
    }
    for (std::int32_t u : nfa_[v].eps) alts.push_back(entry(static_cast<std::size_t>(u)));
    if (static_cast<std::int32_t>(v) == end) alts.push_back(ByteNfa::kMatchState);
    NfaState head;
    if (alts.empty()) {
      head.kind = NfaStateKind::kFail;
    } else if (alts.size() == 1) {
      head.kind = NfaStateKind::kEps;
      head.out = alts[0];
    } else {
      StateId rest = alts.back();
      for (std::size_t i = alts.size() - 2; i >= 1; --i) {
        NfaState sp;
        sp.kind = NfaStateKind::kSplit;
        sp.out = alts[i];
        sp.out1 = rest;
        rest = push(sp);
      }
      head.kind = NfaStateKind::kSplit;
      head.out = alts[0];
      head.out1 = rest;
    }
    nfa.states[entry(v)] = head;
  }
  nfa.start = entry(static_cast<std::size_t>(start));
  RegexCompileOptions ro;
  ro.max_dfa_states = max_states;
  ro.max_subset_elements = std::int64_t{1} << 22;
  Result<SubsetDfa> subset = BuildSubsetDfa(nfa, ro);
  if (!subset.ok()) return nullptr;
  return std::make_shared<const ByteDfa>(MinimizeDfa(*subset));
}

// The repetition B{m,n} of a body automaton B, by subset construction over configurations
// (c, q): c pieces done, the current one in state q of B (q = kNotStarted before its first byte).
// Configurations whose futures another one of the same set holds are left out, so counts stay
// few: for c1 < c2 both at least m (any counts when B matches empty), (c2, q) can only do what
// (c1, q) does with fewer pieces left. An unbounded repetition counts up to m only. Exact: a set
// accepts the union of its configurations' futures, which the pruning leaves as it was.
namespace {

constexpr std::int32_t kNotStarted = -1;

std::shared_ptr<const ByteDfa> CountedDfa(const ByteDfa& body, std::int32_t min, std::int32_t max,
                                          std::int32_t max_states) {
  using Config = std::pair<std::int32_t, std::int32_t>;  // (q, c): sorted by state, then count
  const std::int32_t nc = body.num_classes;
  const bool nullable = body.IsAccepting(body.start);
  // Empty pieces make up any missing count: a nullable body repeated needs no minimum.
  const std::int32_t m = nullable ? 0 : min;
  const bool bounded = max != Expr::kUnbounded;
  auto closure = [&](std::vector<Config>& set) {
    for (std::size_t i = 0; i < set.size(); ++i) {
      const auto [q, c] = set[i];
      if (q == kNotStarted || !body.IsAccepting(q)) continue;
      const std::int32_t done = bounded ? c + 1 : std::min(c + 1, m);
      if (!bounded || done <= max) set.push_back({kNotStarted, done});
    }
    std::sort(set.begin(), set.end());
    std::size_t w = 0;
    for (std::size_t i = 0; i < set.size(); ++i) {
      // Per state: every count below m, then the smallest at or past it.
      if (w > 0 && set[w - 1].first == set[i].first &&
          (set[w - 1] == set[i] || set[w - 1].second >= m)) {
        continue;
      }
      set[w++] = set[i];
    }
    set.resize(w);
  };
  std::map<std::vector<Config>, StateId> index;
  std::vector<std::vector<Config>> sets;
  auto intern = [&](std::vector<Config>& set) -> StateId {
    if (set.empty()) return 0;
    auto [it, fresh] = index.try_emplace(set, static_cast<StateId>(sets.size()));
    if (fresh) sets.push_back(set);
    return it->second;
  };
  sets.emplace_back();  // state 0: the empty set, dead
  SubsetDfa out;
  out.num_classes = nc;
  out.byte_class = body.byte_class;
  std::vector<Config> cur = {{kNotStarted, 0}};
  closure(cur);
  out.start = intern(cur);
  std::size_t elements = 0;
  for (StateId s = 1; s < static_cast<StateId>(sets.size()); ++s) {
    if (static_cast<std::int32_t>(sets.size()) > max_states || elements > (std::size_t{1} << 22)) {
      return nullptr;
    }
    elements += sets[s].size();
    out.next.resize(sets.size() * static_cast<std::size_t>(nc), 0);
    for (std::int32_t cls = 0; cls < nc; ++cls) {
      cur.clear();
      for (const auto& [q, c] : sets[s]) {
        StateId t;
        if (q == kNotStarted) {
          if (bounded && c >= max) continue;
          t = body.next[static_cast<std::size_t>(body.start) * nc + cls];
        } else {
          t = body.next[static_cast<std::size_t>(q) * nc + cls];
        }
        if (t != ByteDfa::kDead) cur.push_back({t, c});
      }
      closure(cur);
      const StateId t = intern(cur);
      out.next.resize(sets.size() * static_cast<std::size_t>(nc), 0);
      out.next[static_cast<std::size_t>(s) * nc + cls] = t;
    }
  }
  out.num_states = static_cast<std::int32_t>(sets.size());
  out.next.resize(sets.size() * static_cast<std::size_t>(nc), 0);
  out.accepting.assign(sets.size(), 0);
  for (std::size_t s = 1; s < sets.size(); ++s) {
    for (const auto& [q, c] : sets[s]) {
      if (q == kNotStarted && c >= m) out.accepting[s] = 1;
    }
  }
  ByteDfa dfa = MinimizeDfa(out);
  if (dfa.num_states - 1 > max_states) return nullptr;
  return std::make_shared<const ByteDfa>(std::move(dfa));
}

// A body that can restart where it could also go on (some accepting state and the start state
// both take a byte: `[^x]+`, `a|ab`) or that matches empty: a counter over it keeps an item per
// possible split, so it is worth a byte automaton. Other bodies (one JSON string character, one
// whitespace byte) cost a counter item or two per byte and stay counters.
bool Restartable(const ByteDfa& body) {
  if (body.start == ByteDfa::kDead) return false;
  if (body.IsAccepting(body.start)) return true;
  const std::int32_t nc = body.num_classes;
  const StateId* start_row = &body.next[static_cast<std::size_t>(body.start) * nc];
  for (StateId q = body.accept_begin; q < body.num_states; ++q) {
    const StateId* row = &body.next[static_cast<std::size_t>(q) * nc];
    for (std::int32_t c = 0; c < nc; ++c) {
      if (row[c] != ByteDfa::kDead && start_row[c] != ByteDfa::kDead) return true;
    }
  }
  return false;
}

}  // namespace

Result<std::shared_ptr<const ByteDfa>> Lowering::RegularRepeat(const Expr& x, ExprId e, int depth) {
  auto memo = regular_repeat_.find(e);
  if (memo != regular_repeat_.end()) return memo->second;
  // The body alone, as NFA states nothing else reaches; taken back once read. The automaton may
  // take a few times the unrolling budget: the counter it replaces would cost an item per count
  // at every byte, where an unrolled copy costs nothing at run time.
  const std::int32_t limit = kRegularRepeatFactor * std::max(options_.max_unrolled_states, 1);
  const std::size_t mark = nfa_live_;
  const std::int32_t start = NewState();
  std::int32_t end;
  LOCKSTEP_RETURN_IF_ERROR(Build(x.children[0], start, &end, depth + 1));
  std::shared_ptr<const ByteDfa> body = FragmentDfa(mark, start, end, 4 * limit);
  nfa_live_ = mark;
  std::shared_ptr<const ByteDfa> result;
  if (body != nullptr && Restartable(*body)) result = CountedDfa(*body, x.min, x.max, 4 * limit);
  if (result != nullptr && result->num_states - 1 > limit) result = nullptr;
  regular_repeat_[e] = result;
  return result;
}

Status Lowering::BuildRepeat(const Expr& x, ExprId e, std::int32_t from, std::int32_t* to,
                             int depth) {
  const std::int32_t min = x.min;
  const std::int32_t max = x.max;
  if (min < 0 || (max != Expr::kUnbounded && max < min)) {
    return Status(StatusCode::kInvalidGrammar, "bad repetition bounds", Loc(x.loc));
  }
  if (min > options_.max_repeat || max > options_.max_repeat) {
    return Status(StatusCode::kResourceLimit,
                  "repetition bound exceeds max_repeat (" + std::to_string(options_.max_repeat) +
                      ")",
                  Loc(x.loc));
  }
  const ExprId child = x.children[0];
  if (max == 0) {
    *to = from;
    return Status::Ok();
  }
  auto optional_copy = [&](std::int32_t s, std::int32_t* t) -> Status {
    std::int32_t end = NewState();
    Eps(s, end);
    std::int32_t c;
    LOCKSTEP_RETURN_IF_ERROR(Build(child, s, &c, depth + 1));
    Eps(c, end);
    *t = end;
    return Status::Ok();
  };
  auto star = [&](std::int32_t s, std::int32_t* t) -> Status {
    std::int32_t loop = NewState();
    Eps(s, loop);
    std::int32_t c;
    LOCKSTEP_RETURN_IF_ERROR(Build(child, loop, &c, depth + 1));
    Eps(c, loop);
    *t = loop;
    return Status::Ok();
  };
  if (min == 0 && max == 1) return optional_copy(from, to);
  if (min == 0 && max == Expr::kUnbounded) return star(from, to);
  if (min == 1 && max == Expr::kUnbounded) {
    std::int32_t c;
    LOCKSTEP_RETURN_IF_ERROR(Build(child, from, &c, depth + 1));
    return star(c, to);
  }
  if (!x.count && IsPureTerminal(child) && EstimateSize(e) <= options_.max_unrolled_states) {
    std::int32_t cur = from;
    for (std::int32_t i = 0; i < min; ++i) LOCKSTEP_RETURN_IF_ERROR(Build(child, cur, &cur, depth + 1));
    if (max == Expr::kUnbounded) return star(cur, to);
    // Nested optionals: a?(a?(a?)) shape keeps the NFA linear.
    std::int32_t end = NewState();
    Eps(cur, end);
    for (std::int32_t i = min; i < max; ++i) {
      std::int32_t c;
      LOCKSTEP_RETURN_IF_ERROR(Build(child, cur, &c, depth + 1));
      Eps(c, end);
      cur = c;
    }
    *to = end;
    return Status::Ok();
  }
  if (!x.count && IsPureTerminal(child)) {
    std::shared_ptr<const ByteDfa> regular;
    LOCKSTEP_ASSIGN_OR_RETURN(regular, RegularRepeat(x, e, depth));
    if (regular != nullptr) {
      EmitDfa(*regular, from, to);
      return Status::Ok();
    }
  }
  // A native counter rule over the child (a rule of its own unless it is a plain reference).
  std::int32_t child_rule;
  const Expr& cx = g_.expr(child);
  if (cx.kind == ExprKind::kRuleRef) {
    child_rule = cx.rule;
  } else {
    auto it = aux_rule_of_expr_.find(child);
    if (it != aux_rule_of_expr_.end()) {
      child_rule = it->second;
    } else {
      PendingRule pr;
      pr.info.kind = CfgProgram::RuleKind::kDfa;
      pr.info.name = "(repeat@" + (Loc(x.loc).empty() ? std::to_string(e) : Loc(x.loc)) + ")";
      pr.body = child;
      child_rule = AddRule(std::move(pr));
      aux_rule_of_expr_[child] = child_rule;
    }
  }
  // One counter rule per expression: a repetition built twice (its body read as a fragment by an
  // enclosing repetition that then stays a counter) does not leave an unused copy.
  if (auto known = counter_rule_of_expr_.find(e); known != counter_rule_of_expr_.end()) {
    std::int32_t n = NewState();
    Edge(from, RuleSymbol(known->second), RuleSymbol(known->second), n);
    *to = n;
    return Status::Ok();
  }
  PendingRule counter;
  counter.info.kind = CfgProgram::RuleKind::kCounter;
  counter.info.name = "(counter{" + std::to_string(min) + "," +
                      (max == Expr::kUnbounded ? std::string() : std::to_string(max)) + "})";
  counter.info.child = child_rule;
  counter.info.min = min;
  counter.info.max = max == Expr::kUnbounded ? CfgProgram::kUnbounded : max;
  std::int32_t cr = AddRule(std::move(counter));
  counter_rule_of_expr_[e] = cr;
  std::int32_t n = NewState();
  Edge(from, RuleSymbol(cr), RuleSymbol(cr), n);
  *to = n;
  return Status::Ok();
}

void EpsClosure(const std::vector<NState>& nfa, std::vector<std::int32_t>* set,
                std::vector<std::uint32_t>* mark, std::uint32_t stamp) {
  std::vector<std::int32_t>& s = *set;
  for (std::int32_t x : s) (*mark)[x] = stamp;
  for (std::size_t i = 0; i < s.size(); ++i) {
    for (std::int32_t t : nfa[s[i]].eps) {
      if ((*mark)[t] != stamp) {
        (*mark)[t] = stamp;
        s.push_back(t);
      }
    }
  }
  std::sort(s.begin(), s.end());
}


// Sorted sets of NFA states interned in one flat pool (open addressing over their indices): the
// subset construction's kernels and closures without an allocation per set.
class SetTable {
 public:
  SetTable() : off_{0} {}
  std::int32_t size() const { return static_cast<std::int32_t>(hash_.size()); }
  std::span<const std::int32_t> Get(std::int32_t i) const {
    return {pool_.data() + off_[i], pool_.data() + off_[i + 1]};
  }
  // {index of s, whether it was added now}.
  std::pair<std::int32_t, bool> Intern(std::span<const std::int32_t> s) {
    if (slots_.empty()) slots_.assign(64, -1);
    const std::uint64_t h = Hash(s);
    std::size_t mask = slots_.size() - 1, i = h & mask;
    for (; slots_[i] >= 0; i = (i + 1) & mask) {
      const std::int32_t id = slots_[i];
      if (hash_[id] != h) continue;
      std::span<const std::int32_t> t = Get(id);
      if (t.size() == s.size() && std::equal(t.begin(), t.end(), s.begin())) return {id, false};
    }
    const std::int32_t id = size();
    pool_.insert(pool_.end(), s.begin(), s.end());
    off_.push_back(static_cast<std::uint32_t>(pool_.size()));
    hash_.push_back(h);
    slots_[i] = id;
    if (static_cast<std::size_t>(size()) * 2 > slots_.size()) {
      slots_.assign(slots_.size() * 2, -1);
      mask = slots_.size() - 1;
      for (std::int32_t j = 0; j < size(); ++j) {
        std::size_t k = hash_[j] & mask;
        while (slots_[k] >= 0) k = (k + 1) & mask;
        slots_[k] = j;
      }
    }
    return {id, true};
  }

 private:
  static std::uint64_t Hash(std::span<const std::int32_t> s) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::int32_t x : s) h = (h ^ static_cast<std::uint32_t>(x)) * 1099511628211ull;
    return h ^ (h >> 29);
  }
  std::vector<std::int32_t> pool_;
  std::vector<std::uint32_t> off_;
  std::vector<std::uint64_t> hash_;
  std::vector<std::int32_t> slots_;
};

Status Lowering::Determinise(std::int32_t rule, std::int32_t nfa_start, std::int32_t nfa_end) {
  std::vector<std::uint32_t> mark(nfa_live_, 0);  // (this rule's NFA: states 0 .. nfa_live_)
  std::uint32_t stamp = 0;
  SetTable sets;  // closures: DFA state base + i is sets.Get(i)
  const std::int32_t base = static_cast<std::int32_t>(dstates_.size());
  // Kernels (the targets before their epsilon closure) seen before skip the closure: many
  // intervals and states step into the same kernel.
  SetTable kernels;
  std::vector<std::int32_t> state_of_kernel;
  // Kernels of one NFA state (most steps of a schema's rules are deterministic) are looked up
  // by that state, without hashing: state_of_single[q] is the DFA state of kernel {q}, or -1.
  std::vector<std::int32_t> state_of_single(nfa_live_, -1);
  std::vector<std::int32_t> closure;
  // `kernel`: sorted, no duplicates.
  auto intern = [&](std::span<const std::int32_t> kernel) -> std::int32_t {
    std::int32_t* single = kernel.size() == 1 ? &state_of_single[kernel[0]] : nullptr;
    if (single != nullptr) {
      if (*single >= 0) return *single;
    } else {
      auto [ki, kfresh] = kernels.Intern(kernel);
      if (!kfresh) return state_of_kernel[ki];
    }
    closure.assign(kernel.begin(), kernel.end());
    EpsClosure(nfa_, &closure, &mark, ++stamp);
    auto [si, sfresh] = sets.Intern(closure);
    const std::int32_t id = base + si;
    if (single != nullptr) {
      *single = id;
    } else {
      state_of_kernel.push_back(id);
    }
    if (sfresh) {
      DState d;
      d.rule = rule;
      d.accepting = false;
      dstates_.push_back(std::move(d));
    }
    return id;
  };
  const std::int32_t start_set[1] = {nfa_start};
  std::int32_t start = intern(start_set);
  rules_[rule].info.start = start;
  // Per DFA state, the byte edges of its NFA states cut [0, 256) into intervals on which the
  // target set is constant: one intern per interval, not per byte (a UTF-8 class or an inlined
  // lexeme DFA spans whole ranges).
  struct ByteEdge {
    std::int32_t lo, hi, to;
  };
  std::vector<ByteEdge> edges;
  std::vector<std::int32_t> cuts;
  std::vector<std::pair<std::int32_t, std::int32_t>> by_sym;  // (symbol, NFA target)
  std::vector<std::int32_t> targets;
  std::vector<std::int32_t> prev_key, k;
  std::vector<ByteRange> bytes;  // of the state being finished
  std::vector<SymEdge> nts, sps;
  for (std::int32_t i = 0; i < sets.size(); ++i) {
    if (options_.deadline.Poll()) return DeadlineError();
    if (static_cast<std::int32_t>(dstates_.size()) - base > options_.max_states) {
      return Status(StatusCode::kResourceLimit, RuleOverBudget(rule, "automaton"));
    }
    LOCKSTEP_RETURN_IF_ERROR(CheckProgramStates(rule));
    edges.clear();
    cuts.clear();
    by_sym.clear();
    bool acc = false;
    for (std::int32_t ns : sets.Get(i)) {  // (a view into the pool: no intern in this loop)
      if (ns == nfa_end) acc = true;
      for (const NEdge& ed : nfa_[ns].edges) {
        if (ed.lo < 256) {
          const std::int32_t hi = std::min<std::int32_t>(ed.hi, 255);
          edges.push_back({ed.lo, hi, ed.to});
          cuts.push_back(ed.lo);
          cuts.push_back(hi + 1);
        } else {
          by_sym.emplace_back(ed.lo, ed.to);
        }
      }
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const std::int32_t sid = base + i;
    bytes.clear();
    prev_key.clear();
    std::int32_t prev_target = -1;
    for (std::size_t c = 0; c + 1 < cuts.size(); ++c) {
      const std::int32_t lo = cuts[c], hi = cuts[c + 1] - 1;
      k.clear();
      for (const ByteEdge& e : edges) {
        if (e.lo <= lo && hi <= e.hi) k.push_back(e.to);
      }
      if (k.empty()) continue;
      std::sort(k.begin(), k.end());
      k.erase(std::unique(k.begin(), k.end()), k.end());
      std::int32_t t;
      if (prev_target >= 0 && k == prev_key) {
        t = prev_target;
      } else {
        t = intern(k);
        prev_key = k;
        prev_target = t;
      }
      if (!bytes.empty() && bytes.back().to == t && bytes.back().hi + 1 == lo) {
        bytes.back().hi = hi;
      } else {
        bytes.push_back({lo, hi, t});
      }
    }
    nts.clear();
    sps.clear();
    std::sort(by_sym.begin(), by_sym.end());
    by_sym.erase(std::unique(by_sym.begin(), by_sym.end()), by_sym.end());
    for (std::size_t a = 0; a < by_sym.size();) {
      const std::int32_t sym = by_sym[a].first;
      targets.clear();
      for (; a < by_sym.size() && by_sym[a].first == sym; ++a) targets.push_back(by_sym[a].second);
      std::int32_t t = intern(targets);
      std::int32_t idx = (sym - kRuleSymbolBase) / 2;
      if ((sym - kRuleSymbolBase) % 2 == 0) {
        nts.emplace_back(idx, t);
      } else {
        sps.emplace_back(idx, t);
      }
    }
    DState& d = dstates_[sid];  // after the interns (they may reallocate)
    d.accepting = acc;
    BeginEdges(d);
    byte_pool_.insert(byte_pool_.end(), bytes.begin(), bytes.end());
    nt_pool_.insert(nt_pool_.end(), nts.begin(), nts.end());
    sp_pool_.insert(sp_pool_.end(), sps.begin(), sps.end());
    EndEdges(d);
  }
  return Status::Ok();
}

// A rule automaton lowered once and shared by every later compile that needs it, in local
// numbering, flat: state i has byte ranges bytes[byte_begin[i] .. byte_begin[i + 1]) and rule
// edges nts[nt_begin[i] .. nt_begin[i + 1]), the rule given by its ordinal in the compile's own
// reference list. Two process-wide caches hold them, each bounded:
//   - big DFA terminals (a format automaton: email has 25,099 states), keyed by the automaton,
//     which the entry keeps alive so its address cannot be reused (SharedRanges);
//   - shared rules (grammar::Rule::shared), keyed by the rule's whole NFA (LowerShared).
struct SharedDfa {
  std::shared_ptr<const ByteDfa> owner;
  std::uint64_t serial = 0;  // nonzero once in the big-terminal cache (RuleInfo::shared_source)
  StateId start = 0;
  std::vector<std::uint8_t> accepting;
  std::vector<std::uint32_t> byte_begin{0};
  std::vector<std::array<std::int32_t, 3>> bytes;  // lo, hi, local target
  std::vector<std::uint32_t> nt_begin{0};
  std::vector<std::pair<std::int32_t, std::int32_t>> nts;  // ordinal, local target
  std::size_t Bytes() const {
    return accepting.size() + (byte_begin.size() + nt_begin.size()) * 4 + bytes.size() * 12 +
           nts.size() * 8;
  }
};

constexpr std::int32_t kSharedLoweringStates = 4096;

struct SharedKeyHash {
  std::size_t operator()(const std::vector<std::int32_t>& k) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ k.size();
    for (std::int32_t v : k) h = (h ^ static_cast<std::uint32_t>(v)) * 0x100000001b3ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

// Both caches, under one lock. Past its budget a cache empties itself to keep the new entry: a
// cache that kept nothing more (as they did) left a long-running server without sharing for
// good once it had met enough distinct automata.
struct LoweringCaches {
  std::mutex mu;
  // Big DFA terminals, by automaton (SharedRanges).
  std::unordered_map<const ByteDfa*, std::shared_ptr<const SharedDfa>> big;
  std::size_t big_bytes = 0;
  std::size_t big_budget = std::size_t{64} << 20;
  std::int64_t big_flushes = 0;
  std::uint64_t serials = 0;  // never reused: a terminal cached again gets a new one
  // Shared rules, by their NFA (LowerShared, StoreShared).
  std::unordered_map<std::vector<std::int32_t>, std::shared_ptr<const SharedDfa>, SharedKeyHash>
      rules;
  std::size_t rule_states = 0;
  std::size_t rule_budget = std::size_t{1} << 16;
  std::int64_t rule_flushes = 0;
};
LoweringCaches& Caches() {
  static auto* caches = new LoweringCaches;
  return *caches;
}

std::shared_ptr<const SharedDfa> SharedRanges(const std::shared_ptr<const ByteDfa>& dfa) {
  LoweringCaches& c = Caches();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.big.find(dfa.get()); it != c.big.end()) return it->second;
  }
  auto lowered = std::make_shared<SharedDfa>();
  lowered->owner = dfa;
  lowered->start = dfa->start - 1;  // the dead state 0 is not copied
  const DfaRanges ranges(*dfa);
  for (StateId s = 1; s < dfa->num_states; ++s) {
    lowered->accepting.push_back(dfa->IsAccepting(s) ? 1 : 0);
    ranges.ForEach(s, [&](std::int32_t lo, std::int32_t hi, StateId t) {
      lowered->bytes.push_back({lo, hi, t - 1});
    });
    lowered->byte_begin.push_back(static_cast<std::uint32_t>(lowered->bytes.size()));
    lowered->nt_begin.push_back(0);
  }
  const std::size_t bytes = lowered->Bytes() + dfa->next.size() * sizeof(StateId);
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.big.find(dfa.get()); it != c.big.end()) return it->second;
  if (bytes <= c.big_budget) {
    if (c.big_bytes + bytes > c.big_budget) {
      // (The entries dropped free their automata, whose addresses a later one may take: it is
      // not found under them, as they are gone.)
      c.big.clear();
      c.big_bytes = 0;
      ++c.big_flushes;
    }
    lowered->serial = ++c.serials;
    c.big.emplace(dfa.get(), lowered);
    c.big_bytes += bytes;
  }
  return lowered;
}

constexpr std::size_t kSharedDfaNfaStates = 4096;  // larger NFAs are not keyed

}  // namespace

LoweringCacheStats GetLoweringCacheStats() {
  LoweringCaches& c = Caches();
  std::lock_guard<std::mutex> lock(c.mu);
  return {c.big_bytes, c.rule_states, c.big_flushes, c.rule_flushes};
}

std::pair<std::size_t, std::size_t> SetLoweringCacheBudgetsForTesting(std::size_t big_dfa_bytes,
                                                                      std::size_t rule_dfa_states) {
  LoweringCaches& c = Caches();
  std::lock_guard<std::mutex> lock(c.mu);
  const std::pair<std::size_t, std::size_t> old = {c.big_budget, c.rule_budget};
  c.big.clear();
  c.big_bytes = 0;
  c.big_budget = big_dfa_bytes;
  c.rules.clear();
  c.rule_states = 0;
  c.rule_budget = rule_dfa_states;
  return old;
}

namespace {

void Lowering::AppendShared(std::int32_t rule, const SharedDfa& dfa,
                            std::span<const std::int32_t> refs) {
  const auto base = static_cast<std::int32_t>(dstates_.size());
  for (std::size_t i = 0; i + 1 < dfa.byte_begin.size(); ++i) {
    DState d;
    d.rule = rule;
    d.accepting = dfa.accepting[i] != 0;
    BeginEdges(d);
    for (std::uint32_t e = dfa.byte_begin[i]; e < dfa.byte_begin[i + 1]; ++e) {
      const auto& [lo, hi, to] = dfa.bytes[e];
      byte_pool_.push_back({lo, hi, base + to});
    }
    for (std::uint32_t e = dfa.nt_begin[i]; e < dfa.nt_begin[i + 1]; ++e) {
      nt_pool_.emplace_back(refs[dfa.nts[e].first], base + dfa.nts[e].second);
    }
    std::sort(nt_pool_.begin() + d.nts_at, nt_pool_.end());  // by rule, as Determinise leaves them
    EndEdges(d);
    dstates_.push_back(d);
  }
  rules_[rule].info.start = base + dfa.start;
}

bool Lowering::LowerShared(std::int32_t rule, std::int32_t nfa_start, std::int32_t nfa_end) {
  shared_keyed_ = false;
  if (nfa_live_ > kSharedDfaNfaStates) return false;
  std::vector<std::int32_t>& key = shared_key_;
  key.clear();
  shared_refs_.clear();
  key.push_back(nfa_start);
  key.push_back(nfa_end);
  for (std::size_t i = 0; i < nfa_live_; ++i) {
    const NState& st = nfa_[i];
    key.push_back(static_cast<std::int32_t>(st.edges.size()));
    for (const NEdge& e : st.edges) {
      if (e.lo < kRuleSymbolBase) {
        key.push_back(e.lo);
        key.push_back(e.hi);
      } else {
        if ((e.lo - kRuleSymbolBase) % 2 != 0) return false;  // special tokens: not shared
        const std::int32_t r = (e.lo - kRuleSymbolBase) / 2;
        auto it = std::find(shared_refs_.begin(), shared_refs_.end(), r);
        const auto ord = static_cast<std::int32_t>(it - shared_refs_.begin());
        if (it == shared_refs_.end()) shared_refs_.push_back(r);
        key.push_back(-1 - ord);
        key.push_back(-1 - ord);
      }
      key.push_back(e.to);
    }
    key.push_back(static_cast<std::int32_t>(st.eps.size()));
    key.insert(key.end(), st.eps.begin(), st.eps.end());
  }
  shared_keyed_ = true;
  std::shared_ptr<const SharedDfa> hit;
  {
    LoweringCaches& c = Caches();
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.rules.find(key); it != c.rules.end()) hit = it->second;
  }
  if (!hit) return false;
  AppendShared(rule, *hit, shared_refs_);
  return true;
}

void Lowering::StoreShared(std::size_t first_state) {
  if (!shared_keyed_) return;
  const std::size_t n = dstates_.size() - first_state;
  LoweringCaches& c = Caches();
  {
    std::lock_guard<std::mutex> lock(c.mu);
    if (n > c.rule_budget || c.rules.count(shared_key_)) return;
  }
  auto dfa = std::make_shared<SharedDfa>();
  const auto base = static_cast<std::int32_t>(first_state);  // the start (Determinise's first)
  for (std::size_t i = 0; i < n; ++i) {
    const DState& d = dstates_[first_state + i];
    dfa->accepting.push_back(d.accepting ? 1 : 0);
    for (const ByteRange& b : Bytes(d)) dfa->bytes.push_back({b.lo, b.hi, b.to - base});
    dfa->byte_begin.push_back(static_cast<std::uint32_t>(dfa->bytes.size()));
    for (const auto& [r, to] : Nts(d)) {  // every rule edge of the DFA comes from the NFA's
      const auto ord = static_cast<std::int32_t>(
          std::find(shared_refs_.begin(), shared_refs_.end(), r) - shared_refs_.begin());
      dfa->nts.emplace_back(ord, to - base);
    }
    dfa->nt_begin.push_back(static_cast<std::uint32_t>(dfa->nts.size()));
  }
  std::lock_guard<std::mutex> lock(c.mu);
  if (n > c.rule_budget || c.rules.count(shared_key_)) return;
  if (c.rule_states + n > c.rule_budget) {
    c.rules.clear();
    c.rule_states = 0;
    ++c.rule_flushes;
  }
  c.rules.emplace(shared_key_, std::move(dfa));
  c.rule_states += n;
}

void Lowering::CopyDfa(std::int32_t rule, const ByteDfa& dfa,
                       const std::shared_ptr<const ByteDfa>& owner) {
  if (owner != nullptr && owner.get() == &dfa && dfa.num_states >= kSharedLoweringStates) {
    const std::shared_ptr<const SharedDfa> shared = SharedRanges(owner);
    AppendShared(rule, *shared, {});
    rules_[rule].info.shared_source = shared->serial;
    return;
  }
  const std::int32_t base = static_cast<std::int32_t>(dstates_.size()) - 1;  // DFA state 1 -> base+1
  const DfaRanges ranges(dfa);
  for (StateId s = 1; s < dfa.num_states; ++s) {
    DState d;
    d.rule = rule;
    d.accepting = dfa.IsAccepting(s);
    BeginEdges(d);
    ranges.ForEach(s, [&](std::int32_t lo, std::int32_t hi, StateId t) {
      byte_pool_.push_back({lo, hi, base + t});
    });
    EndEdges(d);
    dstates_.push_back(d);
  }
  rules_[rule].info.start = base + dfa.start;
}

Result<CfgProgram> Lowering::Run() {
  if (g_.root < 0 || g_.root >= static_cast<std::int32_t>(g_.rules.size())) {
    return Status(StatusCode::kInvalidGrammar, "the grammar has no root rule");
  }
  LOCKSTEP_RETURN_IF_ERROR(LowerRules());
  CfgProgram p;
  for (auto& r : rules_) p.rules.push_back(r.info);
  p.root = g_.root;
  p.special_tokens = specials_;
  p.special_negated = special_negated_;
  current_rule_ = -1;  // (a deadline error from here on names the whole grammar's analysis)
  const RuleEdgeIndex edges(dstates_.size(), p.NumRules(),
                            [&](std::size_t s) { return Nts(dstates_[s]); });
  const RuleStarts starts(p, dstates_.size());
  LOCKSTEP_RETURN_IF_ERROR(ComputeNullable(edges, starts, &p));
  std::vector<std::uint8_t> prod_state, prod_rule;
  LOCKSTEP_RETURN_IF_ERROR(ComputeProductive(edges, starts, &p, &prod_state, &prod_rule));
  AssignByteClasses(prod_state, &p);
  FillTables(prod_state, prod_rule, &p);
  LOCKSTEP_RETURN_IF_ERROR(ComputeItemAutomata(&p));
  LOCKSTEP_RETURN_IF_ERROR(ComputeLengthTables(&p));
  return p;
}

Status Lowering::LowerRules() {
  for (const grammar::Rule& r : g_.rules) {
    PendingRule pr;
    pr.info.kind = CfgProgram::RuleKind::kDfa;
    pr.info.name = r.name;
    pr.info.unique_item = r.unique_item;
    pr.info.unique_open_calls = r.unique_item >= 0 && r.unique_open_calls;
    pr.info.unique_search = r.unique_item >= 0 && r.unique_search;
    pr.info.max_chars = r.max_chars;
    pr.info.ecma_pattern = r.ecma_pattern;
    pr.body = r.body;
    if (r.max_chars >= 0 || r.ecma_pattern) {
      // A counted or checked string is its automaton itself (the parser reads this rule's
      // items), not a call of the rule a big automaton would get (shared with the other uses).
      const grammar::Expr& x = g_.expr(r.body);
      if (x.kind != ExprKind::kByteDfa || x.dfa == nullptr) {
        return Status(StatusCode::kInternal, "rule '" + r.name +
                                                 "' has max_chars or ecma_pattern but its body "
                                                 "is not one automaton");
      }
      pr.direct = x.dfa.get();
      pr.direct_owner = x.dfa;
    }
    rules_.push_back(std::move(pr));
  }
  // Rules may be appended (counters, their children) while lowering: index loop.
  for (std::size_t r = 0; r < rules_.size(); ++r) {
    current_rule_ = static_cast<std::int32_t>(r);
    if (options_.deadline.PassedNow()) return DeadlineError();
    if (rules_[r].info.kind != CfgProgram::RuleKind::kDfa) continue;
    if (const ByteDfa* direct = rules_[r].direct) {
      if (direct->start == ByteDfa::kDead) {
        // The empty language: a start state with no way out (trimmed as unproductive below).
        DState d;
        d.rule = static_cast<std::int32_t>(r);
        d.accepting = false;
        rules_[r].info.start = static_cast<std::int32_t>(dstates_.size());
        dstates_.push_back(std::move(d));
      } else {
        CopyDfa(static_cast<std::int32_t>(r), *direct, rules_[r].direct_owner);
      }
      LOCKSTEP_RETURN_IF_ERROR(CheckProgramStates(static_cast<std::int32_t>(r)));
      continue;
    }
    nfa_live_ = 0;
    std::int32_t start = NewState();
    std::int32_t end;
    LOCKSTEP_RETURN_IF_ERROR(Build(rules_[r].body, start, &end, 0));

    if (overflow_) {
      return Status(StatusCode::kResourceLimit,
                    RuleOverBudget(static_cast<std::int32_t>(r), "NFA (4 per DFA state)"));
    }
    const bool shared = options_.reuse_shared_rules && r < g_.rules.size() && g_.rules[r].shared;
    if (shared && LowerShared(static_cast<std::int32_t>(r), start, end)) {
      LOCKSTEP_RETURN_IF_ERROR(CheckProgramStates(static_cast<std::int32_t>(r)));
      continue;
    }
    const std::size_t first_state = dstates_.size();
    LOCKSTEP_RETURN_IF_ERROR(Determinise(static_cast<std::int32_t>(r), start, end));
    if (shared) StoreShared(first_state);
  }
  return Status::Ok();
}

// Nullability and productivity are least fixpoints over the rule edges, computed by a worklist
// (CloseOverEdges, rule_edges.h: linear in states and rule edges). Rescanning every state until
// nothing changed took one pass per rule on the longest chain of calls to nullable rules (a
// schema's chain of optional members is one such chain), about 10 passes per compile for
// productivity on real-world schemas.
Status Lowering::ComputeNullable(const RuleEdgeIndex& edges, const RuleStarts& starts,
                                 CfgProgram* out) const {
  CfgProgram& p = *out;
  const std::int32_t nr = p.NumRules();
  const std::size_t ns = dstates_.size();
  // null_state[s]: from s the rule can finish without a byte (accepting, or a rule edge to a
  // nullable rule whose target is such a state). Seeds: the accepting states, the rules
  // nullable as lowered, the counters that may repeat 0 times.
  std::vector<std::uint8_t> null_state(ns, 0), null_rule(static_cast<std::size_t>(nr), 0);
  for (std::size_t s = 0; s < ns; ++s) null_state[s] = dstates_[s].accepting ? 1 : 0;
  for (std::int32_t r = 0; r < nr; ++r) {
    null_rule[r] = p.rules[r].nullable ||
                   (p.rules[r].kind == CfgProgram::RuleKind::kCounter && p.rules[r].min == 0);
  }
  if (!CloseOverEdges(edges, starts, {}, {}, null_state, null_rule,
                      [&] { return options_.deadline.PassedNow(); })) {
    return DeadlineError();
  }
  for (std::int32_t r = 0; r < nr; ++r) p.rules[r].nullable = null_rule[r] != 0;
  return Status::Ok();
}

Status Lowering::ComputeProductive(const RuleEdgeIndex& edges, const RuleStarts& starts,
                                   CfgProgram* out, std::vector<std::uint8_t>* prod_state_out,
                                   std::vector<std::uint8_t>* prod_rule_out) const {
  CfgProgram& p = *out;
  const std::int32_t nr = p.NumRules();
  const std::int32_t ns = static_cast<std::int32_t>(dstates_.size());
  std::vector<std::uint8_t>& prod_state = *prod_state_out;
  std::vector<std::uint8_t>& prod_rule = *prod_rule_out;
  prod_state.assign(ns, 0);
  prod_rule.assign(nr, 0);
  // CloseOverEdges with the byte and special edges too: per target state, their sources.
  std::vector<std::uint32_t> sym_begin(static_cast<std::size_t>(ns) + 1, 0);
  for (const DState& d : dstates_) {
    for (const auto& br : Bytes(d)) ++sym_begin[br.to + 1];
    for (const auto& [i, t] : Sps(d)) ++sym_begin[t + 1];
  }
  for (std::int32_t s = 0; s < ns; ++s) sym_begin[s + 1] += sym_begin[s];
  std::vector<std::int32_t> sym_src(sym_begin[ns]);
  {
    std::vector<std::uint32_t> at(sym_begin.begin(), sym_begin.end() - 1);
    for (std::int32_t s = 0; s < ns; ++s) {
      const DState& d = dstates_[s];
      for (const auto& br : Bytes(d)) sym_src[at[br.to]++] = s;
      for (const auto& [i, t] : Sps(d)) sym_src[at[t]++] = s;
    }
  }
  for (std::int32_t s = 0; s < ns; ++s) prod_state[s] = dstates_[s].accepting ? 1 : 0;
  for (std::int32_t r = 0; r < nr; ++r) {
    prod_rule[r] = p.rules[r].kind == CfgProgram::RuleKind::kCounter && p.rules[r].min == 0;
  }
  if (!CloseOverEdges(edges, starts, sym_begin, sym_src, prod_state, prod_rule,
                      [&] { return options_.deadline.PassedNow(); })) {
    return DeadlineError();
  }
  if (!prod_rule[p.root]) {
    return Status(StatusCode::kUnsatisfiable,
                  "the root rule '" + p.rules[p.root].name + "' derives no finite string",
                  Loc(g_.rule(g_.root).loc));
  }
  for (std::int32_t r = 0; r < nr; ++r) {
    auto& ri = p.rules[r];
    if (ri.kind == CfgProgram::RuleKind::kCounter && !prod_rule[ri.child]) ri.max = 0;
  }
  return Status::Ok();
}

void Lowering::AssignByteClasses(const std::vector<std::uint8_t>& prod_state,
                                 CfgProgram* p) const {
  std::array<bool, 257> boundary{};
  boundary[0] = true;
  for (const DState& d : dstates_) {
    // Class boundaries: where the (productive) target changes between adjacent bytes.
    std::int32_t prev_hi = -1, prev_to = -1;
    for (const auto& br : Bytes(d)) {
      const std::int32_t to = prod_state[br.to] ? br.to : -1;
      if (br.lo != prev_hi + 1) {  // a gap (no transition) before this range
        if (prev_to != -1) boundary[prev_hi + 1] = true;
        if (to != -1) boundary[br.lo] = true;
      } else if (to != prev_to) {
        boundary[br.lo] = true;
      }
      prev_hi = br.hi;
      prev_to = to;
    }
    if (prev_hi >= 0 && prev_hi < 255 && prev_to != -1) boundary[prev_hi + 1] = true;
  }
  std::int32_t cls = -1;
  for (int b = 0; b < 256; ++b) {
    if (boundary[b]) ++cls;
    p->byte_class[b] = static_cast<std::uint8_t>(cls);
  }
  p->num_classes = cls + 1;
}

void Lowering::FillTables(const std::vector<std::uint8_t>& prod_state,
                          const std::vector<std::uint8_t>& prod_rule, CfgProgram* out) const {
  CfgProgram& p = *out;
  const std::int32_t ns = static_cast<std::int32_t>(dstates_.size());
  p.num_states = ns;
  p.next.Assign(ns, p.num_classes);
  p.accepting.assign(ns, 0);
  p.state_rule.assign(ns, 0);
  p.has_bytes.assign(ns, 0);
  p.byte_first.assign(ns, {});
  p.nt_begin.assign(ns + 1, 0);
  p.sp_begin.assign(ns + 1, 0);
  for (std::int32_t s = 0; s < ns; ++s) {
    const DState& d = dstates_[s];
    p.accepting[s] = d.accepting ? 1 : 0;
    p.state_rule[s] = d.rule;
    for (const auto& br : Bytes(d)) {
      if (!prod_state[br.to]) continue;
      for (std::int32_t c = p.byte_class[br.lo]; c <= p.byte_class[br.hi]; ++c) {
        p.next.Set(static_cast<std::size_t>(s) * p.num_classes + c, br.to);
      }
      p.has_bytes[s] = 1;
      for (std::int32_t w = br.lo >> 6; w <= br.hi >> 6; ++w) {  // bits lo..hi
        const std::int32_t a = std::max(br.lo, w * 64) - w * 64;
        const std::int32_t b = std::min(br.hi, w * 64 + 63) - w * 64;
        p.byte_first[s][w] |= (~std::uint64_t{0} >> (63 - b)) & (~std::uint64_t{0} << a);
      }
    }
    for (auto& [r, t] : Nts(d)) {
      if (prod_rule[r] && prod_state[t]) p.nt_edges.emplace_back(r, t);
    }
    p.nt_begin[s + 1] = static_cast<std::int32_t>(p.nt_edges.size());
    for (auto& [i, t] : Sps(d)) {
      if (prod_state[t]) p.sp_edges.emplace_back(i, t);
    }
    p.sp_begin[s + 1] = static_cast<std::int32_t>(p.sp_edges.size());
  }
}

}  // namespace

Status ComputeItemAutomata(CfgProgram* out) {
  CfgProgram& p = *out;
  p.item_automaton_of.clear();
  p.item_completions.clear();
  p.before_item.clear();
  p.item_zero_twice.clear();
  if (!p.HasUniqueItems()) return Status::Ok();
  const std::int32_t nr = p.NumRules(), ns = p.num_states, nc = p.num_classes;
  std::vector<std::vector<StateId>> states(static_cast<std::size_t>(nr));
  for (StateId s = 0; s < ns; ++s) states[p.state_rule[s]].push_back(s);
  std::vector<std::int64_t> class_size(static_cast<std::size_t>(nc), 0);
  for (int b = 0; b < 256; ++b) ++class_size[p.byte_class[b]];
  auto byte_only = [&](std::int32_t r) {
    if (p.rules[r].kind != CfgProgram::RuleKind::kDfa) return false;
    for (StateId s : states[r])
      if (p.nt_begin[s] != p.nt_begin[s + 1] || p.sp_begin[s] != p.sp_begin[s + 1]) return false;
    return true;
  };
  p.item_automaton_of.assign(static_cast<std::size_t>(nr), -1);
  p.item_completions.assign(static_cast<std::size_t>(ns), CfgProgram::kNoCompletions);
  p.before_item.assign(static_cast<std::size_t>(ns), 0);
  p.item_zero_twice.assign(static_cast<std::size_t>(nr), 0);
  // Whether rule a's automaton, byte edges only, takes `text` from its start.
  const auto takes = [&](std::int32_t a, std::string_view text) {
    StateId s = p.rules[a].start;
    for (const char c : text) {
      if (s == CfgProgram::kDead) return false;
      s = p.next[static_cast<std::size_t>(s) * nc + p.byte_class[static_cast<std::uint8_t>(c)]];
    }
    return s != CfgProgram::kDead && p.accepting[s] != 0;
  };
  for (std::int32_t list = 0; list < nr; ++list) {
    const std::int32_t item = p.rules[list].unique_item;
    if (item < 0) continue;
    // The item's automaton: the item rule, or the one rule its start calls (a big automaton is a
    // rule of its own), when that is all the item rule does.
    std::int32_t a = -1;
    // Items whose calls are open (items of any type): the item rule, calls and all; a state
    // with a call or a special token is never peeled (infinitely many ways).
    const bool open_calls = p.rules[list].unique_open_calls;
    if (byte_only(item) || (open_calls && p.rules[item].kind == CfgProgram::RuleKind::kDfa)) {
      a = item;
    } else if (p.rules[item].kind == CfgProgram::RuleKind::kDfa) {
      const StateId st = p.rules[item].start;
      if (p.nt_begin[st + 1] - p.nt_begin[st] == 1 && !p.has_bytes[st] &&
          p.sp_begin[st] == p.sp_begin[st + 1] && states[item].size() == 2) {
        const auto [callee, after] = p.nt_edges[p.nt_begin[st]];
        if (p.accepting[after] && !p.has_bytes[after] && p.nt_begin[after] == p.nt_begin[after + 1] &&
            byte_only(callee)) {
          a = callee;
        }
      }
    }
    // Completions per state of the automaton: peel the states whose successors are all peeled
    // (Kahn); what stays reaches a cycle.
    std::vector<StateId> own = a >= 0 ? states[a] : std::vector<StateId>{};
    bool finite = false;
    if (a >= 0) {
      std::unordered_map<StateId, std::int32_t> out_deg;
      std::unordered_map<StateId, std::vector<StateId>> preds;
      for (StateId s : own) {
        std::int32_t d = 0;
        for (std::int32_t c = 0; c < nc; ++c) {
          const StateId t = p.next[static_cast<std::size_t>(s) * nc + c];
          if (t == CfgProgram::kDead) continue;
          ++d;
          preds[t].push_back(s);
        }
        if (open_calls && (p.nt_begin[s] != p.nt_begin[s + 1] || p.sp_begin[s] != p.sp_begin[s + 1]))
          ++d;  // (never reaches 0: a call leads to infinitely many values)
        out_deg[s] = d;
        p.item_completions[s] = CfgProgram::kInfiniteCompletions;
      }
      std::vector<StateId> peel;
      for (StateId s : own)
        if (out_deg[s] == 0) peel.push_back(s);
      for (std::size_t i = 0; i < peel.size(); ++i) {
        const StateId s = peel[i];
        std::int64_t n = p.accepting[s] ? 1 : 0;
        for (std::int32_t c = 0; c < nc; ++c) {
          const StateId t = p.next[static_cast<std::size_t>(s) * nc + c];
          if (t == CfgProgram::kDead) continue;
          const long double m = static_cast<long double>(class_size[c]) *
                                static_cast<long double>(p.item_completions[t]);
          n = static_cast<std::int64_t>(std::min<long double>(
              static_cast<long double>(CfgProgram::kManyCompletions), n + m));
        }
        p.item_completions[s] = std::min(n, CfgProgram::kManyCompletions);
        for (StateId q : preds[s])
          if (--out_deg[q] == 0) peel.push_back(q);
      }
      // (A state after the item's last byte, accepting with nothing after it, is no choice.)
      finite = false;
      for (StateId s : own) {
        const bool last = p.accepting[s] && !p.has_bytes[s];
        if (p.item_completions[s] >= 0 && !last) finite = true;
      }
    }
    // Items that cannot run out (every state reaches a cycle) need no automaton: the check at
    // completion is enough (the schema compiler makes lists of other items only when their item
    // rule is one byte automaton).
    if (!finite) {
      for (StateId s : own) p.item_completions[s] = CfgProgram::kNoCompletions;
    } else {
      p.item_automaton_of[a] = item;
      if (takes(a, "0") && takes(a, "-0")) p.item_zero_twice[a] = 1;
    }
    // The list's states before an item: no way to accept without one more item.
    std::vector<std::uint8_t> free_end(static_cast<std::size_t>(ns), 0);  // accept w/o an item
    for (bool changed = true; changed;) {
      changed = false;
      for (StateId s : states[list]) {
        if (free_end[s]) continue;
        bool v = p.accepting[s] != 0;
        for (std::int32_t c = 0; c < nc && !v; ++c) {
          const StateId t = p.next[static_cast<std::size_t>(s) * nc + c];
          v = t != CfgProgram::kDead && free_end[t];
        }
        for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1] && !v; ++e) {
          v = p.nt_edges[e].first != item && free_end[p.nt_edges[e].second];
        }
        if (v) free_end[s] = 1, changed = true;
      }
    }
    for (StateId s : states[list]) p.before_item[s] = free_end[s] ? 0 : 1;
  }
  return Status::Ok();
}

int JsonTextDecoder::Step(std::uint8_t b, char32_t* c) {
  auto hex = [](std::uint8_t x) -> int {
    if (x >= '0' && x <= '9') return x - '0';
    if (x >= 'a' && x <= 'f') return x - 'a' + 10;
    if (x >= 'A' && x <= 'F') return x - 'A' + 10;
    return -1;
  };
  switch (mode) {
    case kCharBeforeQuote:
      if (b != '"') return kBad;
      mode = kCharText;
      return kNothing;
    case kCharText:
      if (lead != 0) {
        // After a lead surrogate's escape only its trail's may come.
        if (b != '\\') return kBad;
        mode = kCharEscape;
        return kNothing;
      }
      if (b == '"') {
        mode = kCharClosed;
        return kClosed;
      }
      if (b == '\\') {
        mode = kCharEscape;
        return kNothing;
      }
      if (b < 0x20) return kBad;
      if (b < 0x80) {
        *c = b;
        return kChar;
      }
      if (b >= 0xF8 || b < 0xC2) return kBad;
      mode = b >= 0xF0 ? kCharCont3 : b >= 0xE0 ? kCharCont2 : kCharCont1;
      utf8_len = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      acc = b & (b >= 0xF0 ? 0x07u : b >= 0xE0 ? 0x0Fu : 0x1Fu);
      return kNothing;
    case kCharEscape: {
      if (lead != 0 && b != 'u') return kBad;
      if (b == 'u') {
        mode = kCharHex1;
        acc = 0;
        return kNothing;
      }
      static constexpr char kFrom[] = "\"\\/bfnrt";
      static constexpr char kTo[] = "\"\\/\b\f\n\r\t";
      const char* f = std::strchr(kFrom, b);
      if (b == 0 || f == nullptr) return kBad;
      mode = kCharText;
      *c = static_cast<unsigned char>(kTo[f - kFrom]);
      return kChar;
    }
    case kCharHex1:
    case kCharHex2:
    case kCharHex3:
    case kCharHex4: {
      const int h = hex(b);
      if (h < 0) return kBad;
      acc = acc << 4 | static_cast<std::uint32_t>(h);
      if (mode != kCharHex4) {
        ++mode;
        return kNothing;
      }
      mode = kCharText;
      if (lead != 0) {
        if (acc < 0xDC00 || acc > 0xDFFF) return kBad;
        *c = static_cast<char32_t>(0x10000 + ((lead - 0xD800) << 10) + (acc - 0xDC00));
        lead = 0;
        return kChar;
      }
      if (acc >= 0xD800 && acc <= 0xDBFF) {
        lead = acc;
        return kNothing;
      }
      if (acc >= 0xDC00 && acc <= 0xDFFF) return kBad;
      *c = static_cast<char32_t>(acc);
      return kChar;
    }
    case kCharCont1:
    case kCharCont2:
    case kCharCont3:
      if ((b & 0xC0) != 0x80) return kBad;
      acc = acc << 6 | (b & 0x3Fu);
      if (mode != kCharCont1) {
        --mode;
        return kNothing;
      }
      mode = kCharText;
      if (acc < (utf8_len == 4 ? 0x10000u : utf8_len == 3 ? 0x800u : 0x80u) ||
          (acc >= 0xD800 && acc <= 0xDFFF) || acc > 0x10FFFF) {
        return kBad;
      }
      *c = static_cast<char32_t>(acc);
      return kChar;
    default:
      return kBad;
  }
}

bool JsonCharStep(std::uint8_t* mode, std::uint8_t b) {
  switch (*mode) {
    case kCharBeforeQuote:
      if (b == '"') *mode = kCharText;
      return false;
    case kCharText:
      if (b == '"') {
        *mode = kCharClosed;
        return false;
      }
      if (b == '\\') {
        *mode = kCharEscape;
        return true;
      }
      if (b < 0x80) return true;
      if (b >= 0xF0) {
        *mode = kCharCont3;
      } else if (b >= 0xE0) {
        *mode = kCharCont2;
      } else if (b >= 0xC0) {
        *mode = kCharCont1;
      } else {
        return false;  // (a stray continuation byte: no string automaton takes it here)
      }
      return true;
    case kCharEscape:
      *mode = b == 'u' ? kCharHex1 : kCharText;
      return false;
    case kCharHex1:
    case kCharHex2:
    case kCharHex3:
      *mode = static_cast<std::uint8_t>(*mode + 1);
      return false;
    case kCharHex4:
      *mode = kCharText;
      return false;
    case kCharCont3:
      *mode = kCharCont2;
      return false;
    case kCharCont2:
      *mode = kCharCont1;
      return false;
    case kCharCont1:
      *mode = kCharText;
      return false;
    default:
      return false;
  }
}

namespace {

// The length tables of a big format automaton copied from the process's cache
// (RuleInfo::shared_source), by the rank of each state in its rule: the same in every program
// that copies the automaton, so computed once per process (`email` with a maxLength: 25,000
// states, about 15 ms per compile). Bounded by kSharedLengthStates in all.
struct SharedLengthTable {
  std::vector<std::uint8_t> mode;
  std::vector<std::int32_t> min_chars;
  std::int32_t max_min = 0;
};
constexpr std::size_t kSharedLengthStates = std::size_t{1} << 22;
std::mutex shared_length_mu;
std::size_t shared_length_states = 0;
auto* const shared_lengths =
    new std::unordered_map<std::uint64_t, std::shared_ptr<const SharedLengthTable>>;

std::shared_ptr<const SharedLengthTable> FindSharedLengths(std::uint64_t source) {
  std::lock_guard<std::mutex> lock(shared_length_mu);
  auto it = shared_lengths->find(source);
  return it == shared_lengths->end() ? nullptr : it->second;
}

void KeepSharedLengths(std::uint64_t source, const CfgProgram& p,
                       const std::vector<StateId>& ranked, std::int32_t max_min) {
  auto t = std::make_shared<SharedLengthTable>();
  t->max_min = max_min;
  for (StateId s : ranked) {
    t->mode.push_back(p.char_mode[s]);
    t->min_chars.push_back(p.min_chars[s]);
  }
  std::lock_guard<std::mutex> lock(shared_length_mu);
  if (shared_length_states + ranked.size() > kSharedLengthStates) return;
  if (shared_lengths->emplace(source, std::move(t)).second) shared_length_states += ranked.size();
}

}  // namespace

Status ComputeLengthTables(CfgProgram* out) {
  CfgProgram& p = *out;
  p.min_chars.clear();
  p.char_mode.clear();
  p.max_min_chars.clear();
  if (!p.HasCountedStrings()) return Status::Ok();
  const std::int32_t nr = p.NumRules(), ns = p.num_states, nc = p.num_classes;
  constexpr std::uint8_t kNone = 255;
  constexpr std::int32_t kModes = kCharClosed + 1;
  // Per mode and byte class: the mode after and whether a character begins, the same for every
  // byte of the class (else the class mixes bytes a string tells apart: not a string automaton).
  std::vector<std::uint8_t> class_next(static_cast<std::size_t>(kModes * nc), kNone);
  std::vector<std::uint8_t> class_begins(static_cast<std::size_t>(kModes * nc), 0);
  std::vector<std::uint8_t> mixed(static_cast<std::size_t>(kModes * nc), 0);
  for (std::int32_t m = 0; m < kModes; ++m) {
    for (int b = 0; b < 256; ++b) {
      std::uint8_t after = static_cast<std::uint8_t>(m);
      const bool begins = JsonCharStep(&after, static_cast<std::uint8_t>(b));
      const std::size_t i = static_cast<std::size_t>(m * nc + p.byte_class[b]);
      if (class_next[i] == kNone) {
        class_next[i] = after;
        class_begins[i] = begins ? 1 : 0;
      } else if (class_next[i] != after || class_begins[i] != (begins ? 1 : 0)) {
        mixed[i] = 1;
      }
    }
  }
  p.min_chars.assign(static_cast<std::size_t>(ns), -1);
  p.char_mode.assign(static_cast<std::size_t>(ns), kNone);
  p.max_min_chars.assign(static_cast<std::size_t>(nr), 0);
  // Per state: its index among its rule's states (-1 outside the rule at hand), reset after
  // each rule; the rule's edges as the search meets them, then its predecessor lists in CSR form
  // (one pass over the rule's rows of the dense table: a format automaton's 25,000 states times
  // a schema's few hundred classes, once per compile).
  std::vector<std::int32_t> index(static_cast<std::size_t>(ns), -1);
  struct Edge {
    StateId from, to;
    std::uint8_t begins;
  };
  std::vector<Edge> edges;
  std::vector<std::int32_t> pred_begin;
  std::vector<std::pair<StateId, std::uint8_t>> preds;  // (state, begins)
  std::vector<StateId> own;
  for (std::int32_t r = 0; r < nr; ++r) {
    const CfgProgram::RuleInfo& info = p.rules[r];
    if (info.max_chars < 0) continue;
    auto not_a_string = [&](const std::string& why) {
      return Status(StatusCode::kInternal,
                    "rule '" + info.name + "' has max_chars but is not a JSON string: " + why);
    };
    if (info.kind != CfgProgram::RuleKind::kDfa || info.start == CfgProgram::kDead) {
      return not_a_string("no automaton");
    }
    std::vector<StateId> ranked;  // a shared automaton's states, by rank
    if (info.shared_source != 0) {
      for (StateId s = 0; s < ns; ++s) {
        if (p.state_rule[s] == r) ranked.push_back(s);
      }
      const std::shared_ptr<const SharedLengthTable> known = FindSharedLengths(info.shared_source);
      if (known != nullptr && known->mode.size() == ranked.size()) {
        for (std::size_t i = 0; i < ranked.size(); ++i) {
          p.char_mode[ranked[i]] = known->mode[i];
          p.min_chars[ranked[i]] = known->min_chars[i];
        }
        p.max_min_chars[r] = known->max_min;
        continue;
      }
    }
    for (StateId s : own) index[s] = -1;
    // Each state's mode, from the start (every path to a state must agree).
    own.assign(1, info.start);
    edges.clear();
    p.char_mode[info.start] = kCharBeforeQuote;
    index[info.start] = 0;
    for (std::size_t i = 0; i < own.size(); ++i) {
      const StateId s = own[i];
      if (p.nt_begin[s] != p.nt_begin[s + 1] || p.sp_begin[s] != p.sp_begin[s + 1]) {
        return not_a_string("it calls a rule or takes a special token");
      }
      const TransitionRow row = p.next.Row(s, nc);
      for (std::int32_t c = 0; c < nc; ++c) {
        const StateId t = row[c];
        if (t == CfgProgram::kDead) continue;
        const std::size_t k = static_cast<std::size_t>(p.char_mode[s] * nc + c);
        if (mixed[k]) return not_a_string("a byte class mixes bytes of different kinds");
        if (p.state_rule[t] != r) return not_a_string("a transition leaves the rule");
        if (p.char_mode[t] == kNone) {
          p.char_mode[t] = class_next[k];
          index[t] = static_cast<std::int32_t>(own.size());
          own.push_back(t);
        } else if (p.char_mode[t] != class_next[k]) {
          return not_a_string("a state is reached inside and outside a character");
        }
        edges.push_back({s, t, class_begins[k]});
      }
    }
    pred_begin.assign(own.size() + 1, 0);
    for (const Edge& e : edges) ++pred_begin[index[e.to] + 1];
    for (std::size_t i = 0; i < own.size(); ++i) pred_begin[i + 1] += pred_begin[i];
    preds.resize(edges.size());
    {
      std::vector<std::int32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
      for (const Edge& e : edges) preds[fill[index[e.to]]++] = {e.from, e.begins};
    }
    // The fewest characters to an accepting state: 0-1 breadth-first, backwards.
    std::deque<StateId> work;
    for (StateId s : own) {
      if (p.accepting[s]) {
        p.min_chars[s] = 0;
        work.push_back(s);
      }
    }
    while (!work.empty()) {
      const StateId t = work.front();
      work.pop_front();
      for (std::int32_t e = pred_begin[index[t]]; e < pred_begin[index[t] + 1]; ++e) {
        const auto [s, w] = preds[e];
        const std::int32_t d = p.min_chars[t] + w;
        if (p.min_chars[s] >= 0 && p.min_chars[s] <= d) continue;
        p.min_chars[s] = d;
        if (w == 0) {
          work.push_front(s);
        } else {
          work.push_back(s);
        }
      }
    }
    for (StateId s : own) p.max_min_chars[r] = std::max(p.max_min_chars[r], p.min_chars[s]);
    if (info.shared_source != 0) KeepSharedLengths(info.shared_source, p, ranked, p.max_min_chars[r]);
  }
  return Status::Ok();
}

Result<CfgProgram> CompileCfg(const grammar::Grammar& g, const Vocabulary& vocab,
                              const CfgCompileOptions& options) {
  Lowering lowering(g, vocab, options);
  return lowering.Run();
}

}  // namespace lockstep
