#include "automata/cfg/position_key.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "automata/cfg/word_kernels.h"
#include "grammar/base/hash_mix.h"

namespace lockstep {
namespace {

// Two independent 64-bit lanes over a stream of words. Every list in a stream is preceded by its
// length and every reference by a tag, so a stream reads back one way only.
struct Acc {
  std::uint64_t a = 0x243F6A8885A308D3ull, b = 0x13198A2E03707344ull;
  void Add(std::uint64_t x) {
    a = MixBits64(a ^ (x + 0x9E3779B97F4A7C15ull));
    b = MixBits64(b + x * 0xC2B2AE3D27D4EB4Full + 0x165667B19E3779F9ull);
  }
};

enum : std::uint64_t {
  kTagAcyclic = 0xA1,
  kTagCyclic = 0xC1,
  kTagCounter = 0xC0,
  kTagComponent = 0xBA,
  kTagRank = 0xBB,
  kTagWholeRule = 0xB7,
  kTagKey = 0x9051,
  kTagSource = 0x5C,
  kTagMember = 1,  // (a member of a cycle)
  kTagExit = 2,
};

// Two lanes of 64x64->128 multiply-folds over the program's arrays, each array preceded by
// its length in bytes.
struct Fingerprinter {
  std::uint64_t a = 0xA0761D6478BD642Full, b = 0xE7037ED1A0B428DBull;
  static std::uint64_t Mum(std::uint64_t x, std::uint64_t y) {
    const unsigned __int128 r = static_cast<unsigned __int128>(x) * y;
    return static_cast<std::uint64_t>(r) ^ static_cast<std::uint64_t>(r >> 64);
  }
  void Block(std::uint64_t x, std::uint64_t y) {
    a = Mum(x ^ 0x8EBC6AF09C88C6E3ull, y ^ a);
    b = Mum(y ^ 0x589965CC75374CC3ull, x ^ b ^ 0x1D8E4E27C47D124Full);
  }
  void Bytes(const void* data, std::size_t n) {
    Block(n, 0x9E3779B97F4A7C15ull);
    const unsigned char* c = static_cast<const unsigned char*>(data);
    std::size_t i = 0;
    if (n >= 256) {
      // Four lanes of 16 bytes, each its own pair of chains, folded in at the end: the chains'
      // multiplies overlap (one lane is latency-bound at a few bytes a cycle, and a big
      // program's transition table is megabytes).
      Fingerprinter lane[4];
      for (int l = 0; l < 4; ++l) lane[l].Block(a + l, b ^ (0x9E3779B97F4A7C15ull * (l + 1)));
      for (; i + 64 <= n; i += 64) {
        for (int l = 0; l < 4; ++l) {
          std::uint64_t x, y;
          std::memcpy(&x, c + i + 16 * l, 8);
          std::memcpy(&y, c + i + 16 * l + 8, 8);
          lane[l].Block(x, y);
        }
      }
      for (int l = 0; l < 4; ++l) Block(lane[l].a, lane[l].b);
    }
    for (; i + 16 <= n; i += 16) {
      std::uint64_t x, y;
      std::memcpy(&x, c + i, 8);
      std::memcpy(&y, c + i + 8, 8);
      Block(x, y);
    }
    if (i < n) {
      unsigned char tail[16] = {};
      std::memcpy(tail, c + i, n - i);
      std::uint64_t x, y;
      std::memcpy(&x, tail, 8);
      std::memcpy(&y, tail + 8, 8);
      Block(x, y);
    }
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Bytes(v.data(), v.size() * sizeof(T));
  }
};

// Tarjan's strongly connected components of the graph whose node v has successors
// succ[begin[v] .. begin[v + 1]), iteratively (no recursion however long a chain). Calls
// component(members) once per component, after every component it reaches; `members` holds the
// component's nodes (in no particular order) and may be reordered by the callee.
using position_key_detail::SccScratch;

template <typename Component>
void ForEachComponent(std::int32_t n, const std::vector<std::int32_t>& begin,
                      const std::vector<std::int32_t>& succ, SccScratch& sc,
                      Component&& component) {
  sc.index.assign(n, -1);
  sc.low.assign(n, 0);
  sc.on_stack.assign(n, 0);
  sc.stack.clear();
  sc.call.clear();
  std::int32_t counter = 0;
  auto enter = [&](std::int32_t v) {
    sc.index[v] = sc.low[v] = counter++;
    sc.stack.push_back(v);
    sc.on_stack[v] = 1;
    sc.call.push_back({v, begin[v]});
  };
  for (std::int32_t root = 0; root < n; ++root) {
    if (sc.index[root] >= 0) continue;
    enter(root);
    while (!sc.call.empty()) {
      auto& [v, next] = sc.call.back();
      if (next < begin[v + 1]) {
        const std::int32_t w = succ[next++];
        if (sc.index[w] < 0) {
          enter(w);
        } else if (sc.on_stack[w]) {
          sc.low[v] = std::min(sc.low[v], sc.index[w]);
        }
        continue;
      }
      const std::int32_t fv = v;
      sc.call.pop_back();
      if (!sc.call.empty()) {
        sc.low[sc.call.back().first] = std::min(sc.low[sc.call.back().first], sc.low[fv]);
      }
      if (sc.low[fv] != sc.index[fv]) continue;
      sc.members.clear();
      std::int32_t w;
      do {
        w = sc.stack.back();
        sc.stack.pop_back();
        sc.on_stack[w] = 0;
        sc.members.push_back(w);
      } while (w != fv);
      component(sc.members);
    }
  }
}

}  // namespace

PositionKeyer::PositionKeyer(const CfgProgram* program) : p_(program) {
  for (int b = 0; b < 256;) {
    const std::int32_t c = p_->byte_class[b];
    int e = b;
    while (e + 1 < 256 && p_->byte_class[e + 1] == c) ++e;
    class_runs_.push_back({b, e, c});
    b = e + 1;
  }
  const std::int32_t nr = p_->NumRules();
  rule_begin_.assign(nr + 1, 0);
  for (StateId s = 0; s < p_->num_states; ++s) ++rule_begin_[p_->state_rule[s] + 1];
  for (std::int32_t r = 0; r < nr; ++r) rule_begin_[r + 1] += rule_begin_[r];
  rule_states_.resize(p_->num_states);
  std::vector<std::int32_t> fill(rule_begin_.begin(), rule_begin_.end() - 1);
  local_.resize(p_->num_states);
  for (StateId s = 0; s < p_->num_states; ++s) {
    const std::int32_t r = p_->state_rule[s];
    local_[s] = fill[r] - rule_begin_[r];
    rule_states_[fill[r]++] = s;
  }
  hash_.assign(p_->num_states, H{});
  budget_ = kBudgetBase + kBudgetPerState * (static_cast<std::int64_t>(p_->num_states) +
                                             static_cast<std::int64_t>(p_->nt_edges.size()));
  rule_state_.assign(nr, 0);
  counter_hash_.assign(nr, H{});
  class_bytes_begin_.assign(p_->num_classes + 1, 0);
  for (const auto& r : class_runs_) ++class_bytes_begin_[r[2] + 1];
  for (std::int32_t c = 0; c < p_->num_classes; ++c)
    class_bytes_begin_[c + 1] += class_bytes_begin_[c];
  class_bytes_.resize(class_runs_.size());
  std::vector<std::int32_t> at(class_bytes_begin_.begin(), class_bytes_begin_.end() - 1);
  for (const auto& r : class_runs_) {
    class_bytes_[at[r[2]]++] = {static_cast<std::uint8_t>(r[0]), static_cast<std::uint8_t>(r[1])};
  }
  FindComponents();
}

void PositionKeyer::FindComponents() {
  const std::int32_t nr = p_->NumRules();
  // Each rule's distinct callees.
  callee_begin_.assign(1, 0);
  std::vector<std::int32_t> seen(nr, -1);
  for (std::int32_t r = 0; r < nr; ++r) {
    auto add = [&](std::int32_t c) {
      if (seen[c] == r) return;
      seen[c] = r;
      callees_.push_back(c);
    };
    const CfgProgram::RuleInfo& info = p_->rules[r];
    if (info.kind == CfgProgram::RuleKind::kCounter) {
      add(info.child);
    } else {
      for (std::int32_t i = rule_begin_[r]; i < rule_begin_[r + 1]; ++i) {
        const StateId u = rule_states_[i];
        for (std::int32_t k = p_->nt_begin[u]; k < p_->nt_begin[u + 1]; ++k)
          add(p_->nt_edges[k].first);
      }
    }
    callee_begin_.push_back(static_cast<std::int32_t>(callees_.size()));
  }
  // Components numbered as they are finished, after every component they reach: callees get
  // lower numbers.
  rule_comp_.assign(nr, -1);
  rule_rank_.assign(nr, 0);
  comp_begin_.assign(1, 0);
  ForEachComponent(nr, callee_begin_, callees_, scratch_.scc, [&](std::vector<std::int32_t>& members) {
    const std::int32_t c = static_cast<std::int32_t>(comp_begin_.size()) - 1;
    std::sort(members.begin(), members.end());
    std::int64_t work = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const std::int32_t r = members[i];
      rule_comp_[r] = c;
      rule_rank_[r] = static_cast<std::int32_t>(i);
      comp_rules_.push_back(r);
      if (p_->rules[r].kind != CfgProgram::RuleKind::kCounter)
        work += PassWork(rule_begin_[r + 1] - rule_begin_[r]);
    }
    comp_work_.push_back(work);
    comp_begin_.push_back(static_cast<std::int32_t>(comp_rules_.size()));
  });
  const std::size_t nc = comp_work_.size();
  over_bounded_.assign(nc, 0);
  comp_mark_.assign(nc, 0);
}

