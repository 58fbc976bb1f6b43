// Leading lookaheads: a pattern "^(?=A)(?!B)...R" (lookahead groups right after a leading '^',
// no '|' outside groups) is the conjunction of searches "^(?:A)", not "^(?:B)", ..., "^(?:R)".
// Both the validator (RE2 has no lookaround) and the schema compiler (the search automaton is
// the intersection of the parts' automata, a negative part's complemented) run it that way.
// Lookaheads anywhere else stay unsupported.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

// Calls f(i, c, depth) for each character of `pattern` outside escapes and character classes
// (ECMA-262: a class's first ']' closes it, even right after '[' or '[^'), depth being the group
// nesting before c; stops early when f returns false.
template <class F>
void ForEachStructural(std::string_view pattern, F&& f) {
  std::size_t depth = 0;
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      continue;
    }
    if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') ++i;
      continue;
    }
    if (!f(i, c, depth)) return;
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
  }
}

struct LookaheadPart {
  std::string pattern;  // an anchored search pattern "^(?:...)"
  bool negated = false;
};

// The parts of `pattern` when it opens with '^' and one or more lookahead groups and has no
// top-level alternation; nullopt otherwise (including unbalanced groups, left to the parser to
// report). The last part is the rest of the pattern, never negated.
std::optional<std::vector<LookaheadPart>> SplitLeadingLookaheads(std::string_view pattern);

}  // namespace lockstep
