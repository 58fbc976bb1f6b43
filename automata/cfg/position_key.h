// PositionKey: a structural key for a grammar position, equal across grammars whenever the
// positions are, so that positions can be shared by every grammar compiled for one vocabulary.
//
// A position (automata/cfg/cfg_grammar.h) of DFA state s of rule r splits the vocabulary by walking
// every token from s in r alone: which tokens r consumes, which die, and after which bytes r may
// finish (the rest of the token kept as a tail, pruned by the bytes that can follow r). That
// split is a function of the automaton r runs from s (with the rules it calls) and of r's follow
// set. The key is a 128-bit hash of a description of both in which no state, class or rule
// number appears:
//   - per state, bottom-up over the strongly connected components of the rule's automaton: a
//     state on no cycle is described by its acceptance, its byte transitions as maximal byte
//     ranges with their targets' hashes, and its rule edges as (called rule's hash, target's
//     hash), the edges sorted; a state on a cycle by the whole component (its members by their
//     rank in state order, exits by their hashes) and its own rank. Rank order is the lowering's,
//     the same for the same automaton in two grammars (a different order only misses a match);
//   - a rule's hash is its start state's; a counter rule's is (min, max, its child's hash);
//   - rules that call each other (a strongly connected component of the rule graph: JSON's
//     value, object and member rules) are hashed together, once: a call to a rule of the same
//     component is a reference by the rule's rank in the component (rank order is rule order,
//     the lowering's), and every state whose description holds such a reference adds the
//     component's hash (its rules' start descriptions in rank order). Which rule is asked first
//     does not matter, and each state is hashed once whatever the recursion's fan-out;
//   - the position's key adds r's follow set.
// Equal descriptions mean isomorphic automata, hence equal positions: equal positions of
// different grammars (the start of a string value followed by `, "` in two tool schemas, any
// state of a shared `any value` rule) get equal keys, and different positions get different
// keys up to a 128-bit hash collision.
//
// Keying a state hashes the components it reaches that are not hashed yet, callees first. A
// bounded call (a fill's) does that only if all of it fits its bound, and otherwise hashes
// nothing; a keyer also has a budget of states hashed over its life (a multiple of the program's
// size, which a pass over every state once stays within: past it, states get no key).
//
// No key (the position is always computed) for a state that reaches a special-token edge or a
// rule of more than kMaxRuleStates states, except a big format automaton copied unchanged from
// the process's cache (CfgProgram::RuleInfo::shared_source): its states are named by that
// cache entry and their rank in the rule.
#pragma once

#include <array>
#include <climits>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "automata/cfg/cfg_program.h"

namespace lockstep {

struct PositionKey {
  std::uint64_t a = 0, b = 0;
  bool operator==(const PositionKey& o) const { return a == o.a && b == o.b; }
  struct Hash {
    std::size_t operator()(const PositionKey& k) const { return static_cast<std::size_t>(k.a); }
  };
};

namespace position_key_detail {
// Buffers of a strongly-connected-components pass (position_key.cc's ForEachComponent).
struct SccScratch {
  std::vector<std::int32_t> index, low, stack, members;
  std::vector<std::uint8_t> on_stack;
  std::vector<std::pair<std::int32_t, std::int32_t>> call;  // (node, next successor)
};
}  // namespace position_key_detail

// A 128-bit fingerprint of everything of `program` that a PositionKeyer reads (states,
// classes, transitions, acceptance, rule and special edges, rule kinds and bounds): programs
// with equal fingerprints get equal keys state for state (up to a collision), so the hashes a
// keyer computed for one serve the other (a schema compiled again in the same process).
PositionKey ProgramFingerprint(const CfgProgram& program);

// Not thread-safe: one per grammar, used under the grammar's lock. A const keyer (a snapshot
// kept in the vocabulary's store) may be read by any number of threads.
class PositionKeyer {
 public:
  explicit PositionKeyer(const CfgProgram* program);
  // The hashes o has computed so far, for `program` (null for a snapshot that only answers
  // KnownKey), which must have o's program's fingerprint.
  PositionKeyer(const PositionKeyer& o, const CfgProgram* program);
  // Whether the key of state s of `program` is known without hashing any more: its rule has
  // been hashed and does not depend on its callers.
  bool Known(StateId s, const CfgProgram& program) const {
    return rule_state_[program.state_rule[s]] == 2;
  }
  // The key of a Known state.
  std::optional<PositionKey> KnownKey(StateId s, const std::array<std::uint64_t, 4>& follow) const;
  std::int64_t Bytes() const;

  // The key of DFA state s's position, given its rule's follow set (4 words of 64 bytes each);
  // nullopt when it has none (see above). `max_work` bounds this call's hashing (states hashed):
  // when the components still to hash for s take more, the call hashes nothing and returns
  // nullopt (a fill asks with a small bound, the background worker with none). If they take
  // more than `rule_work` (default: max_work), bounded calls give s's rule up for good; if they
  // fit rule_work but not max_work (a fill that hashed for other positions already), it is only
  // left for a later call.
  std::optional<PositionKey> Key(StateId s, const std::array<std::uint64_t, 4>& follow,
                                 std::int64_t max_work = INT64_MAX, std::int64_t rule_work = -1);

