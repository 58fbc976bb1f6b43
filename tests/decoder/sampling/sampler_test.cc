// Tests for lockstep/sampler.h: greedy and masked semantics, top-k/top-p on hand-computed
// distributions, chi-square agreement with softmax(logits / T), counter-based determinism,
// scalar/AVX2 agreement, penalties over a history window, and presets from JSON. Seeds are fixed,
// so every statistical check is deterministic. Stage-by-stage golden values:
// sampler_golden_test.cc.
#include "lockstep/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "decoder/sampling/mask_kernels.h"
#include "lockstep/bitmask.h"

namespace lockstep {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> RandomLogits(std::int32_t width, std::uint64_t seed, float stddev = 2.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0, stddev);
  std::vector<float> x(width);
  for (auto& v : x) v = n(rng);
  return x;
}

// Draws `n` tokens (steps 0..n-1) and counts them.
std::vector<std::int64_t> Histogram(Sampler& s, const std::vector<float>& logits,
                                    const std::uint32_t* mask, std::int64_t n) {
  std::vector<std::int64_t> counts(logits.size(), 0);
  std::vector<float> scratch(logits.size());
  for (std::int64_t step = 0; step < n; ++step) {
    scratch = logits;
    const TokenId t = s.Sample(scratch, mask, 7, static_cast<std::uint64_t>(step));
    EXPECT_GE(t, 0);
    if (t >= 0) ++counts[t];
  }
  return counts;
}

// Pearson chi-square of `counts` against probabilities `p` (bins with expectation < 5 merged).
double ChiSquare(const std::vector<std::int64_t>& counts, const std::vector<double>& p,
                 std::int64_t n, int* dof) {
  double chi = 0, merged_exp = 0, merged_obs = 0;
  int bins = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double e = p[i] * static_cast<double>(n);
    if (e < 5) {
      merged_exp += e;
      merged_obs += static_cast<double>(counts[i]);
      continue;
    }
    chi += (counts[i] - e) * (counts[i] - e) / e;
    ++bins;
  }
  if (merged_exp >= 5) {
    chi += (merged_obs - merged_exp) * (merged_obs - merged_exp) / merged_exp;
    ++bins;
  }
  *dof = bins - 1;
  return chi;
}

std::vector<double> Softmax(const std::vector<float>& x, double t) {
  double m = -1e300;
  for (float v : x) m = std::max(m, static_cast<double>(v));
  std::vector<double> p(x.size());
  double z = 0;
  for (std::size_t i = 0; i < x.size(); ++i) z += p[i] = std::exp((x[i] - m) / t);
  for (auto& v : p) v /= z;
  return p;
}

// Upper 0.1% point of chi-square with `dof` degrees of freedom (Wilson-Hilferty).
double ChiCritical(int dof) {
  const double z = 3.09;
  const double k = dof;
  return k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
}

TEST(SamplerTest, GreedyPicksMaskedArgmaxWithLowestIdOnTies) {
  std::vector<float> x = {1, 5, 2, 5, 9, 0};
  TokenBitmask m(6);
  for (TokenId i : {0, 1, 2, 3, 5}) m.Set(i);
  Sampler greedy(SamplerConfig{.temperature = 0});
  std::vector<float> s = x;
  EXPECT_EQ(greedy.Sample(s, m.words(), 0, 0), 1);
  s = x;
  EXPECT_EQ(greedy.Sample(s, nullptr, 0, 0), 4);
  Sampler topk1(SamplerConfig{.temperature = 1.5f, .top_k = 1});
  s = x;
  EXPECT_EQ(topk1.Sample(s, m.words(), 0, 0), 1);
}

TEST(SamplerTest, TopKOneEqualsGreedyOnRandomLogits) {
  std::mt19937_64 rng(3);
  Sampler greedy(SamplerConfig{.temperature = 0});
  Sampler topk1(SamplerConfig{.temperature = 0.8f, .top_k = 1, .seed = 9});
  for (int trial = 0; trial < 200; ++trial) {
    const std::int32_t width = 1 + static_cast<std::int32_t>(rng() % 5000);
    const std::vector<float> x = RandomLogits(width, rng());
    TokenBitmask m(width);
    for (std::int32_t i = 0; i < width; ++i) {
      if (rng() % 4 == 0) m.Set(i);
    }
    std::vector<float> a = x, b = x;
    const TokenId g = greedy.Sample(a, m.words(), 0, trial);
    EXPECT_EQ(topk1.Sample(b, m.words(), 0, trial), g);
    std::vector<float> masked = x;
    kernels::ApplyMask(masked.data(), m.words(), width);
    if (g == kNoToken) {
      EXPECT_EQ(kernels::CountAllowed(m.words(), width), 0u);
    } else {
      EXPECT_EQ(g, std::max_element(masked.begin(), masked.end()) - masked.begin());
    }
  }
}