void PositionKeyer::RunsOf(StateId s, std::vector<Run>& runs) const {
  runs.clear();
  const TransitionRow row = p_->Row(s);
  constexpr int kSparseBytes = 48;
  if (!p_->byte_first.empty()) {
    // The bytes with a transition are known: a state with few of them (most states: a key's
    // next letter, a digit, a quote) reads their runs off the bits in byte order, without a
    // scan of the classes (a tool schema's program has 50-150 of them).
    const std::array<std::uint64_t, 4>& bits = p_->byte_first[s];
    const int live = cfg_words::CountOnes64(bits[0]) + cfg_words::CountOnes64(bits[1]) +
                     cfg_words::CountOnes64(bits[2]) + cfg_words::CountOnes64(bits[3]);
    if (live <= kSparseBytes) {
      for (int w = 0; w < 4; ++w) {
        for (std::uint64_t m = bits[w]; m != 0; m &= m - 1) {
          const int b = w * 64 + std::countr_zero(m);
          const StateId t = row[p_->byte_class[b]];
          if (!runs.empty() && runs.back().hi + 1 == b && runs.back().target == t) {
            runs.back().hi = static_cast<std::uint8_t>(b);
          } else {
            runs.push_back({static_cast<std::uint8_t>(b), static_cast<std::uint8_t>(b), t});
          }
        }
      }
      return;
    }
  }
  // Most states have a few live classes: their byte runs, sorted and merged. Otherwise every
  // class run in byte order.
  constexpr std::int32_t kSparse = 24;
  std::int32_t live[kSparse];
  std::int32_t nlive = 0;
  for (std::int32_t c = 0; c < p_->num_classes && nlive <= kSparse; ++c) {
    if (row[c] == CfgProgram::kDead) continue;
    if (nlive < kSparse) live[nlive] = c;
    ++nlive;
  }
  if (nlive <= kSparse) {
    for (std::int32_t i = 0; i < nlive; ++i) {
      const std::int32_t c = live[i];
      for (std::int32_t k = class_bytes_begin_[c]; k < class_bytes_begin_[c + 1]; ++k) {
        runs.push_back({class_bytes_[k][0], class_bytes_[k][1], row[c]});
      }
    }
    std::sort(runs.begin(), runs.end(), [](const Run& x, const Run& y) { return x.lo < y.lo; });
    std::size_t out = 0;
    for (std::size_t i = 0; i < runs.size(); ++i) {
      if (out > 0 && runs[out - 1].hi + 1 == runs[i].lo && runs[out - 1].target == runs[i].target) {
        runs[out - 1].hi = runs[i].hi;
      } else {
        runs[out++] = runs[i];
      }
    }
    runs.resize(out);
    return;
  }
  // The class runs tile 0..255 in byte order: a run of bytes ends where the target changes.
  StateId prev = CfgProgram::kDead;
  int lo = 0;
  const std::size_t nr = class_runs_.size();
  for (std::size_t k = 0; k < nr; ++k) {
    const StateId t = row[class_runs_[k][2]];
    if (t == prev) continue;
    const int at = class_runs_[k][0];
    if (prev != CfgProgram::kDead) {
      runs.push_back({static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(at - 1), prev});
    }
    prev = t;
    lo = at;
  }
  if (prev != CfgProgram::kDead) runs.push_back({static_cast<std::uint8_t>(lo), 255, prev});
}

