// Hand-written recursive-descent recognisers for the shipped grammars' languages (see
// grammar_checkers.h). Each works on a cursor over the input bytes; every Parse* function either
// consumes one instance of its construct and returns true, or returns false (the cursor is then
// meaningless and the whole check fails), except where a comment says it backtracks.
#include "util/grammar_checkers.h"

#include <cstdint>
#include <string_view>

namespace lockstep::testing {
namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
int HexValue(char c) {
  if (IsDigit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}
bool IsIdentStart(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool IsIdentChar(char c) { return IsIdentStart(c) || IsDigit(c); }

class Cursor {
 public:
  explicit Cursor(std::string_view s) : s_(s) {}

  bool AtEnd() const { return i_ >= s_.size(); }
  // The byte at the cursor, or '\0' past the end (callers never accept '\0' as a token byte).
  char Peek(std::size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }
  bool Eat(char c) {
    if (AtEnd() || s_[i_] != c) return false;
    ++i_;
    return true;
  }
  bool EatLiteral(std::string_view lit) {
    if (s_.substr(i_).substr(0, lit.size()) != lit) return false;
    i_ += lit.size();
    return true;
  }
  std::size_t pos() const { return i_; }
  void set_pos(std::size_t p) { i_ = p; }
  void Advance(std::size_t n = 1) { i_ += n; }

  // Decodes one UTF-8 scalar value strictly (no overlongs, no encoded surrogates, at most
  // U+10FFFF) into *cp and advances; false on malformed input.
  bool NextCodePoint(std::uint32_t* cp) {
    if (AtEnd()) return false;
    const auto b0 = static_cast<unsigned char>(s_[i_]);
    int len;
    std::uint32_t v;
    if (b0 < 0x80) {
      *cp = b0;
      ++i_;
      return true;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      len = 2, v = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      len = 3, v = b0 & 0x0F;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      len = 4, v = b0 & 0x07;
    } else {
      return false;
    }
    if (i_ + len > s_.size()) return false;
    for (int k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s_[i_ + k]);
      if ((b & 0xC0) != 0x80) return false;
      v = (v << 6) | (b & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF))) return false;
    if (v >= 0xD800 && v <= 0xDFFF) return false;
    *cp = v;
    i_ += len;
    return true;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
};

// ---------------------------------------------------------------------------------------------
// JSON (RFC 8259 + the whitespace bound + surrogate pairing).

bool JsonWs(Cursor& c) {
  std::size_t run = 0;
  while (c.Peek() == ' ' || c.Peek() == '\t' || c.Peek() == '\n' || c.Peek() == '\r') {
    c.Advance();
    if (++run > kJsonMaxWhitespaceRun) return false;
  }
  return true;
}

// Four hex digits after "\u"; the UTF-16 code unit in *unit.
bool JsonHex4(Cursor& c, std::uint32_t* unit) {
  std::uint32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    if (!IsHex(c.Peek())) return false;
    v = v * 16 + HexValue(c.Peek());
    c.Advance();
  }
  *unit = v;
  return true;
}

bool JsonString(Cursor& c) {
  if (!c.Eat('"')) return false;
  for (;;) {
    if (c.AtEnd()) return false;
    const char ch = c.Peek();
    if (ch == '"') {
      c.Advance();
      return true;
    }
    if (ch == '\\') {
      c.Advance();
      const char e = c.Peek();
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
          e == 't') {
        c.Advance();
        continue;
      }
      if (e != 'u') return false;
      c.Advance();
      std::uint32_t unit;
      if (!JsonHex4(c, &unit)) return false;
      if (unit >= 0xDC00 && unit <= 0xDFFF) return false;  // a low surrogate alone
      if (unit >= 0xD800 && unit <= 0xDBFF) {              // must be followed by a low one
        if (!c.Eat('\\') || !c.Eat('u')) return false;
        std::uint32_t low;
        if (!JsonHex4(c, &low)) return false;
        if (low < 0xDC00 || low > 0xDFFF) return false;
      }
      continue;
    }
    std::uint32_t cp;
    if (!c.NextCodePoint(&cp)) return false;
    if (cp < 0x20) return false;
  }
}

bool Digits(Cursor& c) {  // [0-9]+
  if (!IsDigit(c.Peek())) return false;
  while (IsDigit(c.Peek())) c.Advance();
  return true;
}