  static constexpr std::size_t kMaxCycle = 4096;
  // The budget of states hashed (Pass) over the keyer's life: this many times the program's
  // states and rule edges, plus kBudgetBase.
  static constexpr std::int64_t kBudgetPerState = 2;
  static constexpr std::int64_t kBudgetBase = 16384;
  std::int64_t work() const { return work_; }
  static constexpr std::int32_t kMaxRuleStates = 4096;

 private:
  struct Run {
    std::uint8_t lo, hi;
    StateId target;
  };
  struct H {
    std::uint64_t a = 0, b = 0;
    bool none = false;
    // The description refers to a rule of the component being hashed (by rank): the final hash
    // adds the component's.
    bool rec = false;
  };
  // A rule's states' byte runs and successors (local indices), for one Pass.
  struct PassData {
    const StateId* states = nullptr;  // the rule's states, sorted
    std::int32_t n = 0;
    std::vector<Run> runs;
    std::vector<std::int32_t> runs_begin, succ, succ_begin;
    std::span<const Run> RunsOf(std::int32_t local) const;  // by the state's index in its rule
  };
  // Buffers of a Pass.
  struct PassScratch {
    PassData d;
    std::vector<Run> runs;
    position_key_detail::SccScratch scc;
    std::vector<StateId> members;
    struct Edge {
      H rule;
      StateId target;
    };
    std::vector<Edge> edges;
  };
  PassScratch scratch_;
  // The rule graph's strongly connected components (FindComponents): numbered callees first.
  void FindComponents();
  // Hashes, callees first, every component reachable from `target` not hashed yet, if they fit
  // the call's bounds; false (nothing hashed) when they do not.
  bool HashFrom(std::int32_t target, std::int64_t max_work, std::int64_t rule_work);
  void HashComponent(std::int32_t c);
  // A hashed rule's hash: its start state's, or a counter's own.
  H& RuleHash(std::int32_t rule);
  // The hash by which a state of the component being hashed refers to a call of `rule`.
  H RuleRef(std::int32_t rule);
  // Hashes every state of DFA rule `rule` into hash_ (provisionally when they refer to their
  // component).
  void Pass(std::int32_t rule);
  H Acyclic(StateId s, const PassData& d);
  // Hashes the members of one strongly connected component of states (sorted by state number).
  void Cyclic(const std::vector<StateId>& members, const PassData& d);
  void RunsOf(StateId s, std::vector<Run>& out) const;

  const CfgProgram* p_;
  // Byte ranges of each byte class, in byte order: (lo, hi, class).
  std::vector<std::array<std::int32_t, 3>> class_runs_;
  // States of each rule: rule_states_[rule_begin_[r] .. rule_begin_[r + 1]).
  std::vector<std::int32_t> rule_begin_;
  std::vector<StateId> rule_states_;
  std::vector<std::int32_t> local_;  // per state: its index among its rule's states
  std::vector<H> hash_;  // per state
  // Per rule: 0 not hashed, 2 hashed.
  std::vector<std::uint8_t> rule_state_;
  std::vector<H> counter_hash_;
  // The rules each rule calls (distinct): callees_[callee_begin_[r] .. callee_begin_[r + 1]).
  std::vector<std::int32_t> callee_begin_, callees_;
  // Components: the rules of component c are comp_rules_[comp_begin_[c] .. comp_begin_[c + 1])
  // in rule order; rule_comp_[r] is r's component and rule_rank_[r] its rank there; comp_work_
  // what hashing the component takes (PassWork of its rules).
  std::vector<std::int32_t> rule_comp_, rule_rank_, comp_begin_, comp_rules_;
  std::vector<std::int64_t> comp_work_;
  std::int32_t current_comp_ = -1;  // the component being hashed
  // Per component: a bounded call found it over its rule_work (given up by bounded calls).
  std::vector<std::uint8_t> over_bounded_;
  // HashFrom's search: a mark per component (the call's generation) and the components found.
  std::vector<std::uint32_t> comp_mark_;
  std::uint32_t generation_ = 0;
  std::vector<std::int32_t> todo_, search_;
  // Byte runs of each class: class_bytes_[class_bytes_begin_[c] .. class_bytes_begin_[c + 1]).
  std::vector<std::int32_t> class_bytes_begin_;
  std::vector<std::array<std::uint8_t, 2>> class_bytes_;
  std::int64_t work_ = 0;    // states hashed so far
  std::int64_t budget_ = 0;  // see kBudgetPerState
  // The work of one Pass over a rule of n states.
  static std::int64_t PassWork(std::int64_t n) { return n > kMaxRuleStates ? n / 64 : n; }
};

}  // namespace lockstep