PositionKeyer::H& PositionKeyer::RuleHash(std::int32_t rule) {
  const CfgProgram::RuleInfo& r = p_->rules[rule];
  return r.kind == CfgProgram::RuleKind::kCounter ? counter_hash_[rule] : hash_[r.start];
}

PositionKeyer::H PositionKeyer::RuleRef(std::int32_t rule) {
  if (rule_comp_[rule] == current_comp_) {
    Acc acc;
    acc.Add(kTagRank);
    acc.Add(static_cast<std::uint64_t>(rule_rank_[rule]));
    return {acc.a, acc.b, false, true};
  }
  return RuleHash(rule);  // another component's, hashed before (callees first)
}

bool PositionKeyer::HashFrom(std::int32_t target, std::int64_t max_work, std::int64_t rule_work) {
  const std::int32_t tc = rule_comp_[target];
  const bool bounded = max_work != INT64_MAX;
  if (bounded && over_bounded_[tc]) return false;
  // The components to hash: those reachable from the target's and not hashed yet.
  if (++generation_ == 0) {
    std::fill(comp_mark_.begin(), comp_mark_.end(), 0);
    generation_ = 1;
  }
  todo_.clear();
  search_.assign(1, tc);
  comp_mark_[tc] = generation_;
  std::int64_t total = 0;
  const std::int64_t rule_limit = rule_work < 0 ? max_work : rule_work;
  while (!search_.empty()) {
    const std::int32_t c = search_.back();
    search_.pop_back();
    if (bounded && over_bounded_[c]) {
      over_bounded_[tc] = 1;
      return false;
    }
    todo_.push_back(c);
    total += comp_work_[c];
    if (bounded && total > rule_limit) {
      // More than a whole bound: bounded calls give the target up for good.
      over_bounded_[tc] = 1;
      return false;
    }
    for (std::int32_t i = comp_begin_[c]; i < comp_begin_[c + 1]; ++i) {
      const std::int32_t r = comp_rules_[i];
      for (std::int32_t k = callee_begin_[r]; k < callee_begin_[r + 1]; ++k) {
        const std::int32_t callee = callees_[k];
        const std::int32_t cc = rule_comp_[callee];
        if (comp_mark_[cc] == generation_ || rule_state_[callee] == 2) continue;
        comp_mark_[cc] = generation_;
        search_.push_back(cc);
      }
    }
  }
  if (bounded && total > max_work) return false;  // put off: a later call has more left
  // Callees first: components are numbered in that order.
  std::sort(todo_.begin(), todo_.end());
  for (const std::int32_t c : todo_) HashComponent(c);
  return true;
}

