// Lowering of the grammar IR into CfgProgram: per rule a Thompson NFA over bytes, rule symbols
// and special-token symbols, determinised by subset construction; then global state numbering,
// byte classes, nullable and productive analysis.
#include "automata/cfg_program.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <span>

#include "automata/byte_dfa.h"
#include "automata/byte_nfa.h"

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
      : g_(g), vocab_(vocab), options_(options), pure_memo_(g.exprs.size(), -1) {}

  Result<CfgProgram> Run();

 private:
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
  std::vector<std::int8_t> pure_rule_memo_;  // -1 unknown, 0 no, 1 yes, 2 in progress
  std::int64_t EstimateSize(ExprId e);
  Status Build(ExprId e, std::int32_t from, std::int32_t* to, int depth);
  Status BuildRepeat(const Expr& x, ExprId e, std::int32_t from, std::int32_t* to, int depth);
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

  const grammar::Grammar& g_;
  const Vocabulary& vocab_;
  const CfgCompileOptions& options_;
  std::vector<std::int8_t> pure_memo_;
  std::vector<PendingRule> rules_;
  std::map<ExprId, std::int32_t> aux_rule_of_expr_;
  std::map<std::string, std::int32_t> special_index_;
  std::vector<TokenId> specials_;
  std::vector<NState> nfa_;  // the NFA of the rule being lowered: its first nfa_live_ states
  std::size_t nfa_live_ = 0;
  bool overflow_ = false;

  // Per-rule DFAs, in global numbering once appended.
  struct DState {
    std::int32_t rule;
    bool accepting;
    struct ByteRange {
      std::int32_t lo, hi, to;
    };
    std::vector<ByteRange> bytes;  // [lo, hi] -> target, sorted, disjoint
    std::vector<std::pair<std::int32_t, std::int32_t>> nts;    // (rule, target)
    std::vector<std::pair<std::int32_t, std::int32_t>> sps;    // (special, target)
  };
  std::vector<DState> dstates_;
};

bool Lowering::IsPureTerminal(ExprId e) {
  if (pure_memo_[e] >= 0) return pure_memo_[e] != 0;
  const Expr& x = g_.expr(e);
  bool pure = true;
  switch (x.kind) {
    case ExprKind::kRuleRef:
      pure = x.rule >= 0 && x.rule < static_cast<std::int32_t>(g_.rules.size()) &&
             IsPureTerminalRule(x.rule);
      break;
    case ExprKind::kSpecialToken:
      pure = false;
      break;
    case ExprKind::kSequence:
    case ExprKind::kChoice:
    case ExprKind::kRepeat:
      for (ExprId c : x.children) pure = pure && IsPureTerminal(c);
      break;
    default:
      break;
  }
  pure_memo_[e] = pure ? 1 : 0;
  return pure;
}

bool Lowering::IsPureTerminalRule(grammar::RuleId r) {
  if (pure_rule_memo_.empty()) pure_rule_memo_.assign(g_.rules.size(), -1);
  if (pure_rule_memo_[r] == 2) return false;  // recursive
  if (pure_rule_memo_[r] >= 0) return pure_rule_memo_[r] == 1;
  pure_rule_memo_[r] = 2;
  bool pure = g_.rules[r].body >= 0 && IsPureTerminal(g_.rules[r].body);
  pure_rule_memo_[r] = pure ? 1 : 0;
  return pure;
}

std::int64_t Lowering::EstimateSize(ExprId e) {
  const Expr& x = g_.expr(e);
  switch (x.kind) {
    case ExprKind::kEmpty:
      return 1;
    case ExprKind::kLiteral:
      return static_cast<std::int64_t>(x.text.size()) + 1;
    case ExprKind::kCharClass:
      return 4 * static_cast<std::int64_t>(x.ranges.size()) + 8;
    case ExprKind::kLexeme:
      return 64;
    case ExprKind::kByteDfa:
      return x.dfa ? 2 * static_cast<std::int64_t>(x.dfa->num_states) * x.dfa->num_classes + 8 : 8;
    case ExprKind::kRuleRef:
      if (x.rule >= 0 && x.rule < static_cast<std::int32_t>(g_.rules.size()) &&
          IsPureTerminalRule(x.rule)) {
        return EstimateSize(g_.rules[x.rule].body);
      }
      return 2;
    case ExprKind::kRepeat: {
      std::int64_t c = EstimateSize(x.children[0]);
      std::int64_t copies = x.max == Expr::kUnbounded ? x.min + 1 : x.max;
      return c * std::max<std::int64_t>(copies, 1) + 2;
    }
    default: {
      std::int64_t s = 2;
      for (ExprId c : x.children) s += EstimateSize(c);
      return s;
    }
  }
}

