// Tests for lockstep/sampler.h: greedy and masked semantics, top-k/top-p on hand-computed
// distributions, chi-square agreement with softmax(logits / T), counter-based determinism, and
// scalar/AVX2 agreement. Seeds are fixed, so every statistical check is deterministic.
#include "lockstep/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "decoder/mask_kernels.h"
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
                                   {.temperature = 1.0f, .top_p = 0.9f}};
  for (const SamplerConfig& c : configs) {
    std::vector<TokenId> tokens[2];
    for (int pass = 0; pass < 2; ++pass) {
      kernels::ForceIsa(pass == 0 ? kernels::Isa::kScalar : kernels::Isa::kAvx2);
      Sampler s(c);
      std::vector<float> y;
      for (int k = 0; k < 50; ++k) {
        y = x;
        tokens[pass].push_back(s.Sample(y, m.words(), 0, k));
      }
    }
    EXPECT_EQ(tokens[0], tokens[1]);
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

}  // namespace
}  // namespace lockstep
