#include "automata/earley.h"

namespace lockstep {
namespace {

constexpr std::size_t kLinearLimit = 24;

inline std::uint64_t ItemHash(const EarleyItem& it) {
  std::uint64_t h = static_cast<std::uint32_t>(it.rule) * 0x9E3779B97F4A7C15ull;
  h ^= static_cast<std::uint32_t>(it.state) * 0xC2B2AE3D27D4EB4Full;
  h ^= static_cast<std::uint32_t>(it.origin + 1) * 0x165667B19E3779F9ull;
  return h ^ (h >> 29);
}
inline bool SameItem(const EarleyItem& a, const EarleyItem& b) {
  return a.rule == b.rule && a.state == b.state && a.origin == b.origin;
}

}  // namespace

EarleyParser::EarleyParser(const CfgProgram* program, std::int32_t max_depth)
    : p_(program), max_depth_(max_depth) {
  items_.reserve(256);
  set_begin_.reserve(64);
  bottom_.reserve(64);
}

void EarleyParser::BeginSet() {
  cur_begin_ = items_.size();
  set_begin_.push_back(static_cast<std::int32_t>(cur_begin_));
  bottom_.push_back(0);
  table_active_ = false;
}

bool EarleyParser::EndSet() {
  if (items_.size() == cur_begin_) {
    set_begin_.pop_back();
    bottom_.pop_back();
    return false;
  }
  return true;
}

void EarleyParser::Add(const EarleyItem& it) {
  const std::size_t n = items_.size() - cur_begin_;
  if (!table_active_) {
    for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
      if (SameItem(items_[i], it)) return;
    }
    items_.push_back(it);
    if (n + 1 > kLinearLimit) {
      // Switch to hashing for this set.
      std::size_t cap = 64;
      while (cap < 4 * (n + 1)) cap <<= 1;
      table_.assign(cap, -1);
      for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
        std::size_t m = cap - 1, h = ItemHash(items_[i]) & m;
        while (table_[h] >= 0) h = (h + 1) & m;
        table_[h] = static_cast<std::int32_t>(i);
      }
      table_active_ = true;
    }
    return;
  }
  std::size_t m = table_.size() - 1, h = ItemHash(it) & m;
  while (table_[h] >= 0) {
    if (SameItem(items_[table_[h]], it)) return;
    h = (h + 1) & m;
  }
  table_[h] = static_cast<std::int32_t>(items_.size());
  items_.push_back(it);
  if (2 * (n + 1) > table_.size()) {
    std::size_t cap = table_.size() * 2;
    table_.assign(cap, -1);
    for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
      std::size_t mm = cap - 1, hh = ItemHash(items_[i]) & mm;
      while (table_[hh] >= 0) hh = (hh + 1) & mm;
      table_[hh] = static_cast<std::int32_t>(i);
    }
  }
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

void EarleyParser::Predict(std::int32_t rule, std::int32_t k, std::int32_t depth) {
  if (depth > max_depth_) {
    depth_exceeded_ = true;
    bottom_[k] |= 2;
    return;
  }
  const CfgProgram::RuleInfo& r = p_->rules[rule];
  Add({rule, r.kind == CfgProgram::RuleKind::kDfa ? r.start : 0, k, depth});
}

void EarleyParser::AdvanceOver(const EarleyItem& p, std::int32_t rule) {
  const CfgProgram::RuleInfo& pr = p_->rules[p.rule];
  if (pr.kind == CfgProgram::RuleKind::kDfa) {
    const StateId s = p.state;
    for (std::int32_t e = p_->nt_begin[s]; e < p_->nt_begin[s + 1]; ++e) {
      if (p_->nt_edges[e].first == rule) Add({p.rule, p_->nt_edges[e].second, p.origin, p.depth});
    }
    return;
  }
  if (pr.child != rule) return;
  if (pr.max != CfgProgram::kUnbounded && p.state >= pr.max) return;
  std::int32_t c = p.state + 1;
  // Unbounded: counts past min behave alike; cap so the state space stays finite.
  if (pr.max == CfgProgram::kUnbounded && c > pr.min) c = pr.min;
  Add({p.rule, c, p.origin, p.depth});
}

void EarleyParser::Complete(std::int32_t rule, std::int32_t origin, std::int32_t k) {
  if (origin < 0) {
    bottom_[k] |= 1;
    return;
  }
  const std::size_t b = set_begin_[origin];
  const std::size_t e = origin + 1 < num_sets() ? set_begin_[origin + 1] : items_.size();
  for (std::size_t j = b; j < e; ++j) {
    const EarleyItem p = items_[j];
    AdvanceOver(p, rule);
  }
}

void EarleyParser::Closure(std::int32_t k) {
  for (std::size_t i = cur_begin_; i < items_.size(); ++i) {
    const EarleyItem it = items_[i];
    const CfgProgram::RuleInfo& r = p_->rules[it.rule];
    if (r.kind == CfgProgram::RuleKind::kDfa) {
      const StateId s = it.state;
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

void EarleyParser::InitRoot() {
  items_.clear();
  set_begin_.clear();
  bottom_.clear();
  depth_exceeded_ = false;
  BeginSet();
  const CfgProgram::RuleInfo& r = p_->rules[p_->root];
  Add({p_->root, r.start, 0, 0});
  Closure(0);
}

void EarleyParser::InitLocal(std::int32_t rule, std::int32_t state, std::int32_t depth) {
  items_.clear();
  set_begin_.clear();
  bottom_.clear();
  depth_exceeded_ = false;
  BeginSet();
  Add({rule, state, -1, depth});
  Closure(0);
}

bool EarleyParser::StepByte(std::uint8_t b) {
  const std::int32_t prev = num_sets() - 1;
  const std::size_t pb = set_begin_[prev], pe = items_.size();
  BeginSet();
  const std::int32_t cls = p_->byte_class[b];
  const std::int32_t nc = p_->num_classes;
  for (std::size_t j = pb; j < pe; ++j) {
    const EarleyItem it = items_[j];
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    const StateId t = p_->next[static_cast<std::size_t>(it.state) * nc + cls];
    if (t != CfgProgram::kDead) Add({it.rule, t, it.origin, it.depth});
  }
  if (!EndSet()) return false;
  Closure(prev + 1);
  return true;
}

bool EarleyParser::StepSpecial(std::int32_t special_index) {
  const std::int32_t prev = num_sets() - 1;
  const std::size_t pb = set_begin_[prev], pe = items_.size();
  BeginSet();
  for (std::size_t j = pb; j < pe; ++j) {
    const EarleyItem it = items_[j];
    if (p_->rules[it.rule].kind != CfgProgram::RuleKind::kDfa) continue;
    for (std::int32_t e = p_->sp_begin[it.state]; e < p_->sp_begin[it.state + 1]; ++e) {
      if (p_->sp_edges[e].first == special_index) {
        Add({it.rule, p_->sp_edges[e].second, it.origin, it.depth});
      }
    }
  }
  if (!EndSet()) return false;
  Closure(prev + 1);
  return true;
}

bool EarleyParser::PushCompletion(std::int32_t rule, std::int32_t origin) {
  const std::int32_t k = num_sets();
  BeginSet();
  Complete(rule, origin, k);
  if (!EndSet()) return false;
  Closure(k);
  return true;
}

bool EarleyParser::CanEnd() const {
  const std::int32_t k = num_sets() - 1;
  for (const EarleyItem& it : set(k)) {
    if (it.rule == p_->root && it.origin == 0 && ItemAccepting(it)) return true;
  }
  return false;
}

}  // namespace lockstep