Result<std::int32_t> Lowering::SpecialIndex(const Expr& x) {
  auto it = special_index_.find(x.text);
  if (it != special_index_.end()) return it->second;
  TokenId id = vocab_.FindToken(x.text);
  if (id == kNoToken) {
    return Status(StatusCode::kInvalidGrammar,
                  "special token '" + x.text + "' is not in the vocabulary", Loc(x.loc));
  }
  std::int32_t idx = static_cast<std::int32_t>(specials_.size());
  specials_.push_back(id);
  special_index_[x.text] = idx;
  return idx;
}

Status Lowering::Build(ExprId e, std::int32_t from, std::int32_t* to, int depth) {
  if (depth > 10000) {
    return Status(StatusCode::kResourceLimit, "grammar expression nested too deeply",
                  Loc(g_.expr(e).loc));
  }
  if (overflow_) {
    return Status(StatusCode::kResourceLimit,
                  "grammar automaton exceeds max_states (" +
                      std::to_string(options_.max_states) + ")",
                  Loc(g_.expr(e).loc));
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
      if (IsPureTerminalRule(x.rule) && EstimateSize(e) <= options_.max_unrolled_states) {
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
        Result<ByteDfa> r = CompileRegexToDfa(x.text, ro);
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
      std::int32_t end = NewState();
      if (dfa->start == ByteDfa::kDead) {
        *to = end;  // matches nothing: end unreachable
        return Status::Ok();
      }
      std::vector<std::int32_t> map(dfa->num_states, -1);
      for (StateId s = 1; s < dfa->num_states; ++s) map[s] = NewState();
      Eps(from, map[dfa->start]);
      const DfaRanges ranges(*dfa);
      for (StateId s = 1; s < dfa->num_states; ++s) {
        if (dfa->IsAccepting(s)) Eps(map[s], end);
        ranges.ForEach(s, [&](std::int32_t lo, std::int32_t hi, StateId t) {
          Edge(map[s], lo, hi, map[t]);
        });
      }
      *to = end;
      return Status::Ok();
    }
  }
  return Status(StatusCode::kInternal, "unknown expression kind", Loc(x.loc));
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
  if (IsPureTerminal(child) && EstimateSize(e) <= options_.max_unrolled_states) {
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
  PendingRule counter;
  counter.info.kind = CfgProgram::RuleKind::kCounter;
  counter.info.name = "(counter{" + std::to_string(min) + "," +
                      (max == Expr::kUnbounded ? std::string() : std::to_string(max)) + "})";
  counter.info.child = child_rule;
  counter.info.min = min;
  counter.info.max = max == Expr::kUnbounded ? CfgProgram::kUnbounded : max;
  std::int32_t cr = AddRule(std::move(counter));
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
  std::vector<std::uint32_t> mark(nfa_.size(), 0);
  std::uint32_t stamp = 0;
  SetTable sets;  // closures: DFA state base + i is sets.Get(i)
  const std::int32_t base = static_cast<std::int32_t>(dstates_.size());
  // Kernels (the targets before their epsilon closure) seen before skip the closure: many
  // intervals and states step into the same kernel.
  SetTable kernels;
  std::vector<std::int32_t> state_of_kernel;
  std::vector<std::int32_t> closure;
  // `kernel`: sorted, no duplicates.
  auto intern = [&](std::span<const std::int32_t> kernel) -> std::int32_t {
    auto [ki, kfresh] = kernels.Intern(kernel);
    if (!kfresh) return state_of_kernel[ki];
    closure.assign(kernel.begin(), kernel.end());
    EpsClosure(nfa_, &closure, &mark, ++stamp);
    auto [si, sfresh] = sets.Intern(closure);
    const std::int32_t id = base + si;
    state_of_kernel.push_back(id);
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
  for (std::int32_t i = 0; i < sets.size(); ++i) {
    if (static_cast<std::int32_t>(dstates_.size()) > options_.max_states) {
      return Status(StatusCode::kResourceLimit,
                    "grammar automaton exceeds max_states (" +
                        std::to_string(options_.max_states) + ") in rule '" +
                        rules_[rule].info.name + "'");
    }
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
    std::vector<DState::ByteRange> bytes;
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
    std::vector<std::pair<std::int32_t, std::int32_t>> nts, sps;
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
    d.bytes = std::move(bytes);
    d.nts = std::move(nts);
    d.sps = std::move(sps);
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
constexpr std::size_t kSharedLoweringBytes = std::size_t{64} << 20;  // bound on the DFA cache

std::shared_ptr<const SharedDfa> SharedRanges(const std::shared_ptr<const ByteDfa>& dfa) {
  static std::mutex mu;
  static auto* cache = new std::unordered_map<const ByteDfa*, std::shared_ptr<const SharedDfa>>;
  static std::size_t cached_bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache->find(dfa.get()); it != cache->end()) return it->second;
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
  static std::uint64_t serials = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache->find(dfa.get()); it != cache->end()) return it->second;
  if (cached_bytes + bytes <= kSharedLoweringBytes) {
    lowered->serial = ++serials;
    cache->emplace(dfa.get(), lowered);
    cached_bytes += bytes;
  }
  return lowered;
}

struct SharedKeyHash {
  std::size_t operator()(const std::vector<std::int32_t>& k) const {
    std::uint64_t h = 0x9e3779b97f4a7c15ull ^ k.size();
    for (std::int32_t v : k) h = (h ^ static_cast<std::uint32_t>(v)) * 0x100000001b3ull;
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};
constexpr std::size_t kSharedDfaNfaStates = 4096;       // larger NFAs are not keyed
constexpr std::size_t kSharedDfaBudgetStates = 1 << 16;  // all cached rule automata together
std::mutex shared_dfa_mu;
auto* shared_dfas =
    new std::unordered_map<std::vector<std::int32_t>, std::shared_ptr<const SharedDfa>, SharedKeyHash>;
std::size_t shared_dfa_states = 0;

void Lowering::AppendShared(std::int32_t rule, const SharedDfa& dfa,
                            std::span<const std::int32_t> refs) {
  const auto base = static_cast<std::int32_t>(dstates_.size());
  for (std::size_t i = 0; i + 1 < dfa.byte_begin.size(); ++i) {
    DState d;
    d.rule = rule;
    d.accepting = dfa.accepting[i] != 0;
    d.bytes.reserve(dfa.byte_begin[i + 1] - dfa.byte_begin[i]);
    for (std::uint32_t e = dfa.byte_begin[i]; e < dfa.byte_begin[i + 1]; ++e) {
      const auto& [lo, hi, to] = dfa.bytes[e];
      d.bytes.push_back({lo, hi, base + to});
    }
    for (std::uint32_t e = dfa.nt_begin[i]; e < dfa.nt_begin[i + 1]; ++e) {
      d.nts.emplace_back(refs[dfa.nts[e].first], base + dfa.nts[e].second);
    }
    std::sort(d.nts.begin(), d.nts.end());  // by rule, as Determinise leaves them
    dstates_.push_back(std::move(d));
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
    std::lock_guard<std::mutex> lock(shared_dfa_mu);
    if (auto it = shared_dfas->find(key); it != shared_dfas->end()) hit = it->second;
  }
  if (!hit) return false;
  AppendShared(rule, *hit, shared_refs_);
  return true;
}

void Lowering::StoreShared(std::size_t first_state) {
  if (!shared_keyed_) return;
  const std::size_t n = dstates_.size() - first_state;
  {
    std::lock_guard<std::mutex> lock(shared_dfa_mu);
    if (shared_dfa_states + n > kSharedDfaBudgetStates || shared_dfas->count(shared_key_)) return;
  }
  auto dfa = std::make_shared<SharedDfa>();
  const auto base = static_cast<std::int32_t>(first_state);  // the start (Determinise's first)
  for (std::size_t i = 0; i < n; ++i) {
    const DState& d = dstates_[first_state + i];
    dfa->accepting.push_back(d.accepting ? 1 : 0);
    for (const DState::ByteRange& b : d.bytes) dfa->bytes.push_back({b.lo, b.hi, b.to - base});
    dfa->byte_begin.push_back(static_cast<std::uint32_t>(dfa->bytes.size()));
    for (const auto& [r, to] : d.nts) {  // every rule edge of the DFA comes from the NFA's
      const auto ord = static_cast<std::int32_t>(
          std::find(shared_refs_.begin(), shared_refs_.end(), r) - shared_refs_.begin());
      dfa->nts.emplace_back(ord, to - base);
    }
    dfa->nt_begin.push_back(static_cast<std::uint32_t>(dfa->nts.size()));
  }
  std::lock_guard<std::mutex> lock(shared_dfa_mu);
  if (shared_dfa_states + n <= kSharedDfaBudgetStates &&
      shared_dfas->emplace(shared_key_, std::move(dfa)).second) {
    shared_dfa_states += n;
  }
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
    ranges.ForEach(s, [&](std::int32_t lo, std::int32_t hi, StateId t) {
      d.bytes.push_back({lo, hi, base + t});
    });
    dstates_.push_back(std::move(d));
  }
  rules_[rule].info.start = base + dfa.start;
}

Result<CfgProgram> Lowering::Run() {
  if (g_.root < 0 || g_.root >= static_cast<std::int32_t>(g_.rules.size())) {
    return Status(StatusCode::kInvalidGrammar, "the grammar has no root rule");
  }
  for (const grammar::Rule& r : g_.rules) {
    PendingRule pr;
    pr.info.kind = CfgProgram::RuleKind::kDfa;
    pr.info.name = r.name;
    pr.body = r.body;
    rules_.push_back(std::move(pr));
  }
  // Rules may be appended (counters, their children) while lowering: index loop.
  for (std::size_t r = 0; r < rules_.size(); ++r) {
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
      if (static_cast<std::int32_t>(dstates_.size()) > options_.max_states) {
        return Status(StatusCode::kResourceLimit,
                      "grammar automaton exceeds max_states (" +
                          std::to_string(options_.max_states) + ")");
      }
      continue;
    }
    nfa_live_ = 0;
    std::int32_t start = NewState();
    std::int32_t end;
    LOCKSTEP_RETURN_IF_ERROR(Build(rules_[r].body, start, &end, 0));

    if (overflow_) {
      return Status(StatusCode::kResourceLimit,
                    "grammar automaton exceeds max_states (" +
                        std::to_string(options_.max_states) + ")");
    }
    const bool shared = options_.reuse_shared_rules && r < g_.rules.size() && g_.rules[r].shared;
    if (shared && LowerShared(static_cast<std::int32_t>(r), start, end)) {
      if (static_cast<std::int32_t>(dstates_.size()) > options_.max_states) {
        return Status(StatusCode::kResourceLimit,
                      "grammar automaton exceeds max_states (" +
                          std::to_string(options_.max_states) + ")");
      }
      continue;
    }
    const std::size_t first_state = dstates_.size();
    LOCKSTEP_RETURN_IF_ERROR(Determinise(static_cast<std::int32_t>(r), start, end));
    if (shared) StoreShared(first_state);
  }

  CfgProgram p;
  const std::int32_t nr = static_cast<std::int32_t>(rules_.size());
  const std::int32_t ns = static_cast<std::int32_t>(dstates_.size());
  for (auto& r : rules_) p.rules.push_back(r.info);
  p.root = g_.root;
  p.special_tokens = specials_;

  // Nullable: fixpoint.
  std::vector<std::uint8_t> null_state(ns, 0);
  bool changed = true;
  while (changed) {
    changed = false;
    for (std::int32_t s = ns - 1; s >= 0; --s) {
      if (null_state[s]) continue;
      bool v = dstates_[s].accepting;
      for (auto& [r, t] : dstates_[s].nts) v = v || (p.rules[r].nullable && null_state[t]);
      if (v) {
        null_state[s] = 1;
        changed = true;
      }
    }
    for (std::int32_t r = 0; r < nr; ++r) {
      auto& ri = p.rules[r];
      bool v = ri.kind == CfgProgram::RuleKind::kDfa ? null_state[ri.start] != 0
                                                    : (ri.min == 0 || p.rules[ri.child].nullable);
      if (v && !ri.nullable) {
        ri.nullable = true;
        changed = true;
      }
    }
  }
  // Productive: fixpoint.
  std::vector<std::uint8_t> prod_state(ns, 0), prod_rule(nr, 0);
  changed = true;
  while (changed) {
    changed = false;
    for (std::int32_t s = ns - 1; s >= 0; --s) {
      if (prod_state[s]) continue;
      const DState& d = dstates_[s];
      bool v = d.accepting;
      for (const auto& br : d.bytes) v = v || prod_state[br.to];
      for (auto& [i, t] : d.sps) v = v || prod_state[t];
      for (auto& [r, t] : d.nts) v = v || (prod_rule[r] && prod_state[t]);
      if (v) {
        prod_state[s] = 1;
        changed = true;
      }
    }
    for (std::int32_t r = 0; r < nr; ++r) {
      if (prod_rule[r]) continue;
      const auto& ri = p.rules[r];
      bool v = ri.kind == CfgProgram::RuleKind::kDfa ? prod_state[ri.start] != 0
                                                    : (ri.min == 0 || prod_rule[ri.child]);
      if (v) {
        prod_rule[r] = 1;
        changed = true;
      }
    }
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

  // Global tables with byte classes (intervals between transition boundaries).
  std::array<bool, 257> boundary{};
  boundary[0] = true;
  for (const DState& d : dstates_) {
    // Class boundaries: where the (productive) target changes between adjacent bytes.
    std::int32_t prev_hi = -1, prev_to = -1;
    for (const auto& br : d.bytes) {
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
    p.byte_class[b] = static_cast<std::uint8_t>(cls);
  }
  p.num_classes = cls + 1;
  p.num_states = ns;
  p.next.assign(static_cast<std::size_t>(ns) * p.num_classes, CfgProgram::kDead);
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
    for (const auto& br : d.bytes) {
      if (!prod_state[br.to]) continue;
      for (std::int32_t c = p.byte_class[br.lo]; c <= p.byte_class[br.hi]; ++c) {
        p.next[static_cast<std::size_t>(s) * p.num_classes + c] = br.to;
      }
      p.has_bytes[s] = 1;
      for (std::int32_t w = br.lo >> 6; w <= br.hi >> 6; ++w) {  // bits lo..hi
        const std::int32_t a = std::max(br.lo, w * 64) - w * 64;
        const std::int32_t b = std::min(br.hi, w * 64 + 63) - w * 64;
        p.byte_first[s][w] |= (~std::uint64_t{0} >> (63 - b)) & (~std::uint64_t{0} << a);
      }
    }
    for (auto& [r, t] : d.nts) {
      if (prod_rule[r] && prod_state[t]) p.nt_edges.emplace_back(r, t);
    }
    p.nt_begin[s + 1] = static_cast<std::int32_t>(p.nt_edges.size());
    for (auto& [i, t] : d.sps) {
      if (prod_state[t]) p.sp_edges.emplace_back(i, t);
    }
    p.sp_begin[s + 1] = static_cast<std::int32_t>(p.sp_edges.size());
  }
  return p;
}

}  // namespace

Result<CfgProgram> CompileCfg(const grammar::Grammar& g, const Vocabulary& vocab,
                              const CfgCompileOptions& options) {
  Lowering lowering(g, vocab, options);
  return lowering.Run();
}

}  // namespace lockstep
