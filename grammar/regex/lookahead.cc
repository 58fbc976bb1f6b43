#include "grammar/regex/lookahead.h"

namespace lockstep {

namespace {

// The index just past the group opening at `open` (pattern[open] == '('), or npos when it is
// not closed.
std::size_t GroupEnd(std::string_view p, std::size_t open) {
  std::size_t end = std::string_view::npos;
  ForEachStructural(p.substr(open), [&](std::size_t i, char c, std::size_t depth) {
    if (c == ')' && depth == 1) {
      end = open + i + 1;
      return false;
    }
    return true;
  });
  return end;
}

bool HasTopLevelBar(std::string_view p) {
  bool bar = false;
  ForEachStructural(p, [&](std::size_t, char c, std::size_t depth) {
    bar = c == '|' && depth == 0;
    return !bar;
  });
  return bar;
}

}  // namespace

std::optional<std::vector<LookaheadPart>> SplitLeadingLookaheads(std::string_view pattern) {
  if (pattern.size() < 4 || pattern[0] != '^' || pattern.substr(1, 2) != "(?" ||
      (pattern[3] != '=' && pattern[3] != '!')) {
    return std::nullopt;
  }
  if (HasTopLevelBar(pattern)) return std::nullopt;
  std::vector<LookaheadPart> parts;
  std::size_t i = 1;
  while (i + 3 < pattern.size() && pattern.substr(i, 2) == "(?" &&
         (pattern[i + 2] == '=' || pattern[i + 2] == '!')) {
    const std::size_t end = GroupEnd(pattern, i);
    if (end == std::string_view::npos) return std::nullopt;
    LookaheadPart part;
    part.negated = pattern[i + 2] == '!';
    part.pattern = "^(?:" + std::string(pattern.substr(i + 3, end - 1 - (i + 3))) + ")";
    parts.push_back(std::move(part));
    i = end;
  }
  LookaheadPart rest;
  rest.pattern = "^(?:" + std::string(pattern.substr(i)) + ")";
  parts.push_back(std::move(rest));
  return parts;
}

}  // namespace lockstep
