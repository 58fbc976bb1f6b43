#include "automata/cfg/earley.h"

#include <algorithm>
#include <bit>

namespace lockstep {
namespace {

constexpr std::size_t kLinearLimit = 24;
// An origin set larger than this, completed into, gets an index of its waiting items
// (SetMeta::waiting) instead of a scan per completion.
constexpr std::size_t kIndexWaiting = 64;
// ...once its scans have passed over this many times its size in items that were not waiting
// (building the index costs a few scans).
constexpr std::size_t kWasteBeforeIndex = 4;

inline std::uint64_t ItemHash(const EarleyItem& it) {
  std::uint64_t h = static_cast<std::uint32_t>(it.rule) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint32_t>(it.state) * 0xC2B2AE3D27D4EB4Full;
  h ^= static_cast<std::uint32_t>(it.origin + 1) * 0x165667B19E3779F9ull;
  return h ^ (h >> 29);
}
inline bool SameItem(const EarleyItem& a, const EarleyItem& b) {
  return a.rule == b.rule && a.state == b.state && a.origin == b.origin;
}

std::uint64_t KeyHash(const std::vector<std::int32_t>& key) {
  std::uint64_t h = 0x84222325CBF29CE4ull ^ key.size();
  for (std::int32_t x : key) {
    h ^= static_cast<std::uint32_t>(x);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return h;
}

// Past this many scanned items the quick test for a repeated (rule, state) is skipped and the
// items are grouped directly; each group's members are checked against at most this many
// candidates (the largest keys), so a wide group costs linear work, not quadratic.
constexpr std::size_t kPairwiseItems = 6;
constexpr std::size_t kQuickFilterItems = 32;
constexpr std::size_t kSubsumeCandidates = 8;

}  // namespace

EarleyParser::EarleyParser(const CfgProgram* program, std::int32_t max_depth,
                           std::int64_t max_step_items)
    : p_(program), max_depth_(max_depth), max_step_items_(max_step_items) {
  items_.reserve(256);
  set_begin_.reserve(64);
  meta_.reserve(64);
  // (ComputeLengthTables sizes max_min_chars exactly when the program has counted strings.)
  if (!p_->max_min_chars.empty()) {
    has_counted_ = true;  // (unique_rule_: counted rules keep their origins too)
    unique_rule_.assign(static_cast<std::size_t>(p_->NumRules()), 0);
    for (std::int32_t r = 0; r < p_->NumRules(); ++r) {
      if (p_->rules[r].max_chars >= 0) unique_rule_[r] = 1;
    }
  }
  if (p_->HasPatternStrings()) {
    has_patterns_ = true;  // (its rules keep their origins too)
    if (unique_rule_.empty()) unique_rule_.assign(static_cast<std::size_t>(p_->NumRules()), 0);
    for (std::int32_t r = 0; r < p_->NumRules(); ++r) {
      if (p_->rules[r].ecma_pattern) unique_rule_[r] = 1;
    }
  }
  // (ComputeItemAutomata sizes item_automaton_of exactly when the program has unique lists: no
  // scan of the rules for the others.)
  if (p_->item_automaton_of.empty()) return;
  for (std::int32_t r = 0; r < p_->NumRules(); ++r) {
    const std::int32_t item = p_->rules[r].unique_item;
    if (item < 0) continue;
    if (unique_rule_.empty()) unique_rule_.assign(static_cast<std::size_t>(p_->NumRules()), 0);
    unique_rule_[r] = unique_rule_[item] = 1;
    has_unique_ = true;
  }
  if (has_unique_) {
    const auto nr = static_cast<std::size_t>(p_->NumRules());
    for (std::int32_t r = 0; r < p_->NumRules(); ++r) {
      const std::int32_t item = p_->rules[r].unique_item;
      if (item < 0 || p_->rules[item].max_chars < 0) continue;
      if (counted_item_.empty()) counted_item_.assign(nr, 0);
      counted_item_[item] = 1;
      has_counted_items_ = true;
    }
    std::vector<std::int32_t> automaton_of_item(nr, -1);
    for (std::int32_t a = 0; a < p_->NumRules(); ++a) {
      if (p_->item_automaton_of[a] < 0) continue;
      automaton_of_item[p_->item_automaton_of[a]] = a;
      unique_rule_[a] = 1;  // (its items keep their origins too)
    }
    automaton_of_list_.assign(nr, -1);
    for (std::int32_t r = 0; r < p_->NumRules(); ++r) {
      const std::int32_t item = p_->rules[r].unique_item;
      if (item < 0 || automaton_of_item[item] < 0) continue;
      automaton_of_list_[r] = automaton_of_item[item];
      has_finite_ = true;
    }
  }
}

void EarleyParser::Reset() {
  items_.clear();
  set_begin_.clear();
  meta_.clear();
  origins_.clear();
  origin_free_.clear();
  std::fill(origin_buckets_.begin(), origin_buckets_.end(), -1);
  origin_heads_ = 0;
  depth_exceeded_ = false;
  items_exceeded_ = false;
  // Sized here, not at construction, so that a parser stays right whatever program it was
  // last reset for (CfgGrammar's WalkScratch drops its parsers when the grammar changes: it
  // keys them by the grammar's serial number, no longer by the program's address).
  if (predicted_.size() != static_cast<std::size_t>(p_->NumRules())) {
    predicted_.assign(static_cast<std::size_t>(p_->NumRules()), 0);
    set_stamp_ = 0;
  }
}

void EarleyParser::BeginSet() {
  cur_begin_ = items_.size();
  closure_end_ = cur_begin_;
  set_begin_.push_back(static_cast<std::int32_t>(cur_begin_));
  meta_.emplace_back();
  table_active_ = false;
  saturated_.clear();
  step_items_ = 0;
  unique_dropped_ = false;
  dead_lists_.clear();
  if (++set_stamp_ == 0) {  // (wrapped: forget every stamp)
    std::fill(predicted_.begin(), predicted_.end(), 0);
    set_stamp_ = 1;
  }
}

bool EarleyParser::EndSet() {
  if (items_.size() == cur_begin_) {
    set_begin_.pop_back();
    meta_.pop_back();
    return false;
  }
  return true;
}

void EarleyParser::PopTo(std::int32_t num_sets) {
  if (num_sets >= this->num_sets()) return;
  for (std::int32_t s = this->num_sets() - 1; s >= num_sets; --s) {
    for (std::int32_t e = meta_[s].origin_head; e >= 0; e = origins_[e].next_in_set) {
      if (origins_[e].rep == s) UnlinkOrigin(e);
      origin_free_.push_back(e);
    }
  }
  meta_.resize(num_sets);
  items_.resize(set_begin_[num_sets]);
  set_begin_.resize(num_sets);
  if (unique_list_.origin() >= num_sets) {
    unique_list_.Reset(-1);
  } else if (unique_list_.origin() >= 0) {
    unique_list_.PopTo(num_sets);
  }
  // The reads kept per set from an origin (string lengths, pattern strings) end where the sets do.
  auto cut = [num_sets](std::int32_t& origin, auto& reads) {
    if (origin >= num_sets) {
      origin = -1;
      reads.clear();
    } else if (origin >= 0 && reads.size() > static_cast<std::size_t>(num_sets - origin)) {
      reads.resize(static_cast<std::size_t>(num_sets - origin));
    }
  };
  cut(pattern_origin_, pattern_);
  cut(count_origin_, count_);
}

void EarleyParser::RebuildTable() {
  const std::size_t n = items_.size() - cur_begin_;
  std::size_t cap = 64;
  while (cap < 4 * n) cap <<= 1;
  table_.assign(cap, -1);
  const std::size_t m = cap - 1;
  for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
    std::size_t h = ItemHash(items_[i]) & m;
    while (table_[h] >= 0) h = (h + 1) & m;
    table_[h] = static_cast<std::int32_t>(i);
  }
  table_active_ = true;
}

void EarleyParser::Append(const EarleyItem& it) {
  items_.push_back(it);
  const std::size_t n = items_.size() - cur_begin_;
  if (!table_active_) {
    if (n > kLinearLimit) RebuildTable();
    return;
  }
  if (2 * n > table_.size()) {
    RebuildTable();
    return;
  }
  const std::size_t m = table_.size() - 1;
  std::size_t h = ItemHash(it) & m;
  while (table_[h] >= 0) h = (h + 1) & m;
  table_[h] = static_cast<std::int32_t>(items_.size() - 1);
}

void EarleyParser::Add(const EarleyItem& it) {
  if (!table_active_) {
    for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
      if (SameItem(items_[i], it)) return;
    }
    items_.push_back(it);
    if (items_.size() - cur_begin_ > kLinearLimit) RebuildTable();
    return;
  }
  std::size_t m = table_.size() - 1, h = ItemHash(it) & m;
  while (table_[h] >= 0) {
    if (SameItem(items_[table_[h]], it)) return;
    h = (h + 1) & m;
  }
  table_[h] = static_cast<std::int32_t>(items_.size());
  items_.push_back(it);
  if (2 * (items_.size() - cur_begin_) > table_.size()) RebuildTable();
}

