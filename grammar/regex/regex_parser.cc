// ParseRegex: a recursive-descent parser from pattern bytes to RegexAst, with exact byte offsets
// in every error. Only syntax lives here; the automaton is built in automata/regex/byte_nfa.cc.
#include "grammar/regex/regex_parser.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace lockstep {

constexpr char32_t kSurrogateLo = 0xD800;
constexpr char32_t kSurrogateHi = 0xDFFF;

std::vector<CodepointRange> NormalizeCodepointRanges(std::vector<CodepointRange> r, bool negate) {
  using Ranges = std::vector<CodepointRange>;
  std::sort(r.begin(), r.end(),
            [](const CodepointRange& a, const CodepointRange& b) { return a.lo < b.lo; });
  Ranges merged;
  for (const CodepointRange& x : r) {
    if (!merged.empty() && x.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, x.hi);
    } else {
      merged.push_back(x);
    }
  }
  if (negate) {
    Ranges comp;
    char32_t next = 0;
    for (const CodepointRange& x : merged) {
      if (x.lo > next) comp.push_back({next, x.lo - 1});
      next = x.hi + 1;
    }
    if (next <= kMaxCodepoint) comp.push_back({next, kMaxCodepoint});
    merged = std::move(comp);
  }
  Ranges out;
  for (const CodepointRange& x : merged) {
    if (x.hi < kSurrogateLo || x.lo > kSurrogateHi) {
      out.push_back(x);
      continue;
    }
    if (x.lo < kSurrogateLo) out.push_back({x.lo, kSurrogateLo - 1});
    if (x.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, x.hi});
  }
  return out;
}