TEST(SamplerTest, NoAllowedTokenGivesNoToken) {
  std::vector<float> x(100, 0.0f);
  TokenBitmask m(100);
  for (float t : {0.0f, 1.0f}) {
    Sampler s(SamplerConfig{.temperature = t, .top_k = 5, .top_p = 0.5f});
    std::vector<float> y = x;
    EXPECT_EQ(s.Sample(y, m.words(), 0, 0), kNoToken);
    EXPECT_EQ(s.SampleDetailed(x, m.words(), 0, 0).token, kNoToken);
  }
  Sampler s;
  std::vector<float> empty;
  EXPECT_EQ(s.Sample(empty, nullptr, 0, 0), kNoToken);
}

TEST(SamplerTest, NeverPicksAMaskedToken) {
  std::mt19937_64 rng(11);
  const SamplerConfig configs[] = {
      {.temperature = 1.0f},
      {.temperature = 2.0f, .top_k = 3},
      {.temperature = 0.7f, .top_p = 0.9f},
      {.temperature = 1.3f, .top_k = 50, .top_p = 0.5f, .seed = 5},
  };
  std::int64_t draws = 0;
  for (const SamplerConfig& config : configs) {
    Sampler s(config);
    for (int mask_trial = 0; mask_trial < 250; ++mask_trial) {
      const std::int32_t width = 1 + static_cast<std::int32_t>(rng() % 700);
      TokenBitmask m(width);
      const std::uint64_t density = 1 + rng() % 8;  // 1/8 .. all
      for (std::int32_t i = 0; i < width; ++i) {
        if (rng() % 8 < density) m.Set(i);
      }
      m.Set(static_cast<TokenId>(rng() % width));
      const std::vector<float> x = RandomLogits(width, rng(), 4.0f);
      std::vector<float> y(width);
      for (int k = 0; k < 1000; ++k, ++draws) {
        y = x;
        const TokenId t = s.Sample(y, m.words(), mask_trial, k);
        ASSERT_TRUE(t >= 0 && m.Test(t)) << t;
      }
    }
  }
  EXPECT_EQ(draws, 1000000);
  // Large vocabularies, dense and sparse masks.
  for (std::int32_t allowed_every : {1, 3, 5000}) {
    const std::int32_t width = 128256;
    TokenBitmask m(width);
    for (std::int32_t i = 0; i < width; i += allowed_every) m.Set(i);
    const std::vector<float> x = RandomLogits(width, 77);
    Sampler s(SamplerConfig{.temperature = 1.0f, .top_p = 0.95f});
    std::vector<float> y;
    for (int k = 0; k < 200; ++k) {
      y = x;
      const TokenId t = s.Sample(y, m.words(), 1, k);
      ASSERT_TRUE(t >= 0 && m.Test(t)) << t;
    }
  }
}

TEST(SamplerTest, TopPKeepsSmallestSetWithEnoughMass) {
  const std::vector<float> x = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  const std::int64_t n = 200000;
  {
    Sampler s(SamplerConfig{.top_p = 0.75f, .seed = 1});
    const auto c = Histogram(s, x, nullptr, n);
    EXPECT_EQ(c[2], 0);
    int dof;
    EXPECT_LT(ChiSquare(c, {0.5 / 0.8, 0.3 / 0.8, 0.0}, n, &dof), ChiCritical(1));
  }
  for (float p : {0.45f, 0.0f, -1.0f}) {
    Sampler s(SamplerConfig{.top_p = p, .seed = 2});
    const auto c = Histogram(s, x, nullptr, 1000);
    EXPECT_EQ(c[0], 1000) << p;
  }
  {
    Sampler s(SamplerConfig{.top_p = 0.85f, .seed = 3});
    const auto c = Histogram(s, x, nullptr, n);
    int dof;
    EXPECT_LT(ChiSquare(c, {0.5, 0.3, 0.2}, n, &dof), ChiCritical(2));
  }
  // With a mask: top-p applies to the renormalised masked distribution (0.3, 0.2) -> (0.6, 0.4).
  TokenBitmask m(3);
  m.Set(1);
  m.Set(2);
  Sampler s(SamplerConfig{.top_p = 0.55f, .seed = 4});
  const auto c = Histogram(s, x, m.words(), 1000);
  EXPECT_EQ(c[1], 1000);
}

