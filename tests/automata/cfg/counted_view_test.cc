// Counted views (TokenTrie::Counted): a counter rule over a plain byte unit, such as a JSON
// string with minLength/maxLength, takes its positions from one precomputed run of the unit over
// the vocabulary instead of a walk of the whole trie per count. Checked on real vocabularies:
// every count's position equals the whole-trie walk's, the views apply where they should and
// not where a unit may go on after finishing or start where the counter may end, and masks along
// random walks equal brute force.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_grammar_peer.h"
#include "automata/cfg/cfg_program.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

struct Case {
  const char* text;
  bool schema;
  bool has_view;  // some counter rule of it has a view
};

// Schemas whose strings count (minLength/maxLength: the unit is one JSON character, escapes and
// UTF-8 included), and grammars forced to counters (max_unrolled_states = 1).
const Case kCases[] = {
    {R"({"type": "object", "properties": {"key": {"type": "string", "minLength": 52,
        "maxLength": 52}, "password": {"type": "string", "minLength": 8, "maxLength": 2048}},
        "required": ["password", "key"], "additionalProperties": false})",
     true, true},
    {R"({"type": "array", "items": {"type": "string", "maxLength": 3}, "maxItems": 4})", true, true},
    {R"({"type": "object", "properties": {"id": {"type": "string", "minLength": 1}}})", true, true},
    {R"(root ::= "\"" [a-z]{2,5} "\"" | "<" ("ab" | "c"){0,40} ">")", false, true},
    // The unit "a" may go on ("ab"): no view, the walk.
    {R"(root ::= ("a" | "ab" | "b"){2,50} ";")", false, false},
    // A unit starts with "x", which may also follow the counter: no view.
    {R"(root ::= [a-z]{1,30} "x")", false, false},
};

std::shared_ptr<const CompiledGrammar> Compile(const GrammarCompiler& c, const Case& k) {
  CompileOptions o;
  o.max_unrolled_states = 1;
  auto g = k.schema ? c.CompileSchema(k.text, o) : c.CompileGrammar(k.text, o);
  EXPECT_TRUE(g.ok()) << k.text << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

class CountedViewTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CountedViewTest, EveryCountEqualsTheWholeTrieWalk) {
  auto vocab = Vocabulary::Load(GetParam());
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  long compared = 0;
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.text);
    auto g = Compile(compiler, k);
    ASSERT_NE(g, nullptr);
    const CfgGrammar& cfg = *CfgOf(*g);
    const CfgProgram& p = cfg.program();
    bool any_view = false;
    for (std::int32_t r = 0; r < p.NumRules(); ++r) {
      if (!p.IsCounter(r)) continue;
      const bool view = CfgGrammarPeer(cfg).HasCountedView(r);
      any_view |= view;
      if (!view) continue;
      const CfgProgram::RuleInfo& info = p.rules[r];
      // The counts around the minimum and before the maximum (40 each at full scale: past the
      // longest tokens of such strings), where the positions differ.
      const std::int32_t span = std::max(4, static_cast<std::int32_t>(40 * testing::TestScale()));
      const std::int32_t last = info.max == CfgProgram::kUnbounded
                                    ? info.min + 2
                                    : std::min(info.max - 1, info.min + span);
      for (std::int32_t count = 0; count <= last; ++count) {
        const std::unique_ptr<CfgPosition> a =
            CfgGrammarPeer(cfg).FreshCounterPosition(r, count, true);
        const std::unique_ptr<CfgPosition> b =
            CfgGrammarPeer(cfg).FreshCounterPosition(r, count, false);
        EXPECT_TRUE(a->SameContent(*b)) << "rule " << info.name << " count " << count;
        ++compared;
      }
      if (info.max != CfgProgram::kUnbounded) {
        for (std::int32_t count = std::max(0, info.max - span); count < info.max; ++count) {
          EXPECT_TRUE(CfgGrammarPeer(cfg)
                          .FreshCounterPosition(r, count, true)
                          ->SameContent(*CfgGrammarPeer(cfg).FreshCounterPosition(r, count, false)))
              << "rule " << info.name << " count " << count;
          ++compared;
        }
      }
    }
    EXPECT_EQ(any_view, k.has_view);
  }
  EXPECT_GT(compared, 20);
  std::printf("%s: %ld counter positions compared with whole-trie walks\n", GetParam(), compared);
}

TEST_P(CountedViewTest, MasksEqualBruteForce) {
  auto vocab = Vocabulary::Load(GetParam());
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  for (const Case& k : kCases) {
    SCOPED_TRACE(k.text);
    auto g = Compile(compiler, k);
    ASSERT_NE(g, nullptr);
    const long steps = std::max(10L, static_cast<long>(60 * testing::TestScale()));
    const testing::WalkStats st = testing::ExactnessWalks(g, steps, 7, 70);
    EXPECT_EQ(st.over, 0) << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << st.first_mismatch;
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, CountedViewTest, ::testing::Values("llama3", "qwen2.5"));

}  // namespace
}  // namespace lockstep
