// The grammar runtime on grammars built directly in the IR (no front end involved): left
// recursion, ambiguity, nullable rules, native counters, the nesting limit, and fast masks
// against brute force on the Llama-3 vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>

#include "automata/cfg/cfg_grammar.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;

// A tiny builder for IR grammars.
struct Builder {
  grammar::Grammar g;
  grammar::RuleId RuleNamed(const std::string& name) {
    grammar::RuleId r = g.FindRule(name);
    if (r >= 0) return r;
    g.rules.push_back({name, -1, {}});
    return static_cast<grammar::RuleId>(g.rules.size() - 1);
  }
  ExprId Lit(const std::string& s) {
    Expr e;
    e.kind = ExprKind::kLiteral;
    e.text = s;
    return g.Add(e);
  }
  ExprId Cls(char32_t lo, char32_t hi) {
    Expr e;
    e.kind = ExprKind::kCharClass;
    e.ranges.push_back({lo, hi});
    return g.Add(e);
  }
  ExprId Ref(const std::string& name) {
    Expr e;
    e.kind = ExprKind::kRuleRef;
    e.rule = RuleNamed(name);
    return g.Add(e);
  }
  ExprId Seq(std::vector<ExprId> c) {
    Expr e;
    e.kind = ExprKind::kSequence;
    e.children = std::move(c);
    return g.Add(e);
  }
  ExprId Alt(std::vector<ExprId> c) {
    Expr e;
    e.kind = ExprKind::kChoice;
    e.children = std::move(c);
    return g.Add(e);
  }
  ExprId Rep(ExprId c, int min, int max) {
    Expr e;
    e.kind = ExprKind::kRepeat;
    e.children = {c};
    e.min = min;
    e.max = max;
    return g.Add(e);
  }
  ExprId Empty() { return g.Add(Expr{}); }
  void Rule(const std::string& name, ExprId body) {
    g.rules[RuleNamed(name)].body = body;
    if (name == "root") g.root = RuleNamed(name);
  }
};

std::shared_ptr<const Vocabulary> Llama3() {
  static std::shared_ptr<const Vocabulary> v = [] {
    Result<std::shared_ptr<const Vocabulary>> r = Vocabulary::Load("llama3");
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nullptr;
  }();
  return v;
}

const GrammarCompiler& Compiler() {
  static GrammarCompiler c(Llama3());
  return c;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  Matcher m(g);
  return m.AcceptString(s) && m.CanEnd();
}

// All strings over `alphabet` up to length n.
void ForAllStrings(const std::string& alphabet, int n, const std::function<void(const std::string&)>& f) {
  std::vector<std::string> cur = {""};
  f("");
  for (int len = 1; len <= n; ++len) {
    std::vector<std::string> next;
    for (const std::string& s : cur) {
      for (char c : alphabet) {
        next.push_back(s + c);
        f(next.back());
      }
    }
    cur = std::move(next);
  }
}

TEST(EarleyTest, LeftRecursionAndAmbiguity) {
  // root ::= root "+" root | root "a" | "b"   (ambiguous and left-recursive): b (a | +b)*
  Builder b;
  b.Rule("root", b.Alt({b.Seq({b.Ref("root"), b.Lit("+"), b.Ref("root")}),
                        b.Seq({b.Ref("root"), b.Lit("a")}), b.Lit("b")}));
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto in_language = [](const std::string& s) {
    // b followed by any sequence of "a" and "+b".
    if (s.empty() || s[0] != 'b') return false;
    for (std::size_t i = 1; i < s.size(); ++i) {
      if (s[i] == 'a') continue;
      if (s[i] == '+' && i + 1 < s.size() && s[i + 1] == 'b') {
        ++i;
        continue;
      }
      return false;
    }
    return true;
  };
  int checked = 0;
  ForAllStrings("ab+", 7, [&](const std::string& s) {
    EXPECT_EQ(Accepts(*g, s), in_language(s)) << "'" << s << "'";
    ++checked;
  });
  EXPECT_GT(checked, 3000);
}

