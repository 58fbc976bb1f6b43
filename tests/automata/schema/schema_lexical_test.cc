// Tests of the JSON Schema compiler's lexical automata (automata/schema/schema_lexical.h) against
// independent oracles: exact rationals (Boost cpp_rational) for numbers; nlohmann for decoding,
// RE2 for patterns and the validator's own format checker for formats, on the official
// JSON-Schema-Test-Suite and on mutations of its strings.
#include "automata/schema/schema_lexical.h"

#include <gtest/gtest.h>
#include <re2/re2.h>

#include <boost/multiprecision/cpp_int.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep::schema {
bool CheckFormat(const std::string& format, const std::string& value);  // json_schema_format.cc
}

namespace lockstep::schema {
namespace {

using Rational = boost::multiprecision::cpp_rational;
using BigInt = boost::multiprecision::cpp_int;
using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;
using grammar::Grammar;

// ---------------------------------------------------------------------------------------------
// Oracles.

// Exact value of a JSON number text (assumed well-formed).
Rational ParseRational(const std::string& t) {
  std::size_t p = 0;
  bool neg = false;
  if (t[p] == '-') neg = true, ++p;
  BigInt num = 0;
  long long scale = 0;
  for (; p < t.size() && std::isdigit(static_cast<unsigned char>(t[p])); ++p)
    num = num * 10 + (t[p] - '0');
  if (p < t.size() && t[p] == '.') {
    for (++p; p < t.size() && std::isdigit(static_cast<unsigned char>(t[p])); ++p) {
      num = num * 10 + (t[p] - '0');
      --scale;
    }
  }
  if (p < t.size() && (t[p] == 'e' || t[p] == 'E')) scale += std::stoll(t.substr(p + 1));
  Rational r(num);
  BigInt ten = 1;
  for (long long i = 0; i < (scale < 0 ? -scale : scale); ++i) ten *= 10;
  r = scale < 0 ? r / Rational(ten) : r * Rational(ten);
  return neg ? -r : r;
}

// Policy syntax: integer form, plus plain decimals unless `integer_only`.
bool PolicyNumberSyntax(const std::string& s, bool integer_only) {
  std::size_t p = 0;
  if (p < s.size() && s[p] == '-') ++p;
  if (p >= s.size() || !std::isdigit(static_cast<unsigned char>(s[p]))) return false;
  if (s[p] == '0') {
    ++p;
  } else {
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  }
  if (p == s.size()) return true;
  if (integer_only || s[p] != '.') return false;
  std::size_t q = ++p;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  return p > q && p == s.size();
}

bool NumberOracle(const NumberConstraint& c, const std::string& s) {
  if (!PolicyNumberSyntax(s, c.integer)) return false;
  const Rational v = ParseRational(s);
  if (c.minimum) {
    const Rational b = ParseRational(c.minimum->value);
    if (c.minimum->exclusive ? !(v > b) : !(v >= b)) return false;
  }
  if (c.maximum) {
    const Rational b = ParseRational(c.maximum->value);
    if (c.maximum->exclusive ? !(v < b) : !(v <= b)) return false;
  }
  if (c.multiple_of) {
    const Rational q = v / ParseRational(*c.multiple_of);
    if (boost::multiprecision::denominator(q) != 1) return false;
  }
  return true;
}

// Canonical escaping written here from the policy, independently of RenderJsonString.
std::string Canon(const std::string& v) {
  std::string out = "\"";
  for (unsigned char c : v) {
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\b')
      out += "\\b";
    else if (c == '\f')
      out += "\\f";
    else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

std::int64_t CodePoints(const std::string& s) {
  std::int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// Matches `s` against expression `id` of `g` by backtracking (kSequence, kChoice, kRepeat,
// kLiteral, kCharClass over UTF-8, kByteDfa): the set of end offsets.
std::set<std::size_t> Ends(const Grammar& g, ExprId id, const std::string& s, std::size_t i) {
  const Expr& e = g.expr(id);
  std::set<std::size_t> out;
  switch (e.kind) {
    case ExprKind::kEmpty:
      return {i};
    case ExprKind::kLiteral:
      if (s.compare(i, e.text.size(), e.text) == 0) out.insert(i + e.text.size());
      return out;
    case ExprKind::kCharClass: {
      if (i >= s.size()) return out;
      const auto c0 = static_cast<unsigned char>(s[i]);
      std::size_t len = c0 < 0x80 ? 1 : c0 < 0xE0 ? 2 : c0 < 0xF0 ? 3 : 4;
      if (i + len > s.size()) return out;
      char32_t cp = len == 1 ? c0 : len == 2 ? (c0 & 0x1F) : len == 3 ? (c0 & 0x0F) : (c0 & 0x07);
      for (std::size_t k = 1; k < len; ++k)
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
      for (const CodepointRange& r : e.ranges) {
        if (cp >= r.lo && cp <= r.hi) out.insert(i + len);
      }
      return out;
    }
    case ExprKind::kSequence: {
      std::set<std::size_t> cur = {i};
      for (ExprId c : e.children) {
        std::set<std::size_t> next;
        for (std::size_t j : cur) {
          auto x = Ends(g, c, s, j);
          next.insert(x.begin(), x.end());
        }
        cur = std::move(next);
      }
      return cur;
    }
    case ExprKind::kChoice:
      for (ExprId c : e.children) {
        auto x = Ends(g, c, s, i);
        out.insert(x.begin(), x.end());
      }
      return out;
    case ExprKind::kRepeat: {
      std::set<std::size_t> cur = {i};
      for (std::int32_t n = 0;; ++n) {
        if (n >= e.min) out.insert(cur.begin(), cur.end());
        if (cur.empty() || (e.max != Expr::kUnbounded && n >= e.max)) break;
        std::set<std::size_t> next;
        for (std::size_t j : cur) {
          auto x = Ends(g, e.children[0], s, j);
          for (std::size_t k : x) {
            if (k > j) next.insert(k);  // units are never empty
          }
        }
        cur = std::move(next);
      }
      return out;
    }
    case ExprKind::kByteDfa: {
      StateId st = e.dfa->start;
      for (std::size_t j = i; st != ByteDfa::kDead; ++j) {
        if (e.dfa->IsAccepting(st)) out.insert(j);
        if (j == s.size()) break;
        st = e.dfa->Step(st, static_cast<std::uint8_t>(s[j]));
      }
      return out;
    }
    default:
      ADD_FAILURE() << "unexpected expression kind";
      return out;
  }
}

bool ExprAccepts(const Grammar& g, ExprId id, const std::string& s) {
  return Ends(g, id, s, 0).count(s.size()) > 0;
}

std::string SuiteDir() {
  return std::string(LOCKSTEP_SHARED_DATA_DIR) + "/json-schema-test-suite/tests/draft2020-12";
}

std::vector<nlohmann::json> LoadSuiteFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_array()) return {};
  return j.get<std::vector<nlohmann::json>>();
}

// ---------------------------------------------------------------------------------------------
// Numbers.

std::vector<std::string> ShortNumberTexts() {
  std::vector<std::string> out;
  const std::string alphabet = "-0123456789.";
  std::function<void(std::string)> rec = [&](std::string s) {
    out.push_back(s);
    if (s.size() == 5) return;
    for (char c : alphabet) rec(s + c);
  };
  rec("");
  return out;
}

TEST(SchemaLexicalNumber, RandomConstraintsAgainstRationalOracle) {
  const std::vector<std::string> pool = {"-10", "-2.5", "0",    "0.1",   "1",  "7",  "99.99",
                                         "1e3", "-0",   "1e-2", "-2.50", "12", "-1", "0.25"};
  const std::vector<std::string> mults = {"1", "3", "0.5", "0.01", "7", "2.5", "0.3", "1e1"};
  const std::vector<std::string> texts = ShortNumberTexts();
  std::mt19937 rng(12345);
  std::int64_t compared = 0, unsat = 0;
  // 70 random constraints; the sanitizer run (LOCKSTEP_TEST_SCALE=0.05) checks 10 of them.
  const int rounds = std::max(10, static_cast<int>(70 * ::lockstep::testing::TestScale()));
  for (int round = 0; round < rounds; ++round) {
    NumberConstraint c;
    c.integer = rng() % 3 == 0;
    if (rng() % 3 != 0) c.minimum = DecimalBound{pool[rng() % pool.size()], rng() % 2 == 0};
    if (rng() % 3 != 0) c.maximum = DecimalBound{pool[rng() % pool.size()], rng() % 2 == 0};
    if (rng() % 2 == 0) c.multiple_of = mults[rng() % mults.size()];
    std::string desc =
        std::string(c.integer ? "integer" : "number") +
        (c.minimum ? " min" + std::string(c.minimum->exclusive ? "(excl) " : " ") + c.minimum->value
                   : "") +
        (c.maximum ? " max" + std::string(c.maximum->exclusive ? "(excl) " : " ") + c.maximum->value
                   : "") +
        (c.multiple_of ? " multipleOf " + *c.multiple_of : "");
    Grammar g;
    Result<ExprId> r = AddNumberExpr(&g, c);
    // Long random texts near the interesting magnitudes.
    std::vector<std::string> extra;
    for (int i = 0; i < 300; ++i) {
      std::string s = rng() % 2 ? "-" : "";
      const int ilen = 1 + rng() % 6;
      s += static_cast<char>('1' + rng() % 9);
      for (int k = 1; k < ilen; ++k) s += static_cast<char>('0' + rng() % 10);
      if (rng() % 3 == 0) s = rng() % 2 ? "-0" : "0";
      if (rng() % 2) {
        s += '.';
        const int flen = 1 + rng() % 8;
        for (int k = 0; k < flen; ++k)
          s += static_cast<char>('0' + (rng() % 3 == 0 ? 0 : rng() % 10));
      }
      extra.push_back(s);
    }
    if (!r.ok()) {
      ASSERT_EQ(r.status().code(), StatusCode::kUnsatisfiable)
          << desc << ": " << r.status().ToString();
      ++unsat;
      for (const std::vector<std::string>* list :
           {&texts, static_cast<const std::vector<std::string>*>(&extra)}) {
        for (const std::string& s : *list) ASSERT_FALSE(NumberOracle(c, s)) << desc << " " << s;
      }
      continue;
    }
    const Expr& e = g.expr(*r);
    ASSERT_EQ(e.kind, ExprKind::kByteDfa);
    ASSERT_EQ(CheckDfaInvariants(*e.dfa), "");
    for (const std::vector<std::string>* list :
         {&texts, static_cast<const std::vector<std::string>*>(&extra)}) {
      for (const std::string& s : *list) {
        ASSERT_EQ(e.dfa->FullMatch(s), NumberOracle(c, s)) << desc << " text '" << s << "'";
        ++compared;
      }
    }
  }
  EXPECT_GT(unsat, 0);
  RecordProperty("compared", std::to_string(compared));
  std::printf("number texts compared: %lld (unsatisfiable constraints: %lld)\n",
              static_cast<long long>(compared), static_cast<long long>(unsat));
}

TEST(SchemaLexicalNumber, UnconstrainedAndInteger) {
  Grammar g;
  NumberConstraint num;
  Result<ExprId> n = AddNumberExpr(&g, num);
  NumberConstraint integer;
  integer.integer = true;
  Result<ExprId> i = AddNumberExpr(&g, integer);
  ASSERT_TRUE(n.ok() && i.ok());
  const RE2 json_number("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?");
  const std::string alphabet = "-+01.eE9";
  std::vector<std::string> texts = {""};
  for (int len = 1; len <= 6; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : texts) {
      if (static_cast<int>(s.size()) == len - 1) {
        for (char c : alphabet) next.push_back(s + c);
      }
    }
    texts.insert(texts.end(), next.begin(), next.end());
  }
  for (const std::string& s : texts) {
    EXPECT_EQ(g.expr(*n).dfa->FullMatch(s), RE2::FullMatch(s, json_number)) << s;
    EXPECT_EQ(g.expr(*i).dfa->FullMatch(s), PolicyNumberSyntax(s, true)) << s;
  }
}

TEST(SchemaLexicalNumber, LongBoundsStaySmall) {
  Grammar g;
  NumberConstraint c;
  c.minimum = DecimalBound{"123456789012345678901234567890.5", false};
  Result<ExprId> r = AddNumberExpr(&g, c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ByteDfa& d = *g.expr(*r).dfa;
  EXPECT_LT(d.num_states, 200);
  EXPECT_TRUE(d.FullMatch("123456789012345678901234567890.5"));
  EXPECT_FALSE(d.FullMatch("123456789012345678901234567890.4999"));
  EXPECT_TRUE(d.FullMatch("1234567890123456789012345678901"));
  EXPECT_FALSE(d.FullMatch("-1234567890123456789012345678901"));
}

TEST(SchemaLexicalNumber, ErrorCodes) {
  Grammar g;
  NumberConstraint c;
  c.integer = true;
  c.minimum = DecimalBound{"1.5", false};
  c.maximum = DecimalBound{"1.9", false};
  Result<ExprId> r = AddNumberExpr(&g, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);
  NumberConstraint big;
  big.multiple_of = "123456789";
  r = AddNumberExpr(&g, big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(r.status().message().find("multipleOf"), std::string::npos);
  NumberConstraint zero;
  zero.multiple_of = "0";
  r = AddNumberExpr(&g, zero);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  NumberConstraint empty_excl;
  empty_excl.minimum = DecimalBound{"2", true};
  empty_excl.maximum = DecimalBound{"2", false};
  r = AddNumberExpr(&g, empty_excl);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);
}

// ---------------------------------------------------------------------------------------------
// Strings.

// Random values over an alphabet that stresses escaping and UTF-8.
std::string RandomValue(std::mt19937& rng, const std::vector<std::string>& alphabet, int max_len) {
  std::string s;
  const int len = static_cast<int>(rng() % (max_len + 1));
  for (int i = 0; i < len; ++i) s += alphabet[rng() % alphabet.size()];
  return s;
}

const std::vector<std::string> kHardChars = {"a",
                                             "b",
                                             "\"",
                                             "\\",
                                             "\n",
                                             "\t",
                                             "\x01",
                                             "\x1f",
                                             "/",
                                             "\x7f",
                                             "\xc3\xa9",
                                             "\xe2\x82\xac",
                                             "\xf0\x9f\x98\x80",
                                             " ",
                                             "~",
                                             "0",
                                             "1"};

// Token byte strings that are not canonical encodings: the automaton must reject all of them.
const std::vector<std::string> kNonCanonical = {"",
                                                "\"",
                                                "\"a",
                                                "a\"",
                                                "\"\\/\"",
                                                "\"\\u0041\"",
                                                "\"\\u001F\"",
                                                "\"\\u000a\"",
                                                "\"\\u0008\"",
                                                "\"\x01\"",
                                                "\"\n\"",
                                                "\"\xc3\"",
                                                "\"\xff\"",
                                                "\"\\x\"",
                                                "\"\\\"",
                                                "\"\"\"",
                                                "\"\xed\xa0\x80\"",
                                                "\"a\" "};

TEST(SchemaLexicalString, NativeUnconstrainedAndLength) {
  std::mt19937 rng(7);
  std::int64_t compared = 0;
  const std::vector<std::pair<std::int64_t, std::optional<std::int64_t>>> lengths = {
      {0, std::nullopt}, {0, 0}, {1, std::nullopt}, {2, 3}, {0, 5}, {3, 3}, {0, 5000}};
  for (const auto& [lo, hi] : lengths) {
    Grammar g;
    StringConstraint c;
    c.min_length = lo;
    c.max_length = hi;
    Result<ExprId> r = AddStringExpr(&g, c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_NE(g.expr(*r).kind, ExprKind::kByteDfa);  // native counter, no automaton
    for (int i = 0; i < 400; ++i) {
      const std::string v = RandomValue(rng, kHardChars, 7);
      const bool want = CodePoints(v) >= lo && (!hi || CodePoints(v) <= *hi);
      ASSERT_EQ(ExprAccepts(g, *r, Canon(v)), want) << Canon(v);
      ++compared;
    }
    for (const std::string& t : kNonCanonical) EXPECT_FALSE(ExprAccepts(g, *r, t)) << t;
  }
  std::printf("native string tokens compared: %lld\n", static_cast<long long>(compared));
}

TEST(SchemaLexicalString, ExcludedAndLength) {
  std::mt19937 rng(11);
  std::int64_t compared = 0;
  for (int round = 0; round < 40; ++round) {
    StringConstraint c;
    const std::vector<std::string> small = {"a", "b", "\"", "\xc3\xa9", "\n"};
    for (int k = 0, n = 1 + rng() % 5; k < n; ++k) c.excluded.push_back(RandomValue(rng, small, 3));
    if (rng() % 2) c.min_length = rng() % 3;
    if (rng() % 2) c.max_length = c.min_length + rng() % 4;
    Grammar g;
    Result<ExprId> r = AddStringExpr(&g, c);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    const ByteDfa& d = *g.expr(*r).dfa;
    ASSERT_EQ(CheckDfaInvariants(d), "");
    std::vector<std::string> values = c.excluded;
    for (int i = 0; i < 300; ++i) values.push_back(RandomValue(rng, small, 4));
    for (int i = 0; i < 100; ++i) values.push_back(RandomValue(rng, kHardChars, 4));
    for (const std::string& v : values) {
      bool want =
          CodePoints(v) >= c.min_length && (!c.max_length || CodePoints(v) <= *c.max_length);
      for (const std::string& x : c.excluded) want = want && v != x;
      ASSERT_EQ(d.FullMatch(Canon(v)), want) << Canon(v);
      ++compared;
    }
    for (const std::string& t : kNonCanonical) EXPECT_FALSE(d.FullMatch(t)) << t;
  }
  std::printf("excluded/length tokens compared: %lld\n", static_cast<long long>(compared));
}

// Strings constrained only by exclusions (the keys left to additionalProperties) are built
// directly from a trie; the automaton must be the same minimal DFA as the general product
// construction's, and agree with the oracle.
TEST(SchemaLexicalString, DirectExclusionEqualsProductConstruction) {
  std::mt19937 rng(23);
  const std::vector<std::string> alphabet = {"a", "b", "_", " ", "\xc3\xa9", "\xe2\x82\xac",
                                             "\xf0\x9f\x98\x80", "Z", "9"};
  std::int64_t compared = 0, direct = 0;
  for (int round = 0; round < 60; ++round) {
    StringConstraint c;
    if (round == 0) c.excluded = {""};
    if (round == 1) c.excluded = {"a", "ab", "abc", "b"};
    if (round == 2) c.excluded = {"keyword", "source", "date_range"};
    if (round == 3) c.excluded = {"a\"b"};  // escapable byte: the general construction
    for (int k = 0, n = round < 4 ? 0 : 1 + static_cast<int>(rng() % 12); k < n; ++k) {
      c.excluded.push_back(RandomValue(rng, alphabet, 1 + static_cast<int>(rng() % 6)));
    }
    Grammar g1, g2;
    LexicalOptions fast, general;
    general.direct_exclusion = false;
    Result<ExprId> r1 = AddStringExpr(&g1, c, fast);
    Result<ExprId> r2 = AddStringExpr(&g2, c, general);
    ASSERT_TRUE(r1.ok() && r2.ok());
    const ByteDfa& d1 = *g1.expr(*r1).dfa;
    const ByteDfa& d2 = *g2.expr(*r2).dfa;
    ASSERT_EQ(CheckDfaInvariants(d1), "");
    ASSERT_EQ(DumpDfa(d1), DumpDfa(d2)) << "round " << round;
    direct += round != 3;
    std::vector<std::string> values = c.excluded;
    for (const std::string& x : c.excluded) {
      values.push_back(x + "a");
      std::string shorter = x;  // without its last code point
      while (!shorter.empty() && (static_cast<unsigned char>(shorter.back()) & 0xC0) == 0x80)
        shorter.pop_back();
      if (!shorter.empty()) shorter.pop_back();
      values.push_back(shorter);
    }
    for (int i = 0; i < 200; ++i) values.push_back(RandomValue(rng, kHardChars, 4));
    for (const std::string& v : values) {
      bool want = true;
      for (const std::string& x : c.excluded) want = want && v != x;
      ASSERT_EQ(d1.FullMatch(Canon(v)), want) << Canon(v);
      ++compared;
    }
    for (const std::string& t : kNonCanonical) EXPECT_FALSE(d1.FullMatch(t)) << t;
  }
  std::printf("exclusion automata equal to the product's: %lld; tokens compared: %lld\n",
              static_cast<long long>(direct), static_cast<long long>(compared));
}

// Every `pattern` and `patternProperties` key of the suite, recursively.
void CollectPatterns(const nlohmann::json& j, std::set<std::string>* out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.key() == "pattern" && it.value().is_string())
        out->insert(it.value().get<std::string>());
      if (it.key() == "patternProperties" && it.value().is_object()) {
        for (auto p = it.value().begin(); p != it.value().end(); ++p) out->insert(p.key());
      }
      CollectPatterns(it.value(), out);
    }
  } else if (j.is_array()) {
    for (const auto& x : j) CollectPatterns(x, out);
  }
}
void CollectStrings(const nlohmann::json& j, std::set<std::string>* out) {
  if (j.is_string()) out->insert(j.get<std::string>());
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out->insert(it.key());
      CollectStrings(it.value(), out);
    }
  }
  if (j.is_array()) {
    for (const auto& x : j) CollectStrings(x, out);
  }
}

