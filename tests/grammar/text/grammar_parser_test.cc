// ParseGbnf / ParseLark / ParseGrammar: every construct against IR built by hand, and every error
// with its exact line:column.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "grammar/ir/grammar_ir.h"
#include "grammar/grammar_test_util.h"

namespace lockstep::grammar {
namespace {

using testing::Builder;

constexpr char32_t kMax = 0x10FFFF;

void ExpectSame(const Result<Grammar>& got, const Grammar& want) {
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(StructurallyEqual(*got, want)) << "got:\n"
                                             << PrintGbnf(*got) << "want:\n"
                                             << PrintGbnf(want);
}

void ExpectError(const Result<Grammar>& got, StatusCode code, const std::string& location,
                 const std::string& what) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), code) << got.status().ToString();
  EXPECT_EQ(got.status().location(), location) << got.status().ToString();
  EXPECT_NE(got.status().message().find(what), std::string::npos) << got.status().ToString();
}

// ---- GBNF constructs ----

TEST(GbnfParse, LiteralWithEveryEscape) {
  Builder b;
  b.Define("root", b.Lit("a\n\r\t\\\"[]A\xC3\xA9\xF0\x9F\x98\x80z\xE2\x82\xAC"));
  ExpectSame(ParseGbnf(R"~(root ::= "a\n\r\t\\\"\[\]\x41\u00e9\U0001F600z€")~"), b.Build("root"));
}

TEST(GbnfParse, CharacterClasses) {
  Builder b;
  b.Define("root",
           b.Seq({b.Cls({{'A', 'Z'}, {'_', '_'}, {'a', 'z'}}),
                  b.Cls({{0, 0x60}, {0x7B, 0xD7FF}, {0xE000, kMax}}),   // [^a-z]
                  b.Cls({{0, 0x1F}, {'-', '-'}, {']', ']'}}),           // [\x00-\x1F\]-]
                  b.Cls({{'a', 'c'}}),                                   // [cab] merged
                  b.Cls({{0x20AC, 0x20AC}, {0x1F600, 0x1F64F}}),         // unicode escapes
                  b.Cls({{0, '!'}, {'#', '['}, {']', 0xD7FF}, {0xE000, kMax}}),  // [^"\\]
                  b.Cls({{0, 0xD7FF}, {0xE000, 0xFFFF}}),  // surrogates dropped from a range
                  b.Cls({}),                               // [] matches nothing
                  b.Any()}));                              // [^]
  ExpectSame(ParseGbnf(R"~(root ::= [a-zA-Z_] [^a-z] [\x00-\x1F\]-] [cab] [€\U0001F600-\U0001F64F]
    [^"\\] [\x00-\uFFFF] [] [^])~"),
             b.Build("root"));
}

TEST(GbnfParse, DotIsAnyCodePoint) {
  Builder b;
  b.Define("root", b.Seq({b.Any(), b.Lit("x")}));
  ExpectSame(ParseGbnf("root ::= . \"x\""), b.Build("root"));
}

TEST(GbnfParse, RulesReferencesGroupsAlternatives) {
  Builder b;
  b.Define("root", b.Alt({b.Seq({b.Ref("item"), b.Alt({b.Lit("+"), b.Lit("-")}), b.Ref("root")}),
                          b.Ref("item")}));
  b.Define("item", b.Alt({b.Ref("num-1"), b.Seq({b.Lit("("), b.Ref("root"), b.Lit(")")})}));
  b.Define("num-1", b.Plus(b.Cls({{'0', '9'}})));
  ExpectSame(ParseGbnf(R"~(root ::= item ("+" | "-") root | item
item ::= num-1 | "(" root ")"
num-1 ::= [0-9]+
)~"),
             b.Build("root"));
}

TEST(GbnfParse, RepetitionOperatorsAreNativeCounters) {
  Builder b;
  const ExprId a = b.Lit("a");
  b.Define("root", b.Seq({b.Star(a), b.Plus(b.Lit("b")), b.Opt(b.Lit("c")), b.Rep(b.Lit("d"), 3, 3),
                          b.Rep(b.Lit("e"), 2, Expr::kUnbounded), b.Rep(b.Lit("f"), 2, 5),
                          b.Rep(b.Lit("g"), 0, 100000),
                          b.Opt(b.Star(b.Seq({b.Lit("h"), b.Lit("i")})))}));
  Result<Grammar> g =
      ParseGbnf(R"~(root ::= "a"* "b"+ "c"? "d"{3} "e"{2,} "f"{ 2 , 5 } "g"{0,100000} ("h" "i")*?)~");
  ExpectSame(g, b.Build("root"));
  // The counter is kept as one node, never expanded into copies.
  EXPECT_LT(g->exprs.size(), 30u);
}

TEST(GbnfParse, CommentsNewlinesAndRuleBoundaries) {
  Builder b;
  b.Define("root", b.Seq({b.Lit("a"), b.Alt({b.Lit("b"), b.Lit("c")}), b.Ref("x")}));
  b.Define("x", b.Alt({b.Lit("x"), b.Empty(), b.Lit("y")}));
  ExpectSame(ParseGbnf(R"~(# leading comment
root ::= "a" (   # comment inside a group
    "b" |
    "c"
  ) x   # trailing comment
x ::= "x" | | "y"

)~"),
             b.Build("root"));
  // A rule ends where the next `name ::=` starts, even on the same line.
  Builder c;
  c.Define("root", c.Seq({c.Ref("a"), c.Ref("b")}));
  c.Define("a", c.Lit("1"));
  c.Define("b", c.Lit("2"));
  ExpectSame(ParseGbnf("root ::= a b a ::= \"1\" b ::= \"2\""), c.Build("root"));
  // CRLF line ends.
  ExpectSame(ParseGbnf("root ::= a b\r\na ::= \"1\"\r\nb ::= \"2\"\r\n"), c.Build("root"));
}

TEST(GbnfParse, EmptyBodiesAndGroups) {
  Builder b;
  b.Define("root", b.Seq({b.Lit(""), b.Empty(), b.Ref("e")}));
  b.Define("e", b.Empty());
  ExpectSame(ParseGbnf("root ::= \"\" () e\ne ::="), b.Build("root"));
}

TEST(GbnfParse, LexemesAndSpecialTokens) {
  Builder b;
  b.Define("root", b.Seq({b.Special("<|start|>"), b.Lexeme("[0-9]+(\\.[0-9]+)?"),
                          b.Lexeme("a/b\\\\"), b.Special("<|eot_id|>")}));
  ExpectSame(ParseGbnf(R"~(root ::= <[<|start|>]> /[0-9]+(\.[0-9]+)?/ /a\/b\\/ <[<|eot_id|>]>)~"),
             b.Build("root"));
}

TEST(GbnfParse, TokensByIdByTextAndNegated) {
  // llama.cpp's token syntax: <[ID]>, <TEXT> (the angle brackets are part of the token's text),
  // and '!' before either for any one token but that one; <[NAME]> stays the by-name form.
  Builder b;
  b.Define("root", b.Seq({b.TokenById(128009), b.Special("<|eot_id|>"), b.Special("<think>"),
                          b.Star(b.TokenById(5, true)), b.Special("</think>", true),
                          b.Special("<|x|>"), b.Alt({b.Special("<br>"), b.Lit("a")})}));
  const Grammar want = b.Build("root");
  Result<Grammar> got = ParseGbnf(
      "root ::= <[128009]> <|eot_id|> <think> !<[5]>* !</think> <[<|x|>]> (<br> | \"a\")");
  ExpectSame(got, want);
  // The printed grammar reads back the same.
  ExpectSame(ParseGbnf(PrintGbnf(*got)), want);
  EXPECT_NE(PrintGbnf(*got).find("!<[5]>"), std::string::npos);
  EXPECT_NE(PrintGbnf(*got).find("!</think>"), std::string::npos);
}

TEST(GbnfParse, RootNeedNotComeFirstAndLocationsAreKept) {
  Result<Grammar> g = ParseGbnf("a ::= \"x\"\n\nroot ::= a a\n");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->root, 1);
  EXPECT_EQ(g->rules[0].name, "a");
  EXPECT_EQ(g->rules[1].loc.line, 3);
  EXPECT_EQ(g->rules[1].loc.column, 1);
  const Expr& body = g->expr(g->rules[1].body);
  ASSERT_EQ(body.kind, ExprKind::kSequence);
  EXPECT_EQ(g->expr(body.children[1]).loc.line, 3);
  EXPECT_EQ(g->expr(body.children[1]).loc.column, 12);
  EXPECT_EQ(g->expr(g->rules[0].body).loc.column, 7);
}

TEST(GbnfParse, UnusedRulesAreKeptWithAWarningEach) {
  Builder b;
  b.Define("root", b.Lit("a"));
  b.Define("spare", b.Lit("b"));
  b.Define("loop", b.Seq({b.Lit("c"), b.Ref("loop")}));
  const std::string text = "root ::= \"a\"\nspare ::= \"b\"\n\n  loop ::= \"c\" loop\n";
  Result<Grammar> g = ParseGbnf(text);
  ExpectSame(g, b.Build("root"));
  // Unreachable even though referenced (only by itself): a warning too, at each rule's name.
  EXPECT_EQ(g->warnings, (std::vector<std::string>{
                             "2:1: rule 'spare' is never used (unreachable from 'root')",
                             "4:3: rule 'loop' is never used (unreachable from 'root')"}));
  EXPECT_TRUE(ParseGbnf("root ::= a\na ::= \"x\"")->warnings.empty());
  Result<Grammar> lark = ParseLark("start: a\n\nb: \"x\"\na: \"y\"");
  ASSERT_TRUE(lark.ok()) << lark.status().ToString();
  EXPECT_EQ(lark->warnings,
            std::vector<std::string>{"3:1: rule 'b' is never used (unreachable from 'start')"});
}

// ---- GBNF errors ----

TEST(GbnfErrors, SemanticErrorsWithLineAndColumn) {
  ExpectError(ParseGbnf("root ::= \"a\" foo\n"), StatusCode::kInvalidGrammar, "1:14",
              "undefined rule 'foo'");
  ExpectError(ParseGbnf("root ::= a\na ::= \"x\"\n  a ::= \"y\""), StatusCode::kInvalidGrammar,
              "3:3", "rule 'a' is defined twice (first at 2:1)");
  // Unused rules, when asked to refuse them.
  GrammarParseOptions strict;
  strict.allow_unused_rules = false;
  ExpectError(ParseGbnf("root ::= \"a\"\n\nunused ::= \"b\"", strict),
              StatusCode::kInvalidGrammar, "3:1", "rule 'unused' is never used");
  // Unreachable even though referenced (only by itself).
  ExpectError(ParseGbnf("root ::= \"a\"\nloop ::= \"b\" loop", strict),
              StatusCode::kInvalidGrammar, "2:1", "rule 'loop' is never used");
  ExpectError(ParseGbnf("start ::= \"a\""), StatusCode::kInvalidGrammar, "1:1",
              "missing the start rule 'root'");
  ExpectError(ParseGbnf(""), StatusCode::kInvalidGrammar, "1:1", "missing the start rule");
}

TEST(GbnfErrors, SyntaxErrorsWithLineAndColumn) {
  ExpectError(ParseGbnf("root ::= (\"a\" | \"b\""), StatusCode::kInvalidGrammar, "1:20",
              "expected ')'");
  ExpectError(ParseGbnf("root ::= \"a\"\nx ::= \"abc"), StatusCode::kInvalidGrammar, "2:11",
              "expected '\"'");
  ExpectError(ParseGbnf("root ::= \"a\" )"), StatusCode::kInvalidGrammar, "1:14",
              "unexpected ')'");
  ExpectError(ParseGbnf("root ::= \"a\\q\""), StatusCode::kInvalidGrammar, "1:13",
              "expected an escape");
  ExpectError(ParseGbnf("root ::= \"\\x4\""), StatusCode::kInvalidGrammar, "1:13",
              "expected two hex digits");
  ExpectError(ParseGbnf("root ::=\n  [z-a]"), StatusCode::kInvalidGrammar, "2:6",
              "character range is out of order");
  ExpectError(ParseGbnf("root ::= [a-"), StatusCode::kInvalidGrammar, "1:13",
              "expected a character");
  ExpectError(ParseGbnf("root ::= [abc"), StatusCode::kInvalidGrammar, "1:14", "expected ']'");
  ExpectError(ParseGbnf("root ::= \"x\"{3,2}"), StatusCode::kInvalidGrammar, "1:16",
              "repetition maximum is below the minimum");
  ExpectError(ParseGbnf("root ::= \"x\"{,3}"), StatusCode::kInvalidGrammar, "1:14",
              "expected a number");
  ExpectError(ParseGbnf("root ::= \"x\"{3"), StatusCode::kInvalidGrammar, "1:15",
              "expected '}'");
  ExpectError(ParseGbnf("root ::= \"\\uD800\""), StatusCode::kInvalidGrammar, "1:11",
              "surrogate");
  ExpectError(ParseGbnf("root ::= \"\\U00110000\""), StatusCode::kInvalidGrammar, "1:11",
              "above U+10FFFF");
  ExpectError(ParseGbnf("root ::= \"a\xFF\""), StatusCode::kInvalidGrammar, "1:12",
              "invalid UTF-8");
  ExpectError(ParseGbnf("root ::= <[abc"), StatusCode::kInvalidGrammar, "1:15", "expected ']>'");
  ExpectError(ParseGbnf("root ::= <think"), StatusCode::kInvalidGrammar, "1:16", "expected '>'");
  ExpectError(ParseGbnf("root ::= !\"a\""), StatusCode::kInvalidGrammar, "1:11",
              "expected token");
  ExpectError(ParseGbnf("root ::= <[12345678901]>"), StatusCode::kInvalidGrammar, "1:12",
              "token id 12345678901 is too large");
  ExpectError(ParseGbnf("root ::= \"a\"\nfoo ::"), StatusCode::kInvalidGrammar, "2:5",
              "unexpected ':'");
  ExpectError(ParseGbnf("root ::= /ab"), StatusCode::kInvalidGrammar, "1:10",
              "unterminated /regex/");
}

TEST(GbnfErrors, BadRegexIsReportedInsideTheGrammar) {
  // The regex error points at the regex's own offending byte, in grammar coordinates.
  ExpectError(ParseGbnf("root ::= \"a\"\n  x\nx ::= \"b\" /a(b/"), StatusCode::kInvalidGrammar,
              "3:13", "invalid regex: missing ')'");
}

TEST(GbnfErrors, MessageQuotesTheLineWithACaret) {
  Result<Grammar> g = ParseGbnf("root ::= x\nx ::= \"a\" | zz\n");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().location(), "2:13");
  EXPECT_EQ(g.status().message(), "undefined rule 'zz'\n  x ::= \"a\" | zz\n              ^");
  EXPECT_EQ(g.status().ToString(),
            "invalid grammar at 2:13: undefined rule 'zz'\n  x ::= \"a\" | zz\n              ^");
}