namespace {

using Ranges = std::vector<CodepointRange>;


void AddDigit(Ranges* r) { r->push_back({'0', '9'}); }
void AddWord(Ranges* r) {
  r->push_back({'0', '9'});
  r->push_back({'A', 'Z'});
  r->push_back({'_', '_'});
  r->push_back({'a', 'z'});
}
// ECMA-262 WhiteSpace and LineTerminator: TAB VT FF SP NBSP ZWNBSP, Zs, LF CR LS PS.
void AddSpace(Ranges* r) {
  static constexpr CodepointRange kSpace[] = {
      {0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680}, {0x2000, 0x200A},
      {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  r->insert(r->end(), std::begin(kSpace), std::end(kSpace));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsSyntaxChar(char c) {
  switch (c) {
    case '^':
    case '$':
    case '\\':
    case '.':
    case '*':
    case '+':
    case '?':
    case '(':
    case ')':
    case '[':
    case ']':
    case '{':
    case '}':
    case '|':
    case '/':
    case '-':
      return true;
    default:
      return false;
  }
}

// What an atom or a sub-expression says about anchors, so that ^ and $ are accepted exactly
// where they cannot change the full-match language.
struct AnchorInfo {
  bool has_anchor = false;
  bool ends = false;          // contains a $ after which nothing may follow
  std::size_t dollar_at = 0;  // offset of that $
};

class Parser {
 public:
  Parser(std::string_view pattern, const RegexParseOptions& options)
      : p_(pattern), options_(options) {}

  Result<RegexAst> Parse() {
    AnchorInfo info;
    std::int32_t root = ParseAlternation(/*at_start=*/true, &info);
    if (root < 0) return error_;
    if (pos_ < p_.size()) {
      // ParseAlternation stops only at ')' or the end.
      return RegexError(p_, pos_, "unmatched ')'");
    }
    ast_.root = root;
    return std::move(ast_);
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char Peek(std::size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : '\0'; }
  bool Has(std::size_t k) const { return pos_ + k < p_.size(); }

  std::int32_t Fail(std::size_t offset, std::string_view what,
                    StatusCode code = StatusCode::kInvalidRegex) {
    if (error_.ok()) error_ = RegexError(p_, offset, what, code);
    return -1;
  }

  std::int32_t AddNode(RegexNode n) {
    ast_.nodes.push_back(n);
    return static_cast<std::int32_t>(ast_.nodes.size() - 1);
  }
  std::int32_t AddList(RegexNodeKind kind, const std::vector<std::int32_t>& kids,
                       std::size_t offset) {
    if (kids.size() == 1) return kids[0];
    RegexNode n;
    n.offset = static_cast<std::int32_t>(offset);
    if (kids.empty()) {
      n.kind = RegexNodeKind::kEmpty;
      return AddNode(n);
    }
    n.kind = kind;
    n.children_begin = static_cast<std::int32_t>(ast_.children.size());
    ast_.children.insert(ast_.children.end(), kids.begin(), kids.end());
    n.children_end = static_cast<std::int32_t>(ast_.children.size());
    return AddNode(n);
  }
  std::int32_t AddClass(Ranges r, bool negate, std::size_t offset) {
    r = NormalizeCodepointRanges(std::move(r), negate);
    RegexNode n;
    n.kind = RegexNodeKind::kClass;
    n.offset = static_cast<std::int32_t>(offset);
    n.ranges_begin = static_cast<std::int32_t>(ast_.ranges.size());
    ast_.ranges.insert(ast_.ranges.end(), r.begin(), r.end());
    n.ranges_end = static_cast<std::int32_t>(ast_.ranges.size());
    return AddNode(n);
  }

  // alternation := concat ('|' concat)*
  std::int32_t ParseAlternation(bool at_start, AnchorInfo* info) {
    std::size_t start = pos_;
    std::vector<std::int32_t> alts;
    while (true) {
      AnchorInfo a;
      std::int32_t c = ParseConcat(at_start, &a);
      if (c < 0) return -1;
      alts.push_back(c);
      info->has_anchor |= a.has_anchor;
      if (a.ends && !info->ends) {
        info->ends = true;
        info->dollar_at = a.dollar_at;
      }
      if (Peek() == '|' && !AtEnd()) {
        ++pos_;
        continue;
      }
      break;
    }
    return AddList(RegexNodeKind::kAlternate, alts, start);
  }

  // concat := (anchor | atom quantifier?)*
  std::int32_t ParseConcat(bool at_start, AnchorInfo* info) {
    std::size_t start = pos_;
    std::vector<std::int32_t> items;
    bool still_start = at_start;
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      std::size_t at = pos_;
      char c = Peek();
      if ((c == '^' || c == '$') && options_.anchor_markers) {
        ++pos_;
        RegexNode n;
        n.kind = RegexNodeKind::kAnchor;
        n.min = c == '$' ? 1 : 0;
        n.offset = static_cast<std::int32_t>(at);
        std::int32_t atom = AddNode(n);
        if (IsQuantifierStart()) atom = ParseQuantifier(atom, at);
        if (atom < 0) return -1;
        still_start = false;
        items.push_back(atom);
        continue;
      }
      if (c == '^' || c == '$') {
        ++pos_;
        if (c == '^' && !still_start) {
          return Fail(at, "'^' is only supported at the start of the pattern");
        }
        info->has_anchor = true;
        if (c == '$' && !info->ends) {
          info->ends = true;
          info->dollar_at = at;
        }
        if (IsQuantifierStart()) return Fail(pos_, "nothing to repeat");
        continue;
      }
      AnchorInfo atom_info;
      std::int32_t atom = ParseAtom(still_start, &atom_info);
      if (atom < 0) return -1;
      if (info->ends)
        return Fail(info->dollar_at, "'$' is only supported at the end of the pattern");
      still_start = false;
      if (IsQuantifierStart()) {
        if (atom_info.has_anchor) return Fail(pos_, "quantifier on a group containing an anchor");
        atom = ParseQuantifier(atom, at);
        if (atom < 0) return -1;
      }
      info->has_anchor |= atom_info.has_anchor;
      if (atom_info.ends) {
        info->ends = true;
        info->dollar_at = atom_info.dollar_at;
      }
      items.push_back(atom);
    }
    return AddList(RegexNodeKind::kConcat, items, start);
  }

  // True if the input at pos_ is *, +, ? or a well-formed {m}, {m,}, {m,n}.
  bool IsQuantifierStart() const {
    if (AtEnd()) return false;
    char c = Peek();
    if (c == '*' || c == '+' || c == '?') return true;
    if (c != '{') return false;
    std::size_t i = pos_ + 1;
    auto digits = [&]() {
      std::size_t b = i;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9') ++i;
      return i > b;
    };
    if (!digits()) return false;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      digits();
    }
    return i < p_.size() && p_[i] == '}';
  }

  // Reads digits at pos_, saturating at a value above any budget.
  std::int64_t ReadNumber() {
    std::int64_t v = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      v = std::min<std::int64_t>(v * 10 + (Peek() - '0'), std::int64_t{1} << 40);
      ++pos_;
    }
    return v;
  }

  std::int32_t ParseQuantifier(std::int32_t atom, std::size_t atom_offset) {
    std::size_t at = pos_;
    char c = Peek();
    std::int64_t lo = 0;
    std::int64_t hi = RegexNode::kUnbounded;
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      ++pos_;
      lo = 1;
    } else if (c == '?') {
      ++pos_;
      hi = 1;
    } else {
      ++pos_;  // '{'
      lo = ReadNumber();
      hi = lo;
      if (Peek() == ',') {
        ++pos_;
        hi = (Peek() == '}') ? RegexNode::kUnbounded : ReadNumber();
      }
      ++pos_;  // '}'
      if (lo > options_.max_repeat || hi > options_.max_repeat) {
        return Fail(at,
                    "repetition bound exceeds max_repeat (" +
                        std::to_string(options_.max_repeat) + ")",
                    StatusCode::kResourceLimit);
      }
      if (hi != RegexNode::kUnbounded && hi < lo) {
        return Fail(at, "repetition bounds out of order: {m,n} with n < m");
      }
    }
    if (Peek() == '?' && !AtEnd()) ++pos_;  // lazy: same language
    if (IsQuantifierStart()) return Fail(pos_, "nothing to repeat (quantifier after quantifier)");
    RegexNode n;
    n.kind = RegexNodeKind::kRepeat;
    n.min = static_cast<std::int32_t>(lo);
    n.max = static_cast<std::int32_t>(hi);
    n.offset = static_cast<std::int32_t>(atom_offset);
    n.children_begin = static_cast<std::int32_t>(ast_.children.size());
    ast_.children.push_back(atom);
    n.children_end = n.children_begin + 1;
    return AddNode(n);
  }

  std::int32_t ParseAtom(bool at_start, AnchorInfo* info) {
    std::size_t at = pos_;
    char c = Peek();
    switch (c) {
      case '(':
        return ParseGroup(at_start, info);
      case '[':
        return ParseClass();
      case '.': {
        ++pos_;
        Ranges r = {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};
        return AddClass(std::move(r), /*negate=*/true, at);
      }
      case '*':
      case '+':
      case '?':
        return Fail(at, "nothing to repeat");
      case '{':
        if (IsQuantifierStart()) return Fail(at, "nothing to repeat");
        ++pos_;
        return AddClass({{'{', '{'}}, false, at);
      case '\\': {
        Ranges r;
        bool negate = false;
        if (!ParseEscape(/*in_class=*/false, &r, &negate)) return -1;
        return AddClass(std::move(r), negate, at);
      }
      default: {
        char32_t cp = 0;
        if (!DecodeChar(&cp)) return -1;
        return AddClass({{cp, cp}}, false, at);
      }
    }
  }

  std::int32_t ParseGroup(bool at_start, AnchorInfo* info) {
    std::size_t at = pos_;
    ++pos_;  // '('
    if (Peek() == '?' && Has(1)) {
      char k = Peek(1);
      if (k == ':') {
        pos_ += 2;
      } else if (k == '=' || k == '!') {
        return Fail(at, "lookahead assertions are not supported");
      } else if (k == '<' && (Peek(2) == '=' || Peek(2) == '!')) {
        return Fail(at, "lookbehind assertions are not supported");
      } else if (k == '<' || (k == 'P' && Peek(2) == '<')) {
        pos_ += (k == '<') ? 2 : 3;
        std::size_t name_at = pos_;
        while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) || Peek() == '_')) {
          ++pos_;
        }
        std::string_view name = p_.substr(name_at, pos_ - name_at);
        if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || Peek() != '>' ||
            AtEnd()) {
          return Fail(name_at, "invalid group name");
        }
        for (const std::string& seen : names_) {
          if (seen == name) return Fail(name_at, "duplicate group name");
        }
        names_.emplace_back(name);
        ++pos_;  // '>'
      } else if (k == 'P' && Peek(2) == '=') {
        return Fail(at, "backreferences are not supported");
      } else {
        return Fail(at,
                    "unsupported group flag or syntax after '(?' (flags such as (?i) are "
                    "not supported)");
      }
    }
    if (++depth_ > options_.max_nesting_depth) {
      return Fail(at,
                  "group nesting exceeds max_nesting_depth (" +
                      std::to_string(options_.max_nesting_depth) + ")",
                  StatusCode::kResourceLimit);
    }
    std::int32_t body = ParseAlternation(at_start, info);
    --depth_;
    if (body < 0) return -1;
    if (AtEnd() || Peek() != ')') return Fail(at, "missing ')'");
    ++pos_;
    return body;
  }

  // Decodes one UTF-8 scalar value at pos_.
  bool DecodeChar(char32_t* cp) {
    std::size_t at = pos_;
    unsigned char b0 = static_cast<unsigned char>(Peek());
    if (b0 < 0x80) {
      *cp = b0;
      ++pos_;
      return true;
    }
    int len = 0;
    char32_t v = 0;
    char32_t min = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, v = b0 & 0x1F, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, v = b0 & 0x0F, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, v = b0 & 0x07, min = 0x10000;
    } else {
      Fail(at, "invalid UTF-8 in pattern");
      return false;
    }
    for (int k = 1; k < len; ++k) {
      if (!Has(k)) {
        Fail(at, "invalid UTF-8 in pattern");
        return false;
      }
      unsigned char b = static_cast<unsigned char>(Peek(k));
      if ((b & 0xC0) != 0x80) {
        Fail(at, "invalid UTF-8 in pattern");
        return false;
      }
      v = (v << 6) | (b & 0x3F);
    }
    if (v < min || v > kMaxCodepoint || (v >= kSurrogateLo && v <= kSurrogateHi)) {
      Fail(at, "invalid UTF-8 in pattern");
      return false;
    }
    pos_ += len;
    *cp = v;
    return true;
  }

  // Reads exactly `n` hex digits at pos_.
  bool ReadHex(int n, char32_t* v) {
    char32_t x = 0;
    for (int k = 0; k < n; ++k) {
      int h = HexValue(Peek(k));
      if (!Has(k) || h < 0) return false;
      x = x * 16 + h;
    }
    pos_ += n;
    *v = x;
    return true;
  }

  // \u escapes after the backslash and 'u' have been consumed; `esc` is the backslash offset.
  bool ParseUnicodeEscape(std::size_t esc, char32_t* cp) {
    if (Peek() == '{' && Has(0)) {
      ++pos_;
      char32_t v = 0;
      std::size_t digits = 0;
      while (!AtEnd() && HexValue(Peek()) >= 0) {
        v = v * 16 + HexValue(Peek());
        if (v > kMaxCodepoint) {
          Fail(esc, "\\u{...} escape above U+10FFFF");
          return false;
        }
        ++pos_, ++digits;
      }
      if (digits == 0 || AtEnd() || Peek() != '}') {
        Fail(esc, "malformed \\u{...} escape");
        return false;
      }
      ++pos_;
      if (v >= kSurrogateLo && v <= kSurrogateHi) {
        Fail(esc, "surrogate code point in \\u{...} escape (not a Unicode scalar value)");
        return false;
      }
      *cp = v;
      return true;
    }
    char32_t v;
    if (!ReadHex(4, &v)) {
      Fail(esc, "malformed \\u escape (expected 4 hex digits or {...})");
      return false;
    }
    if (v >= 0xDC00 && v <= kSurrogateHi) {
      Fail(esc, "lone low surrogate in \\u escape");
      return false;
    }
    if (v >= kSurrogateLo && v < 0xDC00) {
      char32_t low;
      std::size_t save = pos_;
      if (Peek() == '\\' && Peek(1) == 'u' && Has(1)) {
        pos_ += 2;
        if (ReadHex(4, &low) && low >= 0xDC00 && low <= kSurrogateHi) {
          *cp = 0x10000 + ((v - kSurrogateLo) << 10) + (low - 0xDC00);
          return true;
        }
      }
      pos_ = save;
      Fail(esc, "lone high surrogate in \\u escape (expected a \\uDC00-\\uDFFF escape next)");
      return false;
    }
    *cp = v;
    return true;
  }

  // Parses an escape at pos_ (a backslash). Appends its code points to `r`; `negate` is set for
  // \D \W \S outside classes (inside, the caller complements the set itself).
  bool ParseEscape(bool in_class, Ranges* r, bool* negate, bool* is_set = nullptr) {
    if (is_set != nullptr) *is_set = false;
    std::size_t esc = pos_;
    ++pos_;
    if (AtEnd()) {
      Fail(esc, "trailing backslash");
      return false;
    }
    char c = Peek();
    ++pos_;
    char32_t cp = 0;
    switch (c) {
      case 'd':
      case 'w':
      case 's':
      case 'D':
      case 'W':
      case 'S': {
        if (is_set != nullptr) *is_set = true;
        Ranges sub;
        if (c == 'd' || c == 'D') AddDigit(&sub);
        if (c == 'w' || c == 'W') AddWord(&sub);
        if (c == 's' || c == 'S') AddSpace(&sub);
        if (c == 'd' || c == 'w' || c == 's') {
          r->insert(r->end(), sub.begin(), sub.end());
        } else if (in_class) {
          Ranges comp = NormalizeCodepointRanges(std::move(sub), /*negate=*/true);
          r->insert(r->end(), comp.begin(), comp.end());
        } else {
          *r = std::move(sub);
          *negate = true;
        }
        return true;
      }
      case 't':
        cp = '\t';
        break;
      case 'n':
        cp = '\n';
        break;
      case 'r':
        cp = '\r';
        break;
      case 'f':
        cp = '\f';
        break;
      case 'v':
        cp = '\v';
        break;
      case '0':
        if (Peek() >= '0' && Peek() <= '9' && !AtEnd()) {
          Fail(esc, "octal escapes and backreferences are not supported");
          return false;
        }
        cp = 0;
        break;
      case 'x':
        if (!ReadHex(2, &cp)) {
          Fail(esc, "malformed \\x escape (expected 2 hex digits)");
          return false;
        }
        break;
      case 'u':
        if (!ParseUnicodeEscape(esc, &cp)) return false;
        break;
      case 'c': {
        char l = Peek();
        if (AtEnd() || !std::isalpha(static_cast<unsigned char>(l))) {
          Fail(esc, "malformed \\c escape (expected a letter)");
          return false;
        }
        ++pos_;
        cp = static_cast<char32_t>(l) % 32;
        break;
      }
      case 'b':
        if (in_class) {
          cp = 0x08;
          break;
        }
        Fail(esc, "word boundaries (\\b) are not supported");
        return false;
      case 'B':
        Fail(esc, "word boundaries (\\B) are not supported");
        return false;
      case 'k':
        Fail(esc, "backreferences (\\k<name>) are not supported");
        return false;
      case 'p':
      case 'P':
        Fail(esc, "Unicode property escapes (\\p, \\P) are not supported");
        return false;
      default:
        if (c >= '1' && c <= '9') {
          Fail(esc, "backreferences are not supported");
          return false;
        }
        if (IsSyntaxChar(c) ||
            (static_cast<unsigned char>(c) < 0x80 && std::ispunct(static_cast<unsigned char>(c)))) {
          cp = static_cast<unsigned char>(c);
          break;
        }
        Fail(esc, "invalid escape");
        return false;
    }
    r->push_back({cp, cp});
    return true;
  }

  // One class member at pos_: a single code point (*single = true, in *cp) or a set (\d ...).
  bool ParseClassAtom(Ranges* r, bool* single, char32_t* cp) {
    if (Peek() == '\\') {
      Ranges sub;
      bool negate = false;
      bool is_set = false;
      if (!ParseEscape(/*in_class=*/true, &sub, &negate, &is_set)) return false;
      *single = !is_set;
      if (*single) {
        *cp = sub[0].lo;
      } else {
        r->insert(r->end(), sub.begin(), sub.end());
      }
      return true;
    }
    *single = true;
    return DecodeChar(cp);
  }

  std::int32_t ParseClass() {
    std::size_t at = pos_;
    ++pos_;  // '['
    bool negate = false;
    if (Peek() == '^' && !AtEnd()) {
      negate = true;
      ++pos_;
    }
    Ranges r;
    while (true) {
      if (AtEnd()) return Fail(at, "missing ']'");
      if (Peek() == ']') break;
      std::size_t item_at = pos_;
      bool single = false;
      char32_t lo = 0;
      if (!ParseClassAtom(&r, &single, &lo)) return -1;
      if (Peek() == '-' && Has(1) && Peek(1) != ']') {
        ++pos_;  // '-'
        std::size_t hi_at = pos_;
        bool hi_single = false;
        char32_t hi = 0;
        Ranges dummy;
        if (!ParseClassAtom(&dummy, &hi_single, &hi)) return -1;
        if (!single) return Fail(item_at, "class escape used as a range bound");
        if (!hi_single) return Fail(hi_at, "class escape used as a range bound");
        if (hi < lo) return Fail(item_at, "class range out of order");
        r.push_back({lo, hi});
      } else if (single) {
        r.push_back({lo, lo});
      }
    }
    ++pos_;  // ']'
    return AddClass(std::move(r), negate, at);
  }

  std::string_view p_;
  RegexParseOptions options_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  RegexAst ast_;
  Status error_;
  std::vector<std::string> names_;
};

}  // namespace