// The regex front end reads '.' and \s as ECMA-262 does ('.' excludes \n, \r, U+2028, U+2029;
// \s holds the Unicode spaces); RE2, which the validator runs, excludes only \n from '.' and has
// an ASCII \s. A disagreement is one of these divergences iff the pattern has the construct and
// the value holds one of the characters read differently.
bool DotDivergence(const std::string& pattern, const std::string& value) {
  bool dot = false, in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\')
      ++i;
    else if (pattern[i] == '[')
      in_class = true;
    else if (pattern[i] == ']')
      in_class = false;
    else if (pattern[i] == '.' && !in_class)
      dot = true;
  }
  const bool line_end = value.find('\r') != std::string::npos ||
                        value.find("\xe2\x80\xa8") != std::string::npos ||
                        value.find("\xe2\x80\xa9") != std::string::npos;
  if (dot && line_end) return true;
  // ECMA \s also holds \v, U+00A0, U+1680, U+2000-U+200A, U+2028/9, U+202F, U+205F, U+3000,
  // U+FEFF; RE2's \s is [\t\n\f\r ].
  const bool space_class =
      pattern.find("\\s") != std::string::npos || pattern.find("\\S") != std::string::npos;
  static const char* const kEcmaOnlySpaces[] = {"\v",           "\xc2\xa0",     "\xe1\x9a\x80",
                                                "\xe2\x80\x80", "\xe2\x80\x8a", "\xe2\x80\xa8",
                                                "\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\x9f",
                                                "\xe3\x80\x80", "\xef\xbb\xbf"};
  bool ecma_space = false;
  for (const char* sp : kEcmaOnlySpaces) ecma_space |= value.find(sp) != std::string::npos;
  for (unsigned char c = 0x81; c <= 0x89; ++c) {
    ecma_space |= value.find(std::string("\xe2\x80") + static_cast<char>(c)) != std::string::npos;
  }
  return space_class && ecma_space;
}