TEST(SamplerTest, TopKKeepsTheKBest) {
  const std::vector<float> x = RandomLogits(64, 5);
  const std::int64_t n = 200000;
  Sampler s(SamplerConfig{.temperature = 1.0f, .top_k = 5, .seed = 8});
  const auto c = Histogram(s, x, nullptr, n);
  std::vector<int> order(64);
  for (int i = 0; i < 64; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  std::vector<float> kept(64, kNegInf);
  for (int j = 0; j < 5; ++j) kept[order[j]] = x[order[j]];
  const auto p = Softmax(kept, 1.0);
  for (int i = 0; i < 64; ++i) {
    if (p[i] == 0) {
      EXPECT_EQ(c[i], 0) << i;
    }
  }
  int dof;
  const double chi = ChiSquare(c, p, n, &dof);
  EXPECT_EQ(dof, 4);
  EXPECT_LT(chi, ChiCritical(dof));
}

TEST(SamplerTest, FrequenciesMatchSoftmaxOverTemperature) {
  for (float t : {0.5f, 1.0f, 1.7f}) {
    for (bool masked : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "T " << t << " masked " << masked);
      const std::int32_t width = 2048;
      std::vector<float> x = RandomLogits(width, 21, 1.5f);
      TokenBitmask m(width);
      // A sparse mask exercises the compact path, no mask the dense one.
      for (std::int32_t i = 0; i < width; i += 37) m.Set(i);
      std::vector<float> ref = x;
      if (masked) kernels::ApplyMask(ref.data(), m.words(), width);
      const auto p = Softmax(ref, t);
      const std::int64_t n = 300000;
      Sampler s(SamplerConfig{.temperature = t, .seed = 1234});
      const auto c = Histogram(s, x, masked ? m.words() : nullptr, n);
      int dof;
      const double chi = ChiSquare(c, p, n, &dof);
      EXPECT_LT(chi, ChiCritical(dof)) << "dof " << dof;
    }
  }
}

TEST(SamplerTest, CounterBasedDeterminism) {
  const std::int32_t width = 5000;
  const std::vector<float> x = RandomLogits(width, 99, 0.5f);
  Sampler a(SamplerConfig{.temperature = 1.0f, .top_p = 0.9f, .seed = 42});
  Sampler b(SamplerConfig{.temperature = 1.0f, .top_p = 0.9f, .seed = 42});
  std::vector<float> y;
  // Same (seed, sequence, step) -> same token, whatever the order of the calls.
  std::vector<TokenId> forward, backward(100);
  for (int seq = 0; seq < 100; ++seq) {
    y = x;
    forward.push_back(a.Sample(y, nullptr, seq, 17));
  }
  for (int seq = 99; seq >= 0; --seq) {
    y = x;
    backward[seq] = b.Sample(y, nullptr, seq, 17);
  }
  EXPECT_EQ(forward, backward);
  // Different steps and sequences are independent: P(two draws agree) ~ sum p_i^2.
  const auto p = Softmax(x, 1.0);
  double collide = 0;
  for (double v : p) collide += v * v;
  int same_step = 0, same_seq = 0;
  const int trials = 20000;
  for (int k = 0; k < trials; ++k) {
    y = x;
    const TokenId t0 = a.Sample(y, nullptr, 3, k);
    y = x;
    same_step += a.Sample(y, nullptr, 3, k + 1) == t0;
    y = x;
    same_seq += a.Sample(y, nullptr, 4, k) == t0;
  }
  // top-p 0.9 shrinks the set a little; collisions stay near sum p^2 (about 2e-4 here).
  EXPECT_LT(same_step, trials * collide * 4 + 10);
  EXPECT_LT(same_seq, trials * collide * 4 + 10);
  // The uniform stream itself.
  double mean = 0;
  for (int k = 0; k < 100000; ++k) {
    const double u = CounterUniform(1, 2, k);
    ASSERT_TRUE(u >= 0 && u < 1);
    mean += u;
  }
  EXPECT_NEAR(mean / 100000, 0.5, 0.005);
  EXPECT_EQ(CounterUniform(1, 2, 3), CounterUniform(1, 2, 3));
  EXPECT_NE(CounterUniform(1, 2, 3), CounterUniform(1, 3, 2));
  EXPECT_NE(CounterUniform(1, 2, 3), CounterUniform(2, 2, 3));
}