void PositionKeyer::HashComponent(std::int32_t c) {
  const std::int32_t b = comp_begin_[c], e = comp_begin_[c + 1];
  auto set_none = [&] {
    for (std::int32_t i = b; i < e; ++i) {
      const std::int32_t rule = comp_rules_[i];
      counter_hash_[rule] = H{0, 0, true};
      for (std::int32_t k = rule_begin_[rule]; k < rule_begin_[rule + 1]; ++k)
        hash_[rule_states_[k]] = H{0, 0, true};
      rule_state_[rule] = 2;
    }
  };
  if (work_ + comp_work_[c] > budget_) {
    // Out of budget: no key for this component, for good (its callers get none either).
    work_ += comp_work_[c];
    set_none();
    return;
  }
  current_comp_ = c;
  // Each rule with calls to its own component described by rank (provisionally).
  for (std::int32_t i = b; i < e; ++i) {
    const std::int32_t rule = comp_rules_[i];
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    if (r.kind != CfgProgram::RuleKind::kCounter) {
      Pass(rule);
      continue;
    }
    const H child = RuleRef(r.child);
    if (child.none) {
      counter_hash_[rule] = child;
      continue;
    }
    Acc acc;
    acc.Add(kTagCounter);
    acc.Add(static_cast<std::uint32_t>(r.min));
    acc.Add(static_cast<std::uint32_t>(r.max));
    acc.Add(child.a);
    acc.Add(child.b);
    counter_hash_[rule] = {acc.a, acc.b, false, child.rec};
  }
  current_comp_ = -1;
  // The component's hash: its rules' start descriptions in rank order. A state that refers to
  // the component (`"(" . word ")"` in `word ::= [a-z]+ | "(" word ")"` and in
  // `item ::= [a-z]* | "(" item ")"` read the same) adds it.
  bool recursive = false, start_none = false;
  Acc whole;
  whole.Add(kTagComponent);
  whole.Add(static_cast<std::uint64_t>(e - b));
  for (std::int32_t i = b; i < e; ++i) {
    const H& h = RuleHash(comp_rules_[i]);
    recursive |= h.rec;
    start_none |= h.none;
    if (h.none) {
      whole.Add(0);
    } else {
      whole.Add(h.a);
      whole.Add(h.b);
    }
  }
  if (recursive && start_none) {
    // A component whose rules' starts have no key: nothing referring to it has one.
    set_none();
    return;
  }
  for (std::int32_t i = b; i < e; ++i) {
    const std::int32_t rule = comp_rules_[i];
    rule_state_[rule] = 2;
    if (!recursive) continue;
    auto finish = [&](H& x) {
      if (x.none || !x.rec) return;
      Acc acc;
      acc.Add(kTagWholeRule);
      acc.Add(x.a);
      acc.Add(x.b);
      acc.Add(whole.a);
      acc.Add(whole.b);
      x = {acc.a, acc.b, false, false};
    };
    finish(counter_hash_[rule]);
    for (std::int32_t k = rule_begin_[rule]; k < rule_begin_[rule + 1]; ++k)
      finish(hash_[rule_states_[k]]);
  }
}

