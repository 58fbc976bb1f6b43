// Tests for decoder/sampling/mask_kernels.h and lockstep/bitmask.h: every AVX2 kernel against the scalar
// reference and both against naive loops, on random masks and logits of many widths.
#include "decoder/sampling/mask_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "lockstep/bitmask.h"

namespace lockstep::kernels {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
const std::int32_t kWidths[] = {1,   7,   31,  32,   33,    63,     64,    65,
                                255, 256, 257, 1000, 32000, 128256, 151665};

enum class MaskKind { kZero, kOne, kHalf, kSparse, kBlocky };
const MaskKind kKinds[] = {MaskKind::kZero, MaskKind::kOne, MaskKind::kHalf, MaskKind::kSparse,
                           MaskKind::kBlocky};

// A mask of `kind`; bits past `width` in the last word are set to garbage, which every kernel
// must ignore.
TokenBitmask MakeMask(std::int32_t width, MaskKind kind, std::mt19937_64& rng) {
  TokenBitmask m(width);
  std::uniform_real_distribution<double> u(0, 1);
  for (std::int32_t i = 0; i < width; ++i) {
    bool on = false;
    switch (kind) {
      case MaskKind::kZero:
        on = false;
        break;
      case MaskKind::kOne:
        on = true;
        break;
      case MaskKind::kHalf:
        on = u(rng) < 0.5;
        break;
      case MaskKind::kSparse:
        on = u(rng) < 0.001;
        break;
      case MaskKind::kBlocky:
        on = ((i / 32) % 3 == 0) || ((i / 32) % 3 == 1 && u(rng) < 0.3);
        break;
    }
    if (on) m.Set(i);
  }
  if (width % 32 != 0) m.words()[width / 32] |= ~((1u << (width % 32)) - 1);
  return m;
}

std::vector<float> MakeLogits(std::int32_t width, std::mt19937_64& rng, bool ties) {
  std::vector<float> x(width);
  std::normal_distribution<float> n(0, 3);
  std::uniform_int_distribution<int> small(0, 7);
  for (auto& v : x) v = ties ? static_cast<float>(small(rng)) : n(rng);
  return x;
}

bool Allowed(const TokenBitmask& m, std::int32_t i) { return m.Test(i); }

class KernelsTest : public ::testing::Test {
 protected:
  void TearDown() override { ForceIsa(Isa::kAuto); }
};

TEST(TokenBitmaskTest, LayoutAlignmentAndPadding) {
  TokenBitmask m(128256);
  EXPECT_EQ(m.width(), 128256);
  EXPECT_EQ(m.num_words(), 4008u);
  EXPECT_EQ(m.num_padded_words(), 4016u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(m.words()) % 64, 0u);
  m.Fill();
  for (std::size_t w = m.num_words(); w < m.num_padded_words(); ++w) EXPECT_EQ(m.words()[w], 0u);
  TokenBitmask odd(33);
  odd.Fill();
  EXPECT_EQ(odd.words()[0], ~0u);
  EXPECT_EQ(odd.words()[1], 1u);
  EXPECT_TRUE(odd.Test(32));
  EXPECT_FALSE(odd.Test(33));
  odd.Clear(32);
  EXPECT_FALSE(odd.Test(32));
  odd.Set(40);  // out of range: ignored
  EXPECT_EQ(odd.words()[1], 0u);
  odd.Set(5);
  TokenBitmask copy = odd;
  EXPECT_TRUE(copy.Test(5));
  TokenBitmask moved = std::move(copy);
  EXPECT_TRUE(moved.Test(5));
  EXPECT_EQ(copy.words(), nullptr);  // NOLINT: moved-from state is defined
  moved.Clear();
  EXPECT_FALSE(moved.Test(5));
  EXPECT_EQ(TokenBitmask(0).words(), nullptr);
}

TEST_F(KernelsTest, ExpMatchesStdExp) {
  double worst = 0;
  for (float x = -87.0f; x <= 0.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(ExpNonPositive(x) - ref) / ref);
  }
  EXPECT_LT(worst, 1e-6);
  EXPECT_EQ(ExpNonPositive(0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositive(-100.0f), 0.0f);
  EXPECT_EQ(ExpNonPositive(kNegInf), 0.0f);
}

// Runs every kernel under `isa` and records the results.
struct Outputs {
  std::vector<float> masked;
  std::size_t popcount, allowed;
  std::vector<std::uint32_t> anded, ored;
  TokenId first, argmax, argmax_nomask;
  float max;
  std::vector<float> exp, exp_blocks, thr, thr_blocks;
  double exp_total, thr_total;
  std::vector<TokenId> above;
};

void TopVisit(void* ctx, TokenId id, float) {
  static_cast<std::vector<TokenId>*>(ctx)->push_back(id);
}

Outputs RunKernels(Isa isa, const std::vector<float>& logits, const TokenBitmask& mask,
                   const TokenBitmask& other) {
  EXPECT_TRUE(ForceIsa(isa));
  const std::int32_t width = mask.width();
  Outputs o;
  o.masked = logits;
  ApplyMask(o.masked.data(), mask.words(), width);
  o.popcount = Popcount(mask.words(), mask.num_words());
  o.allowed = CountAllowed(mask.words(), width);
  o.anded.assign(mask.words(), mask.words() + mask.num_words());
  o.ored = o.anded;
  AndInto(o.anded.data(), other.words(), o.anded.size());
  OrInto(o.ored.data(), other.words(), o.ored.size());
  o.first = FirstSetBit(mask.words(), width);
  o.argmax = MaskedArgmax(logits.data(), mask.words(), width);
  o.argmax_nomask = MaskedArgmax(logits.data(), nullptr, width);
  o.max = MaskedMax(logits.data(), mask.words(), width);
  o.exp = logits;
  o.exp_blocks.resize(NumBlocks(width));
  const float shift = MaskedMax(logits.data(), nullptr, width);
  o.exp_total = ExpBlocks(o.exp.data(), mask.words(), width, shift, 0.7f, o.exp_blocks.data());
  o.thr = o.exp;
  o.thr_blocks.resize(NumBlocks(width));
  o.thr_total = ThresholdBlocks(o.thr.data(), width, 0.01f, o.thr_blocks.data());
  // A visitor that keeps raising the threshold, as top-k does.
  struct Ctx {
    std::vector<TokenId> ids;
    float threshold = -1.0f;
    const float* x;
  } ctx;
  ctx.x = logits.data();
  ForEachAbove(
      logits.data(), mask.words(), width, &ctx.threshold,
      [](void* c, TokenId id, float value) {
        auto* s = static_cast<Ctx*>(c);
        s->ids.push_back(id);
        s->threshold = std::max(s->threshold, value - 0.5f);  // may only rise
      },
      &ctx);
  o.above = ctx.ids;
  std::vector<TokenId> all;
  float low = 5.0f;
  ForEachAbove(logits.data(), nullptr, width, &low, TopVisit, &all);
  o.above.push_back(-1);
  o.above.insert(o.above.end(), all.begin(), all.end());
  return o;
}

TEST_F(KernelsTest, ScalarMatchesNaiveAndAvx2MatchesScalar) {
  std::mt19937_64 rng(42);
  for (std::int32_t width : kWidths) {
    for (MaskKind kind : kKinds) {
      for (bool ties : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "width " << width << " kind " << static_cast<int>(kind)
                                          << " ties " << ties);
        const TokenBitmask mask = MakeMask(width, kind, rng);
        const TokenBitmask other = MakeMask(width, MaskKind::kHalf, rng);
        std::vector<float> logits = MakeLogits(width, rng, ties);
        if (width > 40) logits[width / 3] = kNegInf;  // an allowed -inf must not confuse anything

        // Naive references.
        std::size_t allowed = 0;
        TokenId first = kNoToken, argmax = kNoToken, argmax_nomask = kNoToken;
        float max = kNegInf, max_nomask = kNegInf;
        for (std::int32_t i = 0; i < width; ++i) {
          if (logits[i] > max_nomask) {
            max_nomask = logits[i];
            argmax_nomask = i;
          }
          if (!Allowed(mask, i)) continue;
          ++allowed;
          if (first == kNoToken) first = i;
          if (logits[i] > max) {
            max = logits[i];
            argmax = i;
          }
        }
        if (argmax == kNoToken) argmax = first;
        std::size_t pop = 0;
        for (std::size_t w = 0; w < mask.num_words(); ++w)
          pop += __builtin_popcount(mask.words()[w]);
        std::vector<TokenId> visited;
        ForEachSetBit(mask.words(), width, [&](TokenId id) { visited.push_back(id); });
        std::vector<TokenId> expected_visited;
        for (std::int32_t i = 0; i < width; ++i) {
          if (Allowed(mask, i)) expected_visited.push_back(i);
        }
        EXPECT_EQ(visited, expected_visited);

        const Outputs s = RunKernels(Isa::kScalar, logits, mask, other);
        EXPECT_EQ(s.allowed, allowed);
        EXPECT_EQ(s.popcount, pop);
        EXPECT_EQ(s.first, first);
        EXPECT_EQ(s.argmax, argmax);
        EXPECT_EQ(s.argmax_nomask, argmax_nomask);
        EXPECT_EQ(s.max, max);
        for (std::int32_t i = 0; i < width; ++i) {
          ASSERT_EQ(s.masked[i], Allowed(mask, i) ? logits[i] : kNegInf) << i;
          ASSERT_EQ(s.anded[i / 32], mask.words()[i / 32] & other.words()[i / 32]);
          ASSERT_EQ(s.ored[i / 32], mask.words()[i / 32] | other.words()[i / 32]);
          if (!Allowed(mask, i)) {
            ASSERT_EQ(s.exp[i], 0.0f);
          }
          if (Allowed(mask, i) && std::isfinite(logits[i])) {
            const double ref = std::exp((static_cast<double>(logits[i]) - max_nomask) * 0.7);
            if (ref > 1e-30) {
              ASSERT_NEAR(s.exp[i] / ref, 1.0, 2e-6) << i;
            }
          }
        }
        double sum = 0;
        for (float v : s.exp) sum += v;
        EXPECT_NEAR(s.exp_total, sum, 1e-5 * sum + 1e-30);

        if (!CpuHasAvx2()) continue;
        const Outputs a = RunKernels(Isa::kAvx2, logits, mask, other);
        EXPECT_EQ(ActiveIsa(), Isa::kAvx2);
        EXPECT_EQ(0, std::memcmp(a.masked.data(), s.masked.data(), sizeof(float) * width));
        EXPECT_EQ(a.popcount, s.popcount);
        EXPECT_EQ(a.allowed, s.allowed);
        EXPECT_EQ(a.anded, s.anded);
        EXPECT_EQ(a.ored, s.ored);
        EXPECT_EQ(a.first, s.first);
        EXPECT_EQ(a.argmax, s.argmax);
        EXPECT_EQ(a.argmax_nomask, s.argmax_nomask);
        EXPECT_EQ(a.max, s.max);
        // Bit-identical exp, block sums and totals.
        EXPECT_EQ(0, std::memcmp(a.exp.data(), s.exp.data(), sizeof(float) * width));
        EXPECT_EQ(a.exp_blocks, s.exp_blocks);
        EXPECT_EQ(a.exp_total, s.exp_total);
        EXPECT_EQ(0, std::memcmp(a.thr.data(), s.thr.data(), sizeof(float) * width));
        EXPECT_EQ(a.thr_blocks, s.thr_blocks);
        EXPECT_EQ(a.thr_total, s.thr_total);
        EXPECT_EQ(a.above, s.above);
      }
    }
  }
}

