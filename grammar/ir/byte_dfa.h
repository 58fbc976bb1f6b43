// ByteDfa: a minimal, trimmed DFA over bytes, the automaton every regex and every lexeme compiles
// to (automata/regex/regex_compiler.h); the grammar IR carries it for precompiled lexemes. The hot loop is one lookup: next[state * num_classes + byte_class[b]].
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/status.h"
#include "lockstep/types.h"

namespace lockstep {

struct ByteDfa {
  // State 0 is the dead state: never accepting, every byte leads back to 0. Every other state
  // is live (some accepting state is reachable from it): the DFA is trimmed and minimal.
  static constexpr StateId kDead = 0;

  std::int32_t num_states = 1;
  std::int32_t num_classes = 1;
  std::array<std::uint8_t, 256> byte_class{};  // byte -> class in [0, num_classes)
  std::vector<StateId> next;                   // num_states * num_classes entries
  StateId start = kDead;                       // kDead iff the language is empty
  // Accepting states are numbered together: s is accepting iff s >= accept_begin.
  StateId accept_begin = 1;

  StateId Step(StateId s, std::uint8_t b) const { return next[s * num_classes + byte_class[b]]; }
  bool IsAccepting(StateId s) const { return s >= accept_begin; }
  // Runs `bytes` from `s`; returns kDead as soon as the automaton dies.
  StateId Run(StateId s, std::string_view bytes) const {
    for (unsigned char c : bytes) {
      s = Step(s, c);
      if (s == kDead) break;
    }
    return s;
  }
  bool FullMatch(std::string_view bytes) const { return IsAccepting(Run(start, bytes)); }
};

}  // namespace lockstep
