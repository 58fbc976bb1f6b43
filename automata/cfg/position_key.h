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
//   - a rule's hash is its start state's; a counter rule's is (min, max, its child's hash); a
//     call to a rule already being hashed (recursion) is a reference by distance up the stack of
//     rules being hashed, so the description reads the same in any grammar;
//   - the position's key adds r's follow set.
// Equal descriptions mean isomorphic automata, hence equal positions: equal positions of
// different grammars (the start of a string value followed by `, "` in two tool schemas, any
// state of a shared `any value` rule) get equal keys, and different positions get different
// keys up to a 128-bit hash collision.
//
// A rule whose hash refers to a caller (mutual recursion) is hashed again under each caller
// stack it is met with, which grows exponentially with the recursion's fan-out (Kubernetes'
// JSONSchemaProps: 700 rules calling each other took seconds). A keyer therefore has a budget
// of states hashed, a small multiple of the program's size: past it, every rule not hashed yet
// gets no key (its positions are computed, not shared).
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
  // past it the call gives up and returns nullopt, keeping the rules it finished, so that a later
  // call goes on from there (a fill asks with a small bound, the background worker with none).
  // A rule that alone would take more than `rule_work` (default: max_work) is given up for good
  // by bounded calls; one that fits rule_work but not what is left of max_work (a fill that
  // hashed for other positions already) is only left for a later call.
  std::optional<PositionKey> Key(StateId s, const std::array<std::uint64_t, 4>& follow,
                                 std::int64_t max_work = INT64_MAX, std::int64_t rule_work = -1);

  static constexpr std::size_t kMaxCycle = 4096;
  // The budget of states hashed (Pass) over the keyer's life: this many times the program's
  // states and rule edges, plus kBudgetBase.
  static constexpr std::int64_t kBudgetPerState = 2;
  static constexpr std::int64_t kBudgetBase = 16384;
  // Whether the budget ran out (some keys are missing because of it).
  bool exhausted() const { return work_ > budget_; }
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
    // The lowest level of rule_stack_ this hash refers back to (INT32_MAX: none): a hash that
    // refers below its own rule's level depends on its callers and is not kept.
    std::int32_t lowest = INT32_MAX;
  };
  // A rule's states' byte runs and successors (local indices), for one Pass.
  struct PassData {
    const StateId* states = nullptr;  // the rule's states, sorted
    std::int32_t n = 0;
    std::vector<Run> runs;
    std::vector<std::int32_t> runs_begin, succ, succ_begin;
    std::span<const Run> RunsOf(std::int32_t local) const;  // by the state's index in its rule
  };
  // Buffers of one Pass, one per nesting level (a pass hashes the rules it calls first).
  struct PassScratch {
    PassData d;
    std::vector<Run> runs;
    std::vector<std::int32_t> index, low, stack;
    std::vector<std::uint8_t> on_stack;
    std::vector<std::pair<std::int32_t, std::int32_t>> call;  // (state, next successor)
    std::vector<StateId> members;
  };
  std::vector<std::unique_ptr<PassScratch>> pass_scratch_;
  std::int32_t pass_depth_ = 0;
  H RuleHash(std::int32_t rule);
  // Hashes every state of DFA rule `rule` into hash_ (its callers are on rule_stack_).
  void Pass(std::int32_t rule);
  H Acyclic(StateId s, const PassData& d);
  // Hashes the members of one strongly connected component (sorted by state number).
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
  // Per rule: 0 not hashed, 1 being hashed, 2 hashed and independent of its callers.
  std::vector<std::uint8_t> rule_state_;
  std::vector<H> counter_hash_;
  // Hashes that depend on their callers, valid while the same stack is below them.
  struct Dependent {
    std::uint64_t stack_id = 0;
    H h;
  };
  std::vector<Dependent> dependent_;
  std::vector<std::int32_t> rule_stack_;
  std::vector<std::uint64_t> stack_ids_;  // a fresh id per push: the stack below is named by it
  std::uint64_t next_stack_id_ = 1;
  // Byte runs of each class: class_bytes_[class_bytes_begin_[c] .. class_bytes_begin_[c + 1]).
  std::vector<std::int32_t> class_bytes_begin_;
  std::vector<std::array<std::uint8_t, 2>> class_bytes_;
  std::int64_t work_ = 0;    // states hashed so far
  std::int64_t budget_ = 0;  // see kBudgetPerState
  // The work of one Pass over a rule of n states.
  static std::int64_t PassWork(std::int64_t n) { return n > kMaxRuleStates ? n / 64 : n; }
  // Per rule: a bounded Key call gave up on it, or on a rule it calls, before hashing it.
  std::vector<std::uint8_t> over_bounded_;
  std::int64_t call_limit_ = INT64_MAX;  // work_ at which the current Key call gives up
  std::int64_t rule_limit_ = INT64_MAX;  // a rule past it is over_bounded_ (Key's rule_work)
  bool aborted_ = false;                 // the current Key call gave up
};

}  // namespace lockstep
