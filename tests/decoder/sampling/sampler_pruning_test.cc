// Tests for the pruned top-p/min-p path of lockstep/sampler.h and its kernel
// (kernels::CollectCandidates): the scalar and AVX2 kernels agree bit for bit, the tail bound is
// an upper bound and a tight one, and on 128k-wide peaked, flat and masked logits the kept set
// equals an independent double-precision sort-and-cumulate reference, identically under both
// kernels. Also Sampler::Trace (stage by stage, its final stage is Distribution()) and
// Sampler::Logprobs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "decoder/sampling/mask_kernels.h"
#include "lockstep/bitmask.h"
#include "lockstep/sampler.h"

namespace lockstep {
namespace {

constexpr std::int32_t kWidth = 128256;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<float> Logits(std::uint64_t seed, float stddev, bool peaked) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0, stddev);
  std::vector<float> x(kWidth);
  for (auto& v : x) v = n(rng);
  if (peaked) {
    const float head[] = {14, 13.5f, 13, 12, 11, 10, 9, 8};
    for (float h : head) x[rng() % kWidth] = h;
  }
  return x;
}

std::vector<std::uint32_t> Mask(std::uint64_t seed, double keep) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution b(keep);
  std::vector<std::uint32_t> m(PaddedBitmaskWords(kWidth), 0);
  for (std::int32_t i = 0; i < kWidth; ++i) {
    if (b(rng)) m[i >> 5] |= 1u << (i & 31);
  }
  return m;
}

bool Allowed(const std::vector<std::uint32_t>* m, std::int32_t i) {
  return m == nullptr || (((*m)[i >> 5] >> (i & 31)) & 1u);
}

