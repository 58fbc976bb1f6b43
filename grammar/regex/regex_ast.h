// RegexAst: the parsed form of a regex, for the byte-NFA compiler (automata/regex/byte_nfa.cc) and the
// test-side sampler (tests/util/regex_sampler.cc). Flat and integer-indexed: nodes live in one
// vector and point at their children and code-point ranges through [begin, end) slices.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep {

// An inclusive range of Unicode scalar values. Ranges in a class are sorted, disjoint,
// non-adjacent and never contain a surrogate (U+D800-U+DFFF).
struct CodepointRange {
  char32_t lo = 0;
  char32_t hi = 0;
};

inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

enum class RegexNodeKind : std::uint8_t {
  kEmpty,      // matches the empty string only
  kClass,      // one code point from ranges [ranges_begin, ranges_end); empty slice: no string
  kConcat,     // children in order
  kAlternate,  // any one child
  kRepeat,     // child [children_begin] between min and max times (max == kUnbounded: no limit)
  kAnchor,     // only under RegexParseOptions::anchor_markers: '^' (min 0) as the marker byte
               // 0xFE, '$' (min 1) as 0xFF (bytes no UTF-8 text holds), for search automata
               // that read the text between the markers (JSON Schema patterns)
};

struct RegexNode {
  static constexpr std::int32_t kUnbounded = -1;

  RegexNodeKind kind = RegexNodeKind::kEmpty;
  std::int32_t min = 0;
  std::int32_t max = 0;
  std::int32_t children_begin = 0;  // slice of RegexAst::children
  std::int32_t children_end = 0;
  std::int32_t ranges_begin = 0;  // slice of RegexAst::ranges
  std::int32_t ranges_end = 0;
  std::int32_t offset = 0;  // byte offset in the pattern where the construct starts
};

// Anchors (^ at the start, $ at the end), group boundaries and lazy markers do not change the
// full-match language, so they leave no node behind (anchors leave kAnchor nodes under
// RegexParseOptions::anchor_markers).
struct RegexAst {
  std::vector<RegexNode> nodes;
  std::vector<std::int32_t> children;
  std::vector<CodepointRange> ranges;
  std::int32_t root = 0;

  const RegexNode& node(std::int32_t id) const { return nodes[id]; }
};

}  // namespace lockstep