TEST(SchemaLexicalString, PatternsAgainstRe2) {
  std::set<std::string> patterns = {"a",
                                    "^a",
                                    "a$",
                                    "^a$",
                                    "^[a-z]+$",
                                    "x|^y$",
                                    "^\\d{3}-\\d{4}$",
                                    "[\"\\\\]",
                                    "\\n",
                                    "^$",
                                    "",
                                    "é+",
                                    "^[^a]*$",
                                    "\\p{L}",
                                    "^(?:ab|cd)*$",
                                    "[\\s\\S]{2}",
                                    "^\\w+@\\w+\\.com$",
                                    "\\u0001",
                                    "^.{2,4}$",
                                    "b+c?$",
                                    // '^' and '$' inside groups: assertions on the position
                                    "(^[0-9]+\\.[0-9]+$)",
                                    "^([^,]|$)",
                                    "(^a|b$)",
                                    "a^b",
                                    "x(^|-)y",
                                    "^^a",
                                    "(a$)|(^b)c",
                                    "(?:^|,)x(?:,|$)",
                                    "(^x)*y",
                                    "a$|$"};
  std::set<std::string> strings;
  const bool have_suite = std::filesystem::exists(SuiteDir());
  if (have_suite) {
    for (const auto& entry : std::filesystem::recursive_directory_iterator(SuiteDir())) {
      if (entry.path().extension() != ".json") continue;
      for (const auto& group : LoadSuiteFile(entry.path())) {
        CollectPatterns(group["schema"], &patterns);
        if (group.contains("tests")) CollectStrings(group["tests"], &strings);
      }
    }
  } else {
    std::printf("suite missing at %s: only the built-in patterns are checked\n",
                SuiteDir().c_str());
  }
  std::mt19937 rng(3);
  std::int64_t compared = 0, skipped = 0, checked_patterns = 0, dot_divergences = 0;
  for (const std::string& p : patterns) {
    RE2::Options opt;
    opt.set_log_errors(false);
    RE2 re(p, opt);
    Grammar g;
    StringConstraint c;
    c.pattern = p;
    Result<ExprId> r = AddStringExpr(&g, c);
    if (re.ok() && !r.ok() && r.status().code() == StatusCode::kUnsatisfiable) {
      // No string at all ("a^b": '^' after a character): RE2 finds no match either.
      for (const std::string& v : strings) EXPECT_FALSE(RE2::PartialMatch(v, re)) << p << " " << v;
      for (const char* v : {"ab", "a", "b", "", "xa\nb"}) {
        EXPECT_FALSE(RE2::PartialMatch(v, re)) << p << " " << v;
      }
      ++checked_patterns;
      continue;
    }
    if (!re.ok() || !r.ok()) {
      // Outside the subset shared by the regex front end and RE2 (the validator then ignores
      // the keyword): reported, not compared.
      if (!r.ok()) {
        EXPECT_TRUE(r.status().code() == StatusCode::kInvalidRegex ||
                    r.status().code() == StatusCode::kUnsupported)
            << r.status().ToString();
      }
      std::printf("skipped pattern '%s': %s\n", p.c_str(),
                  r.ok() ? "RE2 cannot compile it" : r.status().ToString().c_str());
      ++skipped;
      continue;
    }
    ++checked_patterns;
    const ByteDfa& d = *g.expr(*r).dfa;
    std::vector<std::string> alphabet = kHardChars;
    for (char ch : p) {
      if (static_cast<unsigned char>(ch) < 0x80) alphabet.push_back(std::string(1, ch));
    }
    std::vector<std::string> values(strings.begin(), strings.end());
    for (int i = 0; i < 400; ++i) values.push_back(RandomValue(rng, alphabet, 8));
    for (const std::string& v : values) {
      const bool got = d.FullMatch(Canon(v));
      if (got != RE2::PartialMatch(v, re) && DotDivergence(p, v)) {
        ++dot_divergences;  // ECMA '.' / \s (the front end) vs RE2's (the validator)
        continue;
      }
      ASSERT_EQ(got, RE2::PartialMatch(v, re)) << "pattern '" << p << "' value " << Canon(v);
      ++compared;
    }
    for (const std::string& t : kNonCanonical) EXPECT_FALSE(d.FullMatch(t)) << t;
    // As a pattern the key must NOT match (additionalProperties beside patternProperties).
    {
      StringConstraint n;
      n.not_patterns = {p, "^z"};
      n.excluded = {"b"};
      Grammar gn;
      Result<ExprId> rn = AddStringExpr(&gn, n);
      if (rn.ok()) {
        const ByteDfa& dn = *gn.expr(*rn).dfa;
        for (const std::string& v : values) {
          const bool want = !RE2::PartialMatch(v, re) && v.rfind('z', 0) != 0 && v != "b";
          if (dn.FullMatch(Canon(v)) != want && DotDivergence(p, v)) continue;
          ASSERT_EQ(dn.FullMatch(Canon(v)), want) << "not pattern '" << p << "' value " << Canon(v);
          ++compared;
        }
        for (const std::string& t : kNonCanonical) EXPECT_FALSE(dn.FullMatch(t)) << t;
      } else {
        ASSERT_EQ(rn.status().code(), StatusCode::kUnsatisfiable) << rn.status().ToString();
        for (const std::string& v : values) ASSERT_TRUE(RE2::PartialMatch(v, re)) << v;
      }
    }
    // With a length window and an exclusion.
    StringConstraint c2 = c;
    c2.min_length = 1;
    c2.max_length = 6;
    c2.excluded = {"a", "ab"};
    Grammar g2;
    Result<ExprId> r2 = AddStringExpr(&g2, c2);
    if (!r2.ok()) {
      ASSERT_EQ(r2.status().code(), StatusCode::kUnsatisfiable) << r2.status().ToString();
      for (const std::string& v : values) {
        const std::int64_t n = CodePoints(v);
        ASSERT_FALSE(n >= 1 && n <= 6 && v != "a" && v != "ab" && RE2::PartialMatch(v, re)) << v;
      }
      continue;
    }
    const ByteDfa& d2 = *g2.expr(*r2).dfa;
    for (const std::string& v : values) {
      const std::int64_t n = CodePoints(v);
      const bool want = n >= 1 && n <= 6 && v != "a" && v != "ab" && RE2::PartialMatch(v, re);
      if (d2.FullMatch(Canon(v)) != want && DotDivergence(p, v)) continue;
      ASSERT_EQ(d2.FullMatch(Canon(v)), want) << "pattern '" << p << "' [1,6] value " << Canon(v);
      ++compared;
    }
  }
  std::printf(
      "patterns checked: %lld, skipped: %lld, tokens compared: %lld, ECMA/RE2 divergences: "
      "%lld\n",
      static_cast<long long>(checked_patterns), static_cast<long long>(skipped),
      static_cast<long long>(compared), static_cast<long long>(dot_divergences));
  // The built-in patterns alone give 18 (the rest are outside RE2's or the front end's subset);
  // the suite adds well over a hundred.
  EXPECT_GT(checked_patterns, have_suite ? 20 : 15);
}

