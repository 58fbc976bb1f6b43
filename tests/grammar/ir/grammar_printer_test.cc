// PrintGbnf and StructurallyEqual: golden output, and Parse -> Print -> Parse round trips on
// llama.cpp-style grammars (JSON, arithmetic, bounded lists, ...) and on Lark input.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/ir/grammar_ir.h"
#include "grammar/grammar_test_util.h"

namespace lockstep::grammar {
namespace {

using testing::Builder;

const char* const kJson = R"~(# JSON, in the style of llama.cpp's grammars/json.gbnf
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)~";

const char* const kArithmetic = R"~(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)~";

const char* const kLists = R"~(root ::= "[" item ("," item){0,9} "]" tags{2} opt{0,} pad{3,7}
item ::= [a-z]{1,8} | [0-9]{2,}
tags ::= "#" [A-Za-z]+
opt ::= "?"?
pad ::= " "
)~";

const char* const kChat = R"~(root ::= <[<|start_header_id|>]> role <[<|end_header_id|>]> "\n\n" body <[<|eot_id|>]>
role ::= "user" | "assistant" | "system"
body ::= (text | call)*
text ::= [^<\x00]+
call ::= "<tool>" /\{"name": "[a-z_]+"\}/ "</tool>"
)~";

const char* const kUnicode = R"~(root ::= greeting " " name [.!?€]
greeting ::= "héllo" | "\u4F60\u597D" | "\U0001F44B" | "tab\there" | "quote\"back\\slash"
name ::= [A-Z\u00C0-\u00DE] [a-z\u00DF-\u00FF\x2D\]\[^]* . [^\n] [^\x00-\x7F]
)~";

const char* const kNested = R"~(root ::= (("a" "b") "c") ("d" | ("e" | "f")) ((("g")))* ()
  ("x" | ) ("p" "q")? "r"{2}{3} [] x
x ::= ""
)~";

std::vector<std::string> GbnfCorpus() {
  return {kJson, kArithmetic, kLists, kChat, kUnicode, kNested,
          "root ::= \"a\"",
          "root ::= [^]",
          "root ::= [\\x00-\\x1F\\x7F]*",
          "root ::= a | b\na ::= \"a\" a | \"\"\nb ::= (b \"b\")?",
          "expr ::= \"1\" | \"(\" expr \")\"\nroot ::= expr"};
}

TEST(GbnfPrinter, GoldenOutput) {
  Result<Grammar> g = ParseGbnf(kLists);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(PrintGbnf(*g),
            "root ::= \"[\" item (\",\" item){0,9} \"]\" tags{2} opt* pad{3,7}\n"
            "item ::= [a-z]{1,8} | [0-9]{2,}\n"
            "tags ::= \"#\" [A-Za-z]+\n"
            "opt ::= \"?\"?\n"
            "pad ::= \" \"\n");
  Result<Grammar> u = ParseGbnf(
      "root ::= [^\"\\\\] . [\\x00-\\x1F\\x2D\\]] [^a] \"\\n\\x01é\" [ab] <[<|eot|>]> /a\\/b/ ()");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(PrintGbnf(*u),
            "root ::= [^\"\\\\] . [\\x00-\\x1F\\x2D\\]] [^a] \"\\n\\x01é\" [ab] <|eot|> "
            "/a\\/b/ ()\n");
  // Token items print in llama.cpp's syntax (the older <[NAME]> reads the same).
  Result<Grammar> t = ParseGbnf("root ::= <[7]> !<[8]> <|eot|> !<think> <[a]b>]> !<[<x]>");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(PrintGbnf(*t), "root ::= <[7]> !<[8]> <|eot|> !<think> <[a]b>]> !<[<x]>\n");
  // A name "<>" stays in the by-name form: <> is no token item (a fuzz finding).
  Result<Grammar> e = ParseGbnf("root ::= <[<>]> !<[<>]>");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(PrintGbnf(*e), "root ::= <[<>]> !<[<>]>\n");
  ASSERT_TRUE(ParseGbnf(PrintGbnf(*e)).ok());
}

TEST(GbnfPrinter, RoundTripCorpus) {
  for (const std::string& text : GbnfCorpus()) {
    Result<Grammar> g = ParseGbnf(text);
    ASSERT_TRUE(g.ok()) << text << "\n" << g.status().ToString();
    const std::string printed = PrintGbnf(*g);
    Result<Grammar> again = ParseGbnf(printed);
    ASSERT_TRUE(again.ok()) << printed << "\n" << again.status().ToString();
    EXPECT_TRUE(StructurallyEqual(*g, *again)) << text << "\nprinted:\n" << printed;
    // Printing is a fixpoint after one round.
    EXPECT_EQ(PrintGbnf(*again), printed);
  }
}