// Counts saturate: for c1 < c2 both at or past SaturatesFrom, (C, c2, j) can only do what
// (C, c1, j) does, with fewer repetitions left (C^{0..max-c2} within C^{0..max-c1}, or with a
// nullable body C^{max-c2} within C^{max-c1}), and both are accepting. So each (C, j) keeps its
// smallest saturated count. An item lowered after Closure processed it has completed already
// (accepting either way); only its child may still need predicting (it was at max).
void EarleyParser::AddSaturated(const EarleyItem& it) {
  for (std::int32_t idx : saturated_) {
    EarleyItem& q = items_[idx];
    if (q.rule != it.rule || q.origin != it.origin) continue;
    if (q.state <= it.state) return;
    const std::int32_t old = q.state;
    q.state = it.state;  // (its slot in table_ stays put: saturated items never go through Add)
    const CfgProgram::RuleInfo& r = p_->rules[it.rule];
    if (static_cast<std::size_t>(idx) < closure_end_ && r.max != CfgProgram::kUnbounded &&
        old >= r.max && it.state < r.max) {
      Predict(r.child, num_sets() - 1, q.depth + 1);
    }
    return;
  }
  saturated_.push_back(static_cast<std::int32_t>(items_.size()));
  Append(it);
}

bool EarleyParser::ItemAccepting(const EarleyItem& it) const {
  const CfgProgram::RuleInfo& r = p_->rules[it.rule];
  if (r.kind == CfgProgram::RuleKind::kDfa) return p_->accepting[it.state] != 0;
  return it.state >= r.min || p_->rules[r.child].nullable;
}

bool EarleyParser::ItemHasFuture(const EarleyItem& it) const {
  const CfgProgram::RuleInfo& r = p_->rules[it.rule];
  if (r.kind == CfgProgram::RuleKind::kDfa) {
    const StateId s = it.state;
    return p_->has_bytes[s] || p_->nt_begin[s] != p_->nt_begin[s + 1] ||
           p_->sp_begin[s] != p_->sp_begin[s + 1];
  }
  return r.max == CfgProgram::kUnbounded || it.state < r.max;
}

bool EarleyParser::WaitsOn(const EarleyItem& q, std::int32_t rule) const {
  const CfgProgram::RuleInfo& r = p_->rules[q.rule];
  if (r.kind == CfgProgram::RuleKind::kDfa) {
    for (std::int32_t e = p_->nt_begin[q.state]; e < p_->nt_begin[q.state + 1]; ++e) {
      if (p_->nt_edges[e].first == rule) return true;
    }
    return false;
  }
  return r.child == rule && (r.max == CfgProgram::kUnbounded || q.state < r.max);
}

void EarleyParser::Predict(std::int32_t rule, std::int32_t k, std::int32_t depth) {
  if (depth > max_depth_) {
    depth_exceeded_ = true;
    meta_[k].flags |= 2;
    return;
  }
  // (k is always the set under construction.)
  if (predicted_[rule] == set_stamp_) {
    ++step_items_;
    return;
  }
  predicted_[rule] = set_stamp_;
  const CfgProgram::RuleInfo& r = p_->rules[rule];
  Add({rule, r.kind == CfgProgram::RuleKind::kDfa ? r.start : 0, k, depth});
}

void EarleyParser::AdvanceOver(const EarleyItem& p, std::int32_t rule, std::int32_t from) {
  const CfgProgram::RuleInfo& pr = p_->rules[p.rule];
  // An item predicted in `from` leaves it here: it takes its origin class's representative.
  auto origin = [&] {
    return p.origin == from && from > 0 && MayRepeat(from, p.rule) ? OriginOf(from, p.rule, p.depth)
                                                                    : p.origin;
  };
  if (pr.kind == CfgProgram::RuleKind::kDfa) {
    if (pr.unique_item == rule && unique_checks_ && !UniqueItemOk(p.origin, from)) {
      unique_dropped_ = true;
      return;
    }
    const StateId s = p.state;
    for (std::int32_t e = p_->nt_begin[s]; e < p_->nt_begin[s + 1]; ++e) {
      if (p_->nt_edges[e].first == rule) Add({p.rule, p_->nt_edges[e].second, origin(), p.depth});
    }
    return;
  }
  if (pr.child != rule) return;
  if (pr.max != CfgProgram::kUnbounded && p.state >= pr.max) return;
  std::int32_t c = p.state + 1;
  // Unbounded: counts past min behave alike; cap so the state space stays finite.
  if (pr.max == CfgProgram::kUnbounded && c > pr.min) c = pr.min;
  const EarleyItem next{p.rule, c, origin(), p.depth};
  if (c >= SaturatesFrom(p.rule)) {
    AddSaturated(next);
  } else {
    Add(next);
  }
}

void EarleyParser::Complete(std::int32_t rule, std::int32_t origin, std::int32_t k) {
  if (origin < 0) {
    meta_[k].flags |= 1;
    return;
  }
  // Items with an origin past set 0 took it from OriginOf, whose entry lists the origin's items
  // waiting on the rule: no scan of the whole origin set (which, completed into at every byte,
  // would cost its size per byte).
  if (const std::int32_t h = HeadEntry(origin, rule); h >= 0) {
    const std::size_t n = origins_[h].waiting.size();
    step_items_ += static_cast<std::int64_t>(n);
    for (std::size_t w = 0; w < n; ++w) {
      const EarleyItem p = items_[origins_[h].waiting[w]];  // (origins_ may grow in AdvanceOver)
      AdvanceOver(p, rule, origin);
    }
    return;
  }
  const std::size_t b = set_begin_[origin];
  const std::size_t e = origin + 1 < num_sets() ? set_begin_[origin + 1] : items_.size();
  // A big origin set whose scans mostly find nothing waiting (a chain of nested rules closing at
  // once, each waited on by one item) gets its index once the scans have wasted a few times
  // its size; one whose items mostly wait on what completes (a counter item per count) is
  // scanned: the index would cost more than it saves.
  if (e - b > kIndexWaiting &&
      ((meta_[origin].flags & 4) != 0 || meta_[origin].wasted > kWasteBeforeIndex * (e - b))) {
    const auto& index = WaitingIndex(origin);
    std::size_t w = static_cast<std::size_t>(
        std::lower_bound(index.begin(), index.end(), std::make_pair(rule, std::int32_t{-1})) -
        index.begin());
    const std::size_t first = w;
    // (A copy of each item: AdvanceOver adds to items_. It never grows meta_.)
    for (; w < index.size() && index[w].first == rule; ++w) {
      const EarleyItem p = items_[index[w].second];
      AdvanceOver(p, rule, origin);
    }
    step_items_ += static_cast<std::int64_t>(w - first) + 1;
    return;
  }
  step_items_ += static_cast<std::int64_t>(e - b);
  const std::size_t before = items_.size();
  for (std::size_t j = b; j < e; ++j) {
    const EarleyItem p = items_[j];
    AdvanceOver(p, rule, origin);
  }
  if (e - b > kIndexWaiting) {
    meta_[origin].wasted += (e - b) - std::min(e - b, items_.size() - before);
  }
}