TEST(GbnfErrors, ResourceLimits) {
  ExpectError(ParseGbnf("root ::= \"x\"{100001}"), StatusCode::kResourceLimit, "1:14",
              "max_repeat");
  ExpectError(ParseGbnf("root ::= \"x\"{2,99999999999999999999}"), StatusCode::kResourceLimit,
              "1:16", "max_repeat");
  GrammarParseOptions options;
  options.max_repeat = 10;
  EXPECT_TRUE(ParseGbnf("root ::= \"x\"{10}", options).ok());
  ExpectError(ParseGbnf("root ::= \"x\"{0,11}", options), StatusCode::kResourceLimit, "1:16",
              "max_repeat");
  options.max_nesting_depth = 3;
  EXPECT_TRUE(ParseGbnf("root ::= (((\"a\")))", options).ok());
  ExpectError(ParseGbnf("root ::= ((((\"a\"))))", options), StatusCode::kResourceLimit, "1:13",
              "max_nesting_depth");
}

TEST(GbnfErrors, HundredThousandNestedGroupsFailFast) {
  const std::string text =
      "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  const auto start = std::chrono::steady_clock::now();
  Result<Grammar> g = ParseGbnf(text);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  ExpectError(g, StatusCode::kResourceLimit, "1:1010", "max_nesting_depth (1000)");
  EXPECT_LT(std::chrono::duration_cast<std::chrono::seconds>(elapsed).count(), 5);
  // Unbalanced too: the limit is hit before the missing ')' could be.
  ExpectError(ParseGbnf("root ::= " + std::string(100000, '(')), StatusCode::kResourceLimit,
              "1:1010", "max_nesting_depth");
}

