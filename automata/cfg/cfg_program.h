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
#include <cstring>
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
  // Budget on the states of one rule's DFA (CompileOptions::max_dfa_states); its NFA may have
  // 4 times as many.
  std::int32_t max_states = 200000;
  // Budget on the states of all rule DFAs together (CompileOptions::max_program_states).
  std::int64_t max_program_states = 1000000;
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
          .max_program_states = options.max_program_states,
          .max_unrolled_states = options.max_unrolled_states > 0 ? options.max_unrolled_states
                                                                 : kGrammarUnrolledStates,
          .max_repeat = options.max_repeat,
          .deadline = deadline};
}

// One row of a TransitionTable: the targets of a state by byte class (kDead: none).
class TransitionRow {
 public:
  TransitionRow() = default;
  TransitionRow(const std::uint16_t* narrow, const StateId* wide) : narrow_(narrow), wide_(wide) {}
  StateId operator[](std::int32_t c) const {
    return narrow_ != nullptr ? static_cast<StateId>(narrow_[c]) - 1 : wide_[c];
  }
  // Calls f(c) for each class c < n where this row and `o` (of the same table) differ, in
  // order, comparing eight bytes of entries at a time: two rows of one automaton differ in a
  // few classes out of dozens. Stops early (and returns false) once f returns false.
  template <typename F>
  bool ForEachDifference(const TransitionRow& o, std::int32_t n, F&& f) const {
    if (narrow_ != nullptr) return Differences(narrow_, o.narrow_, n, f);
    return Differences(wide_, o.wide_, n, f);
  }

 private:
  template <typename T, typename F>
  static bool Differences(const T* a, const T* b, std::int32_t n, F& f) {
    constexpr std::int32_t kPer = static_cast<std::int32_t>(sizeof(std::uint64_t) / sizeof(T));
    std::int32_t c = 0;
    for (; c + kPer <= n; c += kPer) {
      std::uint64_t x, y;
      std::memcpy(&x, a + c, sizeof x);
      std::memcpy(&y, b + c, sizeof y);
      if (x == y) continue;
      for (std::int32_t k = c; k < c + kPer; ++k) {
        if (a[k] != b[k] && !f(k)) return false;
      }
    }
    for (; c < n; ++c) {
      if (a[c] != b[c] && !f(c)) return false;
    }
    return true;
  }

  const std::uint16_t* narrow_ = nullptr;
  const StateId* wide_ = nullptr;
};

// The byte transitions of a program: num_states rows of num_classes targets, kDead where there
// is none. Most entries are dead and most programs have fewer than 65,536 states, so a table
// whose targets fit in 16 bits keeps them as target + 1 in two bytes (0: dead), halving what the
// biggest part of a compiled grammar holds (Github_hard's 240 programs: 626 MB of 4-byte
// entries, 1.77 million states over 88 classes at the median). Reads cost one predictable branch.
class TransitionTable {
 public:
  // Every entry dead; narrow iff every target (< num_states) fits, or never when `wide`.
  void Assign(std::int32_t num_states, std::int32_t num_classes, bool wide = false) {
    const std::size_t n = static_cast<std::size_t>(num_states) * static_cast<std::size_t>(num_classes);
    narrow_entries_ = !wide && num_states <= kMaxNarrowStates;
    narrow_.assign(narrow_entries_ ? n : 0, 0);
    wide_.assign(narrow_entries_ ? 0 : n, -1);
  }
  void Set(std::size_t i, StateId t) {
    if (narrow_entries_) {
      narrow_[i] = static_cast<std::uint16_t>(t + 1);
    } else {
      wide_[i] = t;
    }
  }
  StateId operator[](std::size_t i) const {
    return narrow_entries_ ? static_cast<StateId>(narrow_[i]) - 1 : wide_[i];
  }
  TransitionRow Row(StateId s, std::int32_t num_classes) const {
    const std::size_t at = static_cast<std::size_t>(s) * static_cast<std::size_t>(num_classes);
    return narrow_entries_ ? TransitionRow(narrow_.data() + at, nullptr)
                           : TransitionRow(nullptr, wide_.data() + at);
  }
  std::size_t size() const { return narrow_entries_ ? narrow_.size() : wide_.size(); }
  bool narrow() const { return narrow_entries_; }
  // The entries as stored (for fingerprints: equal programs store equal bytes).
  const void* data() const {
    return narrow_entries_ ? static_cast<const void*>(narrow_.data()) : wide_.data();
  }
  std::size_t ByteSize() const { return narrow_.size() * 2 + wide_.size() * sizeof(StateId); }
  static constexpr std::int32_t kMaxNarrowStates = 65535;

