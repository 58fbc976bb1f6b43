// Internal stages between ByteNfa and ByteDfa, for automata/regex/regex_compiler.cc and the tests:
// subset construction over byte classes (dfa_builder.cc), then trimming, Hopcroft minimisation
// and canonical renumbering (dfa_minimize.cc).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "automata/regex/regex_compiler.h"
#include "automata/regex/byte_nfa.h"
#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

// A complete DFA straight from subset construction: state 0 is the empty set (dead); states are
// neither trimmed nor minimal and accepting ones are flagged, not grouped.
struct SubsetDfa {
  std::int32_t num_states = 0;
  std::int32_t num_classes = 1;
  std::array<std::uint8_t, 256> byte_class{};
  std::vector<StateId> next;            // num_states * num_classes
  std::vector<std::uint8_t> accepting;  // num_states
  StateId start = 0;
};

// The coarsest partition of the 256 bytes such that every byte range of `nfa` is a union of
// classes: two bytes share a class iff they lie in exactly the same ranges. Returns the number
// of classes; classes are numbered by their smallest byte.
std::int32_t ComputeByteClasses(const ByteNfa& nfa, std::array<std::uint8_t, 256>* byte_class);

// Subset construction. kResourceLimit naming max_dfa_states (or max_subset_elements, the total
// size of all state sets kept) when a budget runs out.
Result<SubsetDfa> BuildSubsetDfa(const ByteNfa& nfa, const RegexCompileOptions& options);

// Trims states that cannot reach acceptance into the dead state, merges equivalent states
// (Hopcroft), numbers states 0 dead, then non-accepting, then accepting ones in breadth-first
// order over bytes, and merges byte classes whose columns are identical.
// `distinct_states`: the caller knows no two live states are equivalent (a construction that
// is minimal by design); the partition refinement is skipped, the rest (trimming, numbering,
// classes) is the same.
ByteDfa MinimizeDfa(const SubsetDfa& dfa, bool distinct_states = false);
// The same, with `moore_only`: equivalent states merged by Moore's refinement whatever the size
// (MinimizeDfa uses it below states x classes of 16,384 and Hopcroft's above): for the test that
// the two agree.
ByteDfa MinimizeDfaWith(const SubsetDfa& dfa, bool distinct_states, bool moore_only);

}  // namespace lockstep
