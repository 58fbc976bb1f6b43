// Speculative decoding's output distribution equals the target's constrained distribution: on the
// tiny vocabulary under (a|b){1,3}, 100,000 seeded runs with a deliberately different draft are
// compared by chi-square with the exact distribution over token sequences, enumerated here by
// brute force (softmax of the masked target logits in double, every path to EOS).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <vector>

#include "decoder/decode_test_util.h"
#include "lockstep/decoding.h"
#include "lockstep/logits_source.h"
#include "lockstep/sampler.h"
#include "test_data.h"

namespace lockstep {
namespace {

using Path = std::vector<TokenId>;  // generated ids, EOS excluded

// Exact P(path) of sampling `src` at temperature 1 under the matcher, by depth-first search.
void Enumerate(LogitsSource& src, Matcher m, Path path, double prob, std::map<Path, double>* out) {
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
      (*out)[path] += p;
      continue;
    }
    Path longer = path;
    longer.push_back(t);
    Enumerate(src, next, longer, p, out);
  }
}

TEST(SpeculativeTest, OutputDistributionEqualsTheTargetsWithADifferentDraft) {
  auto grammar = testing::CompileTiny("(a|b){1,3}");
  ASSERT_NE(grammar, nullptr);
  // Target and draft disagree: different seeds of the hashed uniform source (logits in [0, 8)).
  UniformSource target(grammar->logits_width(), 2024);
  UniformSource draft(grammar->logits_width(), 77);
  std::map<Path, double> exact;
  Enumerate(target, Matcher(grammar), {}, 1.0, &exact);
  double total = 0;
  for (const auto& [p, v] : exact) total += v;
  ASSERT_NEAR(total, 1.0, 1e-12);
  ASSERT_GT(exact.size(), 20u);

  const std::int64_t n = static_cast<std::int64_t>(100000 * std::min(1.0, testing::TestScale()));
  for (std::int32_t gamma : {1, 3}) {
    std::map<Path, std::int64_t> counts;
    std::int64_t drafted = 0, accepted = 0, rounds = 0, emitted = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      Matcher m(grammar);
      SpeculativeOptions opt;
      opt.gamma = gamma;
      opt.sampler.seed = 12345;
      opt.sequence_id = static_cast<std::uint64_t>(i);
      auto r = SpeculativeGenerate(target, draft, m, {}, opt);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ASSERT_EQ(r->finish, FinishReason::kEos);
      ++counts[r->tokens];
      drafted += r->drafted;
      accepted += r->accepted;
      rounds += r->rounds;
      emitted += static_cast<std::int64_t>(r->tokens.size()) + 1;
    }
    auto chi = testing::ChiSquare(counts, exact, n);
    std::printf(
        "[speculative gamma=%d] chi2 %.2f dof %d p %.4f; acceptance %.3f, tokens/round %.3f\n",
        gamma, chi.statistic, chi.dof, chi.p_value, double(accepted) / drafted,
        double(emitted) / rounds);
    EXPECT_GT(chi.p_value, 0.001) << "gamma " << gamma << " chi2 " << chi.statistic;
    // A different draft is rejected sometimes, a useful one accepted often.
    EXPECT_LT(accepted, drafted);
    EXPECT_GT(accepted, drafted / 10);
  }
  // The test has power: plain sampling from the draft is told apart from the target.
  std::map<Path, std::int64_t> draft_counts;
  for (std::int64_t i = 0; i < n; ++i) {
    Matcher m(grammar);
    GenerateOptions opt;
    opt.jump_forward = false;
    opt.sampler.seed = 12345;
    opt.sequence_id = static_cast<std::uint64_t>(i);
    auto r = Generate(draft, m, {}, opt);
    ASSERT_TRUE(r.ok());
    ++draft_counts[r->tokens];
  }
  auto control = testing::ChiSquare(draft_counts, exact, n);
  std::printf("[draft alone vs target] chi2 %.1f dof %d p %.3g\n", control.statistic, control.dof,
              control.p_value);
  EXPECT_LT(control.p_value, 1e-6);
}