 private:
  bool narrow_entries_ = true;
  std::vector<std::uint16_t> narrow_;
  std::vector<StateId> wide_;
};

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
    // kDfa: the rule of the items of this unique-items list (grammar::Rule::unique_item), whose
    // completions into it the parser checks against the list's earlier items; -1: none.
    std::int32_t unique_item = -1;
    // kDfa with unique_item: its item's calls lead to infinitely many values each
    // (grammar::Rule::unique_open_calls): the item rule is its own item automaton.
    bool unique_open_calls = false;
    // kDfa with unique_item: its items can run out of values along their calls (closed objects;
    // grammar::Rule::unique_search): masks search for a new way to finish each.
    bool unique_search = false;
    // kDfa: the most characters this rule's JSON string may hold (grammar::Rule::max_chars),
    // counted by the parser; -1: none.
    std::int32_t max_chars = -1;
    // kDfa: its JSON string's value must be an ECMAScript pattern (grammar::Rule::ecma_pattern),
    // checked by the parser.
    bool ecma_pattern = false;
  };
  // Whether some rule is a unique-items list (then masks take the run-time check into account:
  // CfgGrammar::FilterUniqueItems).
  bool HasUniqueItems() const {
    for (const RuleInfo& r : rules)
      if (r.unique_item >= 0) return true;
    return false;
  }

  std::vector<RuleInfo> rules;
  std::int32_t root = -1;

  // Unique-items lists whose item values can run out (ComputeItemAutomata; empty when there is
  // no list). item_automaton_of[r]: the list item rule whose automaton rule r is (the item rule
  // itself when it has byte edges only, or the rule it calls as its whole body), -1 otherwise.
  // item_completions[s], for the states of those automata: how many ways the item can finish
  // from s (saturating at kManyCompletions), kInfiniteCompletions when a cycle is reachable;
  // kNoCompletions elsewhere. before_item[s], for the states of the lists: every way to finish
  // the list from s takes one more item (right after `[` or a comma).
  static constexpr std::int64_t kInfiniteCompletions = -1;
  static constexpr std::int64_t kNoCompletions = -2;
  static constexpr std::int64_t kManyCompletions = std::int64_t{1} << 40;
  std::vector<std::int32_t> item_automaton_of;  // (sized iff HasUniqueItems())
  std::vector<std::int64_t> item_completions;
  std::vector<std::uint8_t> before_item;
  // Per rule, for the item automata: 1 when the automaton takes both `0` and `-0` (an integer
  // whose range holds 0), one value spelt two ways, so its values from the start are one fewer
  // than its ways (item_completions counts ways).
  std::vector<std::uint8_t> item_zero_twice;

  // Counted strings (ComputeLengthTables; empty when no rule has max_chars). For the states of
  // those rules: min_chars[s], the fewest characters that still finish the string from s
  // (kNoCompletions elsewhere), and char_mode[s], where s stands in the string's text
  // (JsonCharMode). max_min_chars[r]: the largest min_chars over rule r's states.
  std::vector<std::int32_t> min_chars;
  std::vector<std::uint8_t> char_mode;
  std::vector<std::int32_t> max_min_chars;
  bool HasCountedStrings() const {
    for (const RuleInfo& r : rules)
      if (r.max_chars >= 0) return true;
    return false;
  }

  // Whether some rule's string must be an ECMAScript pattern (then masks take the run-time check
  // into account: CfgGrammar::FilterPatternStrings).
  bool HasPatternStrings() const {
    for (const RuleInfo& r : rules)
      if (r.ecma_pattern) return true;
    return false;
  }

  // Global DFA states of all kDfa rules.
  std::int32_t num_states = 0;
  std::int32_t num_classes = 1;
  std::array<std::uint8_t, 256> byte_class{};
  TransitionTable next;                    // num_states * num_classes; kDead = no transition
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

  StateId Step(StateId s, std::uint8_t b) const {
    return next[static_cast<std::size_t>(s) * num_classes + byte_class[b]];
  }
  TransitionRow Row(StateId s) const { return next.Row(s, num_classes); }
  bool IsCounter(std::int32_t rule) const { return rules[rule].kind == RuleKind::kCounter; }
  std::int32_t NumRules() const { return static_cast<std::int32_t>(rules.size()); }
};

