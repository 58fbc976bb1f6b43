// NullableRules on hand-checked cases; Normalize keeps the language (every string up to length 4
// over a small alphabet, by the independent Oracle in grammar_test_util.h), is idempotent, and
// does what each option says.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "grammar/ir/grammar_ir.h"
#include "grammar/grammar_test_util.h"

namespace lockstep::grammar {
namespace {

using testing::Accepts;
using testing::AllStrings;
using testing::Builder;

Grammar Parse(const std::string& text) {
  Result<Grammar> g = ParseGbnf(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << g.status().ToString();
  return g.ok() ? *g : Grammar{};
}

TEST(Oracle, AgreesWithHandCheckedMemberships) {
  const Grammar g = Parse("root ::= \"a\" root \"b\" | \"\"");  // a^n b^n
  EXPECT_TRUE(Accepts(g, ""));
  EXPECT_TRUE(Accepts(g, "ab"));
  EXPECT_TRUE(Accepts(g, "aabb"));
  EXPECT_FALSE(Accepts(g, "aab"));
  EXPECT_FALSE(Accepts(g, "ba"));
  const Grammar left = Parse("root ::= root \"a\" | \"b\"");  // left recursion: b a*
  EXPECT_TRUE(Accepts(left, "baaa"));
  EXPECT_FALSE(Accepts(left, "ab"));
  const Grammar counted = Parse("root ::= [ab]{2,3} \"c\"?");
  EXPECT_FALSE(Accepts(counted, "a"));
  EXPECT_TRUE(Accepts(counted, "ab"));
  EXPECT_TRUE(Accepts(counted, "abac"));
  EXPECT_FALSE(Accepts(counted, "abab"));
  const Grammar lexeme = Parse("root ::= /a+b?/ \"c\"");
  EXPECT_TRUE(Accepts(lexeme, "aabc"));
  EXPECT_FALSE(Accepts(lexeme, "bc"));
}

TEST(Nullable, HandCases) {
  const Grammar g = Parse(R"~(root ::= a b c d e f g h i j k l m
a ::= ""
b ::= "x"?
c ::= "x"*
d ::= "x"+
e ::= d | ()
f ::= "x" f | "y"
g ::= g "x" | b
h ::= [a-z]{0,3}
i ::= [a-z]{1,3}
j ::= /a*/
k ::= /a+/
l ::= <[<|eot_id|>]>
m ::= a b (c | d) e{2}
)~");
  const std::vector<bool> nullable = NullableRules(g);
  const std::vector<bool> want = {false, true, true, true, false, true, false, true,
                                  true,  false, true, false, false, true};
  ASSERT_EQ(nullable.size(), want.size());
  for (std::size_t r = 0; r < want.size(); ++r) {
    EXPECT_EQ(nullable[r], want[r]) << g.rules[r].name;
  }
  // Mutual recursion with an empty exit, found only by iterating to the fixpoint.
  const Grammar mutual = Parse("root ::= p\np ::= q \"x\" | q\nq ::= p | \"\"\n");
  EXPECT_EQ(NullableRules(mutual), (std::vector<bool>{true, true, true}));
  const Grammar none = Parse("root ::= p\np ::= q \"x\"\nq ::= p\n");  // derives nothing
  EXPECT_EQ(NullableRules(none), (std::vector<bool>{false, false, false}));
}

const std::vector<std::string>& LanguageCorpus() {
  static const std::vector<std::string> corpus = {
      "root ::= a b\na ::= \"a\" | \"\"\nb ::= \"b\"+",
      "root ::= x x\nx ::= [ab] | \"c\" x",
      "root ::= \"a\" root \"b\" | \"\"",
      "root ::= root \"a\" | \"b\" | \"c\" c\nc ::= (\"\" \"c\")? \"a\"{1,2}",
      "root ::= ((\"a\" (\"b\")) | ((\"c\"))) ()* \"\" (\"a\" | (\"b\" | \"c\"))",
      "root ::= p | q\np ::= \"a\" \"b\" \"c\"\nq ::= \"a\" \"b\" \"c\"",
      "root ::= p q r\np ::= s\nq ::= s\nr ::= \"c\"{0,2}\ns ::= [ab]{2}",
      "root ::= l\nl ::= m\nm ::= n\nn ::= \"a\" l | \"b\"",
      "root ::= (\"a\"{1,1}){1,1} (\"b\"*)* (\"c\"{0,0}) \"\"{2,3} [ac]{0,}",
      "root ::= e\ne ::= t (\"a\" t)*\nt ::= \"b\" | \"c\" e \"c\"",
      "root ::= u | v\nu ::= w \"a\"\nv ::= w \"a\"\nw ::= \"b\"?",
      "root ::= /[ab]+/ | \"c\" /a?/ \"b\"",
      "root ::= x | <[<|eot|>]> | y\nx ::= \"a\" y\ny ::= \"b\" x | \"c\"",
  };
  return corpus;
}

TEST(Normalize, PreservesTheLanguage) {
  const std::vector<std::string> strings = AllStrings("abc", 4);
  for (const std::string& text : LanguageCorpus()) {
    const Grammar before = Parse(text);
    for (int variant = 0; variant < 4; ++variant) {
      NormalizeOptions options;
      options.inline_single_use = variant != 1;
      options.dedupe_rules = variant != 2;
      options.flatten = variant != 3;
      Grammar after = before;
      ASSERT_TRUE(Normalize(after, options).ok());
      for (const std::string& s : strings) {
        EXPECT_EQ(Accepts(before, s), Accepts(after, s))
            << "string '" << s << "' variant " << variant << "\nbefore:\n"
            << PrintGbnf(before) << "after:\n"
            << PrintGbnf(after);
      }
    }
  }
}

TEST(Normalize, IsIdempotent) {
  for (const std::string& text : LanguageCorpus()) {
    Grammar once = Parse(text);
    ASSERT_TRUE(Normalize(once).ok());
    Grammar twice = once;
    ASSERT_TRUE(Normalize(twice).ok());
    EXPECT_TRUE(StructurallyEqual(once, twice)) << PrintGbnf(once) << "vs\n" << PrintGbnf(twice);
  }
}

TEST(Normalize, InlinesSingleUseNonRecursiveRules) {
  Grammar g = Parse("root ::= a b b\na ::= \"x\" [0-9]\nb ::= \"y\"\n");
  ASSERT_TRUE(Normalize(g).ok());
  Builder want;
  want.Define("root", want.Seq({want.Lit("x"), want.Cls({{'0', '9'}}), want.Ref("b"),
                                want.Ref("b")}));
  want.Define("b", want.Lit("y"));
  EXPECT_TRUE(StructurallyEqual(g, want.Build("root"))) << PrintGbnf(g);
}

// Two chains of rules that become equal one level at a time (a30 = b30 makes a29 = b29, ...;
// each used twice, so none is inlined): merged within one pass, where each level took a pass of
// its own; the language is unchanged.
TEST(Normalize, MergesChainsThatBecomeEqualLevelByLevel) {
  constexpr int kDepth = 30;
  auto name = [](const char* side, int i) {
    std::string n = side;  // (not side + ...: g++ 12 warns falsely about it)
    n += std::to_string(i);
    return n;
  };
  std::string text = "root ::= a0 \"-\" b0\n";
  for (int i = 0; i < kDepth; ++i) {
    for (const char* side : {"a", "b"}) {
      text += name(side, i) + " ::= \"(\" " + name(side, i + 1) + " " + name(side, i + 1) +
              " \")\" | \"x\"\n";
    }
  }
  text += name("a", kDepth) + " ::= \"y\"\n" + name("b", kDepth) + " ::= \"y\"\n";
  const Grammar before = Parse(text);
  Grammar g = before;
  ASSERT_TRUE(Normalize(g).ok());
  // Every b merged into its a (what stays is the a chain, some of it inlined, and root).
  for (const Rule& r : g.rules) EXPECT_NE(r.name[0], 'b') << PrintGbnf(g);
  EXPECT_LE(g.rules.size(), static_cast<std::size_t>(kDepth + 2)) << PrintGbnf(g);
  for (const std::string s : {"x-x", "(xx)-x", "((xx)x)-(xx)", "x-(x", "y-y", "(x)-x"}) {
    EXPECT_EQ(Accepts(before, s), Accepts(g, s)) << s;
  }
  Grammar again = g;
  ASSERT_TRUE(Normalize(again).ok());
  EXPECT_TRUE(StructurallyEqual(g, again));
}

// One wide rule over 300 pairs of rules that merge one after another, each pair through a level
// below it (the shape of a schema whose big object refers to hundreds of definitions): every b
// merged into its a, and the a's of one letter into one another (what stays: root, the wide rule,
// one a per letter, one c), the language unchanged.
TEST(Normalize, MergesManyRulesReferredToByOneWideRule) {
  constexpr int kPairs = 300;
  std::string text = "root ::= wide \"|\" wide\nwide ::=";
  for (int i = 0; i < kPairs; ++i) {
    const std::string n = std::to_string(i);
    text += " a" + n + " b" + n;
  }
  text += "\n";
  for (int i = 0; i < kPairs; ++i) {
    const std::string n = std::to_string(i);
    const std::string lit =
        std::string(1, '"').append(1, static_cast<char>('a' + i % 26)).append(1, '"');
    text += "a" + n + " ::= " + lit + " ca" + n + "\nb" + n + " ::= " + lit + " cb" + n + "\n";
    text += "ca" + n + " ::= [0-9] | \"-\"\ncb" + n + " ::= [0-9] | \"-\"\n";
  }
  const Grammar before = Parse(text);
  Grammar g = before;
  NormalizeOptions options;
  options.inline_single_use = false;
  ASSERT_TRUE(Normalize(g, options).ok());
  for (const Rule& r : g.rules) EXPECT_NE(r.name[0], 'b') << r.name;
  EXPECT_EQ(g.rules.size(), static_cast<std::size_t>(2 + 26 + 1)) << PrintGbnf(g).substr(0, 2000);
  std::string one;
  for (int i = 0; i < kPairs; ++i) one += std::string(1, 'a' + i % 26) + "1" + std::string(1, 'a' + i % 26) + "-";
  for (const std::string& s : {one + "|" + one, one + "|" + one.substr(1), one}) {
    EXPECT_EQ(Accepts(before, s), Accepts(g, s)) << s.substr(0, 40);
  }
}

TEST(Normalize, KeepsRecursiveRulesAndTheRoot) {
  Grammar g = Parse("root ::= list\nlist ::= \"a\" list | \"b\"\n");
  ASSERT_TRUE(Normalize(g).ok());
  ASSERT_EQ(g.rules.size(), 2u);
  EXPECT_EQ(g.rule(g.root).name, "root");
  EXPECT_EQ(g.rules[1].name, "list");
  // Root refers to itself: it stays too.
  Grammar r = Parse("root ::= \"(\" root \")\" | \"\"");
  ASSERT_TRUE(Normalize(r).ok());
  ASSERT_EQ(r.rules.size(), 1u);
}

TEST(Normalize, DedupesIdenticalRules) {
  Grammar g = Parse("root ::= p q p q\np ::= [ab] \"c\"\nq ::= [ab] \"c\"\n");
  NormalizeOptions options;
  options.inline_single_use = false;
  ASSERT_TRUE(Normalize(g, options).ok());
  Builder want;
  want.Define("root", want.Seq({want.Ref("p"), want.Ref("p"), want.Ref("p"), want.Ref("p")}));
  want.Define("p", want.Seq({want.Cls({{'a', 'b'}}), want.Lit("c")}));
  EXPECT_TRUE(StructurallyEqual(g, want.Build("root"))) << PrintGbnf(g);
}

TEST(Normalize, FlattensAndMergesLiterals) {
  Grammar g = Parse(
      "root ::= \"a\" (\"b\" (\"c\" \"\")) () (\"x\" | (\"y\" | \"z\")) \"q\"{1,1} \"w\"{0} [0-9]");
  ASSERT_TRUE(Normalize(g).ok());
  Builder want;
  want.Define("root", want.Seq({want.Lit("abc"),
                                want.Alt({want.Lit("x"), want.Lit("y"), want.Lit("z")}),
                                want.Lit("q"), want.Cls({{'0', '9'}})}));
  EXPECT_TRUE(StructurallyEqual(g, want.Build("root"))) << PrintGbnf(g);
}

TEST(Normalize, RemovesUnreachableRulesAndRejectsMalformedIr) {
  GrammarParseOptions options;
  options.allow_unused_rules = true;
  Result<Grammar> g = ParseGbnf("root ::= \"a\" x x\nx ::= \"b\"\nspare ::= x", options);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(Normalize(*g).ok());
  ASSERT_EQ(g->rules.size(), 2u);
  EXPECT_EQ(g->FindRule("spare"), -1);
  Grammar bad;
  EXPECT_EQ(Normalize(bad).code(), StatusCode::kInvalidArgument);
  Builder b;
  b.Define("root", b.Lit("a"));
  Grammar dangling = b.Build("root");
  dangling.exprs[0].children = {42};
  EXPECT_EQ(Normalize(dangling).code(), StatusCode::kInvalidArgument);
}

// What compiling does with a parsed grammar's unused rules: only they go, in order, references
// renumbered; the rest is exactly as parsed (no inlining, no merging).
TEST(DropUnreachableRules, KeepsTheReachableRulesAsTheyAre) {
  Result<Grammar> g =
      ParseGbnf("spare ::= x spare\nroot ::= \"a\" x y\nlone ::= \"z\"\nx ::= \"b\"\ny ::= x | \"c\"");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_EQ(g->warnings.size(), 2u);
  DropUnreachableRules(*g);
  Builder want;
  want.Define("root", want.Seq({want.Lit("a"), want.Ref("x"), want.Ref("y")}));
  want.Define("x", want.Lit("b"));
  want.Define("y", want.Alt({want.Ref("x"), want.Lit("c")}));
  EXPECT_TRUE(StructurallyEqual(*g, want.Build("root"))) << PrintGbnf(*g);
  EXPECT_EQ(g->warnings.size(), 2u);  // the warnings stay with the grammar
  Grammar again = *g;
  DropUnreachableRules(again);  // nothing left to drop
  EXPECT_TRUE(StructurallyEqual(again, *g));
}

TEST(Normalize, LongChainsOfRulesDoNotExhaustTheStack) {
  std::string text = "root ::= r0\n";
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    text.append("r").append(std::to_string(i)).append(" ::= \"x\" ");
    text.append(i + 1 < n ? std::string("r").append(std::to_string(i + 1))
                          : std::string("\"end\""));
    text.append("\n");
  }
  Grammar g = Parse(text);
  ASSERT_TRUE(Normalize(g).ok());
  // Inlined over a few rounds down to one flat literal.
  ASSERT_EQ(g.rules.size(), 1u) << g.rules.size();
  EXPECT_EQ(g.expr(g.rules[0].body).text, std::string(n, 'x') + "end");
  Result<Grammar> again = ParseGbnf(PrintGbnf(g));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(StructurallyEqual(g, *again));
}

}  // namespace
}  // namespace lockstep::grammar