TEST_F(KernelsTest, ArgmaxTiesGoToLowestId) {
  for (Isa isa : {Isa::kScalar, Isa::kAvx2}) {
    if (!ForceIsa(isa)) continue;
    std::vector<float> x(1000, 1.0f);
    x[700] = 3.0f;
    x[300] = 3.0f;
    x[999] = 3.0f;
    EXPECT_EQ(MaskedArgmax(x.data(), nullptr, 1000), 300);
    TokenBitmask m(1000);
    m.Set(999);
    m.Set(700);
    EXPECT_EQ(MaskedArgmax(x.data(), m.words(), 1000), 700);
    std::vector<float> inf(100, kNegInf);
    TokenBitmask n(100);
    n.Set(57);
    n.Set(90);
    EXPECT_EQ(MaskedArgmax(inf.data(), n.words(), 100), 57);
    n.Clear();
    EXPECT_EQ(MaskedArgmax(inf.data(), n.words(), 100), kNoToken);
    EXPECT_EQ(MaskedMax(inf.data(), n.words(), 100), kNegInf);
    EXPECT_EQ(FirstSetBit(n.words(), 100), kNoToken);
  }
}

TEST_F(KernelsTest, ForceIsa) {
  EXPECT_TRUE(ForceIsa(Isa::kScalar));
  EXPECT_EQ(ActiveIsa(), Isa::kScalar);
  EXPECT_EQ(ForceIsa(Isa::kAvx2), CpuHasAvx2());
  EXPECT_TRUE(ForceIsa(Isa::kAuto));
  EXPECT_EQ(ActiveIsa(), CpuHasAvx2() ? Isa::kAvx2 : Isa::kScalar);
}

}  // namespace
}  // namespace lockstep::kernels