const std::vector<std::pair<std::int32_t, std::int32_t>>& EarleyParser::WaitingIndex(
    std::int32_t o) {
  SetMeta& meta = meta_[o];
  if ((meta.flags & 4) != 0) return meta.waiting;
  meta.flags |= 4;
  meta.waiting.clear();
  const std::int32_t base = set_begin_[o];
  const std::span<const EarleyItem> items = set(o);
  for (std::size_t i = 0; i < items.size(); ++i) {
    const EarleyItem& q = items[i];
    const CfgProgram::RuleInfo& r = p_->rules[q.rule];
    const std::int32_t idx = base + static_cast<std::int32_t>(i);
    if (r.kind == CfgProgram::RuleKind::kDfa) {
      for (std::int32_t e = p_->nt_begin[q.state]; e < p_->nt_begin[q.state + 1]; ++e) {
        meta.waiting.push_back({p_->nt_edges[e].first, idx});
      }
    } else if (r.max == CfgProgram::kUnbounded || q.state < r.max) {
      meta.waiting.push_back({r.child, idx});
    }
  }
  step_items_ += static_cast<std::int64_t>(items.size());
  std::sort(meta.waiting.begin(), meta.waiting.end());
  meta.waiting.erase(std::unique(meta.waiting.begin(), meta.waiting.end()), meta.waiting.end());
  return meta.waiting;
}

namespace {

std::size_t EntrySlot(std::int32_t rule, std::int32_t depth, std::size_t mask) {
  std::uint64_t h = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(rule)) << 32) |
                    static_cast<std::uint32_t>(depth);
  h *= 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>(h >> 32) & mask;
}

}  // namespace

std::int32_t EarleyParser::HeadEntry(std::int32_t o, std::int32_t rule) const {
  if (o <= 0) return -1;
  const SetMeta& meta = meta_[o];
  std::int32_t found = -1;
  if (!meta.entry_by_rule.empty()) {
    const std::size_t mask = meta.entry_by_rule.size() - 1;
    for (std::size_t i = EntrySlot(rule, 0, mask);; i = (i + 1) & mask) {
      const std::int32_t e = meta.entry_by_rule[i];
      if (e < 0) return -1;
      if (origins_[e].rule == rule) {
        found = e;
        break;
      }
    }
  } else {
    for (std::int32_t e = meta.origin_head; e >= 0; e = origins_[e].next_in_set) {
      if (origins_[e].rule == rule) {
        found = e;
        break;
      }
    }
  }
  if (found < 0) return -1;
  return origins_[found].rep == o ? found : -1;
}

std::int32_t EarleyParser::FindEntry(std::int32_t o, std::int32_t rule,
                                     std::int32_t depth) const {
  const SetMeta& meta = meta_[o];
  if (!meta.entry_by_key.empty()) {
    const std::size_t mask = meta.entry_by_key.size() - 1;
    for (std::size_t i = EntrySlot(rule, depth, mask);; i = (i + 1) & mask) {
      const std::int32_t e = meta.entry_by_key[i];
      if (e < 0) return -1;
      if (origins_[e].rule == rule && origins_[e].depth == depth) return e;
    }
  }
  for (std::int32_t e = meta.origin_head; e >= 0; e = origins_[e].next_in_set) {
    if (origins_[e].rule == rule && origins_[e].depth == depth) return e;
  }
  return -1;
}

void EarleyParser::IndexEntry(std::int32_t o, std::int32_t e) {
  SetMeta& meta = meta_[o];
  ++meta.num_entries;
  if (meta.num_entries <= kEntryScan) return;
  // (Re)built at a load of 1/2 from the list, newest first, so each slot keeps the newest
  // entry of its key; otherwise the new entry, the newest, takes its key's slot.
  auto put = [&](std::vector<std::int32_t>& table, std::int32_t x, bool by_depth, bool newest) {
    const std::size_t mask = table.size() - 1;
    const std::int32_t rule = origins_[x].rule, depth = by_depth ? origins_[x].depth : 0;
    for (std::size_t i = EntrySlot(rule, depth, mask);; i = (i + 1) & mask) {
      const std::int32_t y = table[i];
      if (y < 0) {
        table[i] = x;
        return;
      }
      if (origins_[y].rule == rule && (!by_depth || origins_[y].depth == depth)) {
        if (newest) table[i] = x;
        return;
      }
    }
  };
  if (2 * static_cast<std::size_t>(meta.num_entries) > meta.entry_by_key.size()) {
    const std::size_t cap = std::bit_ceil(4 * static_cast<std::size_t>(meta.num_entries));
    meta.entry_by_key.assign(cap, -1);
    meta.entry_by_rule.assign(cap, -1);
    for (std::int32_t x = meta.origin_head; x >= 0; x = origins_[x].next_in_set) {
      put(meta.entry_by_key, x, true, false);
      put(meta.entry_by_rule, x, false, false);
    }
    return;
  }
  put(meta.entry_by_key, e, true, true);
  put(meta.entry_by_rule, e, false, true);
}

void EarleyParser::Closure(std::int32_t k, bool budgeted) {
  for (std::size_t i = cur_begin_; i < items_.size() && !(budgeted && OverBudget()); ++i) {
    closure_end_ = i + 1;
    const EarleyItem it = items_[i];
    const CfgProgram::RuleInfo& r = p_->rules[it.rule];
    if (r.kind == CfgProgram::RuleKind::kDfa) {
      const StateId s = it.state;
      if (has_finite_ && unique_checks_ && p_->before_item[s] && automaton_of_list_[it.rule] >= 0 &&
          !ListHasRoom(it)) {
        // A list before an item, with no value left for it: no parse goes on from here.
        unique_dropped_ = true;
        dead_lists_.push_back(static_cast<std::int32_t>(i));
        continue;
      }
      if (p_->accepting[s] && it.origin != k) Complete(it.rule, it.origin, k);
      for (std::int32_t e = p_->nt_begin[s]; e < p_->nt_begin[s + 1]; ++e) {
        const auto [sub, target] = p_->nt_edges[e];
        Predict(sub, k, it.depth + 1);
        if (p_->rules[sub].nullable) Add({it.rule, target, it.origin, it.depth});
      }
    } else {
      if (ItemAccepting(it) && it.origin != k) Complete(it.rule, it.origin, k);
      if (r.max == CfgProgram::kUnbounded || it.state < r.max) Predict(r.child, k, it.depth + 1);
    }
  }
}