TEST(EarleyTest, NullableRulesAndBalancedBrackets) {
  // root ::= item*   item ::= "(" root ")" | e   e ::= ""  (nullable everywhere)
  Builder b;
  b.Rule("root", b.Rep(b.Ref("item"), 0, Expr::kUnbounded));
  b.Rule("item", b.Alt({b.Seq({b.Lit("("), b.Ref("root"), b.Lit(")")}), b.Ref("e")}));
  b.Rule("e", b.Empty());
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto balanced = [](const std::string& s) {
    int d = 0;
    for (char c : s) {
      d += c == '(' ? 1 : -1;
      if (d < 0) return false;
    }
    return d == 0;
  };
  ForAllStrings("()", 10, [&](const std::string& s) {
    EXPECT_EQ(Accepts(*g, s), balanced(s)) << "'" << s << "'";
  });
}

TEST(EarleyTest, NativeCountersOverRules) {
  // root ::= "<" item{3,5} ">" | "[" item{2,} "]"   item ::= "ab" | "c" | "(" item ")"
  // (item is recursive, so the repetitions run as native counters over a rule).
  Builder b;
  b.Rule("root", b.Alt({b.Seq({b.Lit("<"), b.Rep(b.Ref("item"), 3, 5), b.Lit(">")}),
                        b.Seq({b.Lit("["), b.Rep(b.Ref("item"), 2, Expr::kUnbounded), b.Lit("]")})}));
  b.Rule("item", b.Alt({b.Lit("ab"), b.Lit("c"), b.Seq({b.Lit("("), b.Ref("item"), b.Lit(")")})}));
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_GE((*g)->Stats().counter_rules, 2);
  // One item at body[i..]: its end, or npos.
  std::function<std::size_t(const std::string&, std::size_t)> item_end =
      [&](const std::string& body, std::size_t i) -> std::size_t {
    if (body.compare(i, 2, "ab") == 0) return i + 2;
    if (i < body.size() && body[i] == 'c') return i + 1;
    if (i < body.size() && body[i] == '(') {
      std::size_t e = item_end(body, i + 1);
      if (e != std::string::npos && e < body.size() && body[e] == ')') return e + 1;
    }
    return std::string::npos;
  };
  auto count_items = [&](const std::string& body) -> int {
    int n = 0;
    for (std::size_t i = 0; i < body.size();) {
      i = item_end(body, i);
      if (i == std::string::npos) return -1;
      ++n;
    }
    return n;
  };
  auto in_language = [&](const std::string& s) {
    if (s.size() < 2) return false;
    int n = count_items(s.substr(1, s.size() - 2));
    if (s.front() == '<' && s.back() == '>') return n >= 3 && n <= 5;
    if (s.front() == '[' && s.back() == ']') return n >= 2;
    return false;
  };
  ForAllStrings("<>[]abc()", 6, [&](const std::string& s) {
    EXPECT_EQ(Accepts(*g, s), in_language(s)) << "'" << s << "'";
  });
  EXPECT_TRUE(Accepts(*g, "<abababababc>") == false);  // 6 items
  EXPECT_TRUE(Accepts(*g, "<ababcab>"));
  EXPECT_TRUE(Accepts(*g, "<((c))ab(ab)>"));
  EXPECT_TRUE(Accepts(*g, "[" + std::string(5000, 'c') + "]"));
}

TEST(EarleyTest, LargeCounterIsNotUnrolled) {
  // root ::= x{0,100000}   x ::= "a" | "bc"   : a native counter, compiled in milliseconds.
  Builder b;
  b.Rule("root", b.Rep(b.Ref("x"), 0, 100000));
  b.Rule("x", b.Alt({b.Lit("a"), b.Lit("bc")}));
  auto t0 = std::chrono::steady_clock::now();
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)->Stats().counter_rules, 1);
  EXPECT_LT((*g)->Stats().dfa_states, 50);
  Matcher m(*g);
  std::string s;
  for (int i = 0; i < 1000; ++i) s += i % 2 ? "a" : "bc";
  EXPECT_TRUE(m.AcceptString(s));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
}

