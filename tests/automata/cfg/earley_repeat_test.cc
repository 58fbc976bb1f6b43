// Counted repetitions of ambiguous or nullable bodies (they must never hang): the grammars of
// schemas/grammars/pathological, each checked for its result, never its time: 10 KB of its
// language accepted, a string outside refused at the right byte, CanEnd, the mask after the
// 10 KB equal to brute force (every token tried), every short string against an independent
// recogniser, and short random walks with no mask mismatch on Llama-3. Then the exactness of the
// parser's bounded sets (saturated counts, merged and subsumed origins), by comparing grammars
// run as counter rules with the same languages run as automata or written out, on every short
// string; and the per-byte item budget.
#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

const GrammarCompiler& Compiler() {
  static GrammarCompiler* c = [] {
    Result<std::shared_ptr<const Vocabulary>> v = Vocabulary::Load("llama3");
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    return new GrammarCompiler(*v);
  }();
  return *c;
}

std::shared_ptr<const CompiledGrammar> Pathological(const std::string& name,
                                                    const CompileOptions& options = {}) {
  const std::string text =
      testing::ReadFile(testing::SourceDataDir() + "/grammars/pathological/" + name + ".gbnf");
  EXPECT_FALSE(text.empty()) << name << " is missing";
  auto g = Compiler().CompileGrammar(text, options);
  EXPECT_TRUE(g.ok()) << name << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::string Repeat(const std::string& unit, std::size_t copies) {
  std::string s;
  for (std::size_t i = 0; i < copies; ++i) s += unit;
  return s;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& s) {
  Matcher m(g);
  return m.AcceptString(s) && m.CanEnd();
}

// Calls f on every string over `alphabet` of length at most n.
void ForAllStrings(const std::string& alphabet, int n,
                   const std::function<void(const std::string&)>& f) {
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

struct Shape {
  std::string name;
  std::function<bool(const std::string&)> in_language;  // an independent recogniser
  std::string alphabet;                                 // short strings over it...
  int max_len;                                          // ...up to this length
  std::string member;                                   // about 10 KB of the language
  std::string refused;  // its last byte is the first one outside every string of the language
  long walk_steps;
};

void CheckShape(const Shape& s) {
  SCOPED_TRACE(s.name);
  auto g = Pathological(s.name);
  ASSERT_NE(g, nullptr);
  // Every short string, against the recogniser.
  int members = 0;
  ForAllStrings(s.alphabet, s.max_len, [&](const std::string& t) {
    const bool in = s.in_language(t);
    members += in;
    EXPECT_EQ(Accepts(g, t), in) << "'" << t << "'";
  });
  // 10 KB of the language, then the mask against brute force.
  ASSERT_TRUE(s.in_language(s.member));
  Matcher m(g);
  ASSERT_TRUE(m.AcceptString(s.member)) << m.last_error().ToString();
  EXPECT_TRUE(m.CanEnd());
  std::vector<std::uint32_t> fast(BitmaskWords(g->logits_width()));
  ASSERT_TRUE(m.FillNextTokenBitmask(fast));
  const testing::Mask slow = testing::BruteForceMask(m);
  long over = 0, under = 0;
  for (std::size_t w = 0; w < fast.size(); ++w) {
    over += __builtin_popcount(fast[w] & ~slow[w]);
    under += __builtin_popcount(slow[w] & ~fast[w]);
  }
  EXPECT_EQ(over, 0);
  EXPECT_EQ(under, 0);
  EXPECT_GT(testing::AllowedIds(slow).size(), 0u);
  // Refused at the right byte, and for no other reason than the language.
  ASSERT_FALSE(s.in_language(s.refused));
  Matcher r(g);
  ASSERT_TRUE(r.AcceptString(s.refused.substr(0, s.refused.size() - 1)))
      << r.last_error().ToString();
  EXPECT_FALSE(r.AcceptString(s.refused.substr(s.refused.size() - 1)));
  EXPECT_TRUE(r.last_error().ok()) << r.last_error().ToString();
  EXPECT_FALSE(Matcher(g).AcceptString(s.refused));
  // Short random walks: fast masks against brute force.
  const long steps = std::max(10L, static_cast<long>(s.walk_steps * testing::TestScale()));
  testing::WalkStats st = testing::ExactnessWalks(g, steps, 21, 20);
  EXPECT_EQ(st.over, 0) << st.first_mismatch;
  EXPECT_EQ(st.under, 0) << st.first_mismatch;
  std::printf("%s: %d short members, %zu-byte member, walks %ld steps %ld completed %ld\n",
              s.name.c_str(), members, s.member.size(), st.walks, st.steps, st.completed);
}

bool NoX(const std::string& s) { return s.find('x') == std::string::npos; }

// Top-level blocks of a string of letters and parenthesised groups: letter runs (with their
// letters) and groups. False if a group does not close or holds other bytes; `group` checks a
// group's text (its parentheses included).
struct Blocks {
  long runs = 0, run_letters = 0, groups = 0;
};
bool ScanBlocks(const std::string& s, const std::function<bool(const std::string&)>& group,
                Blocks* out) {
  for (std::size_t i = 0; i < s.size();) {
    if (s[i] >= 'a' && s[i] <= 'z') {
      ++out->runs;
      while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') ++i, ++out->run_letters;
    } else if (s[i] == '(') {
      std::size_t j = i;
      int depth = 0;
      do {
        if (s[j] == '(') {
          ++depth;
        } else if (s[j] == ')') {
          --depth;
        } else if (s[j] < 'a' || s[j] > 'z') {
          return false;
        }
        ++j;
      } while (j < s.size() && depth > 0);
      if (depth != 0 || !group(s.substr(i, j - i))) return false;
      ++out->groups;
      i = j;
    } else {
      return false;
    }
  }
  return true;
}
// "(" * n, letters (at least `min_letters`), ")" * n, n >= 1.
bool NestedWord(const std::string& g, std::size_t min_letters) {
  std::size_t n = 0;
  while (n < g.size() && g[n] == '(') ++n;
  std::size_t e = n;
  while (e < g.size() && g[e] >= 'a' && g[e] <= 'z') ++e;
  return n >= 1 && e - n >= min_letters && g.size() == e + n &&
         g.find_first_not_of(')', e) == std::string::npos;
}

TEST(EarleyRepeatTest, PlusInCounter) {
  CheckShape({"plus_in_counter", NoX, "ax ", 6, Repeat("lorem ipsum dolor sit amet, ", 366),
              Repeat("lorem ipsum ", 400) + "x", 40});
}

TEST(EarleyRepeatTest, NullableBodyCountedTwice) {
  CheckShape({"star_in_counter_2deep", NoX, "ax ", 6, Repeat("lorem ipsum, ", 788),
              Repeat("lorem ipsum ", 400) + "x", 40});
}

TEST(EarleyRepeatTest, NullableBodyUnderSixCounters) {
  CheckShape({"star_in_counter_6deep", NoX, "ax ", 6, Repeat("lorem ipsum, ", 788),
              Repeat("lorem ipsum ", 400) + "x", 40});
}

TEST(EarleyRepeatTest, AmbiguousPiecesCounted) {
  auto in = [](const std::string& s) {
    if (s.size() < 3 || s.find_first_not_of("ab") != std::string::npos) return false;
    long pairs = 0;
    for (std::size_t i = 0; i + 1 < s.size(); ++i) pairs += s[i] == 'a' && s[i + 1] == 'b';
    return static_cast<long>(s.size()) - pairs <= 6000;
  };
  // 6,000 "ab" use every piece: one more "a" can never fit.
  CheckShape({"pieces_counted", in, "abc", 7, Repeat("ab", 5120), Repeat("ab", 6000) + "a", 40});
}

TEST(EarleyRepeatTest, OptionalCounted) {
  auto in = [](const std::string& s) {
    return s.size() <= 20000 && s.find_first_not_of('x') == std::string::npos;
  };
  CheckShape(
      {"optional_counted", in, "xy", 8, std::string(10240, 'x'), std::string(20001, 'x'), 30});
}

TEST(EarleyRepeatTest, AmbiguousPlusCountedWithMinimum) {
  auto in = [](const std::string& s) {
    return s.size() >= 2 && s.find_first_not_of('a') == std::string::npos;
  };
  CheckShape({"plus_of_choice_counted", in, "ab", 8, std::string(10240, 'a'),
              std::string(5000, 'a') + "b", 30});
}

TEST(EarleyRepeatTest, LargeMinimum) {
  // Code points, not bytes: the member's are ASCII.
  auto in = [](const std::string& s) { return NoX(s) && s.size() >= 300; };
  Shape shape{"large_min",
              in,
              "ax",
              8,
              Repeat("lorem ipsum dolor sit amet, ", 366),
              std::string(120, 'a') + "x",
              30};
  CheckShape(shape);
  // Short strings are no members: the count is checked at the end.
  auto g = Pathological("large_min");
  EXPECT_FALSE(Accepts(g, std::string(299, 'a')));
  EXPECT_TRUE(Accepts(g, std::string(300, 'a')));
  EXPECT_TRUE(Accepts(g, std::string(299, 'a') + "\xC3\xA9"));
  EXPECT_FALSE(Accepts(g, std::string(298, 'a') + "\xC3\xA9"));
}

TEST(EarleyRepeatTest, LargeMinimumOverARule) {
  auto in = [](const std::string& s) {
    Blocks b;
    if (!ScanBlocks(
            s, [](const std::string& g) { return NestedWord(g, 1); }, &b))
      return false;
    return b.runs + b.groups <= 400 && b.run_letters + b.groups >= 300;
  };
  const std::string word = Repeat("loremipsum", 90);
  CheckShape({"large_min_rule", in, "a()", 7, Repeat(word + "((dolor))", 11),
              Repeat("a(b)", 200) + "c", 20});
  auto g = Pathological("large_min_rule");
  EXPECT_FALSE(Accepts(g, std::string(299, 'a')));
  EXPECT_TRUE(Accepts(g, std::string(299, 'a') + "(b)"));
  EXPECT_FALSE(Accepts(g, Repeat("(a)", 299)));
  EXPECT_TRUE(Accepts(g, Repeat("(a)", 400)));
  EXPECT_FALSE(Accepts(g, Repeat("(a)", 401)));
}

TEST(EarleyRepeatTest, AmbiguousRecursiveRuleCounted) {
  auto in = [](const std::string& s) {
    if (s.empty() || s.back() != '.') return false;
    Blocks b;
    const std::string body = s.substr(0, s.size() - 1);
    if (!ScanBlocks(
            body, [](const std::string&) { return true; }, &b))
      return false;
    return b.runs + b.groups >= 1 && b.runs + b.groups <= 200;
  };
  std::string unit = "(";
  unit += Repeat("ab(cd)", 198);
  unit += ")efgh";
  unit += Repeat("ij", 48);
  // 200 blocks, then a 201st.
  CheckShape({"rule_ambiguous_counted", in, "a().", 6, Repeat(unit, 8) + ".",
              Repeat("ab(c)", 100) + "d", 20});
}

TEST(EarleyRepeatTest, NestedCountersMixingNullableBodies) {
  auto in = [](const std::string& s) {
    if (s.empty()) return true;
    if (s.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789") != std::string::npos ||
        !std::isdigit(static_cast<unsigned char>(s.back()))) {
      return false;
    }
    long runs = 0;
    for (std::size_t i = 0; i < s.size();) {
      if (!std::isdigit(static_cast<unsigned char>(s[i]))) {
        ++i;
        continue;
      }
      std::size_t j = i;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j - i < 2) return false;
      ++runs;
      i = j;
    }
    return runs <= 300;
  };
  CheckShape({"nested_mixed", in, "a1", 8,
              Repeat("abcdefghij1234567890123456789012345678901234567890", 205),
              Repeat("a12", 300) + "b", 30});
}

TEST(EarleyRepeatTest, LeftRecursiveBodyCounted) {
  auto in = [](const std::string& s) {
    return !s.empty() && s[0] >= 'a' && s[0] <= 'z' &&
           s.find_first_not_of("abcdefghijklmnopqrstuvwxyz,") == std::string::npos;
  };
  CheckShape({"left_recursive_counted", in, "a,-", 7, Repeat("abc,def,", 1280),
              Repeat("a,b", 1000) + "-", 30});
}

TEST(EarleyRepeatTest, NullableRecursiveRuleCounted) {
  auto in = [](const std::string& s) {
    Blocks b;
    if (!ScanBlocks(
            s, [](const std::string& g) { return NestedWord(g, 0); }, &b))
      return false;
    return b.runs + b.groups <= 5000;
  };
  CheckShape({"nullable_rule_counted", in, "a()", 7, Repeat("((ab))cd", 1280),
              Repeat("(ab)", 100) + "(ab(", 30});
}

// What the lowering makes of them: pure terminals become one byte automaton when it stays small
// (the counter would keep an item per count), rule bodies stay counters.
TEST(EarleyRepeatTest, PureTerminalRepetitionsBecomeAutomata) {
  for (const char* name : {"plus_in_counter", "star_in_counter_2deep", "star_in_counter_6deep",
                           "plus_of_choice_counted", "large_min", "nested_mixed"}) {
    auto g = Pathological(name);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(g->Stats().counter_rules, 0) << name;
  }
  // Minimal automata that must count past the budget stay counters.
  for (const char* name :
       {"pieces_counted", "optional_counted", "large_min_rule", "rule_ambiguous_counted",
        "left_recursive_counted", "nullable_rule_counted"}) {
    auto g = Pathological(name);
    ASSERT_NE(g, nullptr);
    EXPECT_GE(g->Stats().counter_rules, 1) << name;
  }
}

// Depth-first over every string of `alphabet` up to `depth` bytes: both matchers take or refuse
// each byte alike and agree on CanEnd everywhere.
void CompareTrees(Matcher& a, Matcher& b, const std::string& alphabet, int depth, std::string& path,
                  long* nodes, long* mismatches) {
  ++*nodes;
  if (a.CanEnd() != b.CanEnd() && ++*mismatches <= 5) {
    ADD_FAILURE() << "CanEnd differs after '" << path << "'";
  }
  if (depth == 0) return;
  for (char c : alphabet) {
    const std::string byte(1, c);
    const bool ta = a.AcceptString(byte), tb = b.AcceptString(byte);
    if (ta != tb && ++*mismatches <= 5) {
      ADD_FAILURE() << "'" << path << c << "': counters " << ta << ", reference " << tb;
    }
    if (ta && tb) {
      path.push_back(c);
      CompareTrees(a, b, alphabet, depth - 1, path, nodes, mismatches);
      path.pop_back();
    }
    if (ta) a.Rollback(1);
    if (tb) b.Rollback(1);
  }
}

// The parser's bounded sets against plain automata: each grammar runs as counter rules (an
// unrolling budget of 1 state keeps every repetition a counter) and, as the reference, with the
// default budget, where it is unrolled into one automaton (or, over rules, written out by hand).
// Counts saturated too early, origins merged or subsumed wrongly, would take or refuse some byte
// of some short string differently.
TEST(EarleyRepeatTest, CounterRulesAgreeWithAutomataOnEveryShortString) {
  struct Case {
    const char* counters;
    const char* reference;  // null: the same grammar with the default budget
    const char* alphabet;
    int depth;
  };
  const Case cases[] = {
      {R"(root ::= ("a" | "ab" | "b"){2,5})", nullptr, "abc", 12},
      {R"(root ::= ([ab]+ "c"?){2,4})", nullptr, "abc", 8},
      {R"(root ::= (("a"?){0,3} "b"){1,3})", nullptr, "abc", 12},
      {R"(root ::= ((("a" | "aa")+){2,3} "b"){1,2})", nullptr, "ab", 16},
      {R"(root ::= (([ab]*){2,3} "c" ([ab]+){2,3}){1,2})", nullptr, "abc", 8},
      {R"(root ::= (((("a"?){0,2} "b"?){0,2}){0,2} "c"){1,3})", nullptr, "abc", 8},
      {R"(root ::= ((("a" | "ab"){2,3}){2,3} "c"?){1,2})", nullptr, "abc", 12},
      {"root ::= w{2,3}\nw ::= \"a\" | \"a\" w | \"(\" w \")\"",
       "root ::= w w | w w w\nw ::= \"a\" | \"a\" w | \"(\" w \")\"", "a()", 10},
      {"root ::= l{2,3} \"c\"\nl ::= l \"a\" | \"a\" | \"b\"",
       "root ::= l l \"c\" | l l l \"c\"\nl ::= l \"a\" | \"a\" | \"b\"", "abc", 10},
      {"root ::= n{1,3} \"c\"\nn ::= \"a\"* | \"(\" n \")\"",
       "root ::= n \"c\" | n n \"c\" | n n n \"c\"\nn ::= \"a\"* | \"(\" n \")\"", "a()c", 9},
  };
  CompileOptions as_counters;
  as_counters.max_unrolled_states = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.counters);
    auto counters = Compiler().CompileGrammar(c.counters, as_counters);
    ASSERT_TRUE(counters.ok()) << counters.status().ToString();
    EXPECT_GE((*counters)->Stats().counter_rules, 1);
    auto reference = Compiler().CompileGrammar(c.reference ? c.reference : c.counters);
    ASSERT_TRUE(reference.ok()) << reference.status().ToString();
    EXPECT_EQ((*reference)->Stats().counter_rules, 0);
    Matcher a(*counters), b(*reference);
    std::string path;
    long nodes = 0, mismatches = 0;
    CompareTrees(a, b, c.alphabet, c.depth, path, &nodes, &mismatches);
    EXPECT_EQ(mismatches, 0);
    EXPECT_GT(nodes, 30);
    std::printf("%ld strings: %s\n", nodes, c.counters);
  }
}