void PositionKeyer::Pass(std::int32_t rule) {
  const std::int32_t b = rule_begin_[rule], e = rule_begin_[rule + 1];
  const std::int32_t n = e - b;
  if (n > kMaxRuleStates) {
    work_ += PassWork(n);  // named by rank: a few operations a state
    // Too big to hash. A big format automaton, though, is copied unchanged from the process's
    // cache into every grammar, its states in the same order: named by the cache entry and the
    // state's rank (it has only byte edges).
    const std::uint64_t source = p_->rules[rule].shared_source;
    for (std::int32_t i = b; i < e; ++i) {
      if (source == 0) {
        hash_[rule_states_[i]] = H{0, 0, true};
        continue;
      }
      Acc acc;
      acc.Add(kTagSource);
      acc.Add(source);
      acc.Add(static_cast<std::uint64_t>(i - b));
      hash_[rule_states_[i]] = H{acc.a, acc.b, false};
    }
    return;
  }
  work_ += PassWork(n);
  PassScratch& sc = scratch_;
  // Each state's byte runs and successors once, as local indices.
  auto local = [&](StateId t) { return local_[t]; };
  PassData& d = sc.d;
  d.states = rule_states_.data() + b;
  d.n = n;
  d.runs.clear();
  d.succ.clear();
  d.runs_begin.assign(1, 0);
  d.succ_begin.assign(1, 0);
  std::vector<Run>& runs = sc.runs;
  for (std::int32_t i = 0; i < n; ++i) {
    const StateId u = rule_states_[b + i];
    RunsOf(u, runs);
    d.runs.insert(d.runs.end(), runs.begin(), runs.end());
    d.runs_begin.push_back(static_cast<std::int32_t>(d.runs.size()));
    for (const Run& r : runs) d.succ.push_back(local(r.target));
    for (std::int32_t k = p_->nt_begin[u]; k < p_->nt_begin[u + 1]; ++k)
      d.succ.push_back(local(p_->nt_edges[k].second));
    for (std::int32_t k = p_->sp_begin[u]; k < p_->sp_begin[u + 1]; ++k)
      d.succ.push_back(local(p_->sp_edges[k].second));
    d.succ_begin.push_back(static_cast<std::int32_t>(d.succ.size()));
  }
  // A component of states is finished only after every component it reaches, so its exits are
  // hashed when it is.
  std::vector<StateId>& members = sc.members;
  ForEachComponent(n, d.succ_begin, d.succ, sc.scc, [&](std::vector<std::int32_t>& local_members) {
    const std::int32_t fv = local_members[0];
    const bool self_loop =
        local_members.size() == 1 &&
        std::find(d.succ.begin() + d.succ_begin[fv], d.succ.begin() + d.succ_begin[fv + 1], fv) !=
            d.succ.begin() + d.succ_begin[fv + 1];
    if (local_members.size() == 1 && !self_loop) {
      const StateId u = rule_states_[b + fv];
      hash_[u] = Acyclic(u, d);
      return;
    }
    members.clear();
    for (const std::int32_t w : local_members) members.push_back(rule_states_[b + w]);
    if (members.size() > kMaxCycle) {
      for (StateId m : members) hash_[m] = H{0, 0, true};
    } else {
      std::sort(members.begin(), members.end());
      Cyclic(members, d);
    }
  });
}

