// PrintGbnf and StructurallyEqual: GBNF text for any Grammar (read back by ParseGbnf into a
// structurally equal grammar) and the structural comparison the round-trip tests and fuzzers use.
#include <string>
#include <vector>

#include "grammar/ir/grammar_ir.h"
#include "grammar/base/utf8.h"

namespace lockstep::grammar {
namespace {

void AppendHex(std::uint32_t v, int digits, std::string* out) {
  static const char kHex[] = "0123456789ABCDEF";
  for (int i = digits - 1; i >= 0; --i) out->push_back(kHex[(v >> (4 * i)) & 0xF]);
}

// One code point inside "..." or [...]; `in_class` escapes what a class treats specially.
void AppendChar(char32_t c, bool in_class, std::string* out) {
  switch (c) {
    case '\n': *out += "\\n"; return;
    case '\r': *out += "\\r"; return;
    case '\t': *out += "\\t"; return;
    case '\\': *out += "\\\\"; return;
    case '"':
      if (in_class) break;
      *out += "\\\"";
      return;
    default: break;
  }
  if (in_class && (c == '[' || c == ']')) {
    out->push_back('\\');
    out->push_back(static_cast<char>(c));
    return;
  }
  if (in_class && (c == '-' || c == '^')) {
    *out += "\\x";
    AppendHex(c, 2, out);
    return;
  }
  if (c < 0x20 || c == 0x7F) {
    *out += "\\x";
    AppendHex(c, 2, out);
  } else if (c >= 0xD800 && c <= 0xDFFF) {
    *out += "\\u";  // only reachable for hand-built ranges; ParseGbnf drops surrogates
    AppendHex(c, 4, out);
  } else if (c > kMaxCodepoint) {
    *out += "\\U";
    AppendHex(c, 8, out);
  } else {
    AppendUtf8(c, out);
  }
}

// Decodes UTF-8 for printing literals; a byte that is not valid UTF-8 prints as its code point.
std::vector<char32_t> Decode(const std::string& s) {
  std::vector<char32_t> out;
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::size_t len = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    bool ok = len > 0 && i + len <= s.size();
    char32_t cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (std::size_t k = 1; ok && k < len; ++k) {
      const auto c = static_cast<unsigned char>(s[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    if (!ok) {
      out.push_back(b);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

void PrintRanges(const std::vector<CodepointRange>& ranges, std::string* out) {
  for (const CodepointRange& r : ranges) {
    AppendChar(r.lo, true, out);
    if (r.hi != r.lo) {
      if (r.hi != r.lo + 1) out->push_back('-');
      AppendChar(r.hi, true, out);
    }
  }
}

// The complement over the Unicode scalar values, for printing [^...] when it is shorter.
std::vector<CodepointRange> Complement(const std::vector<CodepointRange>& ranges) {
  std::vector<CodepointRange> out;
  char32_t next = 0;
  auto emit = [&](char32_t lo, char32_t hi) {
    if (lo < 0xD800 && hi >= 0xD800) {
      out.push_back({lo, 0xD7FF});
      if (hi > 0xDFFF) out.push_back({0xE000, hi});
    } else if (lo >= 0xD800 && lo <= 0xDFFF) {
      if (hi > 0xDFFF) out.push_back({0xE000, hi});
    } else {
      out.push_back({lo, hi});
    }
  };
  for (const CodepointRange& r : ranges) {
    if (r.lo > next) emit(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodepoint) emit(next, kMaxCodepoint);
  return out;
}

bool IsAny(const std::vector<CodepointRange>& r) {
  return r.size() == 2 && r[0].lo == 0 && r[0].hi == 0xD7FF && r[1].lo == 0xE000 &&
         r[1].hi == kMaxCodepoint;
}

[[gnu::noinline]] void PrintClass(const std::vector<CodepointRange>& ranges, std::string* out) {
  if (IsAny(ranges)) {
    out->push_back('.');
    return;
  }
  std::vector<CodepointRange> comp = Complement(ranges);
  out->push_back('[');
  if (!ranges.empty() && comp.size() < ranges.size()) {
    out->push_back('^');
    PrintRanges(comp, out);
  } else {
    PrintRanges(ranges, out);
  }
  out->push_back(']');
}

// Recursion as deep as the tree; the frame stays small (classes print out of line).
// A token item: <[ID]>, <TEXT> when the text reads back as one (it starts with '<', ends with
// its only '>', has something between them and no line break), else the by-name form <[TEXT]>;
// with '!' before it when negated.
void PrintToken(const Expr& e, std::string* out) {
  if (e.negated) out->push_back('!');
  const std::string& t = e.text;
  if (e.token_id >= 0) {
    out->append("<[").append(std::to_string(e.token_id)).append("]>");
  } else if (t.size() >= 3 && t.front() == '<' && t[1] != '[' && t.find('>') == t.size() - 1 &&
             t.find_first_of("\r\n") == std::string::npos) {
    out->append(t);
  } else {
    out->append("<[").append(t).append("]>");
  }
}

class Printer {
 public:
  explicit Printer(const Grammar& g) : g_(g) {}

  void Print(ExprId id, std::string* out) {
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::kEmpty: *out += "()"; return;
      case ExprKind::kLiteral:
        out->push_back('"');
        for (char32_t c : Decode(e.text)) AppendChar(c, false, out);
        out->push_back('"');
        return;
      case ExprKind::kCharClass: PrintClass(e.ranges, out); return;
      case ExprKind::kRuleRef:
        if (e.rule >= 0 && static_cast<std::size_t>(e.rule) < g_.rules.size()) {
          *out += g_.rule(e.rule).name;
        } else {
          *out += "<invalid-rule>";
        }
        return;
      case ExprKind::kSequence:
      case ExprKind::kChoice: {
        if (e.children.empty()) {
          // An empty choice matches nothing, like an empty class.
          *out += e.kind == ExprKind::kSequence ? "()" : "[]";
          return;
        }
        const char* sep = e.kind == ExprKind::kSequence ? " " : " | ";
        for (std::size_t i = 0; i < e.children.size(); ++i) {
          if (i > 0) *out += sep;
          const Expr& c = g_.expr(e.children[i]);
          // A nested list keeps its parentheses so the structure reads back the same.
          const bool paren =
              !c.children.empty() &&
              (c.kind == ExprKind::kChoice ||
               (c.kind == ExprKind::kSequence && e.kind == ExprKind::kSequence));
          PrintAtom(e.children[i], paren, out);
        }
        return;
      }
      case ExprKind::kRepeat: {
        if (e.children.empty()) {
          *out += "()";
          return;
        }
        const ExprKind k = g_.expr(e.children[0]).kind;
        PrintAtom(e.children[0], k == ExprKind::kSequence || k == ExprKind::kChoice, out);
        if (e.min == 0 && e.max == Expr::kUnbounded) {
          out->push_back('*');
        } else if (e.min == 1 && e.max == Expr::kUnbounded) {
          out->push_back('+');
        } else if (e.min == 0 && e.max == 1) {
          out->push_back('?');
        } else {
          out->push_back('{');
          *out += std::to_string(e.min);
          if (e.max != e.min) {
            out->push_back(',');
            if (e.max != Expr::kUnbounded) *out += std::to_string(e.max);
          }
          out->push_back('}');
        }
        return;
      }
      case ExprKind::kLexeme:
        out->push_back('/');
        for (std::size_t i = 0; i < e.text.size(); ++i) {
          const char c = e.text[i];
          if (c == '\\' && i + 1 < e.text.size()) {
            out->push_back(c);
            out->push_back(e.text[++i]);
          } else if (c == '/') {
            *out += "\\/";
          } else {
            out->push_back(c);
          }
        }
        out->push_back('/');
        return;
      case ExprKind::kSpecialToken:
        PrintToken(e, out);
        return;
      case ExprKind::kByteDfa:
        out->append("/<dfa ")
            .append(std::to_string(e.dfa ? e.dfa->num_states : 0))
            .append(" states>/");
        return;
    }
  }

 private:
  void PrintAtom(ExprId id, bool paren, std::string* out) {
    if (paren) out->push_back('(');
    Print(id, out);
    if (paren) out->push_back(')');
  }
  const Grammar& g_;
};

bool ExprEqual(const Grammar& ga, ExprId a, const Grammar& gb, ExprId b) {
  if (a < 0 || b < 0 || static_cast<std::size_t>(a) >= ga.exprs.size() ||
      static_cast<std::size_t>(b) >= gb.exprs.size()) {
    return a == b;
  }
  const Expr& x = ga.expr(a);
  const Expr& y = gb.expr(b);
  if (x.kind != y.kind || x.text != y.text || x.rule != y.rule ||
      x.children.size() != y.children.size() || x.ranges.size() != y.ranges.size()) {
    return false;
  }
  if (x.kind == ExprKind::kRepeat && (x.min != y.min || x.max != y.max || x.count != y.count)) {
    return false;
  }
  if (x.kind == ExprKind::kByteDfa && x.dfa != y.dfa) return false;
  if (x.token_id != y.token_id || x.negated != y.negated) return false;
  for (std::size_t i = 0; i < x.ranges.size(); ++i) {
    if (x.ranges[i].lo != y.ranges[i].lo || x.ranges[i].hi != y.ranges[i].hi) return false;
  }
  for (std::size_t i = 0; i < x.children.size(); ++i) {
    if (!ExprEqual(ga, x.children[i], gb, y.children[i])) return false;
  }
  return true;
}

}  // namespace

std::string PrintGbnf(const Grammar& g) {
  std::string out;
  if (g.root >= 0 && static_cast<std::size_t>(g.root) < g.rules.size() &&
      g.rule(g.root).name != "root") {
    out.append("# lockstep-root: ").append(g.rule(g.root).name).push_back('\n');
  }
  Printer printer(g);
  for (const Rule& r : g.rules) {
    out += r.name;
    out += " ::= ";
    if (r.body >= 0 && static_cast<std::size_t>(r.body) < g.exprs.size()) {
      printer.Print(r.body, &out);
    } else {
      out += "()";
    }
    out.push_back('\n');
  }
  return out;
}

bool StructurallyEqual(const Grammar& a, const Grammar& b) {
  if (a.root != b.root || a.rules.size() != b.rules.size()) return false;
  for (std::size_t i = 0; i < a.rules.size(); ++i) {
    if (a.rules[i].name != b.rules[i].name) return false;
    if (a.rules[i].unique_item != b.rules[i].unique_item) return false;
    if (a.rules[i].unique_open_calls != b.rules[i].unique_open_calls) return false;
    if (a.rules[i].unique_search != b.rules[i].unique_search) return false;
    if (a.rules[i].max_chars != b.rules[i].max_chars) return false;
    if (a.rules[i].ecma_pattern != b.rules[i].ecma_pattern) return false;
    if (a.rules[i].called != b.rules[i].called) return false;
    if (!ExprEqual(a, a.rules[i].body, b, b.rules[i].body)) return false;
  }
  return true;
}

}  // namespace lockstep::grammar
