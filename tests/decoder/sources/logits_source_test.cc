// Logits sources and combinators: the C callback, replay of recorded logits (round trip, and
// truncated or corrupt files rejected with an offset), scripted logits (steps, context suffixes,
// errors with JSON Pointers), classifier-free guidance and contrastive decoding checked by value
// against formulas computed here, and their identity settings (gamma = 1, alpha = 0) reproducing
// the plain distribution bit for bit, with and without a grammar mask.
#include "lockstep/logits_source.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "decoder/decode_test_util.h"
#include "lockstep/decoding.h"
#include "lockstep/sampler.h"

namespace lockstep {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Call(LogitsSource& s, std::vector<TokenId> ctx,
                        const std::uint32_t* mask = nullptr) {
  std::vector<float> out(s.width(), 12345.0f);
  s.MaskedLogits(ctx, mask, out);
  return out;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("lockstep_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// ---- callback ----------------------------------------------------------------------------------

extern "C" void TestCallback(void* user, const int32_t* context, size_t n, float* out,
                             int32_t width) {
  int* calls = static_cast<int*>(user);
  ++*calls;
  for (int32_t i = 0; i < width; ++i) out[i] = static_cast<float>(i) + (n ? context[n - 1] : -1);
}

TEST(CallbackSourceTest, PassesContextAndUserPointer) {
  int calls = 0;
  CallbackSource s(&TestCallback, &calls, 4);
  EXPECT_EQ(s.width(), 4);
  EXPECT_EQ(Call(s, {7, 2}), (std::vector<float>{2, 3, 4, 5}));
  EXPECT_EQ(Call(s, {}), (std::vector<float>{-1, 0, 1, 2}));
  EXPECT_EQ(calls, 2);
  std::vector<float> wrong(3, 9.0f);
  s.Logits({}, wrong);  // wrong size: untouched, not called
  EXPECT_EQ(wrong, std::vector<float>(3, 9.0f));
  EXPECT_EQ(calls, 2);
}

// ---- replay ------------------------------------------------------------------------------------

TEST(ReplaySourceTest, WriterRoundTripsRowsInCallOrder) {
  const std::string path = TempPath("roundtrip.logits");
  UniformSource uni(37, 5);
  std::vector<std::vector<float>> rows;
  {
    auto w = LogitsWriter::Open(path, 37);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    for (int k = 0; k < 5; ++k) {
      rows.push_back(Call(uni, std::vector<TokenId>(k, 3)));
      if (k == 2) rows.back()[4] = -kInf;  // -inf is a valid logit
      ASSERT_TRUE((*w)->Append(rows.back()).ok());
    }
    EXPECT_FALSE((*w)->Append(std::vector<float>(36)).ok());  // wrong width
    ASSERT_TRUE((*w)->Close().ok());
  }
  EXPECT_EQ(std::filesystem::file_size(path), kLogitsHeaderBytes + 5 * 37 * 4);
  auto r = ReplaySource::Load(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ReplaySource& rep = **r;
  EXPECT_EQ(rep.width(), 37);
  EXPECT_EQ(rep.steps(), 5u);
  for (int k = 0; k < 5; ++k) EXPECT_EQ(Call(rep, {}), rows[k]) << k;
  EXPECT_FALSE(rep.exhausted());
  EXPECT_EQ(Call(rep, {}), std::vector<float>(37, 0.0f));
  EXPECT_TRUE(rep.exhausted());
  rep.Rewind();
  EXPECT_EQ(Call(rep, {}), rows[0]);
  // SerializeLogits writes the same bytes as the writer.
  std::vector<float> flat;
  for (auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  std::ifstream in(path, std::ios::binary);
  std::string disk((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(SerializeLogits(37, flat), disk);
  std::filesystem::remove(path);
}

TEST(ReplaySourceTest, RecordedGenerationReplaysToTheSameTokens) {
  auto grammar = testing::CompileTiny("(a|b){2,6}c");
  ASSERT_NE(grammar, nullptr);
  const std::string path = TempPath("generation.logits");
  UniformSource uni(grammar->logits_width(), 99);
  GenerateOptions opt;
  opt.sampler.seed = 4;
  opt.jump_forward = false;
  GenerateResult first;
  {
    auto w = LogitsWriter::Open(path, grammar->logits_width());
    ASSERT_TRUE(w.ok());
    RecordingSource rec(uni, **w);
    Matcher m(grammar);
    auto r = Generate(rec, m, {}, opt);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    first = *r;
    EXPECT_TRUE(rec.status().ok());
    EXPECT_EQ((*w)->steps(), static_cast<std::uint64_t>(first.model_calls));
  }
  auto rep = ReplaySource::Load(path);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  Matcher m(grammar);
  auto again = Generate(**rep, m, {}, opt);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->tokens, first.tokens);
  EXPECT_EQ(again->text, first.text);
  EXPECT_EQ(again->finish, FinishReason::kEos);
  std::filesystem::remove(path);
}

void ExpectRejected(std::string_view bytes, const std::string& message_part,
                    const std::string& location_part) {
  auto r = ReplaySource::Parse(bytes, "rec.logits");
  ASSERT_FALSE(r.ok()) << message_part;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(message_part), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().location().find(location_part), std::string::npos) << r.status().location();
}

TEST(ReplaySourceTest, TruncatedOrCorruptFilesAreRejectedWithAnOffset) {
  std::vector<float> flat(3 * 10);
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = 0.5f * i;
  const std::string good = SerializeLogits(10, flat);
  ASSERT_TRUE(ReplaySource::Parse(good).ok());
  // Cut inside row 2: rows 0 and 1 are whole, row 2 would start at 24 + 2 * 40 = 104.
  ExpectRejected(good.substr(0, good.size() - 7), "truncated", "rec.logits: offset 104");
  ExpectRejected(good.substr(0, 10), "truncated header", "offset 10");
  ExpectRejected(good + "xy", "trailing bytes", "offset 144");
  std::string bad = good;
  bad[0] = 'X';
  ExpectRejected(bad, "bad magic", "offset 0");
  bad = good;
  bad[8] = 7;
  ExpectRejected(bad, "unsupported version 7", "offset 8");
  bad = good;
  const std::int32_t neg = -3;
  std::memcpy(bad.data() + 12, &neg, 4);
  ExpectRejected(bad, "width -3", "offset 12");
  bad = good;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(bad.data() + 24 + 4 * 13, &nan, 4);
  ExpectRejected(bad, "NaN", "offset 76");
  auto missing = ReplaySource::Load("/nonexistent/file.logits");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
}

// ---- scripted ----------------------------------------------------------------------------------

TEST(ScriptedSourceTest, StepsContextsAndDefaults) {
  auto s = ScriptedSource::Parse(R"({
    "width": 3, "labels": ["x", "y", "z"],
    "steps": [[1, 2, 3], [4, 5, null]],
    "contexts": {"y": [7, 8, 9], "x y": [0, 0, 1], "2 2": [5, 5, 5]}})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->labels(), (std::vector<std::string>{"x", "y", "z"}));
  EXPECT_EQ(Call(**s, {}), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(Call(**s, {0}), (std::vector<float>{4, 5, -kInf}));
  EXPECT_EQ(Call(**s, {0, 0, 0}), (std::vector<float>{4, 5, -kInf}));  // last step repeats
  EXPECT_EQ(Call(**s, {2, 1}), (std::vector<float>{7, 8, 9}));         // suffix "y"
  EXPECT_EQ(Call(**s, {2, 0, 1}), (std::vector<float>{0, 0, 1}));      // longest suffix "x y"
  EXPECT_EQ(Call(**s, {2, 2}), (std::vector<float>{5, 5, 5}));         // keyed by ids

  auto p = ScriptedSource::Parse(R"({"width": 2, "probabilities": true, "default": [0.25, 0]})");
  ASSERT_TRUE(p.ok());
  auto row = Call(**p, {1});
  EXPECT_FLOAT_EQ(row[0], std::log(0.25f));
  EXPECT_EQ(row[1], -kInf);
}

TEST(ScriptedSourceTest, ErrorsNameTheJsonPointer) {
  struct Case {
    const char* json;
    const char* location;
  } cases[] = {
      {R"({"steps": []})", "/width"},
      {R"({"width": 2, "steps": [[1, 2], [1]]})", "/steps/1"},
      {R"({"width": 2, "steps": [[1, "x"]]})", "/steps/0/1"},
      {R"({"width": 2, "contexts": {"q": [1, 2]}})", "/contexts/q"},
      {R"({"width": 2, "labels": ["a", "a"]})", "/labels/1"},
      {R"({"width": 2, "probabilities": true, "default": [1, -1]})", "/default/1"},
      {R"({"width": 2, "stepz": []})", "/stepz"},
      {R"({"width": 2,)", "offset"},
  };
  for (const Case& c : cases) {
    auto r = ScriptedSource::Parse(c.json);
    ASSERT_FALSE(r.ok()) << c.json;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().location().find(c.location), std::string::npos)
        << c.json << " -> " << r.status().ToString();
  }
}

// ---- combinators -------------------------------------------------------------------------------

std::unique_ptr<ScriptedSource> Script(const std::string& json) {
  auto s = ScriptedSource::Parse(json);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

TEST(GuidanceSourceTest, MatchesTheFormulaByValue) {
  // One model, two contexts: the conditional prompt is [0], the negative prompt [1, 1].
  auto model = Script(R"({"width": 4, "contexts": {
      "0": [2.0, 1.0, 0.5, -1.0], "1 1": [1.5, 1.5, 0.0, null],
      "0 3": [0.25, 0.75, 3.0, 1.0], "1 1 3": [1.0, 0.5, 2.0, 1.0]}})");
  const double zc[4] = {2.0, 1.0, 0.5, -1.0}, zu[4] = {1.5, 1.5, 0.0, -INFINITY};
  for (float gamma : {0.0f, 0.5f, 2.0f, 3.5f}) {
    GuidanceSource g(*model, /*prompt_length=*/1, {1, 1}, gamma);
    auto out = Call(g, {0});
    for (int i = 0; i < 3; ++i) {
      const double want = zu[i] + gamma * (zc[i] - zu[i]);
      EXPECT_NEAR(out[i], want, 1e-6) << "gamma " << gamma << " id " << i;
    }
    EXPECT_EQ(out[3], -kInf);
    // After one generated token (3), both contexts carry it.
    auto next = Call(g, {0, 3});
    const double c2[4] = {0.25, 0.75, 3.0, 1.0}, u2[4] = {1.0, 0.5, 2.0, 1.0};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(next[i], u2[i] + gamma * (c2[i] - u2[i]), 1e-6);
  }
}

TEST(ContrastiveSourceTest, MatchesTheFormulaByValueWithAndWithoutMask) {
  auto strong = Script(R"({"width": 5, "default": [3.0, 2.5, 1.0, -0.5, 2.9]})");
  auto weak = Script(R"({"width": 5, "default": [2.0, -1.0, 0.5, 0.0, 3.0]})");
  const double zs[5] = {3.0, 2.5, 1.0, -0.5, 2.9}, zw[5] = {2.0, -1.0, 0.5, 0.0, 3.0};
  const float alpha = 0.5f, beta = 0.2f;
  ContrastiveSource c(*strong, *weak, alpha, beta);
  // Independently: p_strong by softmax in double, the cut at beta * max p.
  auto expect = [&](const std::vector<int>& allowed, const std::vector<float>& out) {
    double z = 0, pmax = 0;
    std::vector<double> p(5);
    for (int i : allowed) z += std::exp(zs[i]);
    for (int i : allowed) pmax = std::max(pmax, std::exp(zs[i]) / z);
    for (int i : allowed) {
      const double pi = std::exp(zs[i]) / z;
      if (pi >= beta * pmax) {
        EXPECT_NEAR(out[i], zs[i] - alpha * zw[i], 1e-6) << i;
      } else {
        EXPECT_EQ(out[i], -kInf) << i;
      }
    }
  };
  auto all = Call(c, {});
  expect({0, 1, 2, 3, 4}, all);
  EXPECT_EQ(all[2], -kInf);  // e^1 / e^3 = .135 < .2
  EXPECT_NEAR(all[1], 3.0, 1e-6);
  // Under a mask without the strong model's best (0) nor 4, the cut follows the best allowed (1):
  // token 2 (e^-1.5 = .22 of it) is now plausible, 3 (e^-3) is not.
  std::uint32_t mask = (1u << 1) | (1u << 2) | (1u << 3);
  auto masked = Call(c, {}, &mask);
  expect({1, 2, 3}, masked);
  EXPECT_NEAR(masked[2], 1.0 - 0.25, 1e-6);
  EXPECT_EQ(masked[3], -kInf);
}

TEST(CombinatorTest, GammaOneAndAlphaZeroReproduceThePlainDistributionExactly) {
  UniformSource plain(300, 17), weak(300, 18);
  GuidanceSource g1(plain, 2, {5, 6, 7}, 1.0f);
  ContrastiveSource c0(plain, weak, 0.0f, 0.0f);
  std::vector<std::uint32_t> mask(BitmaskWords(300));
  for (std::size_t w = 0; w < mask.size(); ++w)
    mask[w] = 0x5A5A5A5Au ^ static_cast<std::uint32_t>(w);
  mask.back() &= (1u << (300 % 32)) - 1;
  for (const SamplerConfig& cfg :
       {SamplerConfig{}, SamplerConfig{.temperature = 0.7f, .top_p = 0.9f},
        SamplerConfig{.temperature = 1.3f, .top_k = 20}}) {
    Sampler sampler(cfg, 300);
    for (std::vector<TokenId> ctx :
         {std::vector<TokenId>{1, 2}, std::vector<TokenId>{1, 2, 9, 4}}) {
      for (const std::uint32_t* m : {static_cast<const std::uint32_t*>(nullptr),
                                     static_cast<const std::uint32_t*>(mask.data())}) {
        auto z = Call(plain, ctx, m);
        EXPECT_EQ(Call(g1, ctx, m), z);
        EXPECT_EQ(Call(c0, ctx, m), z);
        std::vector<float> p0(300), p1(300), p2(300);
        sampler.Distribution(z, m, {}, p0);
        sampler.Distribution(Call(g1, ctx, m), m, {}, p1);
        sampler.Distribution(Call(c0, ctx, m), m, {}, p2);
        EXPECT_EQ(p0, p1);
        EXPECT_EQ(p0, p2);
      }
    }
  }
}

TEST(CombinatorTest, UsableUnderAGrammarMaskInGenerate) {
  auto grammar = testing::CompileTiny("(a|b){1,4}c");
  ASSERT_NE(grammar, nullptr);
  UniformSource model(grammar->logits_width(), 3), weak(grammar->logits_width(), 4);
  GuidanceSource g(model, 0, {2, 2}, 2.5f);
  ContrastiveSource c(model, weak, 1.0f, 0.5f);
  for (LogitsSource* s : {static_cast<LogitsSource*>(&g), static_cast<LogitsSource*>(&c)}) {
    for (std::uint64_t seed = 0; seed < 50; ++seed) {
      Matcher m(grammar);
      GenerateOptions opt;
      opt.sampler.seed = seed;
      auto r = Generate(*s, m, {}, opt);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->finish, FinishReason::kEos);
      ASSERT_GE(r->text.size(), 2u);
      EXPECT_EQ(r->text.back(), 'c');
    }
  }
}

}  // namespace
}  // namespace lockstep