TEST(GbnfErrors, LongChainsOfPostfixOperatorsAreBounded) {
  Result<Grammar> g = ParseGbnf("root ::= \"a\"" + std::string(100000, '*'));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit);
  EXPECT_TRUE(ParseGbnf("root ::= \"a\"" + std::string(50, '?')).ok());
}

// ---- Lark ----

TEST(LarkParse, RulesTerminalsAndOperators) {
  Builder b;
  b.Define("start", b.Seq({b.Plus(b.Ref("pair")), b.Opt(b.Ref("tail")), b.Ref("NUMBER")}));
  b.Define("pair", b.Alt({b.Seq({b.Ref("NAME"), b.Lit("="), b.Ref("value")}),
                          b.Seq({b.Lit("("), b.Star(b.Ref("pair")), b.Lit(")")})}));
  b.Define("value", b.Alt({b.Ref("NAME"), b.Ref("NUMBER"), b.Rep(b.Lit("x"), 3, 3),
                           b.Rep(b.Lit("y"), 2, 4)}));
  b.Define("tail", b.Seq({b.Lit(";"), b.Opt(b.Alt({b.Lit("!"), b.Lit("?")}))}));
  b.Define("NAME", b.Seq({b.Cls({{'a', 'z'}}), b.Star(b.Cls({{'a', 'z'}}))}));
  b.Define("NUMBER", b.Lexeme("[0-9]+"));
  ExpectSame(ParseLark(R"~(// a Lark grammar
start: pair+ tail? NUMBER
pair: NAME "=" value
    | "(" pair* ")"     // continuation line
value: NAME | NUMBER | "x" ~ 3 | "y" ~ 2..4
tail: ";" ["!" | "?"]
NAME: "a".."z" ("a".."z")*
NUMBER: /[0-9]+/
)~"),
             b.Build("start"));
}