// --- origin classes ------------------------------------------------------------------------------
//
// The future of an item (R, s, o) after it completes R is decided by the items of o that wait on
// R: advanced over R, they go on in the set where R completed. Those of them that were predicted
// in o itself (origin o, written kSelf in the key) later complete into o again, through o's
// items waiting on their own rules; the key follows that chain, so it holds every item of o the
// item's future can reach. Two sets with equal keys for R give (R, s, o1) and (R, s, o2) the same
// future (the map o1 -> o2 is a bisimulation of the parses), so the item keeps one origin: the
// first set of its class. Depths are part of the key, so the nesting limit sees the same depths.
// Set 0 is never merged: its root item has an implicit bottom waiting on it that no key shows.

void EarleyParser::OriginKey(std::int32_t o, std::int32_t rule, std::int32_t depth,
                             std::vector<std::int32_t>& key, std::vector<std::int32_t>* waiting) {
  key.clear();
  key.push_back(rule);
  key.push_back(depth);
  rel_.assign(1, rule);
  // Through the set's index of waiting items: a scan of the set per rule made a set of n
  // predictions that all leave it (n alternatives open side by side, each predicting its own
  // rule again) cost n times its size per byte.
  const auto& index = WaitingIndex(o);
  for (std::size_t r = 0; r < rel_.size(); ++r) {
    const std::int32_t y = rel_[r];
    tuples_.clear();
    auto w = std::lower_bound(index.begin(), index.end(), std::make_pair(y, std::int32_t{-1}));
    for (; w != index.end() && w->first == y; ++w) {
      const EarleyItem& q = items_[w->second];
      tuples_.push_back({q.rule, q.state, q.origin == o ? kSelf : q.origin, q.depth, w->second});
    }
    step_items_ += static_cast<std::int64_t>(tuples_.size()) + 1;
    // (Sets list their items in the order they were made, mostly sorted already.)
    if (!std::is_sorted(tuples_.begin(), tuples_.end())) std::sort(tuples_.begin(), tuples_.end());
    if (r == 0 && waiting != nullptr) {
      waiting->clear();
      for (const auto& t : tuples_) waiting->push_back(t[4]);
    }
    key.push_back(y);
    key.push_back(static_cast<std::int32_t>(tuples_.size()));
    for (const auto& t : tuples_) key.insert(key.end(), t.begin(), t.begin() + 4);
    // In sorted order, so that equal sets describe their rules in the same order.
    for (const auto& t : tuples_) {
      if (t[2] == kSelf && std::find(rel_.begin(), rel_.end(), t[0]) == rel_.end()) {
        rel_.push_back(t[0]);
      }
    }
  }
}

bool EarleyParser::KeyWithin(const std::vector<std::int32_t>& a,
                             const std::vector<std::int32_t>& b) {
  if (a[0] != b[0] || a[1] != b[1]) return false;
  std::size_t i = 2, j = 2;
  auto less = [](const std::int32_t* x, const std::int32_t* y) {
    return std::lexicographical_compare(x, x + 4, y, y + 4);
  };
  // Every group of a (a rule and its waiting items) within b's group for the same rule, b's
  // groups in the same order (b may describe more rules after them).
  while (i < a.size()) {
    if (j >= b.size() || a[i] != b[j]) return false;
    const std::size_t ea = i + 2 + 4 * static_cast<std::size_t>(a[i + 1]);
    const std::size_t eb = j + 2 + 4 * static_cast<std::size_t>(b[j + 1]);
    std::size_t ib = j + 2;
    for (std::size_t ia = i + 2; ia < ea; ia += 4) {
      while (ib < eb && less(&b[ib], &a[ia])) ib += 4;
      if (ib >= eb || !std::equal(&a[ia], &a[ia] + 4, &b[ib])) return false;
      ib += 4;
    }
    i = ea;
    j = eb;
  }
  return true;
}

std::int32_t EarleyParser::OriginOf(std::int32_t o, std::int32_t rule, std::int32_t depth) {
  if (o <= 0) return o;
  if (const std::int32_t found = FindEntry(o, rule, depth); found >= 0) return origins_[found].rep;
  // Origins multiply when a rule is predicted again while an earlier instance of it is still
  // open (a body that restarts at every byte, a counter inside a counter, left recursion): set o
  // then holds an item of the rule from an earlier origin that can still go on (one at the end
  // of its automaton, `"x"?` after its x, only completes). Otherwise the items keep o: every
  // caller asks MayRepeat(o, rule) first, exactly, so a JSON value or string predicted once
  // costs a filter test and never gets here (a scan of the set here, per item leaving it, was
  // quadratic per byte).
  std::int32_t e;
  if (!origin_free_.empty()) {
    e = origin_free_.back();
    origin_free_.pop_back();
  } else {
    e = static_cast<std::int32_t>(origins_.size());
    origins_.emplace_back();
  }
  // Lists entry e in set o's entries.
  auto link = [&](std::uint64_t hash, std::int32_t rep) -> OriginEntry& {
    OriginEntry& entry = origins_[e];
    entry.hash = hash;
    entry.set = o;
    entry.rule = rule;
    entry.depth = depth;
    entry.rep = rep;
    entry.next_in_set = meta_[o].origin_head;
    entry.next_in_bucket = -1;
    meta_[o].origin_head = e;
    IndexEntry(o, e);
    return entry;
  };
  OriginKey(o, rule, depth, key_a_, &waiting_a_);
  const std::uint64_t h = KeyHash(key_a_);
  std::int32_t rep = o;
  if (!origin_buckets_.empty()) {
    const std::size_t m = origin_buckets_.size() - 1;
    for (std::int32_t e = origin_buckets_[h & m]; e >= 0; e = origins_[e].next_in_bucket) {
      const OriginEntry& c = origins_[e];
      // Only earlier sets: a representative never outlives the sets that use it.
      if (c.hash == h && c.rule == rule && c.depth == depth && c.set < o && c.key == key_a_) {
        rep = c.set;
        break;
      }
    }
  }
  if (rep == o && 2 * (origin_heads_ + 1) > static_cast<std::int32_t>(origin_buckets_.size())) {
    GrowOriginBuckets();  // (before e is listed: it is chained below)
  }
  OriginEntry& entry = link(h, rep);
  if (rep == o) {
    entry.key.swap(key_a_);
    entry.waiting.swap(waiting_a_);
    const std::size_t m = origin_buckets_.size() - 1;
    entry.next_in_bucket = origin_buckets_[h & m];
    origin_buckets_[h & m] = e;
    ++origin_heads_;
  }
  return rep;
}

void EarleyParser::UnlinkOrigin(std::int32_t e) {
  const std::size_t m = origin_buckets_.size() - 1;
  std::int32_t* link = &origin_buckets_[origins_[e].hash & m];
  while (*link != e) link = &origins_[*link].next_in_bucket;
  *link = origins_[e].next_in_bucket;
  --origin_heads_;
}

void EarleyParser::GrowOriginBuckets() {
  origin_buckets_.assign(std::max<std::size_t>(64, 2 * origin_buckets_.size()), -1);
  const std::size_t m = origin_buckets_.size() - 1;
  for (std::int32_t s = 0; s < num_sets(); ++s) {
    for (std::int32_t e = meta_[s].origin_head; e >= 0; e = origins_[e].next_in_set) {
      if (origins_[e].rep != s) continue;
      origins_[e].next_in_bucket = origin_buckets_[origins_[e].hash & m];
      origin_buckets_[origins_[e].hash & m] = e;
    }
  }
}