// The same grammars' masks as counters, against brute force.
TEST(EarleyRepeatTest, CounterRuleMasksEqualBruteForce) {
  CompileOptions as_counters;
  as_counters.max_unrolled_states = 1;
  for (const char* text : {R"(root ::= ("a" | "ab" | "b"){2,50} ("," ("a" | "ab" | "b"){2,50})*)",
                           R"(root ::= (((("a"?){0,9} " "?){0,9}){0,9} "c"){1,30})",
                           R"(root ::= (([a-z]+ " "?){3,90} "."){1,40})"}) {
    SCOPED_TRACE(text);
    auto g = Compiler().CompileGrammar(text, as_counters);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_GE((*g)->Stats().counter_rules, 1);
    const long steps = std::max(10L, static_cast<long>(40 * testing::TestScale()));
    testing::WalkStats st = testing::ExactnessWalks(*g, steps, 5, 25);
    EXPECT_EQ(st.over, 0) << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << st.first_mismatch;
  }
}

// A byte whose parse takes more than max_earley_items_per_byte items is refused with a resource
// limit naming the budget and the byte, the matcher unchanged and usable; the default budget
// takes the same input. (Below its minimum, a counter over an ambiguous rule keeps one item per
// count: a few hundred per byte here.)
TEST(EarleyRepeatTest, ItemBudgetRefusesABytePastIt) {
  const std::string text = "root ::= w{300,400}\nw ::= [a-z]+ | \"(\" w \")\"";
  CompileOptions tight;
  tight.max_earley_items_per_byte = 200;
  auto g = Compiler().CompileGrammar(text, tight);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  int taken = 0;
  while (taken < 1000 && m.AcceptString("a")) ++taken;
  EXPECT_GT(taken, 10);
  EXPECT_LT(taken, 300);
  EXPECT_EQ(m.last_error().code(), StatusCode::kResourceLimit) << m.last_error().ToString();
  EXPECT_NE(m.last_error().message().find("max_earley_items_per_byte"), std::string::npos);
  EXPECT_EQ(m.last_error().location(), "byte " + std::to_string(taken));
  EXPECT_EQ(m.NumSteps(), taken);
  EXPECT_TRUE(m.Rollback(taken - 2));
  EXPECT_TRUE(m.AcceptString("(b)"));
  EXPECT_TRUE(m.last_error().ok());
  // A budget of one item refuses any byte.
  CompileOptions one;
  one.max_earley_items_per_byte = 1;
  auto g1 = Compiler().CompileGrammar(text, one);
  ASSERT_TRUE(g1.ok());
  Matcher m1(*g1);
  EXPECT_FALSE(m1.AcceptString("a"));
  EXPECT_EQ(m1.last_error().code(), StatusCode::kResourceLimit);
  EXPECT_EQ(m1.last_error().location(), "byte 0");
  // The default budget takes it all.
  auto roomy = Compiler().CompileGrammar(text);
  ASSERT_TRUE(roomy.ok());
  EXPECT_TRUE(Accepts(*roomy, std::string(2000, 'a')));
}

