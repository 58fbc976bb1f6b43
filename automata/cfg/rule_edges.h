// The rule edges of a program read backwards, and the least fixpoint over them that nullability
// and productivity (the lowering, automata/cfg/cfg_program.cc) and the grammar's per-state
// nullability (CfgGrammar::ComputeFollow) share. Internal to automata/cfg.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "automata/cfg/cfg_program.h"

namespace lockstep {

// Reverse edges of the rule edges: per target state, (source, rule); per rule, (source, target).
struct RuleEdgeIndex {
  std::vector<std::uint32_t> by_target_begin, by_rule_begin;
  std::vector<std::pair<std::int32_t, std::int32_t>> by_target;  // (source, rule)
  std::vector<std::pair<std::int32_t, std::int32_t>> by_rule;    // (source, target)
  // nts(s): state s's rule edges (rule, target).
  template <typename Nts>
  RuleEdgeIndex(std::size_t ns, std::int32_t num_rules, Nts nts) {
    by_target_begin.assign(ns + 1, 0);
    by_rule_begin.assign(static_cast<std::size_t>(num_rules) + 1, 0);
    for (std::size_t s = 0; s < ns; ++s) {
      for (const auto& [r, t] : nts(s)) {
        ++by_target_begin[t + 1];
        ++by_rule_begin[r + 1];
      }
    }
    for (std::size_t i = 0; i < ns; ++i) by_target_begin[i + 1] += by_target_begin[i];
    for (std::int32_t r = 0; r < num_rules; ++r) by_rule_begin[r + 1] += by_rule_begin[r];
    by_target.resize(by_target_begin[ns]);
    by_rule.resize(by_rule_begin[num_rules]);
    std::vector<std::uint32_t> at_t(by_target_begin.begin(), by_target_begin.end() - 1);
    std::vector<std::uint32_t> at_r(by_rule_begin.begin(), by_rule_begin.end() - 1);
    for (std::size_t s = 0; s < ns; ++s) {
      for (const auto& [r, t] : nts(s)) {
        by_target[at_t[t]++] = {static_cast<std::int32_t>(s), r};
        by_rule[at_r[r]++] = {static_cast<std::int32_t>(s), t};
      }
    }
  }
};

// Per state, the DFA rules starting there; per rule, the counter rules repeating it: linked
// lists (first_* by state or child, next by rule).
struct RuleStarts {
  std::vector<std::int32_t> first_at_state, first_counter_of, next;
  RuleStarts(const CfgProgram& p, std::size_t ns)
      : first_at_state(ns, -1), first_counter_of(p.NumRules(), -1), next(p.NumRules(), -1) {
    for (std::int32_t r = 0; r < p.NumRules(); ++r) {
      const auto& ri = p.rules[r];
      if (ri.kind == CfgProgram::RuleKind::kDfa && ri.start < 0) continue;  // (no start: no list)
      std::int32_t& head = ri.kind == CfgProgram::RuleKind::kDfa ? first_at_state[ri.start]
                                                                 : first_counter_of[ri.child];
      next[r] = head;
      head = r;
    }
  }
};

// The least fixpoint that nullability and productivity share: a state is in when it has a rule
// edge (r, t) with r and t in (or, given `sym_begin` / `sym_src`, a byte or special edge to a
// state in: the sources of each target's such edges); a DFA rule when its start is in, a counter
// when its child is. Everything in `state_in` / `rule_in` on entry is a seed. A worklist, linear
// in states and edges; false if `stop` (polled every 1,024 steps) said to stop.
template <typename Stop>
bool CloseOverEdges(const RuleEdgeIndex& edges, const RuleStarts& starts,
                    std::span<const std::uint32_t> sym_begin, std::span<const std::int32_t> sym_src,
                    std::vector<std::uint8_t>& state_in, std::vector<std::uint8_t>& rule_in,
                    const Stop& stop) {
  std::vector<std::int32_t> states, rules;
  for (std::size_t s = 0; s < state_in.size(); ++s) {
    if (state_in[s]) states.push_back(static_cast<std::int32_t>(s));
  }
  for (std::size_t r = 0; r < rule_in.size(); ++r) {
    if (rule_in[r]) rules.push_back(static_cast<std::int32_t>(r));
  }
  auto mark_state = [&](std::int32_t s) {
    if (!state_in[s]) state_in[s] = 1, states.push_back(s);
  };
  auto mark_rule = [&](std::int32_t r) {
    if (!rule_in[r]) rule_in[r] = 1, rules.push_back(r);
  };
  std::size_t polls = 0;
  while (!states.empty() || !rules.empty()) {
    if ((++polls & 1023) == 0 && stop()) return false;
    if (!states.empty()) {
      const std::int32_t t = states.back();
      states.pop_back();
      if (!sym_begin.empty()) {
        for (std::uint32_t i = sym_begin[t]; i < sym_begin[t + 1]; ++i) mark_state(sym_src[i]);
      }
      for (std::uint32_t i = edges.by_target_begin[t]; i < edges.by_target_begin[t + 1]; ++i) {
        const auto [s, r] = edges.by_target[i];
        if (rule_in[r]) mark_state(s);
      }
      for (std::int32_t r = starts.first_at_state[t]; r >= 0; r = starts.next[r]) mark_rule(r);
      continue;
    }
    const std::int32_t r = rules.back();
    rules.pop_back();
    for (std::uint32_t i = edges.by_rule_begin[r]; i < edges.by_rule_begin[r + 1]; ++i) {
      const auto [s, t] = edges.by_rule[i];
      if (state_in[t]) mark_state(s);
    }
    for (std::int32_t c = starts.first_counter_of[r]; c >= 0; c = starts.next[c]) mark_rule(c);
  }
  return true;
}

// RuleEdgeIndex over a finished program's rule edges.
inline RuleEdgeIndex ProgramRuleEdges(const CfgProgram& p) {
  return RuleEdgeIndex(static_cast<std::size_t>(p.num_states), p.NumRules(), [&](std::size_t s) {
    return std::span<const std::pair<std::int32_t, StateId>>(
        p.nt_edges.data() + p.nt_begin[s], p.nt_edges.data() + p.nt_begin[s + 1]);
  });
}

}  // namespace lockstep