// "0" | [1-9][0-9]*
bool UnsignedIntNoLeadingZero(Cursor& c) {
  if (c.Eat('0')) return true;
  if (c.Peek() < '1' || c.Peek() > '9') return false;
  return Digits(c);
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?, then ([eE][+-]?[0-9]+)? when with_exponent.
bool Number(Cursor& c, bool with_exponent) {
  c.Eat('-');
  if (!UnsignedIntNoLeadingZero(c)) return false;
  if (c.Eat('.') && !Digits(c)) return false;
  if (with_exponent && (c.Peek() == 'e' || c.Peek() == 'E')) {
    c.Advance();
    if (c.Peek() == '+' || c.Peek() == '-') c.Advance();
    if (!Digits(c)) return false;
  }
  return true;
}

bool JsonValue(Cursor& c, int depth);

bool JsonObject(Cursor& c, int depth) {
  if (!c.Eat('{') || !JsonWs(c)) return false;
  if (c.Eat('}')) return true;
  for (;;) {
    if (!JsonString(c) || !JsonWs(c) || !c.Eat(':') || !JsonWs(c)) return false;
    if (!JsonValue(c, depth + 1) || !JsonWs(c)) return false;
    if (c.Eat('}')) return true;
    if (!c.Eat(',') || !JsonWs(c)) return false;
  }
}

bool JsonArray(Cursor& c, int depth) {
  if (!c.Eat('[') || !JsonWs(c)) return false;
  if (c.Eat(']')) return true;
  for (;;) {
    if (!JsonValue(c, depth + 1) || !JsonWs(c)) return false;
    if (c.Eat(']')) return true;
    if (!c.Eat(',') || !JsonWs(c)) return false;
  }
}

// depth: the number of arrays and objects around this value.
bool JsonValue(Cursor& c, int depth) {
  if (depth >= kCheckerMaxDepth && (c.Peek() == '[' || c.Peek() == '{')) return false;
  switch (c.Peek()) {
    case '{':
      return JsonObject(c, depth);
    case '[':
      return JsonArray(c, depth);
    case '"':
      return JsonString(c);
    case 't':
      return c.EatLiteral("true");
    case 'f':
      return c.EatLiteral("false");
    case 'n':
      return c.EatLiteral("null");
    default:
      return Number(c, /*with_exponent=*/true);
  }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic.

bool ArithExpr(Cursor& c, int depth);

// "0" | [1-9][0-9]*, optional "." [0-9]+.
bool ArithNumber(Cursor& c) {
  if (!UnsignedIntNoLeadingZero(c)) return false;
  if (c.Eat('.') && !Digits(c)) return false;
  return true;
}

bool ArithFactor(Cursor& c, int depth) {
  if (depth > kCheckerMaxDepth) return false;
  if (c.Eat('-')) return ArithFactor(c, depth + 1);
  if (c.Eat('(')) return ArithExpr(c, depth + 1) && c.Eat(')');
  return ArithNumber(c);
}

// Consumes " "? op " "? when op is one of `ops`; otherwise leaves the cursor where it was
// (backtracks over a space that belongs to the caller's level) and returns false.
bool ArithOperator(Cursor& c, std::string_view ops) {
  const std::size_t start = c.pos();
  c.Eat(' ');
  if (c.AtEnd() || ops.find(c.Peek()) == std::string_view::npos) {
    c.set_pos(start);
    return false;
  }
  c.Advance();
  c.Eat(' ');
  return true;
}

bool ArithTerm(Cursor& c, int depth) {
  if (!ArithFactor(c, depth + 1)) return false;
  while (ArithOperator(c, "*/"))
    if (!ArithFactor(c, depth + 1)) return false;
  return true;
}

bool ArithExpr(Cursor& c, int depth) {
  if (!ArithTerm(c, depth + 1)) return false;
  while (ArithOperator(c, "+-"))
    if (!ArithTerm(c, depth + 1)) return false;
  return true;
}

// ---------------------------------------------------------------------------------------------
// C call.

// C-call identifiers are at most 32 characters (c_call.gbnf bounds them so that generation
// cannot extend a name forever).
bool Identifier(Cursor& c) {
  if (!IsIdentStart(c.Peek())) return false;
  c.Advance();
  int n = 1;
  while (IsIdentChar(c.Peek())) {
    if (++n > 32) return false;
    c.Advance();
  }
  return true;
}

bool CString(Cursor& c) {
  if (!c.Eat('"')) return false;
  for (;;) {
    if (c.AtEnd()) return false;
    const char ch = c.Peek();
    if (ch == '"') {
      c.Advance();
      return true;
    }
    if (ch == '\\') {
      c.Advance();
      const char e = c.Peek();
      if (e != '\0' && std::string_view("\"\\'?abfnrtv0").find(e) != std::string_view::npos) {
        c.Advance();
        continue;
      }
      if (e != 'x') return false;
      c.Advance();
      if (!IsHex(c.Peek()) || !IsHex(c.Peek(1))) return false;
      c.Advance(2);
      continue;
    }
    std::uint32_t cp;
    if (!c.NextCodePoint(&cp) || cp < 0x20) return false;
  }
}

bool CCall(Cursor& c, int depth);

bool CArg(Cursor& c, int depth) {
  const char ch = c.Peek();
  if (ch == '"') return CString(c);
  if (ch == '-' || IsDigit(ch)) return Number(c, /*with_exponent=*/true);
  if (!Identifier(c)) return false;
  if (c.Peek() == '(') return CCall(c, depth + 1);  // the identifier was the callee's name
  return true;
}

// The part after the name: "(" args? ")".
bool CCall(Cursor& c, int depth) {
  if (depth > kCheckerMaxDepth) return false;
  if (!c.Eat('(')) return false;
  if (c.Eat(')')) return true;
  for (;;) {
    if (!CArg(c, depth)) return false;
    if (c.Eat(')')) return true;
    if (!c.Eat(',')) return false;
    c.Eat(' ');
  }
}

// ---------------------------------------------------------------------------------------------
// SQL.

bool SqlIdent(Cursor& c) {
  auto start = [](char ch) { return (ch >= 'a' && ch <= 'z') || ch == '_'; };
  if (!start(c.Peek())) return false;
  while (start(c.Peek()) || IsDigit(c.Peek())) c.Advance();
  return true;
}

bool SqlString(Cursor& c) {
  if (!c.Eat('\'')) return false;
  for (;;) {
    if (c.AtEnd()) return false;
    if (c.Peek() == '\'') {
      if (c.Peek(1) == '\'') {  // '' stands for one quote
        c.Advance(2);
        continue;
      }
      c.Advance();
      return true;
    }
    std::uint32_t cp;
    if (!c.NextCodePoint(&cp) || cp < 0x20) return false;
  }
}

bool SqlCondition(Cursor& c) {
  if (!SqlIdent(c) || !c.Eat(' ')) return false;
  // Longest operator first: "<>" and "<=" before "<".
  if (!(c.EatLiteral("<>") || c.EatLiteral("<=") || c.EatLiteral(">=") || c.Eat('<') ||
        c.Eat('>') || c.Eat('=')))
    return false;
  if (!c.Eat(' ')) return false;
  const char ch = c.Peek();
  if (ch == '\'') return SqlString(c);
  if (ch == '-' || IsDigit(ch)) return Number(c, /*with_exponent=*/false);
  return SqlIdent(c);
}

// ---------------------------------------------------------------------------------------------
// Tool calls.

bool ToolName(Cursor& c) {
  if (!IsIdentStart(c.Peek())) return false;
  c.Advance();
  for (int n = 1; IsIdentChar(c.Peek()); ++n) {
    if (n >= 64) return false;  // 1-64 characters in all
    c.Advance();
  }
  return true;
}

bool ToolCall(Cursor& c) {
  if (!c.Eat('{') || !JsonWs(c)) return false;
  if (!c.EatLiteral("\"name\"") || !JsonWs(c) || !c.Eat(':') || !JsonWs(c)) return false;
  if (!c.Eat('"') || !ToolName(c) || !c.Eat('"')) return false;
  if (!JsonWs(c) || !c.Eat(',') || !JsonWs(c)) return false;
  if (!c.EatLiteral("\"arguments\"") || !JsonWs(c) || !c.Eat(':') || !JsonWs(c)) return false;
  if (c.Peek() != '{' || !JsonObject(c, 3)) return false;
  return JsonWs(c) && c.Eat('}');
}

}  // namespace

bool CheckJsonRfc8259(std::string_view text) {
  Cursor c(text);
  return JsonWs(c) && JsonValue(c, 0) && JsonWs(c) && c.AtEnd();
}

bool CheckArithmetic(std::string_view text) {
  Cursor c(text);
  return ArithExpr(c, 0) && c.AtEnd();
}

bool CheckCCall(std::string_view text) {
  Cursor c(text);
  if (!Identifier(c) || !CCall(c, 0)) return false;
  c.Eat(';');
  return c.AtEnd();
}

bool CheckSqlSelect(std::string_view text) {
  Cursor c(text);
  if (!c.EatLiteral("SELECT ")) return false;
  c.EatLiteral("DISTINCT ");
  if (!c.Eat('*')) {
    if (!SqlIdent(c)) return false;
    while (c.EatLiteral(", "))
      if (!SqlIdent(c)) return false;
  }
  if (!c.EatLiteral(" FROM ") || !SqlIdent(c)) return false;
  if (c.EatLiteral(" WHERE ")) {
    if (!SqlCondition(c)) return false;
    while (c.EatLiteral(" AND ") || c.EatLiteral(" OR "))
      if (!SqlCondition(c)) return false;
  }
  if (c.EatLiteral(" ORDER BY ")) {
    do {
      if (!SqlIdent(c)) return false;
      if (!c.EatLiteral(" ASC")) c.EatLiteral(" DESC");
    } while (c.EatLiteral(", "));
  }
  if (c.EatLiteral(" LIMIT ")) {
    if (!UnsignedIntNoLeadingZero(c)) return false;
  }
  c.Eat(';');
  return c.AtEnd();
}

bool CheckToolCalls(std::string_view text) {
  Cursor c(text);
  if (!c.Eat('[') || !JsonWs(c)) return false;
  for (;;) {
    if (!ToolCall(c) || !JsonWs(c)) return false;
    if (c.Eat(']')) break;
    if (!c.Eat(',') || !JsonWs(c)) return false;
  }
  return c.AtEnd();
}

}  // namespace lockstep::testing