std::span<const PositionKeyer::Run> PositionKeyer::PassData::RunsOf(std::int32_t i) const {
  return {runs.data() + runs_begin[i], runs.data() + runs_begin[i + 1]};
}

PositionKeyer::H PositionKeyer::Acyclic(StateId s, const PassData& d) {
  if (p_->sp_begin[s] != p_->sp_begin[s + 1]) return {0, 0, true};
  H out;
  Acc acc;
  const std::span<const Run> runs = d.RunsOf(local_[s]);
  acc.Add(kTagAcyclic);
  acc.Add(std::uint64_t{p_->accepting[s]} << 32 | runs.size());
  for (const Run& r : runs) {
    const H& t = hash_[r.target];
    if (t.none) return t;
    out.rec |= t.rec;
    acc.Add(std::uint64_t{r.lo} << 8 | r.hi);
    acc.Add(t.a);
    acc.Add(t.b);
  }
  const std::int32_t ne = p_->nt_begin[s + 1] - p_->nt_begin[s];
  acc.Add(static_cast<std::uint64_t>(ne));
  if (ne > 0) {
    // (No allocation for the usual few edges: a fill may key hundreds of states.)
    using Edge = std::array<std::uint64_t, 4>;
    constexpr std::int32_t kSmall = 8;
    Edge small[kSmall];
    std::vector<Edge> big;
    if (ne > kSmall) big.resize(static_cast<std::size_t>(ne));
    Edge* edges = ne > kSmall ? big.data() : small;
    for (std::int32_t k = p_->nt_begin[s], i = 0; k < p_->nt_begin[s + 1]; ++k, ++i) {
      const H hr = RuleRef(p_->nt_edges[k].first);
      const H& ht = hash_[p_->nt_edges[k].second];
      if (hr.none) return hr;
      if (ht.none) return ht;
      out.rec |= hr.rec || ht.rec;
      edges[i] = {hr.a, hr.b, ht.a, ht.b};
    }
    std::sort(edges, edges + ne);
    for (std::int32_t i = 0; i < ne; ++i) {
      for (std::uint64_t w : edges[i]) acc.Add(w);
    }
  }
  out.a = acc.a;
  out.b = acc.b;
  return out;
}