// The target's distribution under a full sampler config (the definition: Sampler::Distribution
// of the target's logits, the generated ids as the penalties' history).
void EnumerateWithSampler(LogitsSource& src, const SamplerConfig& cfg, Matcher m, Path path,
                          double prob, std::map<Path, double>* out) {
  const std::int32_t width = src.width();
  std::vector<std::uint32_t> mask(BitmaskWords(width));
  m.FillNextTokenBitmask(mask);
  std::vector<float> z(width), p(width);
  src.Logits(path, z);
  Sampler sampler(cfg, width);
  sampler.Distribution(z, mask.data(), path, p);
  for (TokenId t = 0; t < width; ++t) {
    if (!(p[t] > 0)) continue;
    Matcher next = m.Fork();
    ASSERT_TRUE(next.AcceptToken(t));
    if (next.IsTerminated()) {
      (*out)[path] += prob * p[t];
      continue;
    }
    Path longer = path;
    longer.push_back(t);
    EnumerateWithSampler(src, cfg, next, longer, prob * p[t], out);
  }
}

TEST(SpeculativeTest, KeepsTheTargetsDistributionUnderTruncationAndPenalties) {
  auto grammar = testing::CompileTiny("(a|b){1,3}");
  ASSERT_NE(grammar, nullptr);
  UniformSource target(grammar->logits_width(), 2024);
  UniformSource draft(grammar->logits_width(), 77);
  SamplerConfig cfg{.temperature = 3.0f, .top_p = 0.95f, .repetition_penalty = 1.5f};
  std::map<Path, double> exact;
  EnumerateWithSampler(target, cfg, Matcher(grammar), {}, 1.0, &exact);
  const std::int64_t n = static_cast<std::int64_t>(100000 * std::min(1.0, testing::TestScale()));
  std::map<Path, std::int64_t> counts;
  for (std::int64_t i = 0; i < n; ++i) {
    Matcher m(grammar);
    SpeculativeOptions opt;
    opt.gamma = 2;
    opt.sampler = cfg;
    opt.sampler.seed = 99;
    opt.sequence_id = static_cast<std::uint64_t>(i);
    auto r = SpeculativeGenerate(target, draft, m, {}, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ++counts[r->tokens];
  }
  auto chi = testing::ChiSquare(counts, exact, n);
  std::printf("[speculative T=3 top-p .95 rep 1.5] chi2 %.2f dof %d p %.4f\n", chi.statistic,
              chi.dof, chi.p_value);
  EXPECT_GT(chi.p_value, 0.001);
}

TEST(SpeculativeTest, IdenticalDraftIsAlwaysAcceptedAndGreedyMatchesTheTarget) {
  auto grammar = testing::CompileTiny("(a|b){2,9}c");
  ASSERT_NE(grammar, nullptr);
  UniformSource target(grammar->logits_width(), 5);
  UniformSource same(grammar->logits_width(), 5);
  UniformSource other(grammar->logits_width(), 6);
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    Matcher m(grammar);
    SpeculativeOptions opt;
    opt.gamma = 4;
    opt.sampler.seed = seed;
    auto r = SpeculativeGenerate(target, same, m, {}, opt);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->accepted, r->drafted);
    EXPECT_EQ(r->finish, FinishReason::kEos);
    EXPECT_EQ(r->text.back(), 'c');
    EXPECT_GT(r->tokens_per_round(), 1.0);
  }
  // Greedy: the output is the target's own greedy output, whatever the draft.
  Matcher gm(grammar);
  GenerateOptions g;
  g.sampler.temperature = 0;
  g.jump_forward = false;
  auto want = Generate(target, gm, {}, g);
  ASSERT_TRUE(want.ok());
  Matcher sm(grammar);
  SpeculativeOptions opt;
  opt.sampler.temperature = 0;
  opt.gamma = 3;
  auto got = SpeculativeGenerate(target, other, sm, {}, opt);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->tokens, want->tokens);
}

}  // namespace
}  // namespace lockstep