TEST(LarkParse, PrefixesPrioritiesAliasesAndCaseInsensitiveLiterals) {
  Builder b;
  b.Define("start", b.Seq({b.Ref("a"), b.Opt(b.Ref("b"))}));
  b.Define("a", b.Alt({b.Seq({b.Cls({{'S', 'S'}, {'s', 's'}}), b.Cls({{'E', 'E'}, {'e', 'e'}}),
                               b.Lit("-1")}),
                       b.Lit("z")}));
  b.Define("b", b.Lit("q"));
  ExpectSame(ParseLark(R"~(start: a b?
?a.2: "se-1"i -> first
   | "z"
!b: "q"
)~"),
             b.Build("start"));
}

TEST(LarkParse, AutoDetection) {
  Builder b;
  b.Define("start", b.Lit("x"));
  ExpectSame(ParseGrammar("// comment\n\nstart: \"x\"\n"), b.Build("start"));
  Builder c;
  c.Define("root", c.Lit("x"));
  ExpectSame(ParseGrammar("# comment\nroot ::= \"x\"\n"), c.Build("root"));
  ExpectSame(ParseGrammar("root ::= \"x\"", GrammarSyntax::kGbnf), c.Build("root"));
  EXPECT_FALSE(ParseGrammar("root ::= \"x\"", GrammarSyntax::kLark).ok());
}

