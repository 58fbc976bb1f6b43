// Classify: exact label distributions summed over every tokenisation. Probabilities sum to 1
// (or the floor and budget masses are reported), they equal an independent brute-force sum over
// token paths, and they match the frequencies of 100,000 seeded samples (chi-square); choices on
// the real Llama-3 vocabulary.
#include "lockstep/classify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "decoder/decode_test_util.h"
#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "test_data.h"

namespace lockstep {
namespace {

// P(text) summed over token paths, by depth-first search with softmax in double.
void Enumerate(LogitsSource& src, const Vocabulary& vocab, Matcher m, std::vector<TokenId> path,
               double prob, std::map<std::string, double>* out) {
  const std::int32_t width = src.width();
  std::vector<std::uint32_t> mask(BitmaskWords(width));
  m.FillNextTokenBitmask(mask);
  std::vector<float> z(width);
  src.Logits(path, z);
  double sum = 0;
  for (TokenId t = 0; t < width; ++t) {
    if ((mask[t / 32] >> (t % 32)) & 1) sum += std::exp(double{z[t]});
  }
  for (TokenId t = 0; t < width; ++t) {
    if (!((mask[t / 32] >> (t % 32)) & 1)) continue;
    const double p = prob * std::exp(double{z[t]}) / sum;
    Matcher next = m.Fork();
    ASSERT_TRUE(next.AcceptToken(t));
    if (next.IsTerminated()) {
      (*out)[*vocab.Decode(path)] += p;
      continue;
    }
    auto longer = path;
    longer.push_back(t);
    Enumerate(src, vocab, next, longer, p, out);
  }
}

TEST(ClassifyTest, SumsToOneAndEqualsTheBruteForceSumOverTokenisations) {
  auto grammar = testing::CompileTiny("(a|b){1,3}");
  ASSERT_NE(grammar, nullptr);
  UniformSource src(grammar->logits_width(), 31);
  auto r = Classify(src, Matcher(grammar), {}, {}, {.floor = 0});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->labels.size(), 14u);  // every string of 1 to 3 letters over {a, b}
  EXPECT_NEAR(r->total(), 1.0, 1e-6);
  EXPECT_EQ(r->floor_mass, 0);
  EXPECT_EQ(r->budget_mass, 0);
  double sum = 0;
  for (const auto& l : r->labels) sum += l.probability;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  std::map<std::string, double> exact;
  Enumerate(src, *testing::TinyVocab(), Matcher(grammar), {}, 1.0, &exact);
  for (const auto& l : r->labels) EXPECT_NEAR(l.probability, exact[l.label], 1e-6) << l.label;
  for (std::size_t i = 1; i < r->labels.size(); ++i) {
    EXPECT_GE(r->labels[i - 1].probability, r->labels[i].probability);
  }
  // "aba": a.b.a, ab.a, a.ba; "bab": b.a.b, ba.b, b.ab.
  for (const auto& l : r->labels) {
    if (l.label == "aba" || l.label == "bab") {
      EXPECT_EQ(l.tokenizations, 3) << l.label;
    }
    if (l.label == "a") {
      EXPECT_EQ(l.tokenizations, 1);
    }
  }
}

TEST(ClassifyTest, MatchesSampledFrequencies) {
  auto grammar = testing::CompileTiny("(a|b){1,3}");
  ASSERT_NE(grammar, nullptr);
  UniformSource src(grammar->logits_width(), 31);
  auto r = Classify(src, Matcher(grammar), {}, {}, {});
  ASSERT_TRUE(r.ok());
  std::map<std::string, double> expected;
  for (const auto& l : r->labels) expected[l.label] = l.probability;
  const std::int64_t n = static_cast<std::int64_t>(100000 * std::min(1.0, testing::TestScale()));
  std::map<std::string, std::int64_t> counts;
  GenerateOptions opt;
  opt.jump_forward = false;  // jump-forward fixes a tokenisation: not the model's distribution
  opt.sampler.seed = 8;
  for (std::int64_t i = 0; i < n; ++i) {
    Matcher m(grammar);
    opt.sequence_id = static_cast<std::uint64_t>(i);
    auto g = Generate(src, m, {}, opt);
    ASSERT_TRUE(g.ok());
    ++counts[g->text];
  }
  auto chi = testing::ChiSquare(counts, expected, n);
  std::printf("[classify vs sampling] chi2 %.2f dof %d p %.4f over %lld draws\n", chi.statistic,
              chi.dof, chi.p_value, static_cast<long long>(n));
  EXPECT_GT(chi.p_value, 0.001);
}

TEST(ClassifyTest, FloorAndNodeBudgetReportTheMassTheyLeave) {
  auto grammar = testing::CompileTiny("(a|b){1,6}");
  ASSERT_NE(grammar, nullptr);
  UniformSource src(grammar->logits_width(), 31);
  auto full = Classify(src, Matcher(grammar), {}, {}, {.floor = 0});
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(full->labels.size(), 126u);
  EXPECT_NEAR(full->total(), 1.0, 1e-6);

  auto floored = Classify(src, Matcher(grammar), {}, {}, {.floor = 1e-3});
  ASSERT_TRUE(floored.ok());
  EXPECT_GT(floored->floor_mass, 0);
  EXPECT_LT(floored->nodes, full->nodes);
  EXPECT_NEAR(floored->total(), 1.0, 1e-6);

  auto budget = Classify(src, Matcher(grammar), {}, {}, {.floor = 0, .max_nodes = 20});
  ASSERT_TRUE(budget.ok());
  EXPECT_EQ(budget->nodes, 20);
  EXPECT_GT(budget->budget_mass, 0);
  EXPECT_NEAR(budget->total(), 1.0, 1e-6);
  // Best-first: every label found under the budget has at most its full probability.
  for (const auto& l : budget->labels) {
    auto it = std::find_if(full->labels.begin(), full->labels.end(),
                           [&](const LabelProbability& f) { return f.label == l.label; });
    ASSERT_NE(it, full->labels.end());
    EXPECT_LE(l.probability, it->probability + 1e-12);
  }
}

TEST(ClassifyTest, ChoicesOnLlama3) {
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  std::vector<std::string> choices = {"positive", "negative", "neutral", "n/a (unknown)"};
  auto regex = ChoicesRegex(choices);
  ASSERT_TRUE(regex.ok());
  GrammarCompiler compiler(*vocab);
  auto grammar = compiler.CompileRegex(*regex);
  ASSERT_TRUE(grammar.ok()) << *regex << ": " << grammar.status().ToString();
  UniformSource src((*vocab)->logits_width(), 3);
  auto r = Classify(src, Matcher(*grammar), {}, choices, {.floor = 0});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->labels.size(), 4u);
  double sum = 0;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    EXPECT_EQ(r->labels[i].label, choices[i]);
    EXPECT_GT(r->labels[i].probability, 0);
    EXPECT_GT(r->labels[i].tokenizations, 1) << choices[i];
    sum += r->labels[i].probability;
  }
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(r->other_mass, 0);
  EXPECT_FALSE(ChoicesRegex({}).ok());
}

}  // namespace
}  // namespace lockstep