bool ValidUtf8(const std::string& s) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80         ? 1
                      : (c >> 5) == 6  ? 2
                      : (c >> 4) == 14 ? 3
                      : (c >> 3) == 30 ? 4
                                       : 0;
    if (len == 0 || i + len > s.size()) return false;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Near misses of a string (valid UTF-8 only, as every JSON string value is): deletions,
// insertions, substitutions, duplications.
std::vector<std::string> Mutations(const std::string& s, std::mt19937& rng) {
  static const std::string kChars = "0123456789:.-+TZz@[]/%#?~aAfFxnNvV\"\\ \x01";
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    out.push_back(s.substr(0, i) + s.substr(i + 1));
  }
  for (int k = 0; k < 12; ++k) {
    const std::size_t i = s.empty() ? 0 : rng() % (s.size() + 1);
    const char ch = kChars[rng() % kChars.size()];
    out.push_back(s.substr(0, i) + ch + s.substr(i));
    if (i < s.size() && (static_cast<unsigned char>(s[i]) & 0x80) == 0) {
      std::string t = s;
      t[i] = ch;
      out.push_back(t);
    }
  }
  out.push_back(s + s);
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const std::string& m) { return !ValidUtf8(m); }),
      out.end());
  return out;
}

// The validator's uri-reference / iri-reference checker reads the IP literal of the host from
// RE2's first capture group, which only the scheme branch sets, so a relative reference "//[...]"
// never has its IPv6 literal checked. The automaton checks it: a disagreement is this bug iff
// the checker, given the same text after a scheme ("a:" + s), agrees with the automaton.
bool KnownCheckerBug(const std::string& format, const std::string& s, bool automaton) {
  if (format != "uri-reference" && format != "iri-reference") return false;
  if (s.rfind("//", 0) != 0 || s.find('[') == std::string::npos) return false;
  return CheckFormat(format, "a:" + s) == automaton;
}