TEST(SamplerTest, ScalarAndAvx2KernelsDrawTheSameTokens) {
  if (!kernels::CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  const std::int32_t width = 128256;
  const std::vector<float> x = RandomLogits(width, 5, 3.0f);
  TokenBitmask m(width);
  for (std::int32_t i = 0; i < width; ++i) {
    if (i % 7 != 3) m.Set(i);
  }
  const SamplerConfig configs[] = {{.temperature = 1.0f},
                                   {.temperature = 0.6f, .top_k = 40},
                                   {.temperature = 1.0f, .top_p = 0.9f},
                                   {.temperature = 1.0f, .min_p = 0.05f},
                                   {.temperature = 0.7f,
                                    .top_p = 0.9f,
                                    .min_p = 0.01f,
                                    .logit_bias = {{3, 2.0f}},
                                    .repetition_penalty = 1.3f,
                                    .repetition_window = 64,
                                    .frequency_penalty = 0.2f,
                                    .presence_penalty = 0.1f}};
  std::vector<TokenId> history;
  for (int i = 0; i < 100; ++i) history.push_back((i * 7919) % width);
  for (const SamplerConfig& c : configs) {
    std::vector<TokenId> tokens[2];
    std::vector<float> probs[2];
    for (int pass = 0; pass < 2; ++pass) {
      kernels::ForceIsa(pass == 0 ? kernels::Isa::kScalar : kernels::Isa::kAvx2);
      Sampler s(c);
      std::vector<float> y;
      for (int k = 0; k < 50; ++k) {
        y = x;
        tokens[pass].push_back(s.Sample(y, m.words(), history, 0, k));
      }
      probs[pass].resize(width);
      s.Distribution(x, m.words(), history, probs[pass]);
    }
    EXPECT_EQ(tokens[0], tokens[1]);
    EXPECT_EQ(probs[0], probs[1]);  // bit for bit
  }
  kernels::ForceIsa(kernels::Isa::kAuto);
}

TEST(SamplerTest, DetailedReportsLogProbabilities) {
  const std::vector<float> x = {std::log(0.5f), std::log(0.3f), std::log(0.2f), 0.0f};
  TokenBitmask m(4);
  m.Set(0);
  m.Set(1);
  m.Set(2);
  Sampler s(SamplerConfig{.temperature = 1.0f, .top_p = 0.75f, .seed = 3});
  std::vector<float> y = x;
  for (int k = 0; k < 50; ++k) {
    const SampleResult r = s.SampleDetailed(y, m.words(), 0, k);
    ASSERT_TRUE(r.token == 0 || r.token == 1);
    EXPECT_EQ(y, x);  // untouched
    EXPECT_EQ(r.num_candidates, 2);
    EXPECT_NEAR(r.logprob, std::log(r.token == 0 ? 0.5 / 0.8 : 0.3 / 0.8), 1e-5);
    EXPECT_NEAR(r.masked_logprob, std::log(r.token == 0 ? 0.5 : 0.3), 1e-5);
  }
  Sampler g(SamplerConfig{.temperature = 0});
  const SampleResult r = g.SampleDetailed(y, m.words(), 0, 0);
  EXPECT_EQ(r.token, 0);
  EXPECT_EQ(r.logprob, 0.0f);
  EXPECT_NEAR(r.masked_logprob, std::log(0.5), 1e-5);
}

TEST(SamplerTest, DetailedDrawsTheSameTokenAsSample) {
  const std::int32_t width = 32000;
  const std::vector<float> x = RandomLogits(width, 8, 2.5f);
  TokenBitmask dense(width), sparse(width);
  for (std::int32_t i = 0; i < width; ++i) {
    if (i % 5 != 0) dense.Set(i);
    if (i % 997 == 0) sparse.Set(i);
  }
  const SamplerConfig configs[] = {{.temperature = 0},
                                   {.temperature = 1.0f, .seed = 1},
                                   {.temperature = 0.7f, .top_k = 40, .seed = 2},
                                   {.temperature = 1.2f, .top_p = 0.8f, .seed = 3}};
  for (const SamplerConfig& c : configs) {
    Sampler s(c);
    for (const TokenBitmask* m : {&dense, &sparse}) {
      std::vector<float> y;
      for (int k = 0; k < 20; ++k) {
        y = x;
        const TokenId t = s.Sample(y, m->words(), 5, k);
        const SampleResult r = s.SampleDetailed(x, m->words(), 5, k);
        EXPECT_EQ(r.token, t);
        EXPECT_LE(r.logprob, 0.0f);
        if (c.temperature == 1.0f) {  // at T = 1 truncation can only raise a probability
          EXPECT_LE(r.masked_logprob, r.logprob + 1e-4f);
        }
      }
    }
  }
}

TEST(SamplerTest, AllowedMinusInfinityAndTinyTemperature) {
  std::vector<float> x = {kNegInf, kNegInf, 3.0f};
  TokenBitmask m(3);
  m.Set(0);
  m.Set(1);
  Sampler s;
  std::vector<float> y = x;
  EXPECT_EQ(s.Sample(y, m.words(), 0, 0), 0);  // degenerate: lowest allowed id
  Sampler cold(SamplerConfig{.temperature = 1e-4f});
  const std::vector<float> z = RandomLogits(1000, 4);
  for (int k = 0; k < 20; ++k) {
    y = z;
    EXPECT_EQ(cold.Sample(y, nullptr, 0, k), std::max_element(z.begin(), z.end()) - z.begin());
  }
}

TEST(SamplerTest, PenaltiesTouchOnlyTheHistoryWindow) {
  const std::vector<float> x = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f};
  // Tokens 4 and 0 fall outside the window of 4; 1 appears twice, 3 and 2 once; 99 and -5 are
  // outside the width and ignored.
  const std::vector<TokenId> history = {4, 0, 99, 1, 3, -5, 1, 2};
  SamplerConfig c{.temperature = 0,
                  .repetition_penalty = 2.0f,
                  .repetition_window = 6,
                  .frequency_penalty = 0.25f,
                  .presence_penalty = 0.5f};
  // Expected logits after the penalties (window = {99, 1, 3, -5, 1, 2}).
  const std::vector<float> want = {
      2.0f, -1.0f * 2 - 2 * 0.25f - 0.5f, 0.5f / 2 - 0.25f - 0.5f, 3.0f / 2 - 0.25f - 0.5f, -2.0f,
      1.0f};
  // Greedy over the penalised logits: argmax moves from 3 to 0.
  Sampler s(c);
  std::vector<float> y = x;
  EXPECT_EQ(s.Sample(y, nullptr, history, 0, 0), 0);
  EXPECT_EQ(y, want);  // the logits are the scratch: they now hold the penalised values
  // The scratch counts are reset: the same call again gives the same result, and a call with an
  // empty history leaves the logits alone.
  y = x;
  s.Sample(y, nullptr, history, 0, 1);
  EXPECT_EQ(y, want);
  y = x;
  EXPECT_EQ(s.Sample(y, nullptr, {}, 0, 2), 3);
  EXPECT_EQ(y, x);
  // Window 0: the whole history, so 4 and 0 are penalised too.
  c.repetition_window = 0;
  Sampler whole(c);
  y = x;
  whole.Sample(y, nullptr, history, 0, 0);
  EXPECT_EQ(y[0], 2.0f / 2 - 0.25f - 0.5f);
  EXPECT_EQ(y[4], -2.0f * 2 - 0.25f - 0.5f);
}

