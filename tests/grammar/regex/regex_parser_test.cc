// Tests for ParseRegex (grammar/regex/regex_parser.h): what parses, what is rejected and at which
// exact byte offset, the shape of the AST for a few patterns, and the error snippet; and for
// SplitLeadingLookaheads (lookahead.h).
#include "grammar/regex/regex_parser.h"
#include "grammar/regex/lookahead.h"

#include <gtest/gtest.h>

#include <string>

namespace lockstep {
namespace {

TEST(RegexParserTest, AcceptsSupportedSyntax) {
  const char* kGood[] = {
      "",
      "a",
      "abc",
      "a|b|",
      "|",
      "()",
      "(?:)",
      "(a)(?:b)(?<n1>c)(?P<n2>d)",
      "a*b+c?d{2}e{2,}f{2,3}g{0}h{0,0}",
      "a*?b+?c??d{2}?e{2,}?f{2,3}?",
      "[abc][^abc][a-z0-9_][-a][a-][\\]\\[\\-\\\\][\\d\\w\\s\\D\\W\\S][\\b]",
      "[]",
      "[^]",
      "[[]",
      "\\d\\w\\s\\D\\W\\S\\t\\n\\r\\f\\v\\0\\x41\\u0041\\u{1F600}\\u{41}",
      "\\.\\\\\\/\\-\\[\\]\\(\\)\\{\\}\\*\\+\\?\\^\\$\\|\\,\\#\\:\\!\\\"\\'\\<\\>\\=",
      "\\uD83D\\uDE00",
      "[\\uD83D\\uDE00-\\uD83D\\uDE4F]",
      "\\cJ",
      ".",
      "é",
      "😀+",
      "日本語",
      "^abc$",
      "^^a$$",
      "^(a|b)$",
      "^a|^b$|c$",
      "(^a|b)c",
      "(a|b$)",
      "((^a))b",
      "a{,5}",
      "a{2,3",
      "x{",
      "}",
      "]",
      "a{1}{",
  };
  for (const char* p : kGood) {
    Result<RegexAst> r = ParseRegex(p);
    EXPECT_TRUE(r.ok()) << p << ": " << r.status().ToString();
  }
}

struct BadCase {
  const char* pattern;
  int offset;
  StatusCode code = StatusCode::kInvalidRegex;
};

TEST(RegexParserTest, RejectsWithExactOffsets) {
  const BadCase kBad[] = {
      {"a(b", 1},
      {"((a)", 0},
      {"a)b", 1},
      {"ab)", 2},
      {"(?:a))", 5},
      {"[z-a]", 1},
      {"x[b-a]", 2},
      {"[abc", 0},
      {"x[", 1},
      {"*a", 0},
      {"a|*", 2},
      {"(+)", 1},
      {"a**", 2},
      {"a+*", 2},
      {"a??+", 3},
      {"a{2}{3}", 4},
      {"{3}", 0},
      {"a{3,2}", 1},
      {"a\\", 1},
      {"\\", 0},
      {"[a\\", 2},
      {"\\1", 0},
      {"(a)\\1", 3},
      {"\\k<n>", 0},
      {"(?=a)", 0},
      {"a(?!b)", 1},
      {"(?<=a)b", 0},
      {"(?<!a)b", 0},
      {"\\bword\\b", 0},
      {"a\\B", 1},
      {"(?i)abc", 0},
      {"(?P=n)", 0},
      {"(?<>a)", 3},
      {"(?<1a>a)", 3},
      {"(?<n>a)(?<n>b)", 10},
      {"\\q", 0},
      {"\\x4", 0},
      {"\\xZZ", 0},
      {"\\u12", 0},
      {"\\u{}", 0},
      {"\\u{110000}", 0},
      {"\\u{D800}", 0},
      {"\\uD83D", 0},
      {"\\uD83Dx", 0},
      {"\\uDE00", 0},
      {"\\p{L}", 0},
      {"\\c1", 0},
      {"\\01", 0},
      {"[\\d-z]", 1},
      {"[a-\\d]", 3},
      {"a^b", 1},
      {"a$b", 1},
      {"(a$)b", 2},
      {"(a$|b)c", 2},
      {"x(^a)", 2},
      {"^*", 1},
      {"a$+", 2},
      {"(^a)*", 4},
      {"ab\xff", 2},
      {"a\xc3", 1},
      {"\xc3\x28", 0},
      {"\xe0\x80\x80", 0},      // overlong
      {"\xed\xa0\x80", 0},      // encoded surrogate
      {"\xf4\x90\x80\x80", 0},  // above U+10FFFF
      {"a{100001}", 1, StatusCode::kResourceLimit},
      {"a{1,100001}", 1, StatusCode::kResourceLimit},
      {"a{99999999999999999999}", 1, StatusCode::kResourceLimit},
  };
  for (const BadCase& c : kBad) {
    Result<RegexAst> r = ParseRegex(c.pattern);
    ASSERT_FALSE(r.ok()) << c.pattern;
    EXPECT_EQ(r.status().code(), c.code) << c.pattern << ": " << r.status().ToString();
    EXPECT_EQ(r.status().location(), "offset " + std::to_string(c.offset))
        << c.pattern << ": " << r.status().ToString();
  }
}

TEST(RegexParserTest, ErrorMessageHasSnippetAndCaret) {
  Result<RegexAst> r = ParseRegex("ab(cd");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "missing ')'\n  ab(cd\n    ^");
  r = ParseRegex("é(?=x)");  // a two-byte character counts as one column
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().location(), "offset 2");
  EXPECT_EQ(r.status().message(), "lookahead assertions are not supported\n  é(?=x)\n   ^");
  r = ParseRegex("a\nb)");  // control characters render as '?'
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "unmatched ')'\n  a?b)\n     ^");
  // Long patterns show a window around the offset.
  std::string longp = std::string(100, 'a') + ")" + std::string(100, 'b');
  r = ParseRegex(longp);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().location(), "offset 100");
  const std::string& m = r.status().message();
  const std::size_t line1 = m.find('\n');
  const std::size_t line2 = m.find('\n', line1 + 1);
  const std::string snippet = m.substr(line1 + 1, line2 - line1 - 1);
  const std::string caret = m.substr(line2 + 1);
  EXPECT_LT(snippet.size(), 80u);
  EXPECT_EQ(snippet[caret.size() - 1], ')');
  EXPECT_EQ(caret.back(), '^');
  EXPECT_NE(r.status().ToString().find("invalid regex at offset 100"), std::string::npos);
}