TEST(SchemaLexicalString, FormatsAgainstValidatorChecker) {
  const std::string dir = SuiteDir() + "/optional/format";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "JSON-Schema-Test-Suite missing at " << dir;
  std::mt19937 rng(5);
  std::int64_t suite_cases = 0, mutated = 0, known_bugs = 0;
  std::set<std::string> formats_seen;
  std::vector<std::string> disagreements;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    for (const auto& group : LoadSuiteFile(path)) {
      if (!group["schema"].contains("format")) continue;
      const std::string format = group["schema"]["format"].get<std::string>();
      if (!FormatSupported(format)) continue;
      formats_seen.insert(format);
      Grammar g;
      StringConstraint c;
      c.format = format;
      Result<ExprId> r = AddStringExpr(&g, c);
      ASSERT_TRUE(r.ok()) << format << ": " << r.status().ToString();
      const ByteDfa& token = *g.expr(*r).dfa;
      ASSERT_EQ(CheckDfaInvariants(token), "") << format;
      Result<std::shared_ptr<const ByteDfa>> content = FormatContentDfa(format);
      ASSERT_TRUE(content.ok());
      for (const auto& t : group["tests"]) {
        if (!t["data"].is_string()) continue;
        const std::string v = t["data"].get<std::string>();
        const bool want = CheckFormat(format, v);
        const bool got = token.FullMatch(Canon(v));
        if (got != want && KnownCheckerBug(format, v, got)) {
          EXPECT_EQ(got, t["valid"].get<bool>()) << format << " " << Canon(v);
          std::printf("checker bug (automaton follows the suite): %s %s suite says %s\n",
                      format.c_str(), Canon(v).c_str(),
                      t["valid"].get<bool>() ? "valid" : "invalid");
          ++known_bugs;
        } else {
          EXPECT_EQ(got, want) << format << " suite value " << Canon(v) << " (" << t["description"]
                               << ")";
        }
        ++suite_cases;
        for (const std::string& m : Mutations(v, rng)) {
          const bool mgot = (*content)->FullMatch(m);
          if (mgot != CheckFormat(format, m)) {
            if (KnownCheckerBug(format, m, mgot)) {
              ++known_bugs;
            } else {
              disagreements.push_back(format + " " + Canon(m) + " checker=" +
                                      (CheckFormat(format, m) ? "accepts" : "rejects"));
            }
          }
          ++mutated;
        }
      }
      std::printf("format %-22s %6d states (token automaton)\n", format.c_str(), token.num_states);
    }
  }
  for (const std::string& d : disagreements) ADD_FAILURE() << "disagreement: " << d;
  std::printf(
      "formats: %zu, suite cases compared: %lld, mutations compared: %lld, checker bug cases: "
      "%lld\n",
      formats_seen.size(), static_cast<long long>(suite_cases), static_cast<long long>(mutated),
      static_cast<long long>(known_bugs));
  EXPECT_GE(formats_seen.size(), 14u);
}