void PositionKeyer::Cyclic(const std::vector<StateId>& members, const PassData& d) {
  // Members (sorted by state number) are referred to by their rank; exits by their hashes. The
  // rank order is the lowering's, which is the same for the same automaton in two grammars.
  H out;
  auto rank = [&](StateId t) {
    const auto it = std::lower_bound(members.begin(), members.end(), t);
    return it != members.end() && *it == t ? static_cast<std::int64_t>(it - members.begin()) : -1;
  };
  Acc acc;
  acc.Add(kTagCyclic);
  acc.Add(members.size());
  auto ref = [&](StateId t) -> bool {
    const std::int64_t r = rank(t);
    if (r >= 0) {
      acc.Add(kTagMember);
      acc.Add(static_cast<std::uint64_t>(r));
      return true;
    }
    const H& h = hash_[t];
    if (h.none) return false;
    out.rec |= h.rec;
    acc.Add(kTagExit);
    acc.Add(h.a);
    acc.Add(h.b);
    return true;
  };
  using Edge = PassScratch::Edge;
  std::vector<Edge>& edges = scratch_.edges;
  bool none = false;
  for (StateId u : members) {
    if (p_->sp_begin[u] != p_->sp_begin[u + 1]) {
      none = true;
      break;
    }
    const std::span<const Run> runs = d.RunsOf(local_[u]);
    acc.Add(std::uint64_t{p_->accepting[u]} << 32 | runs.size());
    for (const Run& r : runs) {
      acc.Add(std::uint64_t{r.lo} << 8 | r.hi);
      if (!ref(r.target)) none = true;
    }
    edges.clear();
    for (std::int32_t k = p_->nt_begin[u]; k < p_->nt_begin[u + 1]; ++k) {
      const H hr = RuleRef(p_->nt_edges[k].first);
      if (hr.none) none = true;
      out.rec |= hr.rec;
      edges.push_back({hr, p_->nt_edges[k].second});
    }
    if (none) break;
    // Sorted by the called rule's hash; equal rules keep their order (another order in another
    // grammar only misses a match).
    // (Few edges: an insertion sort, stable without the buffer std::stable_sort allocates.)
    auto before = [](const Edge& x, const Edge& y) {
      return std::tie(x.rule.a, x.rule.b) < std::tie(y.rule.a, y.rule.b);
    };
    if (edges.size() > 16) {
      std::stable_sort(edges.begin(), edges.end(), before);
    } else {
      for (std::size_t i = 1; i < edges.size(); ++i) {
        const Edge x = edges[i];
        std::size_t j = i;
        for (; j > 0 && before(x, edges[j - 1]); --j) edges[j] = edges[j - 1];
        edges[j] = x;
      }
    }
    acc.Add(edges.size());
    for (const Edge& x : edges) {
      acc.Add(x.rule.a);
      acc.Add(x.rule.b);
      if (!ref(x.target)) none = true;
    }
    if (none) break;
  }
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (none) {
      hash_[members[i]] = H{0, 0, true};
      continue;
    }
    Acc m = acc;
    m.Add(i);
    hash_[members[i]] = {m.a, m.b, false, out.rec};
  }
}