// Items a byte carries on with equal (rule, state) and origins o1, o2: when o1's key is within
// o2's (every item o1 has waiting, o2 has too), the parses from (R, s, o1) are among those from
// (R, s, o2), and the first item is dropped. Sets after a long run of a body that can restart
// at every byte (`([^x]+){300,400}`: set o holds counts 1..o) keep one such item, not one per
// origin. Only scanned items are compared (the kernel, before Closure has run).
void EarleyParser::SubsumeScanned() {
  const std::size_t n = items_.size() - cur_begin_;
  if (n <= kPairwiseItems) {
    // Most steps carry a few items, none two with one (rule, state).
    bool repeat = false;
    for (std::size_t i = cur_begin_ + 1; i < items_.size() && !repeat; ++i) {
      for (std::size_t j = cur_begin_; j < i && !repeat; ++j) {
        repeat = items_[i].rule == items_[j].rule && items_[i].state == items_[j].state;
      }
    }
    if (!repeat) return;
  } else if (n <= kQuickFilterItems) {
    // A 64-slot filter finds the repeats (it may miss some, which only leaves items in).
    seen_.fill(~std::uint64_t{0});
    bool repeat = false;
    for (std::size_t i = cur_begin_; i < items_.size() && !repeat; ++i) {
      const std::uint64_t key = (static_cast<std::uint64_t>(items_[i].rule) << 32) |
                                static_cast<std::uint32_t>(items_[i].state);
      std::uint64_t& slot = seen_[(key * 0x9E3779B97F4A7C15ull) >> 58];
      repeat = slot == key;
      slot = key;
    }
    if (!repeat) return;
  }
  groups_.clear();
  for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
    groups_.push_back({items_[i].rule, items_[i].state, static_cast<std::int32_t>(i)});
  }
  std::sort(groups_.begin(), groups_.end());
  bool dropped_any = false;
  for (std::size_t g = 0; g < groups_.size();) {
    std::size_t end = g + 1;
    while (end < groups_.size() && groups_[end][0] == groups_[g][0] &&
           groups_[end][1] == groups_[g][1]) {
      ++end;
    }
    // Members: items with a keyed origin (their origin's representative entry holds the key).
    members_.clear();
    member_entry_.clear();
    for (std::size_t x = g; x < end; ++x) {
      const EarleyItem& it = items_[groups_[x][2]];
      const std::int32_t h = HeadEntry(it.origin, it.rule);
      if (h < 0) continue;
      members_.push_back(groups_[x][2]);
      member_entry_.push_back(h);
    }
    g = end;
    if (members_.size() < 2) continue;
    auto key = [&](std::size_t x) -> const std::vector<std::int32_t>& {
      return origins_[member_entry_[x]].key;
    };
    // Candidates: the members with the largest keys (a key within another is not longer).
    order_.resize(members_.size());
    for (std::size_t x = 0; x < order_.size(); ++x) order_[x] = x;
    std::sort(order_.begin(), order_.end(), [&](std::size_t a, std::size_t b) {
      return key(a).size() > key(b).size() || (key(a).size() == key(b).size() && a < b);
    });
    const std::size_t nc = std::min(order_.size(), kSubsumeCandidates);
    drop_.assign(members_.size(), 0);
    for (std::size_t x = 0; x < members_.size(); ++x) {
      for (std::size_t c = 0; c < nc; ++c) {
        const std::size_t y = order_[c];
        if (y == x || drop_[y]) continue;
        step_items_ += static_cast<std::int64_t>(key(x).size() / 4);
        // Equal keys (origins merged under different representatives): keep the first.
        if (KeyWithin(key(x), key(y)) && (key(x) != key(y) || y < x)) {
          drop_[x] = 1;
          break;
        }
      }
    }
    for (std::size_t x = 0; x < members_.size(); ++x) {
      if (!drop_[x]) continue;
      items_[members_[x]].rule = -1;
      dropped_any = true;
    }
  }
  if (!dropped_any) return;
  std::size_t w = cur_begin_;
  for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
    if (items_[i].rule >= 0) items_[w++] = items_[i];
  }
  items_.resize(w);
  if (items_.size() - cur_begin_ > kLinearLimit) {
    RebuildTable();
  } else {
    table_active_ = false;
  }
  // (A pushed completion's kernel holds counter items too.)
  saturated_.clear();
  for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
    if (items_[i].state >= SaturatesFrom(items_[i].rule)) {
      saturated_.push_back(static_cast<std::int32_t>(i));
    }
  }
}

// --- steps ---------------------------------------------------------------------------------------

bool EarleyParser::MayRepeat(std::int32_t o, std::int32_t rule) {
  // (A unique-items list and its items keep their origins: the check reads their bytes.)
  if (!unique_rule_.empty() && unique_rule_[rule]) return false;
  SetMeta& meta = meta_[o];
  if ((meta.older >> 63) == 0) {
    meta.older = std::uint64_t{1} << 63;
    std::vector<std::int32_t>& rules = rel_;  // (scratch; OriginKey refills it)
    rules.clear();
    for (const EarleyItem& q : set(o)) {
      if (q.origin != o && ItemHasFuture(q)) {
        meta.older |= std::uint64_t{1} << (q.rule % 63);
        rules.push_back(q.rule);
      }
    }
    step_items_ += static_cast<std::int64_t>(set(o).size());
    std::sort(rules.begin(), rules.end());
    rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
    meta.older_rules.assign(rules.begin(), rules.end());
  }
  if (((meta.older >> (rule % 63)) & 1) == 0) return false;
  return std::binary_search(meta.older_rules.begin(), meta.older_rules.end(), rule);
}

bool EarleyParser::FinishStep(std::int32_t k) {
  // (Only items whose origins are keyed representatives are compared.)
  if (origin_heads_ > 0 && items_.size() - cur_begin_ >= 2) SubsumeScanned();
  if (!EndSet()) return false;
  Closure(k, /*budgeted=*/true);
  if (OverBudget()) {
    items_exceeded_ = true;
    PopTo(k);
    return false;
  }
  if (unique_dropped_ && !SetLive(k)) {
    PopTo(k);
    return false;
  }
  return true;
}

bool EarleyParser::SetLive(std::int32_t k) const {
  const std::size_t b = set_begin_[k];
  const std::size_t e = k + 1 < num_sets() ? set_begin_[k + 1] : items_.size();
  for (std::size_t i = b; i < e; ++i) {
    const EarleyItem& it = items_[i];
    if (std::find(dead_lists_.begin(), dead_lists_.end(), static_cast<std::int32_t>(i)) !=
        dead_lists_.end()) {
      continue;
    }
    if (ItemHasFuture(it)) return true;
    if (it.rule == p_->root && it.origin == 0 && ItemAccepting(it)) return true;
  }
  return false;
}

void EarleyParser::InitRoot() {
  Reset();
  BeginSet();
  unique_checks_ = true;
  unique_list_.Reset(-1);
  count_origin_ = -1;
  count_.clear();
  pattern_origin_ = -1;
  pattern_.clear();
  const CfgProgram::RuleInfo& r = p_->rules[p_->root];
  Add({p_->root, r.start, 0, 0});
  Closure(0, /*budgeted=*/false);  // bounded by the grammar, not by the input
}

void EarleyParser::InitLocal(std::int32_t rule, std::int32_t state, std::int32_t depth) {
  Reset();
  BeginSet();
  unique_checks_ = false;
  unique_list_.Reset(-1);
  count_origin_ = -1;
  count_.clear();
  pattern_origin_ = -1;
  pattern_.clear();
  Add({rule, state, -1, depth});
  Closure(0, /*budgeted=*/false);
}