// Random strings over an alphabet chosen per format (its delimiters and a few letters), so that
// near-valid shapes are frequent: the content automaton against the checker.
TEST(SchemaLexicalString, FormatsFuzzedAgainstValidatorChecker) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"ipv6", {"0", "1", "a", "F", ":", ":", ":", ".", "25", "5", "ffff"}},
      {"ipv4", {"0", "1", "2", "5", ".", ".", "9", "25", "00"}},
      {"duration", {"P", "T", "Y", "M", "W", "D", "H", "S", "1", "12"}},
      {"uri-template",
       {"{", "}", "a", ",", ":", "*", "+", "#", "1", "%2F", "%", ".", "/", " ", "'"}},
      {"json-pointer", {"/", "~", "0", "1", "a", "\"", "~0", "~1"}},
      {"relative-json-pointer", {"/", "~", "0", "1", "2", "#", "a", "~1"}},
      {"email",
       {"a", "@", ".", "-", "\"", "\\", "[", "]", "1", ":", "IPv6:", "::", "1.2.3.4", " "}},
      {"hostname", {"a", "-", ".", "xn", "X", "N", "0", "--"}},
      {"uri",
       {"a", ":", "/", "//", "?", "#", "[", "]", "@", "%1F", "%", ".", "-", "\xc3\xa9", " ", "::1",
        "v1.x"}},
      {"uri-reference",
       {"a", ":", "/", "//", "?", "#", "[", "]", "@", "%1F", ".", "\xc3\xa9", "::1", "v1.x"}},
      {"iri",
       {"a", ":", "/", "//", "?", "#", "[", "]", "@", "%1F", ".", "\xc3\xa9", "\xee\x80\x80",
        "::1"}},
      {"iri-reference",
       {"a", ":", "/", "//", "?", "#", "[", "]", "@", "%1F", ".", "\xc3\xa9", "::1"}},
      {"time", {"1", "2", "0", "5", "9", ":", ".", "+", "-", "Z", "z", "23:59:60", "00"}},
      {"date", {"2", "0", "1", "9", "-", "02", "29", "2000", "1900", "-02-29"}},
      {"uuid", {"0", "a", "F", "-", "0000", "ffff"}},
  };
  std::mt19937 rng(17);
  std::int64_t compared = 0, accepted = 0;
  for (const auto& [format, alphabet] : cases) {
    Result<std::shared_ptr<const ByteDfa>> d = FormatContentDfa(format);
    ASSERT_TRUE(d.ok()) << format;
    for (int i = 0; i < 20000; ++i) {
      const std::string v = RandomValue(rng, alphabet, 10);
      const bool got = (*d)->FullMatch(v);
      if (got != CheckFormat(format, v) && KnownCheckerBug(format, v, got)) continue;
      ASSERT_EQ(got, CheckFormat(format, v)) << format << " " << Canon(v);
      accepted += got;
      ++compared;
    }
  }
  std::printf("fuzzed format values compared: %lld (accepted: %lld)\n",
              static_cast<long long>(compared), static_cast<long long>(accepted));
}