TEST(RegexParserTest, NestingDepthIsBounded) {
  RegexParseOptions o;
  o.max_nesting_depth = 50;
  std::string deep = std::string(51, '(') + "a" + std::string(51, ')');
  Result<RegexAst> r = ParseRegex(deep, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(r.status().message().find("max_nesting_depth"), std::string::npos);
  EXPECT_TRUE(ParseRegex(std::string(50, '(') + "a" + std::string(50, ')'), o).ok());
  // The default bound keeps a hostile pattern from overflowing the stack.
  EXPECT_FALSE(ParseRegex(std::string(100000, '(')).ok());
}

// Code points of the single class in `pattern`, as "lo-hi" pairs.
std::string ClassOf(std::string_view pattern) {
  Result<RegexAst> r = ParseRegex(pattern);
  if (!r.ok()) return "error: " + r.status().ToString();
  const RegexNode& n = r->node(r->root);
  if (n.kind != RegexNodeKind::kClass) return "not a class";
  std::string out;
  char buf[32];
  for (std::int32_t i = n.ranges_begin; i < n.ranges_end; ++i) {
    std::snprintf(buf, sizeof(buf), "%s%X-%X", out.empty() ? "" : " ",
                  static_cast<unsigned>(r->ranges[i].lo), static_cast<unsigned>(r->ranges[i].hi));
    out += buf;
  }
  return out;
}

TEST(RegexParserTest, ClassContents) {
  EXPECT_EQ(ClassOf("a"), "61-61");
  EXPECT_EQ(ClassOf("[c-ea-b]"), "61-65");
  EXPECT_EQ(ClassOf("\\d"), "30-39");
  EXPECT_EQ(ClassOf("\\w"), "30-39 41-5A 5F-5F 61-7A");
  EXPECT_EQ(ClassOf("\\s"),
            "9-D 20-20 A0-A0 1680-1680 2000-200A 2028-2029 202F-202F 205F-205F 3000-3000 "
            "FEFF-FEFF");
  EXPECT_EQ(ClassOf("\\D"), "0-2F 3A-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("[^\\D]"), "30-39");
  EXPECT_EQ(ClassOf("[\\D]"), "0-2F 3A-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("."), "0-9 B-C E-2027 202A-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("[^]"), "0-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("[]"), "");
  EXPECT_EQ(ClassOf("[\\u0000-\\u{10FFFF}]"), "0-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("\\uD83D\\uDE00"), "1F600-1F600");
  EXPECT_EQ(ClassOf("\\u{1f600}"), "1F600-1F600");
  EXPECT_EQ(ClassOf("😀"), "1F600-1F600");
  EXPECT_EQ(ClassOf("[\\b]"), "8-8");
  EXPECT_EQ(ClassOf("\\cj"), "A-A");
  EXPECT_EQ(ClassOf("\\x7f"), "7F-7F");
  EXPECT_EQ(ClassOf("\\0"), "0-0");
  EXPECT_EQ(ClassOf("[a-]"), "2D-2D 61-61");
  EXPECT_EQ(ClassOf("[-a]"), "2D-2D 61-61");
  EXPECT_EQ(ClassOf("[\\w-]"), "2D-2D 30-39 41-5A 5F-5F 61-7A");
  EXPECT_EQ(ClassOf("[^\\x00-\\x7f]"), "80-D7FF E000-10FFFF");
  EXPECT_EQ(ClassOf("]"), "5D-5D");
  EXPECT_EQ(ClassOf("{"), "7B-7B");
}

TEST(RegexParserTest, RepeatBoundsAndAnchorsLeaveNoNodes) {
  Result<RegexAst> r = ParseRegex("^(?:a{2,5}?)$");
  ASSERT_TRUE(r.ok());
  const RegexNode& n = r->node(r->root);
  ASSERT_EQ(n.kind, RegexNodeKind::kRepeat);
  EXPECT_EQ(n.min, 2);
  EXPECT_EQ(n.max, 5);
  EXPECT_EQ(r->node(r->children[n.children_begin]).kind, RegexNodeKind::kClass);
  r = ParseRegex("a{3,}");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->node(r->root).max, RegexNode::kUnbounded);
  r = ParseRegex("x|yz|");
  ASSERT_TRUE(r.ok());
  const RegexNode& alt = r->node(r->root);
  ASSERT_EQ(alt.kind, RegexNodeKind::kAlternate);
  ASSERT_EQ(alt.children_end - alt.children_begin, 3);
  EXPECT_EQ(r->node(r->children[alt.children_begin + 1]).kind, RegexNodeKind::kConcat);
  EXPECT_EQ(r->node(r->children[alt.children_begin + 2]).kind, RegexNodeKind::kEmpty);
}

TEST(RegexParserTest, AppendUtf8) {
  std::string s;
  AppendUtf8(0x41, &s);
  AppendUtf8(0xE9, &s);
  AppendUtf8(0x20AC, &s);
  AppendUtf8(0x1F600, &s);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

// Leading lookaheads split into anchored searches; anything else is left to the parser.
TEST(SplitLeadingLookaheads, OnlyRightAfterALeadingCaretWithoutTopLevelBars) {
  auto parts = SplitLeadingLookaheads("^(?=[^=]+$)(?!\\s+$)(.|\\n)+$");
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 3u);
  EXPECT_EQ((*parts)[0].pattern, "^(?:[^=]+$)");
  EXPECT_FALSE((*parts)[0].negated);
  EXPECT_EQ((*parts)[1].pattern, "^(?:\\s+$)");
  EXPECT_TRUE((*parts)[1].negated);
  EXPECT_EQ((*parts)[2].pattern, "^(?:(.|\\n)+$)");
  EXPECT_FALSE((*parts)[2].negated);
  // Parentheses and bars inside classes and escapes do not count.
  parts = SplitLeadingLookaheads("^(?![)|(]\\))x");
  ASSERT_TRUE(parts.has_value());
  ASSERT_EQ(parts->size(), 2u);
  EXPECT_EQ((*parts)[0].pattern, "^(?:[)|(]\\))");
  EXPECT_EQ((*parts)[1].pattern, "^(?:x)");
  for (const char* p : {"a(?=b)", "^a(?=b)", "^(?=a)|b", "^(?=a", "^(?:a)", "(?=a)", "^"}) {
    EXPECT_FALSE(SplitLeadingLookaheads(p).has_value()) << p;
  }
}

}  // namespace
}  // namespace lockstep