PositionKeyer::PositionKeyer(const PositionKeyer& o, const CfgProgram* program)
    : p_(program),
      class_runs_(o.class_runs_),
      rule_begin_(o.rule_begin_),
      rule_states_(o.rule_states_),
      local_(o.local_),
      hash_(o.hash_),
      rule_state_(o.rule_state_),
      counter_hash_(o.counter_hash_),
      callee_begin_(o.callee_begin_),
      callees_(o.callees_),
      rule_comp_(o.rule_comp_),
      rule_rank_(o.rule_rank_),
      comp_begin_(o.comp_begin_),
      comp_rules_(o.comp_rules_),
      comp_work_(o.comp_work_),
      over_bounded_(o.over_bounded_),
      comp_mark_(o.comp_mark_.size(), 0),
      class_bytes_begin_(o.class_bytes_begin_),
      class_bytes_(o.class_bytes_),
      work_(o.work_),
      budget_(o.budget_) {}

std::int64_t PositionKeyer::Bytes() const {
  return static_cast<std::int64_t>(
      sizeof(*this) + class_runs_.capacity() * sizeof(class_runs_[0]) +
      (rule_begin_.capacity() + rule_states_.capacity() + local_.capacity() +
       class_bytes_begin_.capacity()) * 4 +
      (hash_.capacity() + counter_hash_.capacity()) * sizeof(H) + rule_state_.capacity() +
      (callee_begin_.capacity() + callees_.capacity() + rule_comp_.capacity() +
       rule_rank_.capacity() + comp_begin_.capacity() + comp_rules_.capacity() +
       comp_mark_.capacity()) * 4 +
      comp_work_.capacity() * 8 + over_bounded_.capacity() +
      class_bytes_.capacity() * 2);
}

PositionKey ProgramFingerprint(const CfgProgram& p) {
  Fingerprinter fp;
  const std::int64_t head[4] = {p.num_states, p.num_classes, p.root, p.NumRules()};
  fp.Bytes(head, sizeof head);
  fp.Bytes(p.byte_class.data(), p.byte_class.size());
  fp.Bytes(p.next.data(), p.next.ByteSize());
  fp.Vec(p.accepting);
  fp.Vec(p.state_rule);
  fp.Vec(p.nt_begin);
  std::vector<std::int32_t> flat;
  flat.reserve(2 * std::max(p.nt_edges.size(), p.sp_edges.size()));
  for (const auto& [r, t] : p.nt_edges) flat.insert(flat.end(), {r, t});
  fp.Vec(flat);
  fp.Vec(p.sp_begin);
  flat.clear();
  for (const auto& [i, t] : p.sp_edges) flat.insert(flat.end(), {i, t});
  fp.Vec(flat);
  std::vector<std::uint64_t> rules;
  rules.reserve(p.rules.size() * 4);
  for (const CfgProgram::RuleInfo& r : p.rules) {
    rules.push_back(static_cast<std::uint64_t>(r.kind) << 32 | static_cast<std::uint32_t>(r.start));
    rules.push_back(static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.child)) << 32 |
                    static_cast<std::uint32_t>(r.min));
    rules.push_back(static_cast<std::uint64_t>(static_cast<std::uint32_t>(r.max)) << 1 |
                    (r.nullable ? 1 : 0));
    rules.push_back(r.shared_source);
  }
  fp.Vec(rules);
  return {MixBits64(fp.a), MixBits64(fp.b ^ 0x243F6A8885A308D3ull)};
}

std::optional<PositionKey> PositionKeyer::KnownKey(StateId s,
                                                   const std::array<std::uint64_t, 4>& follow) const {
  const H& h = hash_[s];
  if (h.none) return std::nullopt;
  Acc acc;
  acc.Add(kTagKey);
  acc.Add(h.a);
  acc.Add(h.b);
  for (std::uint64_t w : follow) acc.Add(w);
  return PositionKey{acc.a, acc.b};
}

std::optional<PositionKey> PositionKeyer::Key(StateId s,
                                              const std::array<std::uint64_t, 4>& follow,
                                              std::int64_t max_work, std::int64_t rule_work) {
  const std::int32_t rule = p_->state_rule[s];
  if (rule_state_[rule] != 2 && !HashFrom(rule, max_work, rule_work)) return std::nullopt;
  return KnownKey(s, follow);
}

}  // namespace lockstep