// Fills item_automaton_of, item_completions and before_item from the automata (after lowering,
// and after an artifact is read).
Status ComputeItemAutomata(CfgProgram* p);

// Where a byte of a JSON string's text stands, for counting its characters (code points): the
// string automata spell every character one way, an escape being `\X` or `\u00XX`.
enum JsonCharMode : std::uint8_t {
  kCharBeforeQuote = 0,  // before the opening quote
  kCharText,             // at a character boundary inside the string
  kCharEscape,           // after a backslash
  kCharHex1, kCharHex2, kCharHex3, kCharHex4,  // \u and 4, 3, 2, 1 hex digits to go
  kCharCont1, kCharCont2, kCharCont3,          // 1, 2, 3 UTF-8 continuation bytes to go
  kCharClosed,           // after the closing quote
};
// Advances `mode` over byte b; returns whether b begins a character.
bool JsonCharStep(std::uint8_t* mode, std::uint8_t b);

// A JSON string's text decoded byte by byte into the code points of its value, for the checks
// that read the value at run time (ECMAScript patterns). Any escape is read, `\uD83D\uDE00` as one
// code point; a lead surrogate escape not followed by a trail one is ill-formed here (the string
// automata spell such characters raw).
struct JsonTextDecoder {
  enum : int { kBad = -1, kNothing = 0, kChar = 1, kClosed = 2 };
  std::uint8_t mode = kCharBeforeQuote;  // JsonCharMode
  std::uint8_t utf8_len = 0;    // the bytes of the UTF-8 sequence under way
  std::uint32_t acc = 0;        // \u digits, or a UTF-8 sequence, so far
  std::uint32_t lead = 0;       // a lead surrogate waiting for its trail
  // kChar (the code point in *c), kClosed (the closing quote), kNothing or kBad.
  int Step(std::uint8_t b, char32_t* c);
  bool operator==(const JsonTextDecoder&) const = default;
};

// Fills min_chars, char_mode and max_min_chars (after lowering, and after an artifact is read);
// kInternal if a counted rule's automaton is not a JSON string.
Status ComputeLengthTables(CfgProgram* p);

// The process's two caches of lowered rule automata (cfg_program.cc): big DFA terminals (format
// automata, 64 MiB) and shared rules (65,536 states). A cache past its budget empties itself to
// keep the new entry, so that a long-running process goes on sharing (a big terminal gets a new
// `shared_source`, and the positions keyed by it are walked once more).
struct LoweringCacheStats {
  std::size_t big_dfa_bytes = 0, rule_dfa_states = 0;  // held now
  std::int64_t big_dfa_flushes = 0, rule_dfa_flushes = 0;
};
LoweringCacheStats GetLoweringCacheStats();
// Tests: empties both caches and sets their budgets (bytes of big terminals, states of shared
// rules); returns the old budgets.
std::pair<std::size_t, std::size_t> SetLoweringCacheBudgetsForTesting(std::size_t big_dfa_bytes,
                                                                      std::size_t rule_dfa_states);

// Lowers `g` (any front end's IR). kUnsatisfiable if the root derives no string; kInvalidGrammar
// for a token item the vocabulary does not have (an id out of range, a text that is not one
// token) or a bad lexeme regex (with the expression's
// line:column); kResourceLimit past the budgets.
Result<CfgProgram> CompileCfg(const grammar::Grammar& g, const Vocabulary& vocab,
                              const CfgCompileOptions& options = {});

}  // namespace lockstep