TEST(SchemaLexicalString, TimeLeapSecondsAndHostnameLimits) {
  Result<std::shared_ptr<const ByteDfa>> time = FormatContentDfa("time");
  ASSERT_TRUE(time.ok());
  std::mt19937 rng(23);
  std::int64_t compared = 0;
  for (int h = 0; h < 25; ++h) {
    for (int m = 0; m < 61; ++m) {
      std::vector<std::string> zones = {"Z", "+00:00", "-23:59", "+23:59", "+24:00", "-00:60"};
      for (int k = 0; k < 4; ++k) {
        char z[16];
        std::snprintf(z, sizeof z, "%c%02d:%02d", rng() % 2 ? '+' : '-',
                      static_cast<int>(rng() % 24), static_cast<int>(rng() % 60));
        zones.push_back(z);
      }
      // The offset that puts this local time at 23:59 UTC, both signs.
      const int local = h * 60 + m;
      for (int sign : {1, -1}) {
        const int off = (((local - 1439) * sign) % 1440 + 1440) % 1440;
        char z[16];
        std::snprintf(z, sizeof z, "%c%02d:%02d", sign > 0 ? '+' : '-', off / 60, off % 60);
        zones.push_back(z);
      }
      for (const std::string& zone : zones) {
        for (const char* sec : {"60", "59", "61"}) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%02d:%02d:%s%s", h, m, sec, zone.c_str());
          ASSERT_EQ((*time)->FullMatch(buf), CheckFormat("time", buf)) << buf;
          ++compared;
        }
      }
    }
  }
  Result<std::shared_ptr<const ByteDfa>> host = FormatContentDfa("hostname");
  ASSERT_TRUE(host.ok());
  for (int total = 240; total <= 256; ++total) {
    for (int label : {1, 2, 62, 63, 64}) {
      std::string s;
      while (static_cast<int>(s.size()) < total) {
        if (!s.empty()) s += '.';
        s += std::string(static_cast<std::size_t>(label), 'a');
      }
      s.resize(static_cast<std::size_t>(total));
      for (const std::string& v : {s, s.substr(0, s.size() - 1) + "b", s + "a"}) {
        ASSERT_EQ((*host)->FullMatch(v), CheckFormat("hostname", v)) << v.size() << " " << v;
        ++compared;
      }
    }
  }
  std::printf("leap-second / host-name boundary values compared: %lld\n",
              static_cast<long long>(compared));
}

TEST(SchemaLexicalString, FormatWithLengthAndPattern) {
  Grammar g;
  StringConstraint c;
  c.format = "date";
  c.pattern = "^2024";
  c.max_length = 10;
  c.excluded = {"2024-01-01"};
  Result<ExprId> r = AddStringExpr(&g, c);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const ByteDfa& d = *g.expr(*r).dfa;
  EXPECT_TRUE(d.FullMatch("\"2024-02-29\""));
  EXPECT_FALSE(d.FullMatch("\"2023-02-28\""));
  EXPECT_FALSE(d.FullMatch("\"2024-01-01\""));
  EXPECT_FALSE(d.FullMatch("\"2024-02-30\""));
  for (int m = 1; m <= 12; ++m) {
    for (int day = 1; day <= 31; ++day) {
      char buf[16];
      std::snprintf(buf, sizeof buf, "2024-%02d-%02d", m, day);
      const bool want = CheckFormat("date", buf) && std::string(buf) != "2024-01-01";
      EXPECT_EQ(d.FullMatch(Canon(buf)), want) << buf;
    }
  }
}

