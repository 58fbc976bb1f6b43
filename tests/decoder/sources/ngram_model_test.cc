// Tests for lockstep/ngram_model.h and UniformSource (lockstep/logits_source.h) on hand-made
// token corpora: normalisation, smoothing and backoff, EOS after document ends, the binary format
// (round trip, and rejection of wrong magic/version/fingerprint and corrupt files).
#include "lockstep/ngram_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lockstep/logits_source.h"

namespace lockstep {
namespace {

constexpr std::int32_t kWidth = 40;  // ids 20..39 never occur: padding-like
constexpr TokenId kEos = 19;

std::vector<std::vector<TokenId>> Corpus() {
  return {{1, 2, 3}, {1, 2, 4}, {1, 2, 3}, {5, 6, 7, 8}, {5, 6, 7, 8}, {1, 2, 3, 9, 9}};
}

NgramModel TrainOrDie(int order) {
  Result<NgramModel> m = NgramModel::Train(Corpus(), kWidth, kEos, order);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return std::move(m).value();
}

std::vector<float> LogitsOf(NgramModel& m, std::vector<TokenId> context) {
  std::vector<float> out(m.width());
  m.Logits(context, out);
  return out;
}

TEST(NgramModelTest, ProbabilitiesSumToOne) {
  for (int order : {2, 3, 4}) {
    NgramModel m = TrainOrDie(order);
    const std::vector<std::vector<TokenId>> contexts = {
        {}, {1}, {1, 2}, {1, 2, 3}, {5, 5}, {30, 31}, {9, 9, 9, 9}, {kEos}, {1, 2, 3, kEos}};
    for (const auto& c : contexts) {
      const std::vector<float> l = LogitsOf(m, c);
      double sum = 0;
      for (float v : l) {
        ASSERT_TRUE(std::isfinite(v));
        sum += std::exp(static_cast<double>(v));
      }
      EXPECT_NEAR(sum, 1.0, 1e-4) << "order " << order << " context size " << c.size();
    }
  }
}

TEST(NgramModelTest, SeenContinuationsBeatUnseenAndEosEndsDocuments) {
  NgramModel m = TrainOrDie(3);
  std::vector<float> l = LogitsOf(m, {1, 2});
  EXPECT_GT(l[3], l[4]);    // seen 3 times vs once
  EXPECT_GT(l[4], l[5]);    // seen vs unseen in this context
  EXPECT_GT(l[5], l[25]);   // seen somewhere vs never seen
  EXPECT_EQ(l[25], l[39]);  // never-seen ids share the floor
  l = LogitsOf(m, {5, 6, 7, 8});
  EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), kEos);
  l = LogitsOf(m, {1, 2, 4});
  EXPECT_EQ(std::max_element(l.begin(), l.end()) - l.begin(), kEos);
  // Empty context = document start (EOS in front): documents start with 1 or 5.
  l = LogitsOf(m, {});
  const TokenId first = static_cast<TokenId>(std::max_element(l.begin(), l.end()) - l.begin());
  EXPECT_EQ(first, 1);
  EXPECT_GT(l[5], l[3]);
  // Out-of-range context ids back off instead of failing.
  l = LogitsOf(m, {-4, 1000});
  double sum = 0;
  for (float v : l) sum += std::exp(static_cast<double>(v));
  EXPECT_NEAR(sum, 1.0, 1e-4);
  // Wrong output size: left untouched.
  std::vector<float> small(3, 7.0f);
  m.Logits(std::vector<TokenId>{1}, small);
  EXPECT_EQ(small, std::vector<float>(3, 7.0f));
}

TEST(NgramModelTest, WittenBellByHand) {
  // Bigram model over {EOS 1 2 EOS}, {EOS 1 3 EOS}, width 5, eos 4.
  Result<NgramModel> r = NgramModel::Train({{1, 2}, {1, 3}}, 5, 4, 2);
  ASSERT_TRUE(r.ok());
  NgramModel m = std::move(r).value();
  // Unigram: N = 6 (1,2,EOS,1,3,EOS), types T0 = 4 (1,2,3,EOS): P(w) = (c + 4/5) / 10.
  auto uni = [](double c) { return (c + 0.8) / 10.0; };
  std::vector<float> l = LogitsOf(m, {1});
  // After 1: c = 2, T = 2 (2, 3): P(2|1) = (1 + 2 * P(2)) / 4.
  EXPECT_NEAR(std::exp(l[2]), (1 + 2 * uni(1)) / 4, 1e-6);
  EXPECT_NEAR(std::exp(l[0]), (0 + 2 * uni(0)) / 4, 1e-6);
  EXPECT_NEAR(std::exp(l[4]), (0 + 2 * uni(2)) / 4, 1e-6);
  // Unseen context 0: the unigram.
  l = LogitsOf(m, {0});
  EXPECT_NEAR(std::exp(l[1]), uni(2), 1e-6);
  EXPECT_EQ(m.num_tokens(), 6u);
  EXPECT_EQ(m.num_contexts(1), 4u);  // EOS, 1, 2, 3
}

TEST(NgramModelTest, TrainRejectsBadInput) {
  EXPECT_FALSE(NgramModel::Train(Corpus(), kWidth, kEos, 1).ok());
  EXPECT_FALSE(NgramModel::Train(Corpus(), kWidth, kEos, 5).ok());
  EXPECT_FALSE(NgramModel::Train(Corpus(), kWidth, kWidth, 3).ok());
  EXPECT_FALSE(NgramModel::Train({{1, 2, 40}}, kWidth, kEos, 3).ok());
  EXPECT_FALSE(NgramModel::Train({{-1}}, kWidth, kEos, 3).ok());
  EXPECT_FALSE(NgramModel::Train(Corpus(), 0, 0, 3).ok());
  EXPECT_FALSE(NgramModel::Train({}, kWidth, kEos, 3).ok());  // nothing to learn from
}