TEST(GbnfPrinter, RoundTripAfterNormalize) {
  for (const std::string& text : GbnfCorpus()) {
    Result<Grammar> g = ParseGbnf(text);
    ASSERT_TRUE(g.ok());
    ASSERT_TRUE(Normalize(*g).ok());
    Result<Grammar> again = ParseGbnf(PrintGbnf(*g));
    ASSERT_TRUE(again.ok()) << PrintGbnf(*g) << again.status().ToString();
    EXPECT_TRUE(StructurallyEqual(*g, *again)) << PrintGbnf(*g);
  }
}

TEST(GbnfPrinter, LarkGrammarsPrintWithTheirStartRule) {
  const char* const lark = R"~(start: item ("," item)*
item: WORD | NUMBER | "[" [start] "]"
WORD: ("a".."z")+ "."? "x"i
NUMBER: /-?[0-9]+/ ~ 1..3
)~";
  Result<Grammar> g = ParseLark(lark);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string printed = PrintGbnf(*g);
  EXPECT_EQ(printed.rfind("# lockstep-root: start\n", 0), 0u) << printed;
  Result<Grammar> again = ParseGbnf(printed);
  ASSERT_TRUE(again.ok()) << printed << again.status().ToString();
  EXPECT_TRUE(StructurallyEqual(*g, *again)) << printed;
  EXPECT_EQ(again->rule(again->root).name, "start");
}

TEST(GbnfPrinter, HandBuiltIr) {
  Builder b;
  b.Define("root", b.Seq({b.Alt({b.Lit("a"), b.Seq({b.Lit("b"), b.Lit("c")})}),
                          b.Seq({b.Lit("d"), b.Lit("e")}), b.Rep(b.Ref("x"), 2, 2),
                          b.Alt({}), b.Cls({})}));
  b.Define("x", b.Empty());
  const Grammar g = b.Build("root");
  EXPECT_EQ(PrintGbnf(g), "root ::= (\"a\" | \"b\" \"c\") (\"d\" \"e\") x{2} [] []\nx ::= ()\n");
}

TEST(StructuralEquality, ComparesNamesRootsAndTreesButNotLocations) {
  Result<Grammar> a = ParseGbnf("root ::= x \"a\"\nx ::= [a-c]");
  Result<Grammar> a2 = ParseGbnf("\n\n  root ::=   x\n  \"a\"   x ::= [a-c] # moved\n");
  Result<Grammar> renamed = ParseGbnf("root ::= y \"a\"\ny ::= [a-c]");
  Result<Grammar> other_class = ParseGbnf("root ::= x \"a\"\nx ::= [a-d]");
  Result<Grammar> other_text = ParseGbnf("root ::= x \"b\"\nx ::= [a-c]");
  Result<Grammar> reordered = ParseGbnf("x ::= [a-c]\nroot ::= x \"a\"");
  Result<Grammar> counted = ParseGbnf("root ::= x{2} \"a\"\nx ::= [a-c]");
  Result<Grammar> counted3 = ParseGbnf("root ::= x{3} \"a\"\nx ::= [a-c]");
  for (const auto* r : {&a, &a2, &renamed, &other_class, &other_text, &reordered, &counted,
                        &counted3}) {
    ASSERT_TRUE(r->ok()) << r->status().ToString();
  }
  EXPECT_TRUE(StructurallyEqual(*a, *a2));
  EXPECT_FALSE(StructurallyEqual(*a, *renamed));
  EXPECT_FALSE(StructurallyEqual(*a, *other_class));
  EXPECT_FALSE(StructurallyEqual(*a, *other_text));
  EXPECT_FALSE(StructurallyEqual(*a, *reordered));
  EXPECT_FALSE(StructurallyEqual(*counted, *counted3));
  EXPECT_FALSE(StructurallyEqual(*a, *counted));
}

TEST(GbnfPrinter, DeepestAcceptedTreesRoundTripAndNormalize) {
  // 1000 nested groups (the default limit), each adding a choice, a sequence and two repeats:
  // an IR about 4000 levels deep, which every recursive pass must handle.
  std::string text = "root ::= ";
  for (int i = 0; i < 1000; ++i) text += "(\"a\" | \"b\" ";
  text += "\"c\"";
  for (int i = 0; i < 1000; ++i) text += ")**";
  Result<Grammar> g = ParseGbnf(text);
  ASSERT_TRUE(g.ok()) << g.status().ToString().substr(0, 200);
  GrammarParseOptions roomy;
  roomy.max_nesting_depth = 2100;  // printing parenthesises each repeated choice
  Result<Grammar> again = ParseGbnf(PrintGbnf(*g), roomy);
  ASSERT_TRUE(again.ok()) << again.status().ToString().substr(0, 200);
  EXPECT_TRUE(StructurallyEqual(*g, *again));
  EXPECT_EQ(NullableRules(*g), std::vector<bool>{true});
  Grammar normalized = *g;
  ASSERT_TRUE(Normalize(normalized).ok());
  EXPECT_TRUE(StructurallyEqual(*g, normalized) || normalized.rules.size() == 1);
}

}  // namespace
}  // namespace lockstep::grammar
