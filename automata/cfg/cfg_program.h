// CfgProgram: a context-free grammar lowered for the Earley runtime. Every rule is either
//   - a DFA rule: a deterministic automaton over bytes, rule symbols and special-token symbols
//     (all rule DFA states share one global numbering and one byte-class table), or
//   - a counter rule: `child` repeated between min and max times, run as a native counter (an
//     Earley item's state is the repetition count), never as copies.
// Unproductive states and rules (those that can never finish) are trimmed, so every live parse
// can be completed: a token the runtime allows never leads into a dead end.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "grammar/base/deadline.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/compiler.h"
#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

// The automatic CompileOptions::max_unrolled_states (0) of each kind of constraint: grammars
// unroll more (fewer stack-dependent tokens, faster masks); JSON Schemas and structured formats
// put a whitespace gap at every JSON gap, where unrolling doubles the time to first mask.
inline constexpr std::int32_t kGrammarUnrolledStates = 2048;
inline constexpr std::int32_t kSchemaUnrolledStates = 256;

// The lowering's options. A compile takes them from its CompileOptions through CfgOptionsFrom,
// the one mapping, so CompileOptions' budgets and defaults are the ones in effect there. The
// defaults below apply only to options built directly (tests), where the budgets are roomier
// than CompileOptions' (200,000 states and 1,000,000 repetitions, against 100,000 each).
struct CfgCompileOptions {
  // Budget on the states of all rule DFAs together (CompileOptions::max_dfa_states).
  std::int32_t max_states = 200000;
  // Small bounded repetitions of pure terminals are unrolled inside the rule's byte automaton
  // while the unrolled NFA stays under this many states; larger ones use a counter rule
  // (CompileOptions::max_unrolled_states, else kGrammarUnrolledStates).
  std::int32_t max_unrolled_states = kGrammarUnrolledStates;
  std::int32_t max_repeat = 1000000;  // CompileOptions::max_repeat
  // Rules marked grammar::Rule::shared take their automaton from a process-wide cache keyed by
  // the rule's NFA when an earlier compile determinised the same NFA (off: always determinise).
  bool reuse_shared_rules = true;
  // Past it, kResourceLimit naming the rule being lowered (polled per rule, per expression
  // built and per DFA state).
  CompileDeadline deadline;
};

// The lowering's options under a compile's `options` and `deadline` (CompileOptions'
// compile_timeout_ms and cancel, started when the compile began).
inline CfgCompileOptions CfgOptionsFrom(const CompileOptions& options,
                                        const CompileDeadline& deadline) {
  return {.max_states = options.max_dfa_states,
          .max_unrolled_states = options.max_unrolled_states > 0 ? options.max_unrolled_states
                                                                 : kGrammarUnrolledStates,
          .max_repeat = options.max_repeat,
          .deadline = deadline};
}

struct CfgProgram {
  static constexpr StateId kDead = -1;
  static constexpr std::int32_t kUnbounded = -1;

  enum class RuleKind : std::uint8_t { kDfa, kCounter };
  struct RuleInfo {
    RuleKind kind = RuleKind::kDfa;
    std::string name;
    StateId start = kDead;  // kDfa: global start state
    std::int32_t child = -1;  // kCounter: repeated rule
    std::int32_t min = 0;     // kCounter
    std::int32_t max = 0;     // kCounter; kUnbounded: no limit
    bool nullable = false;
    // kDfa copied unchanged from a process-wide cached automaton (a big format automaton): that
    // entry's serial number, the same in every grammar of the process; 0 otherwise.
    std::uint64_t shared_source = 0;
  };

  std::vector<RuleInfo> rules;
  std::int32_t root = -1;

  // Global DFA states of all kDfa rules.
  std::int32_t num_states = 0;
  std::int32_t num_classes = 1;
  std::array<std::uint8_t, 256> byte_class{};
  std::vector<StateId> next;               // num_states * num_classes; kDead = no transition
  std::vector<std::uint8_t> accepting;     // per state
  std::vector<std::int32_t> state_rule;    // per state: the rule it belongs to
  std::vector<std::uint8_t> has_bytes;     // per state: some byte transition exists
  // Per state: the bytes with a transition, as 4 words (filled by CompileCfg from its byte
  // ranges; empty in a program read back from an artifact, where users derive them from next).
  std::vector<std::array<std::uint64_t, 4>> byte_first;
  // Rule-symbol edges of state s: nt_edges[nt_begin[s] .. nt_begin[s+1]) = (rule, target).
  std::vector<std::int32_t> nt_begin;
  std::vector<std::pair<std::int32_t, StateId>> nt_edges;
  // Special-token edges likewise: (special index, target).
  std::vector<std::int32_t> sp_begin;
  std::vector<std::pair<std::int32_t, StateId>> sp_edges;
  std::vector<TokenId> special_tokens;  // special index -> token id
  // special index -> 1 when the edge takes any one token but special_tokens[index] (GBNF
  // !<...>), never an end-of-sequence token. Empty reads as all 0.
  std::vector<std::uint8_t> special_negated;
  bool SpecialNegated(std::int32_t index) const {
    return static_cast<std::size_t>(index) < special_negated.size() && special_negated[index] != 0;
  }

  StateId Step(StateId s, std::uint8_t b) const { return next[s * num_classes + byte_class[b]]; }
  bool IsCounter(std::int32_t rule) const { return rules[rule].kind == RuleKind::kCounter; }
  std::int32_t NumRules() const { return static_cast<std::int32_t>(rules.size()); }
};

// Lowers `g` (any front end's IR). kUnsatisfiable if the root derives no string; kInvalidGrammar
// for a token item the vocabulary does not have (an id out of range, a text that is not one
// token) or a bad lexeme regex (with the expression's
// line:column); kResourceLimit past the budgets.
Result<CfgProgram> CompileCfg(const grammar::Grammar& g, const Vocabulary& vocab,
                              const CfgCompileOptions& options = {});

}  // namespace lockstep