Status RegexError(std::string_view pattern, std::size_t offset, std::string_view what,
                  StatusCode code) {
  // A window of the pattern around the offset. Non-printable bytes render as '?' and a valid
  // multi-byte character counts as one column, so the caret stays under the offending spot.
  constexpr std::size_t kBefore = 40;
  constexpr std::size_t kAfter = 30;
  offset = std::min(offset, pattern.size());
  std::size_t begin = offset > kBefore ? offset - kBefore : 0;
  while (begin > 0 && (static_cast<unsigned char>(pattern[begin]) & 0xC0) == 0x80) --begin;
  std::size_t end = std::min(pattern.size(), offset + kAfter);
  std::string line = begin > 0 ? "..." : "";
  std::size_t col = line.size();
  std::size_t chars = line.size();
  for (std::size_t i = begin; i < end;) {
    if (i <= offset) col = chars;
    unsigned char b = static_cast<unsigned char>(pattern[i]);
    std::size_t len = 1;
    if (b >= 0xC2 && b <= 0xF4) {
      std::size_t l = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : 2;
      bool ok = i + l <= pattern.size();
      for (std::size_t k = 1; ok && k < l; ++k) {
        ok = (static_cast<unsigned char>(pattern[i + k]) & 0xC0) == 0x80;
      }
      if (ok) len = l;
    }
    if (len > 1) {
      line.append(pattern.substr(i, len));
    } else {
      line.push_back(b >= 0x20 && b < 0x7F ? static_cast<char>(b) : '?');
    }
    ++chars;
    i += len;
  }
  if (offset >= end) col = chars;
  std::string msg(what);
  msg += "\n  ";
  msg += line;
  msg += "\n  ";
  msg.append(col, ' ');
  msg += '^';
  return Status(code, std::move(msg), "offset " + std::to_string(offset));
}


Result<RegexAst> ParseRegex(std::string_view pattern, const RegexParseOptions& options) {
  return Parser(pattern, options).Parse();
}

}  // namespace lockstep