TEST(SamplerTest, OldSignatureEqualsEmptyHistory) {
  const std::vector<float> x = RandomLogits(3000, 12);
  SamplerConfig c{.temperature = 0.9f,
                  .top_p = 0.8f,
                  .min_p = 0.02f,
                  .logit_bias = {{17, 5.0f}},
                  .repetition_penalty = 1.5f,
                  .frequency_penalty = 1.0f,
                  .presence_penalty = 1.0f};
  Sampler a(c), b(c);
  std::vector<float> y, z;
  for (int k = 0; k < 200; ++k) {
    y = x;
    z = x;
    ASSERT_EQ(a.Sample(y, nullptr, 1, k), b.Sample(z, nullptr, {}, 1, k));
    ASSERT_EQ(a.SampleDetailed(x, nullptr, 1, k).token,
              a.SampleDetailed(x, nullptr, {}, 1, k).token);
  }
}

TEST(SamplerTest, DistributionIsTheDrawnDistribution) {
  const std::int32_t width = 40000;
  const std::vector<float> x = RandomLogits(width, 31, 2.5f);
  TokenBitmask dense(width), sparse(width);
  for (std::int32_t i = 0; i < width; ++i) {
    if (i % 9 != 0) dense.Set(i);
    if (i % 101 == 0) sparse.Set(i);
  }
  std::vector<TokenId> history = {5, 5, 100, 2000, 39999};
  const SamplerConfig configs[] = {
      {.temperature = 0},
      {.temperature = 1.0f, .min_p = 0.01f},
      {.temperature = 0.7f, .top_k = 40, .top_p = 0.9f, .repetition_penalty = 1.2f},
      {.temperature = 1.2f, .top_p = 0.8f, .logit_bias = {{8, 3.0f}}, .frequency_penalty = 0.3f}};
  for (const SamplerConfig& c : configs) {
    Sampler s(c);
    for (const TokenBitmask* m : {&dense, &sparse}) {
      std::vector<float> probs(width);
      const std::int32_t n = s.Distribution(x, m->words(), history, probs);
      double sum = 0;
      std::int32_t nonzero = 0;
      for (std::int32_t i = 0; i < width; ++i) {
        if (probs[i] > 0) {
          ASSERT_TRUE(m->Test(i)) << i;
          ++nonzero;
        }
        sum += probs[i];
      }
      EXPECT_NEAR(sum, 1.0, 1e-5);
      EXPECT_LE(nonzero, n);  // candidates whose probability underflowed are counted too
      for (int k = 0; k < 20; ++k) {
        const SampleResult r = s.SampleDetailed(x, m->words(), history, 2, k);
        ASSERT_GT(probs[r.token], 0.0f);
        if (c.temperature > 0) {
          EXPECT_NEAR(r.logprob, std::log(probs[r.token]), 1e-5);
        }
      }
    }
  }
  std::vector<float> wrong(3);
  Sampler s;
  EXPECT_EQ(s.Distribution(x, nullptr, {}, wrong), 0);
}

