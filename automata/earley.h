// EarleyParser: the byte-level recogniser of a CfgProgram. One Earley set per byte consumed;
// items are (rule, state, origin set). Items point back at their origin sets, so the sets form
// a graph-structured stack shared by every parse alive at once: ambiguity and left recursion
// cost nothing special, and rolling back is truncating the set stack. Nullable rules follow
// Aycock & Horspool (advance over a nullable rule when predicting it). No recursion anywhere:
// nesting depth is bounded by an option, never by the C++ stack.
//
// Local mode (InitLocal) starts from a single item whose origin is the "bottom" (-1): the
// parse of one rule position in isolation, used to precompute token classes per position.
// When that item's rule completes, the set is marked (bottom_completed) instead of continuing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "automata/cfg_program.h"

namespace lockstep {

struct EarleyItem {
  std::int32_t rule;
  std::int32_t state;   // kDfa: global DFA state; kCounter: repetitions done so far
  std::int32_t origin;  // set where the rule was predicted; -1: the bottom (local mode)
  std::int32_t depth;   // prediction depth (root = 0)
};

class EarleyParser {
 public:
  EarleyParser(const CfgProgram* program, std::int32_t max_depth);

  void InitRoot();
  void InitLocal(std::int32_t rule, std::int32_t state, std::int32_t depth);

  // Each appends one set and returns true, or returns false and leaves the parser unchanged.
  bool StepByte(std::uint8_t b);
  bool StepSpecial(std::int32_t special_index);
  // A set holding the items of set `origin` that wait on `rule`, advanced over it (the parse
  // right after `rule` completes with that origin), closed.
  bool PushCompletion(std::int32_t rule, std::int32_t origin);
  void PopTo(std::int32_t num_sets) {
    if (num_sets >= static_cast<std::int32_t>(set_begin_.size())) return;
    items_.resize(set_begin_[num_sets]);
    set_begin_.resize(num_sets);
    bottom_.resize(num_sets);
  }

  std::int32_t num_sets() const { return static_cast<std::int32_t>(set_begin_.size()); }
  std::span<const EarleyItem> set(std::int32_t k) const {
    std::size_t e = k + 1 < num_sets() ? set_begin_[k + 1] : items_.size();
    return {items_.data() + set_begin_[k], items_.data() + e};
  }
  // Kernel items of set k: those not created by prediction in k. Every parse path from set k
  // starts in the closure of a kernel item.
  bool IsKernel(std::int32_t k, const EarleyItem& it) const {
    return it.origin < k || (k == 0 && &it == items_.data() + set_begin_[0]);
  }
  bool ItemAccepting(const EarleyItem& it) const;
  // Whether the item can still consume something (bytes, specials or a rule).
  bool ItemHasFuture(const EarleyItem& it) const;
  bool CanEnd() const;
  bool bottom_completed(std::int32_t k) const { return (bottom_[k] & 1) != 0; }
  // Some prediction in set k was dropped because of max_depth.
  bool truncated(std::int32_t k) const { return (bottom_[k] & 2) != 0; }
  // A prediction was dropped because of max_depth since the last ClearDepthFlag.
  bool depth_exceeded() const { return depth_exceeded_; }
  void ClearDepthFlag() { depth_exceeded_ = false; }
  std::int32_t max_depth() const { return max_depth_; }
  const CfgProgram& program() const { return *p_; }
  std::size_t MemoryBytes() const {
    return items_.capacity() * sizeof(EarleyItem) + set_begin_.capacity() * sizeof(std::int32_t);
  }

 private:
  void BeginSet();
  bool EndSet();  // closes the set under construction; false (and discarded) if empty
  void Add(const EarleyItem& it);
  void Closure(std::int32_t k);
  void Complete(std::int32_t rule, std::int32_t origin, std::int32_t k);
  void Predict(std::int32_t rule, std::int32_t k, std::int32_t depth);
  // Advances `p` over a completed `rule`; appends to the current set.
  void AdvanceOver(const EarleyItem& p, std::int32_t rule);

  const CfgProgram* p_;
  std::int32_t max_depth_;
  bool depth_exceeded_ = false;
  std::vector<EarleyItem> items_;
  std::vector<std::int32_t> set_begin_;
  std::vector<std::uint8_t> bottom_;  // per set: 1 = bottom completed, 2 = truncated
  // Dedupe of the set under construction: linear scan while small, then a hash table.
  std::vector<std::int32_t> table_;
  bool table_active_ = false;
  std::size_t cur_begin_ = 0;
};

}  // namespace lockstep
