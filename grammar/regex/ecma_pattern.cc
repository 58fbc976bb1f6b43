// This file's external interface is EcmaPatternChecker and IsEcmaPattern (ecma_pattern.h).
//
// The checker is a hand-written pushdown machine over ES2024 §22.2.1 with [+UnicodeMode]: the
// only stack is the list of open groups. Exact viability needs care in three places, where the
// text so far may be syntactically fine and yet have no valid completion:
//  - the upper end of a class range, while its escape is being read (`[z-\x4` is dead): we keep
//    the interval(s) of values the escape can still reach and compare their top with the lower
//    end;
//  - a group name character written as an escape (`(?<\u003` is dead: U+0030..U+003F holds no
//    identifier start): the same intervals, intersected with the identifier sets;
//  - `\p{...}`: a prefix is alive iff it is a prefix of some accepted name, so the names live in
//    one automaton (a trie whose `=` edges join the value tries).
// Everything else can always be finished by closing what is open, and back references by adding
// groups after them, so they never make Step fail.
#include "grammar/regex/ecma_pattern.h"

#include <unicode/uchar.h>
#include <unicode/uset.h>

#include <algorithm>
#include <array>
#include <utility>

#include "grammar/base/utf8.h"

namespace lockstep {

enum class EcmaPatternChecker::Mode : std::uint8_t {
  kTerm,       // between terms
  kParen,      // after `(`
  kParenQ,     // after `(?`
  kParenLt,    // after `(?<`: `=`, `!` or a group name
  kBraceMin,   // in `{n`
  kBraceMax,   // in `{n,m`
  kClass,      // in `[...]`
  kGroupName,  // in `(?<name`
  kRefName,    // in `\k<name`
};

enum class EcmaPatternChecker::Esc : std::uint8_t {
  kNone,
  kBackslash,      // `\`
  kControl,        // `\c`
  kHex,            // `\x` and digits_ hex digits
  kHex4,           // `\u` and digits_ (< 4) hex digits
  kBraced,         // `\u{` and the digits of value_
  kLead,           // `\uXXXX` with XXXX = lead_ a lead surrogate (classes and names only)
  kLeadBackslash,  // ... then `\`
  kTrail,          // ... then `\u` and digits_ hex digits that may still be a trail surrogate
  kPropOpen,       // `\p` or `\P`: `{` must follow
  kPropName,       // in `\p{...`
  kKeyOpen,        // `\k`: `<` must follow
};

enum class EcmaPatternChecker::Phase : std::uint8_t {
  kOpen,   // right after `[`: `^` negates
  kStart,  // where ClassContents starts afresh: after `[^` or after a range
  kAtom,   // after an atom (left_) that may start a range
  kDash,   // after an atom and `-`: the next atom ends a range, `]` makes `-` a literal
};

namespace {

constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr std::uint32_t kBoundCap = 0x7FFFFFFF;  // V8 saturates {n,m} bounds here

bool IsDigit(char32_t c) { return c >= '0' && c <= '9'; }
bool IsLead(char32_t c) { return c >= 0xD800 && c <= 0xDBFF; }
bool IsSurrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }
char32_t Pair(char32_t lead, char32_t trail) {
  return 0x10000 + ((lead - 0xD800) << 10) + (trail - 0xDC00);
}
int HexValue(char32_t c) {
  if (IsDigit(c)) return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}
// The position of `c` in the ASCII `set`, or npos.
std::size_t Index(char32_t c, std::string_view set) {
  return c < 0x80 ? set.find(static_cast<char>(c)) : std::string_view::npos;
}
bool Among(char32_t c, std::string_view set) { return Index(c, set) != std::string_view::npos; }

struct Span {
  char32_t lo, hi;
};

// What `digits` hex digits of `value` can still become as four: [value 0..0, value F..F].
Span Hex4Span(char32_t value, int digits) {
  const int shift = 4 * (4 - digits);
  return {value << shift, (value << shift) | ((char32_t{1} << shift) - 1)};
}

// Up to six intervals of code points; the values an escape being read may still denote.
struct Reach {
  std::array<Span, 6> spans;
  int size = 0;
  void Add(char32_t lo, char32_t hi) {
    if (lo <= hi) spans[size++] = {lo, hi};
  }
  // A \uXXXX prefix: its own values and, if it may become a lead surrogate, the pairs it leads.
  void AddHex4(char32_t value, int digits) {
    const Span s = Hex4Span(value, digits);
    Add(s.lo, s.hi);
    const char32_t lead_lo = std::max<char32_t>(s.lo, 0xD800);
    const char32_t lead_hi = std::min<char32_t>(s.hi, 0xDBFF);
    if (lead_lo <= lead_hi) Add(Pair(lead_lo, 0xDC00), Pair(lead_hi, 0xDFFF));
  }
  char32_t Max() const {
    char32_t m = 0;
    for (int i = 0; i < size; ++i) m = std::max(m, spans[i].hi);
    return m;
  }
};

// Sorted disjoint closed intervals of code points.
class RangeSet {
 public:
  // The code points with binary property `p`, plus `extra`.
  RangeSet(UProperty p, std::initializer_list<char32_t> extra) {
    UErrorCode err = U_ZERO_ERROR;
    USet* set = uset_openEmpty();
    uset_applyIntPropertyValue(set, p, 1, &err);
    for (char32_t c : extra) uset_add(set, static_cast<UChar32>(c));
    for (int32_t i = 0, n = uset_getItemCount(set); i < n; ++i) {
      UChar32 lo = 0, hi = 0;
      err = U_ZERO_ERROR;
      uset_getItem(set, i, &lo, &hi, nullptr, 0, &err);
      ranges_.push_back({static_cast<char32_t>(lo), static_cast<char32_t>(hi)});
    }
    uset_close(set);
  }
  bool Intersects(Span s) const {
    auto it = std::lower_bound(ranges_.begin(), ranges_.end(), s.lo,
                               [](const Span& r, char32_t lo) { return r.hi < lo; });
    return it != ranges_.end() && it->lo <= s.hi;
  }