TEST(SchemaLexicalString, ErrorCodes) {
  Grammar g;
  StringConstraint c;
  c.min_length = 5;
  c.max_length = 3;
  Result<ExprId> r = AddStringExpr(&g, c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);

  StringConstraint f;
  f.format = "regex";
  r = AddStringExpr(&g, f);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("regex"), std::string::npos);

  // '^' inside a group is an assertion, compiled (no longer refused): "a" at the start.
  StringConstraint anchored;
  anchored.pattern = "(^a)";
  r = AddStringExpr(&g, anchored);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(g.expr(*r).dfa->FullMatch(Canon("ab")));
  EXPECT_FALSE(g.expr(*r).dfa->FullMatch(Canon("ba")));

  StringConstraint bad;
  bad.pattern = "a(";
  r = AddStringExpr(&g, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidRegex);

  StringConstraint blowup;
  blowup.pattern = "a[ab]{14}$";
  LexicalOptions small;
  small.max_dfa_states = 1000;
  r = AddStringExpr(&g, blowup, small);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);

  StringConstraint counted;
  counted.pattern = "^[a-z]+$";
  counted.max_length = 100000;
  r = AddStringExpr(&g, counted, small);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(r.status().message().find("max_dfa_states"), std::string::npos);

  StringConstraint never;
  never.pattern = "^a$";
  never.excluded = {"a"};
  r = AddStringExpr(&g, never);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsatisfiable);
}

// ---------------------------------------------------------------------------------------------
// The expressions inside the real runtime: a root rule around each, compiled against llama3's
// vocabulary, must accept exactly what the oracles accept.

TEST(SchemaLexicalRuntime, MatcherAgreesWithOracles) {
  Result<std::shared_ptr<const Vocabulary>> vocab = Vocabulary::Load("llama3");
  if (!vocab.ok()) GTEST_SKIP() << "llama3 vocabulary unavailable: " << vocab.status().ToString();
  const GrammarCompiler compiler(*vocab);
  auto compile = [&](Grammar g, ExprId body) {
    grammar::Rule rule;
    rule.name = "root";
    rule.body = body;
    g.rules.push_back(rule);
    g.root = 0;
    Result<std::shared_ptr<const CompiledGrammar>> c = CompileGrammarIr(compiler, g);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : nullptr;
  };
  auto accepts = [](const std::shared_ptr<const CompiledGrammar>& c, const std::string& s) {
    Matcher m(c);
    return m.AcceptString(s) && m.CanEnd();
  };
  std::mt19937 rng(21);
  std::int64_t compared = 0;
  {
    NumberConstraint c;
    c.minimum = DecimalBound{"-2.5", false};
    c.maximum = DecimalBound{"99.99", true};
    c.multiple_of = "0.5";
    Grammar g;
    Result<ExprId> r = AddNumberExpr(&g, c);
    ASSERT_TRUE(r.ok());
    auto compiled = compile(g, *r);
    ASSERT_NE(compiled, nullptr);
    for (const char* t : {"-2.5", "-3", "0", "-0", "99.5", "99.99", "100", "1.50", "1.25", "7",
                          "-2.0", "1e2", "01", "99"}) {
      EXPECT_EQ(accepts(compiled, t), NumberOracle(c, t)) << t;
      ++compared;
    }
  }
  for (const auto& [lo, hi] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 3}, {2, 5000}}) {
    StringConstraint c;
    c.min_length = lo;
    c.max_length = hi;
    Grammar g;
    Result<ExprId> r = AddStringExpr(&g, c);
    ASSERT_TRUE(r.ok());
    auto compiled = compile(g, *r);
    ASSERT_NE(compiled, nullptr);
    for (int i = 0; i < 60; ++i) {
      const std::string v = RandomValue(rng, kHardChars, 5);
      const bool want = CodePoints(v) >= lo && CodePoints(v) <= hi;
      EXPECT_EQ(accepts(compiled, Canon(v)), want) << Canon(v);
      ++compared;
    }
    for (const std::string& t : kNonCanonical) EXPECT_FALSE(accepts(compiled, t)) << t;
  }
  {
    StringConstraint c;
    c.format = "date-time";
    c.excluded = {"2024-01-01T00:00:00Z"};
    Grammar g;
    Result<ExprId> r = AddStringExpr(&g, c);
    ASSERT_TRUE(r.ok());
    auto compiled = compile(g, *r);
    ASSERT_NE(compiled, nullptr);
    for (const char* v :
         {"2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z", "1998-12-31T23:59:60Z",
          "1998-12-31T15:59:60-08:00", "1998-12-31T15:59:60+08:00", "2023-02-29T00:00:00Z",
          "2024-02-29t12:30:00.123+05:30", "2024-13-01T00:00:00Z"}) {
      const bool want = CheckFormat("date-time", v) && std::string(v) != "2024-01-01T00:00:00Z";
      EXPECT_EQ(accepts(compiled, Canon(v)), want) << v;
      ++compared;
    }
  }
  std::printf("runtime samples compared: %lld\n", static_cast<long long>(compared));
}

// ---------------------------------------------------------------------------------------------
// Rendering.

TEST(SchemaLexicalRender, StringsMatchNlohmannDump) {
  std::mt19937 rng(9);
  for (int i = 0; i < 2000; ++i) {
    const std::string v = RandomValue(rng, kHardChars, 6);
    EXPECT_EQ(RenderJsonString(v), nlohmann::json(v).dump()) << v;
    EXPECT_EQ(RenderJsonString(v), Canon(v));
  }
}

TEST(SchemaLexicalRender, Numbers) {
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(3)), "3");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(-12)), "-12");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(18446744073709551615ull)), "18446744073709551615");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(-9223372036854775807LL - 1)), "-9223372036854775808");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(1.0)), "1");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(-0.0)), "0");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(0.1)), "0.1");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(-2.5)), "-2.5");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(1e21)), "1000000000000000000000");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(1.5e-7)), "0.00000015");
  EXPECT_EQ(RenderJsonNumber(nlohmann::json(123.456)), "123.456");
  std::mt19937_64 rng(1);
  for (int i = 0; i < 5000; ++i) {
    const double d =
        std::ldexp(static_cast<double>(rng() % 100000000) - 5e7, static_cast<int>(rng() % 60) - 40);
    const std::string s = RenderJsonNumber(nlohmann::json(d));
    ASSERT_TRUE(PolicyNumberSyntax(s, false)) << s;
    ASSERT_EQ(std::strtod(s.c_str(), nullptr), d) << s;
    if (d == std::floor(d)) {
      ASSERT_EQ(s.find('.'), std::string::npos) << s;
    }
  }
}

}  // namespace
}  // namespace lockstep::schema