// Top-p on a 128k vocabulary, peaked (few entries above the skip bound: the compaction and
// quickselect path) and flat (the histogram path): the kept set is the one a double-precision
// sort-and-cumulate picks.
TEST(SamplerTest, TopPKeptSetMatchesASortOnLargeVocabularies) {
  const std::int32_t width = 128256;
  for (bool peaked : {true, false}) {
    SCOPED_TRACE(peaked ? "peaked" : "flat");
    std::vector<float> x = RandomLogits(width, 41, 2.0f);
    if (peaked) {
      const float head[] = {14, 13.5f, 13, 12, 11, 10, 9, 8};
      for (int j = 0; j < 8; ++j) x[j * 9001 + 5] = head[j];
    }
    const double t = 0.7, top_p = 0.9;
    std::vector<double> p(width);
    const double m = *std::max_element(x.begin(), x.end());
    for (std::int32_t i = 0; i < width; ++i) p[i] = std::exp((x[i] - m) / t);
    std::vector<double> sorted = p;
    std::sort(sorted.begin(), sorted.end(), std::greater<double>());
    const double total = std::accumulate(sorted.begin(), sorted.end(), 0.0);
    double cum = 0;
    std::int32_t want = 0;
    while (cum < top_p * total) cum += sorted[want++];
    Sampler s(SamplerConfig{.temperature = 0.7f, .top_p = 0.9f});
    std::vector<float> probs(width);
    s.Distribution(x, nullptr, {}, probs);
    std::int32_t kept = 0;
    for (std::int32_t i = 0; i < width; ++i) {
      if (probs[i] > 0) {
        ++kept;
        EXPECT_GE(p[i], sorted[want - 1]) << i;
      }
    }
    EXPECT_EQ(kept, want);
    // More kept than the direct path's 4096 candidates: the flat case took the histogram path.
    if (peaked) {
      EXPECT_LT(want, 10);
    } else {
      EXPECT_GT(want, 4096);
    }
  }
}