std::string TempPath(const char* name) {
  return ::testing::TempDir() + "/lockstep_ngram_" + name + ".bin";
}

TEST(NgramModelTest, SaveLoadRoundTripGivesIdenticalLogits) {
  NgramModel m = TrainOrDie(4);
  const std::string path = TempPath("roundtrip");
  ASSERT_TRUE(m.Save(path, 0x1234).ok());
  Result<NgramModel> loaded = NgramModel::Load(path, 0x1234);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->order(), 4);
  EXPECT_EQ(loaded->eos(), kEos);
  EXPECT_EQ(loaded->num_tokens(), m.num_tokens());
  for (const auto& c : std::vector<std::vector<TokenId>>{{}, {1, 2}, {5, 6, 7}, {9, 9, 9}}) {
    const std::vector<float> a = LogitsOf(m, c);
    const std::vector<float> b = LogitsOf(*loaded, c);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(float)));
  }
  EXPECT_EQ(loaded->Serialize(0x1234), m.Serialize(0x1234));
  NgramModel copy = *loaded;  // a value type: copies are independent
  EXPECT_EQ(LogitsOf(copy, {1, 2}), LogitsOf(m, {1, 2}));
  // Fingerprint 0 means "do not check".
  EXPECT_TRUE(NgramModel::Load(path, 0).ok());
  std::remove(path.c_str());
}

TEST(NgramModelTest, LoadRejectsBadFiles) {
  NgramModel m = TrainOrDie(3);
  const std::string good = m.Serialize(77);
  ASSERT_TRUE(NgramModel::Deserialize(good, 77).ok());

  Result<NgramModel> r = NgramModel::Deserialize(good, 78);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("fingerprint"), std::string::npos);

  std::string bad = good;
  bad[0] = 'X';
  r = NgramModel::Deserialize(bad, 77);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);

  bad = good;
  bad[8] = 2;  // version 2
  r = NgramModel::Deserialize(bad, 77);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("version"), std::string::npos);

  // Every single-byte corruption and every truncation is rejected, never a crash.
  for (std::size_t i = 0; i < good.size(); ++i) {
    bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5A);
    EXPECT_FALSE(NgramModel::Deserialize(bad, 77).ok()) << "byte " << i;
    EXPECT_FALSE(NgramModel::Deserialize(good.substr(0, i), 77).ok()) << "length " << i;
  }
  EXPECT_FALSE(NgramModel::Deserialize(good + "x", 77).ok());

  EXPECT_EQ(NgramModel::Load(TempPath("missing"), 0).status().code(), StatusCode::kIoError);
}

// Corruptions that keep a valid checksum must still be caught by the structural checks (or load
// into a model that works): never a crash, never out-of-range reads.
TEST(NgramModelTest, StructurallyCorruptFilesWithValidChecksumNeverCrash) {
  NgramModel m = TrainOrDie(4);
  const std::string good = m.Serialize(0);
  auto fix_checksum = [](std::string& bytes) {
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (std::size_t i = 0; i + 8 < bytes.size(); ++i) {
      h ^= static_cast<unsigned char>(bytes[i]);
      h *= 0x100000001B3ull;
    }
    std::memcpy(bytes.data() + bytes.size() - 8, &h, 8);
  };
  std::string copy = good;
  fix_checksum(copy);
  ASSERT_EQ(copy, good);  // the test's checksum is the format's
  std::mt19937_64 rng(17);
  int loaded = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    std::string bad = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const std::size_t pos = 8 + rng() % (bad.size() - 16);
      bad[pos] = static_cast<char>(rng() % 4 == 0 ? 0xFF : rng());
    }
    fix_checksum(bad);
    Result<NgramModel> r = NgramModel::Deserialize(bad, 0);
    if (!r.ok()) continue;
    ++loaded;
    std::vector<float> out(r->width());
    r->Logits(std::vector<TokenId>{1, 2, 3}, out);
    for (float v : out) ASSERT_FALSE(std::isnan(v));
  }
  // Count edits can leave a consistent model; most edits must be rejected.
  EXPECT_LT(loaded, 5000);
}

TEST(UniformSourceTest, DeterministicAndContextDependent) {
  UniformSource a(1000, 5), b(1000, 5), c(1000, 6);
  std::vector<float> x(1000), y(1000), z(1000);
  const std::vector<TokenId> ctx = {3, 4, 5};
  a.Logits(ctx, x);
  b.Logits(ctx, y);
  c.Logits(ctx, z);
  EXPECT_EQ(x, y);
  EXPECT_NE(x, z);
  for (float v : x) ASSERT_TRUE(v >= 0.0f && v < 8.0f);
  a.Logits(std::vector<TokenId>{3, 4, 6}, y);
  EXPECT_NE(x, y);
  a.Logits(std::vector<TokenId>{4, 5}, y);
  EXPECT_NE(x, y);
  double mean = 0;
  for (float v : x) mean += v;
  EXPECT_NEAR(mean / 1000, 4.0, 0.3);
  EXPECT_EQ(a.width(), 1000);
}

}  // namespace
}  // namespace lockstep