// A thousand recursive alternatives open side by side: after "x(" every b_i waits on itself
// again, and every one of them takes the next byte ("y..."). Each item leaving that set looked
// up its origin class by scanning the whole set, twice: quadratic per byte, so that past 157
// alternatives the default budget refused a valid byte. Per byte the parse now takes a few
// items per alternative: 10 per alternative is room enough. (Each of those items also looks up
// its set's origin entry for its rule: by an index once the set has more than 16, not along the
// list.)
TEST(EarleyRepeatTest, AThousandRecursiveAlternativesOpenSideBySide) {
  constexpr int kAlternatives = 1000;
  std::string text = "root ::= a0";
  for (int i = 1; i < kAlternatives; ++i) text += " | a" + std::to_string(i);
  text += "\n";
  for (int i = 0; i < kAlternatives; ++i) {
    const std::string n = std::to_string(i);
    text += "a" + n + " ::= \"x\" b" + n + "\nb" + n + " ::= \"y" + n + "\" | \"(\" b" + n +
            " \")\"\n";
  }
  CompileOptions linear;
  linear.max_earley_items_per_byte = 10 * kAlternatives;
  for (const CompileOptions& o : {CompileOptions{}, linear}) {
    auto g = Compiler().CompileGrammar(text, o);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    Matcher m(*g);
    EXPECT_TRUE(m.AcceptString("x((")) << m.last_error().ToString();
    EXPECT_TRUE(m.AcceptString("((y999))))")) << m.last_error().ToString();
    EXPECT_TRUE(m.CanEnd());
    EXPECT_TRUE(m.last_error().ok()) << m.last_error().ToString();
    EXPECT_TRUE(Accepts(*g, "x(y0)"));
    EXPECT_TRUE(Accepts(*g, "xy500"));
    EXPECT_FALSE(Accepts(*g, "x((y999)"));
    // Back to "x((" and on: the sets popped take their origin entries (and the index of a
    // set's entries, past 16) with them.
    ASSERT_TRUE(m.Rollback(1));
    EXPECT_TRUE(m.AcceptString("y7)"));
    EXPECT_FALSE(m.CanEnd());
    EXPECT_TRUE(m.AcceptString(")"));
    EXPECT_TRUE(m.CanEnd());
    Matcher bad(*g);
    EXPECT_TRUE(bad.AcceptString("x(y5)"));
    EXPECT_FALSE(bad.AcceptString(")"));  // one ")" too many: refused, not over a budget
    EXPECT_TRUE(bad.last_error().ok()) << bad.last_error().ToString();
  }
}

}  // namespace
}  // namespace lockstep