std::string ReadPresets() {
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DATA_DIR) + "/presets/presets.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SamplerTest, PresetsFromTheShippedFile) {
  const std::string json = ReadPresets();
  ASSERT_FALSE(json.empty());
  auto extraction = SamplerPreset("extraction", json);
  ASSERT_TRUE(extraction.ok()) << extraction.status().ToString();
  EXPECT_EQ(extraction->temperature, 0.0f);
  auto chat = SamplerPreset("chat", json);
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat->temperature, 0.7f);
  EXPECT_EQ(chat->top_p, 1.0f);
  auto creative = SamplerPreset("creative", json);
  ASSERT_TRUE(creative.ok());
  EXPECT_EQ(creative->temperature, 1.0f);
  EXPECT_EQ(creative->top_p, 0.95f);
  EXPECT_EQ(creative->frequency_penalty, 0.2f);
  auto code = SamplerPreset("code", json);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(code->temperature, 0.2f);
  EXPECT_EQ(code->top_p, 0.95f);
  EXPECT_EQ(code->top_k, 0);
  EXPECT_EQ(code->frequency_penalty, 0.0f);

  auto unknown = SamplerPreset("poetry", json);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(unknown.status().location(), "/presets/poetry");
  EXPECT_NE(unknown.status().message().find("chat, code, creative, extraction"), std::string::npos)
      << unknown.status().message();
}

TEST(SamplerTest, PresetErrorsPointAtTheBadField) {
  struct Case {
    const char* json;
    const char* location;
  };
  const Case cases[] = {
      {R"({"presets": {"a": {"top_p": 1.5}}})", "/presets/a/top_p"},
      {R"({"presets": {"a": {"temperature": "hot"}}})", "/presets/a/temperature"},
      {R"({"presets": {"a": {"top_k": 2.5}}})", "/presets/a/top_k"},
      {R"({"presets": {"a": {"top_k": -1}}})", "/presets/a/top_k"},
      {R"({"presets": {"a": {"temprature": 1}}})", "/presets/a/temprature"},
      {R"({"presets": {"a": {"logit_bias": {"x1": 2}}}})", "/presets/a/logit_bias/x1"},
      {R"({"presets": {"a": {"logit_bias": {"12": null}}}})", "/presets/a/logit_bias/12"},
      {R"({"presets": {"a": {"seed": -3}}})", "/presets/a/seed"},
      {R"({"presets": {"a": [1]}})", "/presets/a"},
      {R"({"presets": [1]})", "/presets"},
      {R"({"other": {}})", "/presets"},
      {R"({"presets": {"a": {"top_p": 0.5,}}})", "offset 32"},
      {"", "offset 0"},
  };
  for (const Case& c : cases) {
    auto r = SamplerPreset("a", c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(r.status().location(), c.location) << c.json << ": " << r.status().message();
  }
  auto ok = SamplerPreset("a/b", R"({"presets": {"a/b": {"top_k": 3, "min_p": 0.1, "seed": 9,
      "repetition_penalty": 1.1, "repetition_window": 64, "presence_penalty": -0.5,
      "logit_bias": {"7": -100, "0": 1.5}, "description": "x"}}})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->top_k, 3);
  EXPECT_EQ(ok->min_p, 0.1f);
  EXPECT_EQ(ok->seed, 9u);
  EXPECT_EQ(ok->repetition_penalty, 1.1f);
  EXPECT_EQ(ok->repetition_window, 64);
  EXPECT_EQ(ok->presence_penalty, -0.5f);
  ASSERT_EQ(ok->logit_bias.size(), 2u);  // object keys come in sorted order
  EXPECT_EQ(ok->logit_bias[0], (std::pair<TokenId, float>{0, 1.5f}));
  EXPECT_EQ(ok->logit_bias[1], (std::pair<TokenId, float>{7, -100.0f}));
  auto escaped = SamplerPreset("x~y/z", R"({"presets": {}})");
  EXPECT_EQ(escaped.status().location(), "/presets/x~0y~1z");
}

}  // namespace
}  // namespace lockstep