 private:
  std::vector<Span> ranges_;
};

// The accepted `\p{...}` contents as one automaton: a trie of the lone names and of the property
// names, whose `=` edges lead to the shared trie of that property's values.
class NameAutomaton {
 public:
  NameAutomaton() : nodes_(1) {}
  int Next(int node, char32_t c) const {
    const Node& n = nodes_[node];
    for (std::size_t i = 0; i < n.labels.size(); ++i) {
      if (static_cast<unsigned char>(n.labels[i]) == c) return n.kids[i];
    }
    return -1;
  }
  bool Accepts(int node) const { return nodes_[node].accept; }
  // Some edge out of `node` is labelled with a character in [lo, hi].
  bool HasLabelIn(int node, char32_t lo, char32_t hi) const {
    for (char l : nodes_[node].labels) {
      const auto c = static_cast<unsigned char>(l);
      if (c >= lo && c <= hi) return true;
    }
    return false;
  }
  int NewNode() {
    nodes_.emplace_back();
    return static_cast<int>(nodes_.size()) - 1;
  }
  // Adds the path of `s` from `node`; returns its end.
  int Add(int node, std::string_view s) {
    for (char c : s) {
      int next = Next(node, static_cast<unsigned char>(c));
      if (next < 0) {
        next = NewNode();
        Link(node, c, next);
      }
      node = next;
    }
    return node;
  }
  void AddWord(int node, std::string_view s) { nodes_[Add(node, s)].accept = true; }
  void Link(int from, char c, int to) {
    nodes_[from].labels.push_back(c);
    nodes_[from].kids.push_back(to);
  }

