// Hand-picked sentences and non-sentences of each shipped grammar's language, run through the
// oracles of grammar_checkers.h (and, for JSON, cross-checked with simdjson where RFC 8259
// alone decides).
#include "util/grammar_checkers.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

namespace lockstep::testing {
namespace {

using Cases = std::vector<std::string>;

void ExpectAll(bool (*check)(std::string_view), const Cases& cases, bool expected) {
  for (const auto& s : cases)
    EXPECT_EQ(check(s), expected) << "input: \"" << s.substr(0, 200) << "\"";
}

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// ---------------------------------------------------------------------------------------------
TEST(CheckJsonRfc8259, Accepts) {
  const Cases ok = {"0",
                    "-0",
                    "1",
                    "-12",
                    "1.5",
                    "-0.0",
                    "1e5",
                    "1E+5",
                    "1e-05",
                    "0.1e10",
                    "123456789012345678901234567890",
                    "true",
                    "false",
                    "null",
                    "\"\"",
                    "\"abc\"",
                    "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"",
                    "\"\\u0000\\u001f\\u00e9\\uFFFF\"",
                    "\"\\ud83d\\ude00\"",
                    "\"\\uD83D\\uDE00x\\uDBFF\\uDFFF\"",
                    "\"\\uD7FF\\uE000\"",
                    "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"",
                    "\"\x7f\"",
                    "[]",
                    "{}",
                    "[1,2,3]",
                    "{\"a\":1,\"a\":2}",
                    "{\"\":{}}",
                    "[[[]]]",
                    " \t\n\r1\r\n\t ",
                    "[ 1 , 2 ]",
                    "{ \"a\" : [ true , null ] }",
                    "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"c\"\n    }\n  ]\n}",
                    std::string(64, ' ') + "1" + std::string(64, ' '),
                    "[" + std::string(64, '\n') + "]",
                    Nested(kCheckerMaxDepth)};
  ExpectAll(CheckJsonRfc8259, ok, true);
  simdjson::dom::parser parser;
  for (const auto& s : ok) {
    if (s.find("1234567890123456789012") != std::string::npos) continue;  // simdjson: bigint
    if (s.size() > 1024 && s[0] == '[') continue;  // deeper than simdjson's default 1024
    EXPECT_EQ(parser.parse(s).error(), simdjson::SUCCESS) << s;
  }
}

TEST(CheckJsonRfc8259, Rejects) {
  const Cases bad = {"",
                     " ",
                     "01",
                     "-01",
                     "+1",
                     ".5",
                     "1.",
                     "1.e3",
                     "1e",
                     "-",
                     "0x10",
                     "NaN",
                     "Infinity",
                     "tru",
                     "nul",
                     "True",
                     "[1,]",
                     "{\"a\":1,}",
                     "[,]",
                     "{\"a\"}",
                     "{a:1}",
                     "{'a':1}",
                     "'a'",
                     "[1 2]",
                     "{\"a\":1 \"b\":2}",
                     "[",
                     "]",
                     "[1]]",
                     "1 2",
                     "\"abc",
                     "\"\\x41\"",
                     "\"\\u12\"",
                     "\"\\u12G4\"",
                     "\"\\q\"",
                     "\"\\U0001F600\"",
                     "\"\\'\"",
                     "\"a\tb\"",
                     "\"a\nb\"",
                     std::string("\"\0\"", 3),
                     "\"\\uD83D\"",
                     "\"\\uDE00\"",
                     "\"\\uDE00\\uD83D\"",
                     "\"\\uD83D\\uD83D\"",
                     "\"\\uD83Dx\"",
                     "\"\\uD83D\\u0041\"",
                     "{\"\\udc00\":1}",
                     "\"\xff\"",
                     "\"\xc0\xaf\"",
                     "\"\xed\xa0\x80\"",
                     "\"\xf4\x90\x80\x80\"",
                     "\"\xe2\x82\"",
                     "\f1",
                     "[1,\v2]",
                     "\xc2\xa0"
                     "1",
                     "\xef\xbb\xbf"
                     "1",
                     "// c\n1",
                     "[1]/**/",
                     std::string(65, ' ') + "1",
                     "1" + std::string(65, '\n'),
                     "[" + std::string(65, ' ') + "]",
                     "{\"a\":" + std::string(30, ' ') + std::string(35, '\t') + "1}",
                     Nested(kCheckerMaxDepth + 1)};
  ExpectAll(CheckJsonRfc8259, bad, false);
}

// ---------------------------------------------------------------------------------------------
TEST(CheckArithmetic, Accepts) {
  ExpectAll(CheckArithmetic,
            {"0",
             "7",
             "42",
             "3.14",
             "0.5",
             "10.0",
             "-1",
             "--1",
             "-(2)",
             "1+2",
             "1 + 2",
             "1 +2",
             "1+ 2",
             "1-2",
             "1 - -2",
             "1--2",
             "2*3+4",
             "2 * (3 + 4)",
             "((1))",
             "1/2/3",
             "-(-(1.5 * 2) / 3) - 4",
             "1 * 2 - 3 / 4 + 5",
             "(1+2)*(3-4)/-5",
             std::string(500, '(') + "1" + std::string(500, ')')},
            true);
}

TEST(CheckArithmetic, Rejects) {
  ExpectAll(CheckArithmetic,
            {"",     " ",  " 1",   "1 ",     "01",     "1.",     ".5",      "1..2",
             "1 .5", "+1", "1++2", "1  + 2", "1 +  2", "- 1",    "1 - - 2", "( 1)",
             "(1 )", "()", "(1",   "1)",     "1 2",    "1*",     "*1",      "1 x 2",
             "1e5",  "a",  "1,2",  "1+2;",   "1\t+ 2", "(1)(2)", "2(3)",    "-"},
            false);
}

// ---------------------------------------------------------------------------------------------
TEST(CheckCCall, Accepts) {
  ExpectAll(CheckCCall,
            {"f()",
             "f();",
             "_x1()",
             "print(1)",
             "add(1, 2)",
             "add(1,2)",
             "add(-1, 2.5e-3)",
             "g(0, -0.0, 1E10)",
             "f(\"\")",
             "log(\"hi\\n\\t\\\"q\\\" \\\\ \\' \\? \\a\\b\\f\\r\\v\\0\")",
             "f(\"\\x41\\xfF\")",
             "f(\"caf\xc3\xa9\")",
             "f(true, false, null)",
             "f(x, y_2)",
             "outer(inner(1), other(deep(\"s\")));",
             "f(a,b, c)",
             "f(g())",
             "setColor(RED, 0.5)",
             "f(\"a\x7f\")",
             "f(\"\\012\")"},  // \0 is one NUL, then the characters 1 and 2 (never octal)
            true);
}

TEST(CheckCCall, Rejects) {
  ExpectAll(CheckCCall, {"",
                         "f",
                         "f(",
                         "f)",
                         "1f()",
                         "f ()",
                         "f( )",
                         "f(1 )",
                         "f( 1)",
                         "f(1,  2)",
                         "f(1 ,2)",
                         "f(1,)",
                         "f(,1)",
                         "f();;",
                         "f() ;",
                         " f()",
                         "f()g()",
                         "f(01)",
                         "f(1.)",
                         "f(.5)",
                         "f(+1)",
                         "f('a')",
                         "f(\"a)",
                         "f(\"\\q\")",
                         "f(\"\\x4\")",
                         "f(\"\\u0041\")",
                         "f(\"a\nb\")",
                         "f(\"\xff\")",
                         "f(1)(2)",
                         "f(a b)",
                         "f(-x)"},
            false);
}

// ---------------------------------------------------------------------------------------------
TEST(CheckSqlSelect, Accepts) {
  ExpectAll(CheckSqlSelect,
            {"SELECT * FROM t", "SELECT * FROM t;", "SELECT a FROM t", "SELECT a, b, c FROM t",
             "SELECT DISTINCT a FROM t", "SELECT DISTINCT * FROM t", "SELECT a FROM t WHERE a = 1",
             "SELECT a FROM t WHERE a <> 'x'",
             "SELECT a FROM t WHERE a < -1.5 AND b > c OR d <= 0 AND e >= 'it''s'",
             "SELECT a FROM t WHERE name = ''", "SELECT a FROM t ORDER BY a",
             "SELECT a FROM t ORDER BY a ASC, b DESC, c", "SELECT a FROM t LIMIT 0",
             "SELECT a FROM t LIMIT 10;",
             "SELECT DISTINCT a, b FROM users_2 WHERE age >= 18 ORDER BY b DESC LIMIT 5;",
             "SELECT _a FROM t WHERE x = 'caf\xc3\xa9 \x7f'", "SELECT a FROM t WHERE x = y"},
            true);
}

TEST(CheckSqlSelect, Rejects) {
  ExpectAll(CheckSqlSelect,
            {"",
             "SELECT",
             "SELECT * FROM",
             "select * from t",
             "SELECT *  FROM t",
             "SELECT a,b FROM t",
             "SELECT a , b FROM t",
             "SELECT A FROM t",
             "SELECT a FROM T",
             "SELECT a FROM t WHERE",
             "SELECT a FROM t WHERE a=1",
             "SELECT a FROM t WHERE a == 1",
             "SELECT a FROM t WHERE a != 1",
             "SELECT a FROM t WHERE a = \"x\"",
             "SELECT a FROM t WHERE a = 'x",
             "SELECT a FROM t WHERE a = 'it's'",
             "SELECT a FROM t WHERE a = 01",
             "SELECT a FROM t WHERE a = 1e5",
             "SELECT a FROM t WHERE a = 1 AND",
             "SELECT a FROM t ORDER BY",
             "SELECT a FROM t LIMIT -1",
             "SELECT a FROM t LIMIT 1.5",
             "SELECT a FROM t LIMIT 5 ORDER BY a",
             "SELECT a FROM t ORDER BY a ASC DESC",
             "SELECT a FROM t;;",
             "SELECT a FROM t ;",
             " SELECT a FROM t",
             "SELECT a FROM t WHERE a = 'x\ny'",
             "SELECT * , a FROM t",
             "SELECT DISTINCT DISTINCT a FROM t",
             "SELECT 1a FROM t"},
            false);
}

// ---------------------------------------------------------------------------------------------
TEST(CheckToolCalls, Accepts) {
  const Cases ok = {
      R"([{"name": "f", "arguments": {}}])",
      R"([{"name":"f","arguments":{}}])",
      R"([{"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}])",
      R"([{"name": "a", "arguments": {}}, {"name": "B_2", "arguments": {"x": [1, {"y": null}]}}])",
      "[\n  {\n    \"name\": \"f\",\n    \"arguments\": {\n      \"q\": \"\\ud83d\\ude00\"\n    "
      "}\n  }\n]",
      "[ { \"name\" : \"f\" , \"arguments\" : { } } ]",
      R"([{"name": "_", "arguments": {"a": {"b": {"c": true}}}}])",
      R"([{"name": "f", "arguments": {"a": 1, "a": 2}}])",
      R"([{"name": "f", "arguments": {"s": "caf)"
      "\xc3\xa9"
      R"("}}])",
      R"([{"name": "f", "arguments": {"n": -1.5e+10}}])",
      "[{\"name\": \"" + std::string(64, 'x') + "\", \"arguments\": {}}]",
      R"([{"name": "f", "arguments": {}},{"name": "g", "arguments": {}},{"name": "h", "arguments": {}}])",
      R"([{"name": "f", "arguments": {"": ""}}])",
      R"([{"name": "f", "arguments": {"list": []}}])",
      R"([{"name": "f9", "arguments": {"esc": "\"\\\/\b\f\n\r\t"}}])"};
  ExpectAll(CheckToolCalls, ok, true);
  for (const auto& s : ok) EXPECT_TRUE(CheckJsonRfc8259(s)) << s;
}