// The kept ids of mask -> T -> top-p -> min-p, in double with a full sort (ties kept).
std::vector<std::int32_t> ReferenceKept(const std::vector<float>& z,
                                        const std::vector<std::uint32_t>* mask, double t,
                                        double top_p, double min_p) {
  double max = -INFINITY;
  for (std::int32_t i = 0; i < kWidth; ++i) {
    if (Allowed(mask, i)) max = std::max(max, static_cast<double>(z[i]));
  }
  std::vector<std::pair<double, std::int32_t>> p;
  double total = 0;
  for (std::int32_t i = 0; i < kWidth; ++i) {
    if (!Allowed(mask, i)) continue;
    const double v = std::exp((z[i] - max) / t);
    p.push_back({v, i});
    total += v;
  }
  std::sort(p.begin(), p.end(), [](auto a, auto b) { return a.first > b.first; });
  double cut = 0, cum = 0;
  if (top_p < 1) {
    for (const auto& [v, i] : p) {
      cum += v;
      cut = v;
      if (cum >= top_p * total) break;
    }
  }
  cut = std::max(cut, min_p);  // p_max is 1 before renormalising
  std::vector<std::int32_t> kept;
  for (const auto& [v, i] : p) {
    if (v >= cut) kept.push_back(i);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<std::int32_t> Kept(const std::vector<float>& probs) {
  std::vector<std::int32_t> kept;
  for (std::int32_t i = 0; i < static_cast<std::int32_t>(probs.size()); ++i) {
    if (probs[i] > 0) kept.push_back(i);
  }
  return kept;
}

TEST(CollectCandidatesTest, KernelsAgreeAndBoundTheTail) {
  if (!kernels::CpuHasAvx2()) GTEST_SKIP() << "no AVX2";
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<float> x = Logits(100 + trial, 2.0f, true);
    const std::int32_t width = kWidth - trial * 7;  // tails not a multiple of 32
    x[5] = kNegInf;
    const auto mask = Mask(trial, trial % 2 ? 0.5 : 0.99);
    const std::uint32_t* m = trial == 0 ? nullptr : mask.data();
    const float max = kernels::MaskedMax(x.data(), m, width);
    const float t = 0.7f, lo = max - 12 * t, scale = 1 / t;
    std::vector<TokenId> ids_s(width), ids_v(width);
    std::vector<float> vals_s(width), vals_v(width);
    double bound_s = 0, bound_v = 0;
    ASSERT_TRUE(kernels::ForceIsa(kernels::Isa::kScalar));
    const auto ns = kernels::CollectCandidates(x.data(), m, width, lo, max, scale, width,
                                               ids_s.data(), vals_s.data(), &bound_s);
    ASSERT_TRUE(kernels::ForceIsa(kernels::Isa::kAvx2));
    const auto nv = kernels::CollectCandidates(x.data(), m, width, lo, max, scale, width,
                                               ids_v.data(), vals_v.data(), &bound_v);
    kernels::ForceIsa(kernels::Isa::kAuto);
    ASSERT_EQ(ns, nv);
    EXPECT_EQ(bound_s, bound_v);
    double tail = 0;
    std::int32_t expect = 0;
    for (std::int32_t i = 0; i < width; ++i) {
      if (m != nullptr && !((m[i >> 5] >> (i & 31)) & 1u)) continue;
      if (x[i] >= lo) {
        ASSERT_EQ(ids_s[expect], i);
        ASSERT_EQ(ids_v[expect], i);
        ASSERT_EQ(vals_v[expect], x[i]);
        ++expect;
      } else {
        tail += std::exp((static_cast<double>(x[i]) - max) * scale);
      }
    }
    EXPECT_EQ(ns, expect);
    EXPECT_GE(bound_s, tail);
    EXPECT_LE(bound_s, tail * 1.08 + 1e-30) << "the bound should be within 6% (+1% widening)";
    // The limit: -1 as soon as there would be more candidates.
    if (expect > 1) {
      EXPECT_EQ(kernels::CollectCandidates(x.data(), m, width, lo, max, scale, expect - 1,
                                           ids_v.data(), vals_v.data(), &bound_v),
                -1);
    }
  }
}

struct Case {
  float stddev;
  bool peaked;
  double keep;  // mask density; 1 = no mask
  float t, top_p, min_p;
};

TEST(PrunedCutTest, KeptSetMatchesTheSortReferenceUnderBothKernels) {
  const Case cases[] = {
      {2, true, 0.99, 0.7f, 0.9f, 0},   {2, true, 1, 0.7f, 0.9f, 0.05f}, {2, true, 0.5, 1, 0.95f, 0},
      {3, true, 0.99, 0.5f, 0.8f, 0},   {2, false, 0.99, 0.7f, 0.9f, 0}, {1, true, 1, 1, 1, 0.1f},
      {4, false, 1, 0.3f, 0.5f, 0},     {2, true, 0.99, 2, 0.99f, 0},    {2, true, 0.99, 0.7f, 0, 0},
  };
  std::uint64_t seed = 1;
  for (const Case& c : cases) {
    const auto z = Logits(seed, c.stddev, c.peaked);
    const auto mask = Mask(seed++, c.keep);
    const std::vector<std::uint32_t>* m = c.keep < 1 ? &mask : nullptr;
    const auto expect = ReferenceKept(z, m, c.t, c.top_p, c.min_p);
    std::vector<float> probs[2];
    for (int isa = 0; isa < 2; ++isa) {
      if (isa == 1 && !kernels::ForceIsa(kernels::Isa::kAvx2)) continue;
      if (isa == 0) kernels::ForceIsa(kernels::Isa::kScalar);
      Sampler s({.temperature = c.t, .top_p = c.top_p, .min_p = c.min_p}, kWidth);
      probs[isa].resize(kWidth);
      s.Distribution(z, m ? m->data() : nullptr, {}, probs[isa]);
      EXPECT_EQ(Kept(probs[isa]), expect) << "stddev " << c.stddev << " T " << c.t << " top-p "
                                          << c.top_p << " min-p " << c.min_p;
      double sum = 0;
      for (float p : probs[isa]) sum += p;
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
    kernels::ForceIsa(kernels::Isa::kAuto);
    if (!probs[1].empty()) {
      EXPECT_EQ(probs[0], probs[1]) << "kernels differ";
    }
  }
}

TEST(PrunedCutTest, DrawsAreReproducibleAndInsideTheKeptSet) {
  const auto z = Logits(9, 2, true);
  const auto mask = Mask(9, 0.99);
  Sampler a({.temperature = 0.7f, .top_p = 0.9f, .seed = 3}, kWidth);
  Sampler b({.temperature = 0.7f, .top_p = 0.9f, .seed = 3});
  std::vector<float> probs(kWidth);
  a.Distribution(z, mask.data(), {}, probs);
  for (std::uint64_t step = 0; step < 200; ++step) {
    std::vector<float> x1 = z, x2 = z;
    const TokenId t1 = a.Sample(x1, mask.data(), 0, step);
    const TokenId t2 = b.Sample(x2, mask.data(), 0, step);
    ASSERT_EQ(t1, t2);
    ASSERT_GT(probs[t1], 0.0f);
  }
}

TEST(TraceTest, StagesFollowTheConfigAndEndInTheDistribution) {
  const std::vector<float> z = {6, 5, 4.5f, 3.5f, 2, 0};
  SamplerConfig c{.temperature = 1, .top_k = 5, .top_p = 0.9f, .min_p = 0.1f};
  c.logit_bias = {{5, 1.0f}};
  c.repetition_penalty = 1.25f;
  std::vector<std::uint32_t> mask = {0x1Fu};  // 0..4 allowed
  const std::vector<TokenId> history = {0};
  Sampler s(c);
  const auto stages = s.Trace(z, mask.data(), history);
  const char* names[] = {"logits", "logit_bias", "repetition", "frequency_presence", "mask",
                         "temperature", "top_k", "top_p", "min_p", "final"};
  ASSERT_EQ(stages.size(), std::size(names));
  for (std::size_t i = 0; i < stages.size(); ++i) EXPECT_EQ(stages[i].name, names[i]);
  EXPECT_NEAR(stages[0].probs[0], 0.590, 5e-4);
  EXPECT_GT(stages[1].probs[5], stages[0].probs[5]);     // bias raised token 5
  EXPECT_NEAR(stages[2].probs[0] / stages[2].probs[1], std::exp(4.8 - 5), 1e-4);
  EXPECT_FALSE(stages[3].enabled);
  EXPECT_EQ(stages[4].probs[5], 0.0f);                    // masked
  std::vector<float> probs(z.size());
  s.Distribution(z, mask.data(), history, probs);
  EXPECT_EQ(stages.back().probs, probs);
  EXPECT_EQ(stages[8].probs, probs);
  // Masked, penalised (4.8 5 4.5 3.5 2): .371 .303 .225 sum to .899 < .9, so top-p keeps 4.
  EXPECT_EQ(Kept(stages[7].probs).size(), 4u);
  EXPECT_GT(stages[7].kept_mass, 0.9 * stages[6].kept_mass - 1e-6);
  EXPECT_GT(stages[7].cutoff, 0.0f);
  EXPECT_EQ(s.config().top_k, 5);  // restored
}

TEST(LogprobsTest, RawConstrainedSampledAndTop) {
  const std::vector<float> z = {6, 5, 4.5f, 3.5f, 2, 0};
  std::vector<std::uint32_t> mask = {0x0Eu};  // 1, 2, 3
  Sampler s({.temperature = 1, .top_k = 2});
  const TokenLogprobs lp = s.Logprobs(z, mask.data(), {}, 1, 3);
  double lse = 0, lse_m = 0;
  for (int i = 0; i < 6; ++i) lse += std::exp(z[i]);
  for (int i = 1; i <= 3; ++i) lse_m += std::exp(z[i]);
  EXPECT_NEAR(lp.raw_logprob, 5 - std::log(lse), 1e-5);
  EXPECT_NEAR(lp.constrained_logprob, 5 - std::log(lse_m), 1e-5);
  EXPECT_NEAR(lp.sampled_logprob, 5 - std::log(std::exp(5.0) + std::exp(4.5)), 1e-5);
  double h = 0;
  for (int i = 1; i <= 3; ++i) {
    const double p = std::exp(z[i]) / lse_m;
    h -= p * std::log(p);
  }
  EXPECT_NEAR(lp.entropy, h, 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 2);
  EXPECT_EQ(lp.top[2].first, 3);
}

}  // namespace
}  // namespace lockstep