// Advances set `prev`'s items over byte b into the open set after it.
inline void EarleyParser::ScanByte(std::int32_t prev, std::uint8_t b) {
  const std::size_t pb = set_begin_[prev], pe = set_begin_[prev + 1];
  const std::int32_t cls = p_->byte_class[b];
  const std::int32_t nc = p_->num_classes;
  for (std::size_t j = pb; j < pe; ++j) {
    const EarleyItem it = items_[j];
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    const StateId t = p_->next[static_cast<std::size_t>(it.state) * nc + cls];
    if (t == CfgProgram::kDead) continue;
    // Items predicted in prev take their origin class's representative when they leave it.
    const std::int32_t origin = it.origin == prev && prev > 0 && MayRepeat(prev, it.rule)
                                    ? OriginOf(prev, it.rule, it.depth)
                                    : it.origin;
    if (has_finite_ && unique_checks_ && p_->item_automaton_of[it.rule] >= 0 &&
        p_->item_completions[t] >= 0 && !ItemStaysNew(it.rule, it.origin, t)) {
      unique_dropped_ = true;  // (every way to finish this item repeats an earlier one)
      continue;
    }
    if (has_counted_ && unique_checks_ && p_->rules[it.rule].max_chars >= 0 &&
        !LengthOk(it.rule, it.origin, prev, b, t)) {
      continue;  // (past the string's maxLength, or with no way to end within it)
    }
    if (has_patterns_ && unique_checks_ && p_->rules[it.rule].ecma_pattern) {
      // (No text to read, a pushed completion on the way: FilterPatternStrings has none either.)
      const PatternRead* read = PatternTo(it.origin, prev);
      if (read != nullptr) {
        PatternRead next = *read;
        if (!PatternStep(&next, b)) continue;  // (no valid pattern begins so)
      }
    }
    if (has_counted_items_ && unique_checks_ && counted_item_[it.rule] &&
        !CountedItemStaysNew(it.rule, it.origin, prev, b, t)) {
      unique_dropped_ = true;  // (at maxLength, with only repeats of earlier items left)
      continue;
    }
    Add({it.rule, t, origin, it.depth});
  }
}

void EarleyParser::LiveBytes(std::bitset<256>* out) const {
  const std::int32_t nc = p_->num_classes;
  out->reset();
  const std::int32_t k = num_sets() - 1;
  for (const EarleyItem& it : set(k)) {
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa || !p_->has_bytes[it.state]) continue;
    auto found = live_bytes_.find(it.state);
    if (found == live_bytes_.end()) {
      if (live_bytes_.size() >= kMaxLiveStates) live_bytes_.clear();
      std::bitset<256> bytes;
      const TransitionRow row = p_->next.Row(it.state, nc);
      for (int b = 0; b < 256; ++b)
        if (row[p_->byte_class[b]] != CfgProgram::kDead) bytes.set(static_cast<std::size_t>(b));
      found = live_bytes_.emplace(it.state, bytes).first;
    }
    *out |= found->second;
  }
}

bool EarleyParser::StepByte(std::uint8_t b) {
  const std::int32_t prev = num_sets() - 1;
  BeginSet();
  meta_.back().byte = b;
  ScanByte(prev, b);
  return FinishStep(prev + 1);
}

template <typename Takes>
void EarleyParser::ScanTokenEdges(std::int32_t from, Takes takes) {
  const std::size_t pb = set_begin_[from];
  const std::size_t pe = set_begin_[from + 1];  // (a set is open after `from`)
  for (std::size_t j = pb; j < pe; ++j) {
    const EarleyItem it = items_[j];
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    for (std::int32_t e = p_->sp_begin[it.state]; e < p_->sp_begin[it.state + 1]; ++e) {
      if (!takes(p_->sp_edges[e].first)) continue;
      const std::int32_t origin = it.origin == from && from > 0 && MayRepeat(from, it.rule)
                                      ? OriginOf(from, it.rule, it.depth)
                                      : it.origin;
      Add({it.rule, p_->sp_edges[e].second, origin, it.depth});
    }
  }
}

bool EarleyParser::StepSpecial(std::int32_t special_index) {
  const std::int32_t prev = num_sets() - 1;
  BeginSet();
  ScanTokenEdges(prev, [special_index](std::int32_t i) { return i == special_index; });
  return FinishStep(prev + 1);
}

bool EarleyParser::StepTokenEdges(std::span<const std::uint8_t> take) {
  const std::int32_t prev = num_sets() - 1;
  BeginSet();
  ScanTokenEdges(prev, [take](std::int32_t i) { return take[i] != 0; });
  return FinishStep(prev + 1);
}

bool EarleyParser::StepBytesOrTokenEdges(std::string_view bytes,
                                         std::span<const std::uint8_t> take) {
  const std::int32_t from = num_sets() - 1;
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
    if (StepByte(static_cast<std::uint8_t>(bytes[i]))) continue;
    PopTo(from + 1);
    return StepTokenEdges(take);
  }
  const std::int32_t prev = num_sets() - 1;
  BeginSet();
  meta_.back().byte = static_cast<std::uint8_t>(bytes.back());
  ScanByte(prev, static_cast<std::uint8_t>(bytes.back()));
  ScanTokenEdges(from, [take](std::int32_t i) { return take[i] != 0; });
  if (FinishStep(prev + 1)) return true;
  PopTo(from + 1);
  return false;
}

bool EarleyParser::PushCompletion(std::int32_t rule, std::int32_t origin) {
  const std::int32_t k = num_sets();
  BeginSet();
  Complete(rule, origin, k);
  return FinishStep(k);
}

// --- unique items --------------------------------------------------------------------------------

bool EarleyParser::ReadListTo(std::int32_t origin, std::int32_t upto) {
  if (unique_list_.origin() != origin) unique_list_.Reset(origin);
  if (unique_list_.read_to() > upto) unique_list_.PopTo(upto + 1);
  while (unique_list_.read_to() < upto) {
    const std::int32_t b = meta_[unique_list_.read_to() + 1].byte;
    if (b < 0) {
      unique_list_.Reset(-1);
      return false;
    }
    unique_list_.Feed(static_cast<std::uint8_t>(b));
  }
  return true;
}

bool EarleyParser::UniqueItemOk(std::int32_t list_origin, std::int32_t item_origin) {
  const std::int32_t k = num_sets() - 1;
  if (list_origin < 0 || item_origin < list_origin) return true;
  std::string& raw = unique_scratch_;
  raw.clear();
  for (std::int32_t j = item_origin + 1; j <= k; ++j) {
    if (meta_[j].byte < 0) return true;  // (a pushed completion: FilterUniqueItems checks)
    raw.push_back(static_cast<char>(meta_[j].byte));
  }
  step_items_ += 1 + static_cast<std::int64_t>(raw.size() / 16);
  if (!UniqueKey(raw, &unique_value_)) return true;
  const std::int32_t before = unique_list_.read_to();
  if (!ReadListTo(list_origin, item_origin)) return true;
  step_items_ += std::max<std::int64_t>(0, unique_list_.read_to() - before) / 16;
  return !unique_list_.Contains(unique_value_);
}

const UniqueListItems* EarleyParser::ReadUniqueList(std::int32_t origin) {
  if (origin < 0 || !ReadListTo(origin, num_sets() - 1)) return nullptr;
  return &unique_list_;
}