TEST(EarleyTest, DeepNestingEndsInAClearError) {
  // root ::= "[" root? "]" ; 100,000 levels of '[' against the default limit.
  Builder b;
  b.Rule("root", b.Seq({b.Lit("["), b.Rep(b.Ref("root"), 0, 1), b.Lit("]")}));
  CompileOptions opts;
  opts.max_nesting_depth = 1000;
  auto g = CompileGrammarIr(Compiler(), b.g, opts);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  std::string deep(100000, '[');
  EXPECT_FALSE(m.AcceptString(deep));
  EXPECT_EQ(m.last_error().code(), StatusCode::kResourceLimit) << m.last_error().ToString();
  EXPECT_NE(m.last_error().message().find("max_nesting_depth"), std::string::npos);
  // Byte by byte: the matcher stops at the limit and stays usable.
  int accepted = 0;
  for (int i = 0; i < 100000; ++i) {
    if (!m.AcceptString("[")) break;
    ++accepted;
  }
  EXPECT_GT(accepted, 100);
  EXPECT_LE(accepted, 1001);
  EXPECT_EQ(m.last_error().code(), StatusCode::kResourceLimit);
  EXPECT_TRUE(m.AcceptString("]"));
  std::vector<std::uint32_t> mask(BitmaskWords((*g)->logits_width()));
  EXPECT_TRUE(m.FillNextTokenBitmask(mask));
  // Within the limit, depth costs nothing special.
  Matcher ok(*g);
  EXPECT_TRUE(ok.AcceptString(std::string(300, '[') + std::string(300, ']')));
  EXPECT_TRUE(ok.CanEnd());
}

TEST(EarleyTest, UnproductiveRulesAreTrimmed) {
  // root ::= "a" loop | "b"   loop ::= "x" loop   (loop never finishes): only "b".
  Builder b;
  b.Rule("root", b.Alt({b.Seq({b.Lit("a"), b.Ref("loop")}), b.Lit("b")}));
  b.Rule("loop", b.Seq({b.Lit("x"), b.Ref("loop")}));
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_FALSE(m.AcceptString("a"));
  EXPECT_TRUE(m.AcceptString("b"));
  Builder none;
  none.Rule("root", none.Seq({none.Lit("x"), none.Ref("root")}));
  auto bad = CompileGrammarIr(Compiler(), none.g);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnsatisfiable);
}

TEST(EarleyTest, FastMaskEqualsBruteForceOnLlama3) {
  // Nested lists of words and numbers with optional spaces, recursion through two rules.
  Builder b;
  b.Rule("root", b.Seq({b.Lit("["), b.Rep(b.Ref("ws"), 0, 1),
                        b.Rep(b.Seq({b.Ref("item"), b.Rep(b.Seq({b.Lit(","), b.Rep(b.Ref("ws"), 0, 1), b.Ref("item")}), 0, Expr::kUnbounded)}), 0, 1),
                        b.Lit("]")}));
  b.Rule("item", b.Alt({b.Ref("root"), b.Rep(b.Cls('a', 'z'), 1, 12), b.Rep(b.Cls('0', '9'), 1, Expr::kUnbounded),
                        b.Seq({b.Lit("\""), b.Rep(b.Alt({b.Cls(' ', '!'), b.Cls('#', 0x10FFFF)}), 0, Expr::kUnbounded), b.Lit("\"")})}));
  b.Rule("ws", b.Rep(b.Lit(" "), 1, 3));
  auto g = CompileGrammarIr(Compiler(), b.g);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  testing::WalkStats st = testing::ExactnessWalks(*g, 150, 7, 25);
  EXPECT_EQ(st.over, 0) << st.first_mismatch;
  EXPECT_EQ(st.under, 0) << st.first_mismatch;
  EXPECT_GE(st.walks, 1);
  std::printf("steps %ld walks %ld completed %ld\n", st.steps, st.walks, st.completed);
}


