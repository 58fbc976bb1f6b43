// EcmaPatternChecker: an exact, incremental check of ECMAScript RegExp pattern syntax in Unicode
// mode (`new RegExp(p, "u")` as V8 in Node 20 parses it: ES2024, no duplicate group names, no
// `v` flag), early errors included. For JSON Schema's `"format": "regex"` (IsEcmaPattern) and for
// generation, where a character is allowed iff the pattern can still be completed after it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

// Reads a pattern one code point at a time. Viability is exact: Step says whether some
// continuation of the text so far is a valid pattern, so a generator never paints itself into a
// corner. Where V8 departs from the letter of ECMA-262 the checker follows V8: {n,m} bounds
// saturate at 2^31-1 before they are compared, and `\p{...}` takes ICU's names (so `WSpace` is a
// name of White_Space) for values that hold at least one code point (so no `Script=Hrkt`). One
// V8 limit is left out: it refuses more than 32767 capturing groups; we take any number.
// A copy costs a few words plus two short strings: copy it to try a code point.
class EcmaPatternChecker {
 public:
  EcmaPatternChecker();  // the empty text

  // Feeds one code point. Returns true iff some continuation of the text fed so far (this code
  // point included) is a valid pattern. On false the checker is dead: every later call returns
  // false and Complete() is false (callers copy the checker before trying a code point).
  // Surrogates and values past U+10FFFF are never part of a pattern.
  bool Step(char32_t c);
  // The text fed so far is a whole valid pattern, the whole-pattern early errors included
  // (decimal escapes at most the number of capturing groups, every \k<name> names a group).
  bool Complete() const;
  bool dead() const { return dead_; }
  // Appends to *out a key of the state as far as the results of later Step calls go: two checkers
  // with equal keys give the same Step results for every continuation (Complete() may differ: the
  // key leaves out the capture count, the largest decimal escape and the \k names referenced).
  void AppendLocalKey(std::string* out) const;
  // Appends a key of the whole state: two checkers with equal keys give the same Step results
  // and the same Complete() for every continuation (the local key and what only Complete reads).
  void AppendKey(std::string* out) const;
  // Every run of plain characters can follow: code points from U+0020 up other than the syntax
  // characters and `-` (a mask may then pass such tokens unread). Exact: when false, some one
  // plain character fails.
  bool PlainRunsFree() const;
  // Whether Step would return true for some code point in [lo, hi] (lo <= hi; the range may
  // hold surrogates or values past U+10FFFF, which never pass). Exact, and fast: O(1) or
  // O(number of ICU ranges) per call, never one Step per code point of a large range. For the
  // code points a partial UTF-8 sequence can still become.
  bool SomeStepIn(char32_t lo, char32_t hi) const;

 private:
  enum class Mode : std::uint8_t;   // the syntactic position outside escapes
  enum class Esc : std::uint8_t;    // the escape being read, if any
  enum class Phase : std::uint8_t;  // where in a character class

  bool StepPlain(char32_t c);
  bool TermChar(char32_t c);
  bool ClassChar(char32_t c);
  bool NameChar(char32_t c);
  bool StepEscape(char32_t c);
  bool Backslash(char32_t c);
  bool EndHex4();
  bool Deliver(char32_t value, bool is_set = false);
  bool ClassAtom(char32_t value, bool is_set);
  bool AddNameChar(char32_t c);
  bool EndName();
  bool EscapeViable() const;
  void OpenGroup(char kind);
  std::string_view SteeringChars() const;
  bool OthersStepIn(char32_t lo, char32_t hi) const;

  Mode mode_;
  Esc esc_;
  Phase phase_;
  std::uint8_t last_ = 0;    // outside classes: 0 nothing to quantify, 1 an atom, 2 a quantifier
  std::uint8_t digits_ = 0;  // hex digits read (for \u{...} and {n,m}: whether any digit was)
  bool dead_ = false;
  bool no_digit_ = false;        // `\0` was just read: a decimal digit may not follow
  bool in_decimal_ = false;      // a decimal escape was just read: a digit extends it
  bool left_is_set_ = false;     // in a class: the atom before `-` is a class escape (\d, \p{..})
  char32_t value_ = 0;           // the escape's value so far
  char32_t left_ = 0;            // in a class: the atom that may start a range
  char32_t lead_ = 0;            // a lead surrogate written \uXXXX, waiting for a trail
  std::int32_t prop_node_ = 0;   // in \p{...}: the node of the property-name automaton
  std::uint32_t brace_min_ = 0;  // {n,m} bounds read so far, saturated as V8 does
  std::uint32_t brace_max_ = 0;
  // Only Complete() reads these three.
  std::uint32_t captures_ = 0;
  std::uint32_t backref_ = 0;      // the decimal escape being read
  std::uint32_t max_backref_ = 0;  // the largest decimal escape
  std::string stack_;              // open groups: 'c' capturing, 'n' (?:, 'l' lookaround
  std::string name_;               // UTF-8 of the group name being read
  // Rare, so shared on copy and replaced (never changed in place) on a new name.
  std::shared_ptr<const std::vector<std::string>> names_;  // the group names defined
  std::shared_ptr<const std::vector<std::string>> refs_;   // the names \k<..> refers to
};

// The whole UTF-8 text is a valid pattern (false for ill-formed UTF-8).
bool IsEcmaPattern(std::string_view utf8);

}  // namespace lockstep