TEST(LarkErrors, ErrorsWithLineAndColumn) {
  ExpectError(ParseLark("start: a\n%import common.WS\n"), StatusCode::kUnsupported, "2:1",
              "directives");
  ExpectError(ParseLark("start: a\na: \"x\"\n%ignore \" \"\n"), StatusCode::kUnsupported, "3:1",
              "directives");
  ExpectError(ParseLark("start: /a/i"), StatusCode::kUnsupported, "1:11", "regex flags");
  ExpectError(ParseLark("start: x\nx:   \"a\" /a(b/"), StatusCode::kInvalidGrammar, "2:12",
              "invalid regex");
  ExpectError(ParseLark("start: \"a\"..\"zz\""), StatusCode::kInvalidGrammar, "1:8",
              "one character on each side");
  ExpectError(ParseLark("start: \"z\"..\"a\""), StatusCode::kInvalidGrammar, "1:13",
              "out of order");
  ExpectError(ParseLark("start: \"a\" ~ "), StatusCode::kInvalidGrammar, "1:14",
              "expected a number");
  ExpectError(ParseLark("start: \"a\" ~ 3..2"), StatusCode::kInvalidGrammar, "1:17",
              "below the minimum");
  ExpectError(ParseLark("start: [\"a\""), StatusCode::kInvalidGrammar, "1:12", "expected ']'");
  ExpectError(ParseLark("root: \"a\""), StatusCode::kInvalidGrammar, "1:1",
              "missing the start rule 'start'");
  GrammarParseOptions strict;
  strict.allow_unused_rules = false;
  ExpectError(ParseLark("start: a\n\nb: \"x\"\na: \"y\"", strict), StatusCode::kInvalidGrammar,
              "3:1", "rule 'b' is never used");
  ExpectError(ParseLark("start: a b\na: \"y\""), StatusCode::kInvalidGrammar, "1:10",
              "undefined rule 'b'");
  const std::string deep = "start: " + std::string(100000, '[') + "\"a\"" +
                           std::string(100000, ']');
  ExpectError(ParseLark(deep), StatusCode::kResourceLimit, "1:1008", "max_nesting_depth");
}

}  // namespace
}  // namespace lockstep::grammar