 private:
  struct Node {
    std::string labels;
    std::vector<int> kids;
    bool accept = false;
  };
  std::vector<Node> nodes_;
};

// V8 reads a property name only as letters, digits and `_`; a name with anything else in it can
// never be written.
bool IsPropertyWord(const char* s) {
  if (s == nullptr || *s == '\0') return false;
  for (; *s; ++s) {
    const char c = *s;
    if (!(IsDigit(static_cast<unsigned char>(c)) || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z') || c == '_')) {
      return false;
    }
  }
  return true;
}

// Every name ICU has for `value` of `property` (short, long, then aliases), or for the property
// itself when `value` < 0.
template <typename F>
void ForEachIcuName(UProperty property, int32_t value, F f) {
  for (int choice = U_SHORT_PROPERTY_NAME;; ++choice) {
    const auto nc = static_cast<UPropertyNameChoice>(choice);
    const char* n =
        value < 0 ? u_getPropertyName(property, nc) : u_getPropertyValueName(property, value, nc);
    if (n == nullptr && choice != U_SHORT_PROPERTY_NAME) break;  // some have no short name
    if (IsPropertyWord(n)) f(n);
  }
}

bool HoldsSome(UProperty property, int32_t value) {
  UErrorCode err = U_ZERO_ERROR;
  USet* set = uset_openEmpty();
  uset_applyIntPropertyValue(set, property, value, &err);
  const bool some = U_SUCCESS(err) && !uset_isEmpty(set);
  uset_close(set);
  return some;
}

// ECMA-262's table of binary properties (Any, ASCII and Assigned are not ICU properties).
// clang-format off
constexpr UProperty kBinaryProperties[] = {
    UCHAR_ASCII_HEX_DIGIT, UCHAR_ALPHABETIC, UCHAR_BIDI_CONTROL, UCHAR_BIDI_MIRRORED,
    UCHAR_CASE_IGNORABLE, UCHAR_CASED, UCHAR_CHANGES_WHEN_CASEFOLDED, UCHAR_CHANGES_WHEN_CASEMAPPED,
    UCHAR_CHANGES_WHEN_LOWERCASED, UCHAR_CHANGES_WHEN_NFKC_CASEFOLDED,
    UCHAR_CHANGES_WHEN_TITLECASED, UCHAR_CHANGES_WHEN_UPPERCASED, UCHAR_DASH,
    UCHAR_DEFAULT_IGNORABLE_CODE_POINT, UCHAR_DEPRECATED, UCHAR_DIACRITIC, UCHAR_EMOJI,
    UCHAR_EMOJI_COMPONENT, UCHAR_EMOJI_MODIFIER, UCHAR_EMOJI_MODIFIER_BASE,
    UCHAR_EMOJI_PRESENTATION, UCHAR_EXTENDED_PICTOGRAPHIC, UCHAR_EXTENDER, UCHAR_GRAPHEME_BASE,
    UCHAR_GRAPHEME_EXTEND, UCHAR_HEX_DIGIT, UCHAR_IDS_BINARY_OPERATOR, UCHAR_IDS_TRINARY_OPERATOR,
    UCHAR_ID_CONTINUE, UCHAR_ID_START, UCHAR_IDEOGRAPHIC, UCHAR_JOIN_CONTROL,
    UCHAR_LOGICAL_ORDER_EXCEPTION, UCHAR_LOWERCASE, UCHAR_MATH, UCHAR_NONCHARACTER_CODE_POINT,
    UCHAR_PATTERN_SYNTAX, UCHAR_PATTERN_WHITE_SPACE, UCHAR_QUOTATION_MARK, UCHAR_RADICAL,
    UCHAR_REGIONAL_INDICATOR, UCHAR_S_TERM, UCHAR_SOFT_DOTTED, UCHAR_TERMINAL_PUNCTUATION,
    UCHAR_UNIFIED_IDEOGRAPH, UCHAR_UPPERCASE, UCHAR_VARIATION_SELECTOR, UCHAR_WHITE_SPACE,
    UCHAR_XID_CONTINUE, UCHAR_XID_START};
// clang-format on

NameAutomaton BuildPropertyNames() {
  NameAutomaton a;
  const int gc_values = a.NewNode();
  const int sc_values = a.NewNode();
  const int scx_values = a.NewNode();
  // General_Category values are lone names too, and take in the groups (L, LC, ...), which ICU
  // keeps under the mask property.
  std::vector<int32_t> masks;
  for (int i = 0; i < U_CHAR_CATEGORY_COUNT; ++i) masks.push_back(U_MASK(i));
  for (int32_t m : {U_GC_L_MASK, U_GC_LC_MASK, U_GC_M_MASK, U_GC_N_MASK, U_GC_P_MASK, U_GC_S_MASK,
                    U_GC_Z_MASK, U_GC_C_MASK}) {
    masks.push_back(m);
  }
  for (int32_t m : masks) {
    ForEachIcuName(UCHAR_GENERAL_CATEGORY_MASK, m, [&](const char* n) {
      a.AddWord(0, n);
      a.AddWord(gc_values, n);
    });
  }
  for (const char* n : {"Any", "ASCII", "Assigned"}) a.AddWord(0, n);
  for (UProperty p : kBinaryProperties) {
    ForEachIcuName(p, -1, [&](const char* n) { a.AddWord(0, n); });
  }
  // V8 refuses a script with no code point (Hrkt, and ISO 15924 codes Unicode does not use).
  for (int32_t v = 0, max = u_getIntPropertyMaxValue(UCHAR_SCRIPT); v <= max; ++v) {
    const bool sc = HoldsSome(UCHAR_SCRIPT, v);
    const bool scx = HoldsSome(UCHAR_SCRIPT_EXTENSIONS, v);
    ForEachIcuName(UCHAR_SCRIPT, v, [&](const char* n) {
      if (sc) a.AddWord(sc_values, n);
      if (scx) a.AddWord(scx_values, n);
    });
  }
  const std::pair<UProperty, int> kValued[] = {{UCHAR_GENERAL_CATEGORY, gc_values},
                                               {UCHAR_SCRIPT, sc_values},
                                               {UCHAR_SCRIPT_EXTENSIONS, scx_values}};
  for (const auto& valued : kValued) {  // (clang 14 cannot capture a structured binding)
    const int values = valued.second;
    ForEachIcuName(valued.first, -1, [&](const char* n) { a.Link(a.Add(0, n), '=', values); });
  }
  return a;
}

struct Tables {
  RangeSet id_start{UCHAR_ID_START, {'$', '_'}};
  RangeSet id_continue{UCHAR_ID_CONTINUE, {'$', 0x200C, 0x200D}};
  NameAutomaton properties = BuildPropertyNames();
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

template <typename T>
void AppendRaw(T v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

EcmaPatternChecker::EcmaPatternChecker()
    : mode_(Mode::kTerm), esc_(Esc::kNone), phase_(Phase::kOpen) {}

bool EcmaPatternChecker::Step(char32_t c) {
  if (dead_) return false;
  const bool ok =
      c <= kMaxCodePoint && !IsSurrogate(c) && (esc_ != Esc::kNone ? StepEscape(c) : StepPlain(c));
  dead_ = !ok;
  return ok;
}

bool EcmaPatternChecker::StepPlain(char32_t c) {
  // `\0` and decimal escapes end where the digits do; they look at the next character.
  if (no_digit_) {
    no_digit_ = false;
    if (IsDigit(c)) return false;
  }
  if (in_decimal_) {
    in_decimal_ = false;
    if (IsDigit(c)) {
      backref_ = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(backref_ * std::uint64_t{10} + (c - '0'), UINT32_MAX));
      max_backref_ = std::max(max_backref_, backref_);  // the value only grows: no need to wait
      in_decimal_ = true;
      return true;
    }
  }
  switch (mode_) {
    case Mode::kTerm:
      return TermChar(c);
    case Mode::kParen:
      if (c == '?') {
        mode_ = Mode::kParenQ;
        return true;
      }
      OpenGroup('c');
      return TermChar(c);
    case Mode::kParenQ:
      if (c == ':' || c == '=' || c == '!') {
        OpenGroup(c == ':' ? 'n' : 'l');
        return true;
      }
      if (c != '<') return false;
      mode_ = Mode::kParenLt;
      return true;
    case Mode::kParenLt:
      if (c == '=' || c == '!') {
        OpenGroup('l');
        return true;
      }
      mode_ = Mode::kGroupName;
      return NameChar(c);
    case Mode::kBraceMin:
    case Mode::kBraceMax: {
      std::uint32_t& bound = mode_ == Mode::kBraceMin ? brace_min_ : brace_max_;
      if (IsDigit(c)) {
        bound = static_cast<std::uint32_t>(
            std::min<std::uint64_t>(bound * std::uint64_t{10} + (c - '0'), kBoundCap));
        digits_ = 1;
        return true;
      }
      if (c == ',' && mode_ == Mode::kBraceMin && digits_ != 0) {
        mode_ = Mode::kBraceMax;
        digits_ = 0;
        return true;
      }
      if (c != '}' || (mode_ == Mode::kBraceMin && digits_ == 0)) return false;
      if (mode_ == Mode::kBraceMax && digits_ != 0 && brace_max_ < brace_min_) return false;
      mode_ = Mode::kTerm;
      last_ = 2;
      digits_ = 0;
      brace_min_ = brace_max_ = 0;
      return true;
    }
    case Mode::kClass:
      return ClassChar(c);
    case Mode::kGroupName:
    case Mode::kRefName:
      return NameChar(c);
  }
  return false;
}

// V8 also refuses more than 32767 capturing groups; we do not, so that Step and Complete need
// no count (capture counts stay out of the local key).
void EcmaPatternChecker::OpenGroup(char kind) {
  if (kind == 'c') ++captures_;
  stack_.push_back(kind);
  mode_ = Mode::kTerm;
  last_ = 0;
}

bool EcmaPatternChecker::TermChar(char32_t c) {
  if (Among(c, "^$|")) {
    last_ = 0;  // in Unicode mode no assertion takes a quantifier
    return true;
  }
  if (Among(c, "*+?{")) {
    // Each needs an atom before it; a `?` may also make a quantifier lazy. In Unicode mode a `{`
    // that is not a quantifier is an error, and so is a lone `}` or `]`.
    if (last_ == 0 || (last_ == 2 && c != '?')) return false;
    if (c == '{') mode_ = Mode::kBraceMin;
    last_ = last_ == 1 ? 2 : 0;
    return true;
  }
  switch (c) {
    case '\\':
      esc_ = Esc::kBackslash;
      return true;
    case '(':
      mode_ = Mode::kParen;
      return true;
    case ')':
      if (stack_.empty()) return false;
      last_ = stack_.back() == 'l' ? 0 : 1;
      stack_.pop_back();
      return true;
    case '[':
      mode_ = Mode::kClass;
      phase_ = Phase::kOpen;
      return true;
    case '}':
    case ']':
      return false;
    default:  // `.` and pattern characters
      last_ = 1;
      return true;
  }
}

bool EcmaPatternChecker::ClassChar(char32_t c) {
  // After `\d-` only `]` (making `-` a literal) avoids a range with a class escape at one end.
  if (phase_ == Phase::kDash && left_is_set_ && c != ']') return false;
  switch (c) {
    case ']':
      mode_ = Mode::kTerm;
      last_ = 1;
      phase_ = Phase::kOpen;
      left_ = 0;
      left_is_set_ = false;
      return true;
    case '\\':
      esc_ = Esc::kBackslash;
      return true;  // \u{10FFFF} ends any range
    case '^':
      if (phase_ != Phase::kOpen) return ClassAtom(c, false);
      phase_ = Phase::kStart;
      return true;
    case '-':
      // The grammar's NonemptyClassRangesNoDash comes down to this greedy reading: a `-` after
      // an atom makes a range unless `]` follows; anywhere else it is an atom (or a range end).
      if (phase_ != Phase::kAtom) return ClassAtom(c, false);
      phase_ = Phase::kDash;
      return true;
    default:
      return ClassAtom(c, false);
  }
}

bool EcmaPatternChecker::ClassAtom(char32_t value, bool is_set) {
  if (phase_ == Phase::kDash) {
    if (is_set || value < left_) return false;
    phase_ = Phase::kStart;
    left_ = 0;
    left_is_set_ = false;
    return true;
  }
  phase_ = Phase::kAtom;
  left_ = value;
  left_is_set_ = is_set;
  return true;
}

bool EcmaPatternChecker::NameChar(char32_t c) {
  if (c == '>') return !name_.empty() && EndName();
  if (c == '\\') {
    esc_ = Esc::kBackslash;
    return true;  // \u{...} can write any code point
  }
  return AddNameChar(c);
}

bool EcmaPatternChecker::AddNameChar(char32_t c) {
  const Tables& t = GetTables();
  if (!(name_.empty() ? t.id_start : t.id_continue).Intersects({c, c})) return false;
  AppendUtf8(c, &name_);
  return true;
}

bool EcmaPatternChecker::EndName() {
  auto add = [this](std::shared_ptr<const std::vector<std::string>>* set) {
    auto bigger = *set ? std::make_shared<std::vector<std::string>>(**set)
                       : std::make_shared<std::vector<std::string>>();
    bigger->push_back(name_);
    *set = std::move(bigger);
  };
  auto has = [this](const std::shared_ptr<const std::vector<std::string>>& set) {
    return set && std::find(set->begin(), set->end(), name_) != set->end();
  };
  if (mode_ == Mode::kGroupName) {
    if (has(names_)) return false;  // a second group of that name: nothing can undo it
    add(&names_);
    OpenGroup('c');
  } else {
    if (!has(refs_)) add(&refs_);
    mode_ = Mode::kTerm;
    last_ = 1;
  }
  name_.clear();
  return true;
}

bool EcmaPatternChecker::StepEscape(char32_t c) {
  const int h = HexValue(c);
  switch (esc_) {
    case Esc::kNone:
      return false;
    case Esc::kBackslash:
      return Backslash(c);
    case Esc::kControl:
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
      return Deliver(c % 32);
    case Esc::kHex:
      if (h < 0) return false;
      value_ = value_ * 16 + h;
      if (++digits_ == 2) return Deliver(value_);
      return EscapeViable();
    case Esc::kHex4:
      if (c == '{' && digits_ == 0) {
        esc_ = Esc::kBraced;
        return EscapeViable();
      }
      if (h < 0) return false;
      value_ = value_ * 16 + h;
      if (++digits_ == 4) return EndHex4();
      return EscapeViable();
    case Esc::kBraced:
      if (c == '}') return digits_ != 0 && Deliver(value_);
      if (h < 0) return false;
      value_ = value_ * 16 + h;
      digits_ = 1;
      return value_ <= kMaxCodePoint && EscapeViable();
    case Esc::kLead:
      if (c == '\\') {
        esc_ = Esc::kLeadBackslash;
        return EscapeViable();
      }
      // In a class the lead stands alone; in a name a lone surrogate is never allowed.
      return mode_ == Mode::kClass && Deliver(lead_) && StepPlain(c);
    case Esc::kLeadBackslash:
      if (c == 'u') {
        esc_ = Esc::kTrail;
        return EscapeViable();
      }
      if (mode_ != Mode::kClass || !Deliver(lead_)) return false;
      esc_ = Esc::kBackslash;
      return Backslash(c);
    case Esc::kTrail: {
      if (h < 0 && !(c == '{' && digits_ == 0)) return false;
      if (h >= 0) {
        value_ = value_ * 16 + h;
        ++digits_;
        const Span s = Hex4Span(value_, digits_);
        if (s.hi >= 0xDC00 && s.lo <= 0xDFFF) {
          return digits_ == 4 ? Deliver(Pair(lead_, value_)) : EscapeViable();
        }
      }
      // Not a trail: the lead stands alone (classes only) and `\u` starts another escape.
      if (mode_ != Mode::kClass) return false;
      const char32_t value = value_;
      const std::uint8_t digits = digits_;
      if (!Deliver(lead_)) return false;
      esc_ = h < 0 ? Esc::kBraced : Esc::kHex4;
      value_ = value;
      digits_ = digits;
      return digits_ == 4 ? EndHex4() : EscapeViable();
    }
    case Esc::kPropOpen:
      if (c != '{') return false;
      esc_ = Esc::kPropName;
      prop_node_ = 0;
      return true;
    case Esc::kPropName: {
      const NameAutomaton& names = GetTables().properties;
      if (c == '}') return names.Accepts(prop_node_) && Deliver(0, true);
      prop_node_ = names.Next(prop_node_, c);
      return prop_node_ >= 0;
    }
    case Esc::kKeyOpen:
      if (c != '<') return false;
      esc_ = Esc::kNone;
      mode_ = Mode::kRefName;
      return true;
  }
  return false;
}

bool EcmaPatternChecker::Backslash(char32_t c) {
  const bool term = mode_ == Mode::kTerm;
  const bool in_class = mode_ == Mode::kClass;
  if (!term && !in_class) {  // group names take only \u escapes
    if (c != 'u') return false;
    esc_ = Esc::kHex4;
    return EscapeViable();
  }
  if (c == 'u' || c == 'x' || c == 'c') {
    esc_ = c == 'u' ? Esc::kHex4 : c == 'x' ? Esc::kHex : Esc::kControl;
    return EscapeViable();
  }
  if (c == 'p' || c == 'P' || c == 'k') {
    if (c == 'k' ? !term : phase_ == Phase::kDash && in_class) return false;  // no set ends a range
    esc_ = c == 'k' ? Esc::kKeyOpen : Esc::kPropOpen;
    return true;
  }
  if (Among(c, "dDsSwW")) return Deliver(0, true);
  if (Among(c, "fnrtv")) return Deliver(std::string_view("\f\n\r\t\v")[Index(c, "fnrtv")]);
  if (c == 'b' || c == 'B') {
    if (in_class) return c == 'b' && Deliver(0x08);
    esc_ = Esc::kNone;
    last_ = 0;  // an assertion
    return true;
  }
  if (c == '0') {
    no_digit_ = true;
    return Deliver(0);
  }
  if (IsDigit(c)) {  // 1-9: a back reference, which only Complete() can judge
    if (!term) return false;
    esc_ = Esc::kNone;
    last_ = 1;
    backref_ = c - '0';
    max_backref_ = std::max(max_backref_, backref_);
    in_decimal_ = true;
    return true;
  }
  return (Among(c, "^$\\.*+?()[]{}|/") || (c == '-' && in_class)) && Deliver(c);
}

bool EcmaPatternChecker::EndHex4() {
  // Outside classes and names the value does not matter, so a lead can be an atom of its own.
  if (IsLead(value_) && mode_ != Mode::kTerm) {
    esc_ = Esc::kLead;
    lead_ = value_;
    value_ = 0;
    digits_ = 0;
    return EscapeViable();
  }
  return Deliver(value_);
}

bool EcmaPatternChecker::Deliver(char32_t value, bool is_set) {
  esc_ = Esc::kNone;
  value_ = 0;
  digits_ = 0;
  lead_ = 0;
  prop_node_ = 0;
  switch (mode_) {
    case Mode::kClass:
      return ClassAtom(value, is_set);
    case Mode::kGroupName:
    case Mode::kRefName:
      return AddNameChar(value);
    default:
      last_ = 1;
      return true;
  }
}

bool EcmaPatternChecker::EscapeViable() const {
  const bool range_end = mode_ == Mode::kClass && phase_ == Phase::kDash;
  const bool name = mode_ == Mode::kGroupName || mode_ == Mode::kRefName;
  if (!range_end && !name) return true;
  Reach r;
  switch (esc_) {
    case Esc::kControl:
      r.Add(1, 26);
      break;
    case Esc::kHex:
      r.Add(value_ << (4 * (2 - digits_)),
            (value_ << (4 * (2 - digits_))) | (digits_ ? 0xF : 0xFF));
      break;
    case Esc::kHex4:
      if (digits_ == 0) {
        r.Add(0, kMaxCodePoint);  // \u{...}
      } else {
        r.AddHex4(value_, digits_);
      }
      break;
    case Esc::kBraced:
      if (value_ == 0) {  // leading zeros: still anything
        r.Add(0, kMaxCodePoint);
        break;
      }
      // v itself, or v followed by k more digits, while that stays in range.
      for (char32_t lo = value_, width = 1; lo <= kMaxCodePoint; lo *= 16, width *= 16) {
        r.Add(lo, std::min<char32_t>(lo + width - 1, kMaxCodePoint));
      }
      break;
    case Esc::kLead:
    case Esc::kLeadBackslash:
      r.Add(Pair(lead_, 0xDC00), Pair(lead_, 0xDFFF));  // above lead_ alone
      break;
    case Esc::kTrail: {
      const Span s = digits_ == 0 ? Span{0xDC00, 0xDFFF} : Hex4Span(value_, digits_);
      r.Add(Pair(lead_, std::max<char32_t>(s.lo, 0xDC00)),
            Pair(lead_, std::min<char32_t>(s.hi, 0xDFFF)));
      break;
    }
    default:
      r.Add(0, kMaxCodePoint);
  }
  if (range_end) return r.size > 0 && r.Max() >= left_;
  const RangeSet& allowed = name_.empty() ? GetTables().id_start : GetTables().id_continue;
  for (int i = 0; i < r.size; ++i) {
    if (allowed.Intersects(r.spans[i])) return true;
  }
  return false;
}

bool EcmaPatternChecker::Complete() const {
  if (dead_ || mode_ != Mode::kTerm || esc_ != Esc::kNone || !stack_.empty()) return false;
  if (max_backref_ > captures_) return false;
  if (refs_) {
    for (const std::string& r : *refs_) {
      if (!names_ || std::find(names_->begin(), names_->end(), r) == names_->end()) return false;
    }
  }
  return true;
}

void EcmaPatternChecker::AppendLocalKey(std::string* out) const {
  for (std::uint8_t b : {static_cast<std::uint8_t>(mode_), static_cast<std::uint8_t>(esc_),
                         static_cast<std::uint8_t>(phase_), last_, digits_,
                         static_cast<std::uint8_t>(dead_ | no_digit_ << 1 | left_is_set_ << 2)}) {
    out->push_back(static_cast<char>(b));
  }
  for (std::uint32_t v : {std::uint32_t{value_}, std::uint32_t{left_}, std::uint32_t{lead_},
                          static_cast<std::uint32_t>(prop_node_), brace_min_, brace_max_}) {
    AppendRaw(v, out);
  }
  // Strings length-prefixed, so that no two different lists give the same bytes.
  auto put = [out](const std::string& s) {
    AppendRaw(static_cast<std::uint32_t>(s.size()), out);
    out->append(s);
  };
  put(stack_);
  put(name_);
  AppendRaw(static_cast<std::uint32_t>(names_ ? names_->size() : 0), out);
  if (names_) {
    for (const std::string& n : *names_) put(n);
  }
}

void EcmaPatternChecker::AppendKey(std::string* out) const {
  AppendLocalKey(out);
  out->push_back(static_cast<char>(in_decimal_));
  for (std::uint32_t v : {captures_, backref_, max_backref_}) AppendRaw(v, out);
  AppendRaw(static_cast<std::uint32_t>(refs_ ? refs_->size() : 0), out);
  if (refs_) {
    for (const std::string& r : *refs_) {
      AppendRaw(static_cast<std::uint32_t>(r.size()), out);
      out->append(r);
    }
  }
}

bool EcmaPatternChecker::PlainRunsFree() const {
  if (dead_ || no_digit_) return false;
  if (esc_ == Esc::kLead) {  // a class atom (the lead) ends, then the run goes on after it
    return mode_ == Mode::kClass && (phase_ != Phase::kDash || lead_ >= left_);
  }
  if (esc_ != Esc::kNone) return false;
  switch (mode_) {
    case Mode::kTerm:
    case Mode::kParen:
      return true;
    case Mode::kClass:  // U+0020 is the least plain character
      return phase_ != Phase::kDash || (!left_is_set_ && left_ <= 0x20);
    default:
      return false;
  }
}

// SomeStepIn splits the code points in two. The steering characters, a few ASCII ones that
// depend on the state (syntax characters, digits, the letters of escapes), are tried one by one
// on a copy. For all the others Step's verdict is one of a few simple sets (all, none, from left_
// up, ID_Start or ID_Continue, the labels out of a \p{...} node), tested on whole intervals.
std::string_view EcmaPatternChecker::SteeringChars() const {
  constexpr std::string_view kHex = "0123456789abcdefABCDEF";
  switch (esc_) {
    case Esc::kNone:
      switch (mode_) {
        case Mode::kTerm:
        case Mode::kParen:
          return ")*+?]{}";
        case Mode::kParenQ:
          return ":=!<";
        case Mode::kParenLt:
          return "=!>\\";
        case Mode::kBraceMin:
        case Mode::kBraceMax:
          return "0123456789,}";
        case Mode::kClass:
          return "]\\^-";
        case Mode::kGroupName:
        case Mode::kRefName:
          return ">\\";
      }
      return "";
    case Esc::kBackslash:
    case Esc::kLeadBackslash:  // names take only \u
      if (mode_ != Mode::kTerm && mode_ != Mode::kClass) return "u";
      return "uxcpPkdDsSwWfnrtvbB0123456789^$\\.*+?()[]{}|/-";
    case Esc::kControl:
      return "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    case Esc::kHex:
      return kHex;
    case Esc::kHex4:
    case Esc::kTrail:
      return "0123456789abcdefABCDEF{";
    case Esc::kBraced:
      return "0123456789abcdefABCDEF}";
    case Esc::kLead:
      return "\\]^-";
    case Esc::kPropOpen:
      return "{";
    case Esc::kPropName:
      return "}";
    case Esc::kKeyOpen:
      return "<";
  }
  return "";
}

// [lo, hi] holds no surrogate and no steering character (nor, after `\0` or a decimal escape, a
// digit: past those flags the state is as if they were not set).
bool EcmaPatternChecker::OthersStepIn(char32_t lo, char32_t hi) const {
  const Tables& t = GetTables();
  switch (esc_) {
    case Esc::kNone:
      switch (mode_) {
        case Mode::kTerm:
        case Mode::kParen:
          return true;
        case Mode::kParenLt:
          return t.id_start.Intersects({lo, hi});
        case Mode::kGroupName:
        case Mode::kRefName:
          return (name_.empty() ? t.id_start : t.id_continue).Intersects({lo, hi});
        case Mode::kClass:
          return phase_ != Phase::kDash || (!left_is_set_ && hi >= left_);
        default:
          return false;
      }
    case Esc::kLead:  // the lead ends a class atom, then the character is read afresh
      return mode_ == Mode::kClass && (phase_ != Phase::kDash || lead_ >= left_);
    case Esc::kPropName:
      return t.properties.HasLabelIn(prop_node_, lo, hi);
    default:
      return false;
  }
}

bool EcmaPatternChecker::SomeStepIn(char32_t lo, char32_t hi) const {
  hi = std::min(hi, kMaxCodePoint);
  if (dead_ || lo > hi) return false;
  std::array<bool, 0x80> steer{};
  for (char c : SteeringChars()) steer[static_cast<unsigned char>(c)] = true;
  if (no_digit_ || in_decimal_) {
    for (char c = '0'; c <= '9'; ++c) steer[static_cast<unsigned char>(c)] = true;
  }
  // The others, in intervals that skip the steering characters and the surrogates.
  for (char32_t c = lo; c <= hi;) {
    if (c < 0x80 && steer[c]) {
      ++c;
      continue;
    }
    if (IsSurrogate(c)) {
      c = 0xE000;
      continue;
    }
    char32_t end = hi;
    if (c < 0x80) {
      end = std::min<char32_t>(end, 0x7F);
      for (char32_t x = c + 1; x <= end; ++x) {
        if (steer[x]) {
          end = x - 1;
          break;
        }
      }
    } else if (c < 0xD800) {
      end = std::min<char32_t>(end, 0xD7FF);
    }
    if (OthersStepIn(c, end)) return true;
    c = end + 1;
  }
  for (char32_t c = lo; c <= hi && c < 0x80; ++c) {
    if (!steer[c]) continue;
    EcmaPatternChecker copy = *this;
    if (copy.Step(c)) return true;
  }
  return false;
}

bool IsEcmaPattern(std::string_view utf8) {
  EcmaPatternChecker checker;
  std::size_t i = 0;
  while (i < utf8.size()) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    const int len = b < 0x80                ? 1
                    : b >= 0xC2 && b < 0xE0 ? 2
                    : b >= 0xE0 && b < 0xF0 ? 3
                    : b >= 0xF0 && b < 0xF5 ? 4
                                            : 0;
    if (len == 0 || i + len > utf8.size()) return false;
    char32_t c = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto t = static_cast<unsigned char>(utf8[i + k]);
      if ((t & 0xC0) != 0x80) return false;
      c = c << 6 | (t & 0x3F);
    }
    // Overlong 3- and 4-byte forms; Step refuses surrogates and values past U+10FFFF.
    if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000)) return false;
    if (!checker.Step(c)) return false;
    i += len;
  }
  return checker.Complete();
}

}  // namespace lockstep