TEST(CheckToolCalls, Rejects) {
  ExpectAll(CheckToolCalls,
            {"",
             "[]",
             "{}",
             R"({"name": "f", "arguments": {}})",
             R"([{"name": "f"}])",
             R"([{"arguments": {}, "name": "f"}])",
             R"([{"name": "f", "arguments": []}])",
             R"([{"name": "f", "arguments": null}])",
             R"([{"name": "f", "arguments": {}, "id": 1}])",
             R"([{"name": "1f", "arguments": {}}])",
             R"([{"name": "", "arguments": {}}])",
             R"([{"name": "a-b", "arguments": {}}])",
             R"([{"name": "f", "arguments": {},}])",
             R"([{"name": "f", "arguments": {}},])",
             R"([{"na\u006de": "f", "arguments": {}}])",
             R"([{"name": "\u0066", "arguments": {}}])",
             R"([{'name': 'f', 'arguments': {}}])",
             R"([{"name": "f", "arguments": {"a": 01}}])",
             R"([{"name": "f", "arguments": {"a": "\uD83D"}}])",
             R"([{"name": "f", "arguments": {"a" 1}}])",
             R"([{"name": "f", "arguments": {}}] x)",
             "[{\"name\": \"" + std::string(65, 'x') + "\", \"arguments\": {}}]",
             "[" + std::string(65, ' ') + R"({"name": "f", "arguments": {}}])",
             R"( [{"name": "f", "arguments": {}}])",  // nothing before the array
             "[{\"name\": \"f\", \"arguments\": {}}]\n",  // nor after it
             R"([{"name": f, "arguments": {}}])",
             R"([{"name": "f", "arguments": {}})"},
            false);
}

}  // namespace
}  // namespace lockstep::testing