// Position walks run below rule edges on explicit stacks (CfgGrammar's stack walk), falling back
// to the Earley parser where stacks would not stay small. Grammars whose tokens cross rule
// boundaries through counters over rules, nullable rules, recursion, left recursion and
// ambiguity: the fast mask must equal brute force at every step.
TEST(EarleyTest, WalksAcrossRuleEdgesEqualBruteForce) {
  struct Case {
    const char* name;
    Builder b;
  };
  std::vector<Case> cases;
  {
    // JSON-like objects: keys and numbers as counters over rules, nullable ws as a counter of a
    // rule, recursion through value.
    Builder b;
    b.Rule("root", b.Seq({b.Lit("{"), b.Ref("ws"), b.Rep(b.Ref("members"), 0, 1), b.Ref("ws"),
                          b.Lit("}")}));
    b.Rule("members", b.Seq({b.Ref("member"),
                             b.Rep(b.Seq({b.Ref("ws"), b.Lit(","), b.Ref("ws"), b.Ref("member")}),
                                   0, Expr::kUnbounded)}));
    b.Rule("member", b.Seq({b.Ref("key"), b.Ref("ws"), b.Lit(":"), b.Ref("ws"), b.Ref("value")}));
    b.Rule("key", b.Seq({b.Lit("\""), b.Rep(b.Ref("letter"), 1, 20), b.Lit("\"")}));
    b.Rule("letter", b.Cls('a', 'z'));
    b.Rule("value", b.Alt({b.Ref("num"), b.Ref("key"), b.Ref("root"), b.Ref("list")}));
    b.Rule("num", b.Rep(b.Ref("digit"), 1, 300));
    b.Rule("digit", b.Cls('0', '9'));
    b.Rule("list", b.Seq({b.Lit("["), b.Ref("ws"),
                          b.Rep(b.Seq({b.Ref("value"),
                                       b.Rep(b.Seq({b.Ref("ws"), b.Lit(","), b.Ref("ws"),
                                                    b.Ref("value")}),
                                             0, Expr::kUnbounded)}),
                                0, 1),
                          b.Ref("ws"), b.Lit("]")}));
    b.Rule("ws", b.Rep(b.Ref("sp"), 0, 3));
    b.Rule("sp", b.Alt({b.Lit(" "), b.Lit("\n")}));
    cases.push_back({"objects", std::move(b)});
  }
  {
    // Left-recursive arithmetic: the stack walk gives up, the Earley parser walks.
    Builder b;
    b.Rule("root", b.Ref("expr"));
    b.Rule("expr", b.Alt({b.Seq({b.Ref("expr"), b.Lit("+"), b.Ref("term")}),
                          b.Seq({b.Ref("expr"), b.Lit("-"), b.Ref("term")}), b.Ref("term")}));
    b.Rule("term", b.Alt({b.Seq({b.Ref("term"), b.Lit("*"), b.Ref("factor")}), b.Ref("factor")}));
    b.Rule("factor", b.Alt({b.Rep(b.Cls('0', '9'), 1, 6), b.Seq({b.Lit("("), b.Ref("expr"), b.Lit(")")}),
                            b.Seq({b.Lit("-"), b.Ref("factor")})}));
    cases.push_back({"left-recursive", std::move(b)});
  }
  {
    // Ambiguous splits between two nullable counters over an ambiguous rule.
    Builder b;
    b.Rule("root", b.Seq({b.Ref("a"), b.Ref("a"), b.Rep(b.Seq({b.Lit(" "), b.Ref("a"), b.Ref("a")}), 0, 40)}));
    b.Rule("a", b.Rep(b.Ref("x"), 0, 5));
    b.Rule("x", b.Alt({b.Lit("ab"), b.Lit("a"), b.Lit("b"), b.Lit("ba")}));
    cases.push_back({"ambiguous", std::move(b)});
  }
  for (Case& c : cases) {
    auto g = CompileGrammarIr(Compiler(), c.b.g);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    // Brute force costs a parse per token: fewer steps under the sanitizers (scale 0.05).
    const long steps = std::max(40L, static_cast<long>(150 * testing::TestScale()));
    testing::WalkStats st = testing::ExactnessWalks(*g, steps, 11, 25);
    EXPECT_EQ(st.over, 0) << c.name << ": " << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << c.name << ": " << st.first_mismatch;
    EXPECT_GE(st.walks, 1) << c.name;
    std::printf("%s: steps %ld walks %ld completed %ld\n", c.name, st.steps, st.walks, st.completed);
  }
}

}  // namespace
}  // namespace lockstep