void EarleyParser::OpenUniqueLists(std::span<const std::uint8_t> inside,
                                   std::vector<std::pair<std::int32_t, std::int32_t>>* out,
                                   std::size_t max, bool deep) const {
  out->clear();
  if (!has_unique_) return;
  // The sets of the last one's items' origins, and of theirs, four levels up (a string item's
  // character under way inside its length counter is three levels below its list), at most 16
  // sets, through items of rules inside lists only: every list item found there is open on
  // some parse (a list from a dead parse too, which only adds tokens for the filter to check).
  // Deep: every level up, each set once (a list of closed objects must be found from anywhere
  // inside its item: CfgGrammar::FilterUniqueItems).
  thread_local std::vector<std::int32_t> sets;
  sets.clear();
  const std::size_t max_sets = deep ? static_cast<std::size_t>(num_sets()) : 16;
  const int max_level = deep ? std::numeric_limits<int>::max() : 4;
  std::size_t level_begin = 0;
  sets.push_back(num_sets() - 1);
  std::size_t nsets = 1;
  for (int level = 0; level <= max_level && level_begin < nsets; ++level) {
    const std::size_t level_end = nsets;
    for (std::size_t x = level_begin; x < level_end; ++x) {
      const std::int32_t o = sets[x];
      for (const EarleyItem& q : set(o)) {
        if (p_->rules[q.rule].unique_item >= 0 && q.origin >= 0 && out->size() < max) {
          const std::pair<std::int32_t, std::int32_t> v{q.rule, q.origin};
          if (std::find(out->begin(), out->end(), v) == out->end()) out->push_back(v);
        }
        if (level == max_level || q.origin < 0 || q.origin >= o || nsets == max_sets ||
            !inside[q.rule]) {
          continue;
        }
        if (std::find(sets.begin(), sets.end(), q.origin) == sets.end()) {
          sets.push_back(q.origin);
          ++nsets;
        }
      }
    }
    level_begin = level_end;
  }
}

bool EarleyParser::SomeNewCompletion(StateId state, const std::string& prefix,
                                     std::int32_t char_mode) {
  // Depth-first over the automaton's bytes from `state`: its completions are few (at most the
  // list's size, or the caller answered without this), each checked as it is found. A state's
  // edges are read by byte class (a dead class skips all its bytes at once). With a character
  // mode (a string at its maxLength), only bytes that start no new character: at most the rest
  // of one character (an escape's four hex digits) and the closing quote.
  if (class_bytes_.empty()) {
    class_bytes_.resize(static_cast<std::size_t>(p_->num_classes));
    for (int b = 0; b < 256; ++b) class_bytes_[p_->byte_class[b]].push_back(static_cast<std::uint8_t>(b));
  }
  const std::int32_t nc = p_->num_classes;
  struct Frame {
    StateId s;
    std::int32_t cls;
    std::int32_t k;  // the next byte of class cls
    std::uint8_t mode;
  };
  thread_local std::vector<Frame> stack;
  thread_local std::string text;
  stack.assign(1, {state, 0, 0, static_cast<std::uint8_t>(char_mode < 0 ? 0 : char_mode)});
  text = prefix;
  if (p_->accepting[state] && (!UniqueKey(text, &unique_key_) || !unique_list_.Contains(unique_key_)))
    return true;
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.cls >= nc) {
      stack.pop_back();
      if (!stack.empty()) text.pop_back();
      continue;
    }
    const StateId t = p_->next[static_cast<std::size_t>(f.s) * nc + f.cls];
    const std::vector<std::uint8_t>& bytes = class_bytes_[f.cls];
    if (t == CfgProgram::kDead || f.k >= static_cast<std::int32_t>(bytes.size())) {
      ++f.cls;
      f.k = 0;
      continue;
    }
    const std::uint8_t b = bytes[f.k++];
    ++step_items_;
    std::uint8_t m = f.mode;
    if (char_mode >= 0 && JsonCharStep(&m, b)) continue;  // (a new character: none is left)
    text.push_back(static_cast<char>(b));
    if (p_->accepting[t] && (!UniqueKey(text, &unique_key_) || !unique_list_.Contains(unique_key_)))
      return true;
    stack.push_back({t, 0, 0, m});  // (f is not used after this)
  }
  return false;
}

bool EarleyParser::ItemStaysNew(std::int32_t rule, std::int32_t item_origin, StateId state) {
  const std::int32_t k = num_sets() - 1;  // (the set under construction: its byte is known)
  if (item_origin < 0) return true;
  std::string& prefix = unique_raw_;
  prefix.clear();
  for (std::int32_t j = item_origin + 1; j <= k; ++j) {
    if (meta_[j].byte < 0) return true;
    prefix.push_back(static_cast<char>(meta_[j].byte));
  }
  const std::int32_t item = p_->item_automaton_of[rule];
  // The lists waiting on the item there (the item rule's own item, when it calls the automaton,
  // is predicted in the same set).
  bool some_list = false;
  for (const EarleyItem& q : set(item_origin)) {
    if (p_->rules[q.rule].unique_item != item || q.origin < 0 || !WaitsOn(q, item)) continue;
    some_list = true;
    if (!ReadListTo(q.origin, item_origin)) return true;
    const std::int64_t n = p_->item_completions[state];
    if (n > static_cast<std::int64_t>(unique_list_.size())) return true;
    // A string under way: its completions are the item's values that start with the value so
    // far, and the keys read with that start are some of them (every item read is one of the
    // automaton's values), so with k such keys the completions hold a new one iff n > k (the
    // grammar spells each value one way). No enumeration.
    // (The value so far: the prefix closed by a quote, decoded.)
    bool decoded = false;
    if (!prefix.empty() && prefix[0] == '"' && prefix.back() != '\\' &&
        prefix.find("\\u", prefix.size() >= 6 ? prefix.size() - 6 : 0) == std::string::npos) {
      prefix.push_back('"');
      decoded = DecodeJsonString(prefix, &unique_prefix_);
      prefix.pop_back();
    }
    if (decoded) {
      unique_prefix_.insert(unique_prefix_.begin(), 's');  // (GCC 12: -Wrestrict misfires on "s")
      const auto k = static_cast<std::int64_t>(
          unique_list_.CountWithPrefix(unique_prefix_, static_cast<std::size_t>(n) + 1));
      step_items_ += 1 + k / 16;
      if (n > k) return true;
      if (n == k) continue;  // (every completion is a key read: no new one in this list)
    }
    if (SomeNewCompletion(state, prefix)) return true;
  }
  return !some_list;
}

bool EarleyParser::CountedItemStaysNew(std::int32_t rule, std::int32_t item_origin,
                                       std::int32_t prev, std::uint8_t b, StateId t) {
  if (item_origin < 0) return true;
  CharCount c;
  if (!CountTo(item_origin, prev, &c)) return true;
  std::uint8_t mode = c.mode;
  std::int32_t chars = c.chars;
  if (JsonCharStep(&mode, b)) ++chars;
  // (Closed: the check at completion decides.)
  if (chars < p_->rules[rule].max_chars || mode == kCharClosed) return true;
  const std::int32_t k = num_sets() - 1;  // (the set under construction: its byte is b)
  std::string& prefix = unique_raw_;
  prefix.clear();
  for (std::int32_t j = item_origin + 1; j <= k; ++j) {
    if (meta_[j].byte < 0) return true;
    prefix.push_back(static_cast<char>(meta_[j].byte));
  }
  bool some_list = false;
  for (const EarleyItem& q : set(item_origin)) {
    if (p_->rules[q.rule].unique_item != rule || q.origin < 0 || !WaitsOn(q, rule)) continue;
    some_list = true;
    if (!ReadListTo(q.origin, item_origin)) return true;
    if (unique_list_.size() == 0) return true;
    if (SomeNewCompletion(t, prefix, mode)) return true;
  }
  return !some_list;
}

bool EarleyParser::ListHasRoom(const EarleyItem& q) {
  const std::int32_t a = automaton_of_list_[q.rule];
  const StateId start = p_->rules[a].start;
  std::int64_t n = p_->item_completions[start];
  if (n < 0) return true;  // (infinitely many values)
  n -= p_->item_zero_twice[a];  // (ways to values: 0 and -0 are one)
  if (!ReadListTo(q.origin, num_sets() - 1)) return true;
  if (n > static_cast<std::int64_t>(unique_list_.size())) return true;
  return SomeNewCompletion(start, std::string());
}

bool EarleyParser::CanEnd() const {
  const std::int32_t k = num_sets() - 1;
  for (const EarleyItem& it : set(k)) {
    if (it.rule == p_->root && it.origin == 0 && ItemAccepting(it)) return true;
  }
  return false;
}

// --- ECMAScript patterns -------------------------------------------------------------------------

namespace {

// Whether the character under way in `d` (a byte or more of it read) can still end as one the
// checker takes: a token may end inside a character, and the string must not be left where no
// way to finish it passes. The string automata spell characters canonically (raw, `\X`, or
// `\u00XX` for a control character), so an escape ends as a control character, `"` or `\`.
bool PartialCharViable(const JsonTextDecoder& d, const EcmaPatternChecker& check) {
  auto some_of = [&](std::initializer_list<std::pair<char32_t, char32_t>> ranges) {
    for (const auto& [lo, hi] : ranges) {
      if (check.SomeStepIn(lo, hi)) return true;
    }
    return false;
  };
  switch (d.mode) {
    case kCharText:
      if (d.lead == 0) return true;
      return check.SomeStepIn(0x10000 + ((d.lead - 0xD800) << 10),
                              0x10000 + ((d.lead - 0xD800) << 10) + 0x3FF);
    case kCharEscape:
      return some_of({{0x00, 0x1F}, {'"', '"'}, {'\\', '\\'}});
    case kCharHex1:
      return some_of({{0x00, 0x1F}});
    case kCharHex2:
    case kCharHex3:
      return d.acc == 0 && some_of({{0x00, 0x1F}});
    case kCharHex4:
      return d.acc == 0   ? some_of({{0x00, 0x07}, {0x0B, 0x0B}, {0x0E, 0x0F}})
             : d.acc == 1 ? some_of({{0x10, 0x1F}})
                          : false;
    case kCharCont1:
    case kCharCont2:
    case kCharCont3: {
      const int left = d.mode - kCharCont1 + 1;  // continuation bytes to go
      const std::uint32_t lo = d.acc << (6 * left);
      const std::uint32_t hi = lo | ((std::uint32_t{1} << (6 * left)) - 1);
      const std::uint32_t least = d.utf8_len == 4 ? 0x10000 : d.utf8_len == 3 ? 0x800 : 0x80;
      const std::uint32_t from = std::max(lo, least), to = std::min<std::uint32_t>(hi, 0x10FFFF);
      return from <= to && check.SomeStepIn(from, to);
    }
    default:
      return true;
  }
}

}  // namespace

bool EarleyParser::PatternStep(PatternRead* read, std::uint8_t b) {
  if (read->dead) return false;
  char32_t c = 0;
  switch (read->text.Step(b, &c)) {
    case JsonTextDecoder::kChar:
      read->dead = !read->check.Step(c);
      break;
    case JsonTextDecoder::kClosed:
      read->dead = !read->check.Complete();
      break;
    case JsonTextDecoder::kNothing:
      read->dead = !PartialCharViable(read->text, read->check);
      break;
    default:
      read->dead = true;
  }
  return !read->dead;
}

const EarleyParser::PatternRead* EarleyParser::PatternTo(std::int32_t origin,
                                                         std::int32_t upto) {
  if (origin < 0 || upto < origin) return nullptr;
  if (pattern_origin_ != origin) {
    pattern_origin_ = origin;
    pattern_.assign(1, PatternRead{});
  }
  while (pattern_origin_ + static_cast<std::int32_t>(pattern_.size()) - 1 < upto) {
    const std::int32_t b = meta_[pattern_origin_ + static_cast<std::int32_t>(pattern_.size())].byte;
    if (b < 0) return nullptr;  // (a pushed completion or a special token: no text to read)
    PatternRead next = pattern_.back();
    PatternStep(&next, static_cast<std::uint8_t>(b));
    pattern_.push_back(std::move(next));
  }
  return &pattern_[static_cast<std::size_t>(upto - origin)];
}

void EarleyParser::OpenPatternStrings(std::vector<PatternString>* out) {
  out->clear();
  if (!has_patterns_ || !unique_checks_) return;
  const std::int32_t k = num_sets() - 1;
  for (const EarleyItem& it : set(k)) {
    if (!p_->rules[it.rule].ecma_pattern || it.origin < 0 || !p_->has_bytes[it.state]) continue;
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    const PatternRead* read = PatternTo(it.origin, k);
    if (read == nullptr || read->dead) continue;
    out->push_back({it.rule, it.state, it.origin, *read});
  }
}

// --- string lengths ------------------------------------------------------------------------------

bool EarleyParser::CountTo(std::int32_t origin, std::int32_t upto, CharCount* out) {
  if (origin < 0 || upto < origin) return false;
  if (count_origin_ != origin) {
    count_origin_ = origin;
    count_.assign(1, CharCount{0, kCharBeforeQuote});
  }
  while (count_origin_ + static_cast<std::int32_t>(count_.size()) - 1 < upto) {
    const std::int32_t b = meta_[count_origin_ + static_cast<std::int32_t>(count_.size())].byte;
    if (b < 0) return false;  // (a pushed completion or a special token: no text to count)
    CharCount c = count_.back();
    if (JsonCharStep(&c.mode, static_cast<std::uint8_t>(b))) ++c.chars;
    count_.push_back(c);
  }
  *out = count_[static_cast<std::size_t>(upto - origin)];
  return true;
}

bool EarleyParser::LengthOk(std::int32_t rule, std::int32_t origin, std::int32_t prev,
                            std::uint8_t b, StateId t) {
  CharCount c;
  if (!CountTo(origin, prev, &c)) return true;  // (FilterCountedStrings has no text either)
  if (JsonCharStep(&c.mode, b)) ++c.chars;
  const std::int32_t max = p_->rules[rule].max_chars;
  const std::int32_t rest = p_->min_chars[t];
  return c.chars <= max && (rest < 0 || c.chars + rest <= max);
}

void EarleyParser::OpenCountedStrings(std::vector<CountedString>* out) {
  out->clear();
  if (!has_counted_ || !unique_checks_) return;
  const std::int32_t k = num_sets() - 1;
  for (const EarleyItem& it : set(k)) {
    if (p_->rules[it.rule].max_chars < 0 || it.origin < 0) continue;
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    // (A string already closed takes no more characters: its item is no bound on the next token.)
    if (!p_->has_bytes[it.state]) continue;
    CharCount c;
    if (!CountTo(it.origin, k, &c)) continue;
    out->push_back({it.rule, it.state, it.origin, c.chars, c.mode});
  }
}

std::int32_t EarleyParser::ScanningItems() const {
  const std::int32_t k = num_sets() - 1;
  std::int32_t n = 0;
  for (std::size_t i = set_begin_[k]; i < items_.size(); ++i) {
    const EarleyItem& it = items_[i];
    if (p_->rules[it.rule].kind == CfgProgram::RuleKind::kDfa && p_->has_bytes[it.state]) ++n;
  }
  return n;
}

}  // namespace lockstep
