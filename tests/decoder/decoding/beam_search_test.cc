// Beam search under a grammar, on the textbook example built with the scripted source: first
// step .40 vs .35, continuations .50 vs .90; greedy takes a.a (.20), beam width 2 finds b.a
// (.315). Also the length penalty's ranking and the generation loop's jump-forward.
#include <gtest/gtest.h>

#include <cmath>

#include "decoder/decode_test_util.h"
#include "lockstep/decoding.h"
#include "lockstep/logits_source.h"

namespace lockstep {
namespace {

// Tiny vocabulary ids: a 0, b 1, c 2, ab 3, ba 4, </s> 5. Two letters from [abc], then EOS.
constexpr const char* kTextbook = R"({
  "width": 6, "labels": ["a", "b", "c", "ab", "ba", "eos"], "probabilities": true,
  "contexts": {
    "":  [0.40, 0.35, 0.25, 0, 0, 0],
    "a": [0.50, 0.30, 0.20, 0, 0, 1],
    "b": [0.90, 0.05, 0.05, 0, 0, 1],
    "c": [0.40, 0.30, 0.30, 0, 0, 1]}})";

TEST(BeamSearchTest, WidthTwoFindsTheSequenceGreedyMisses) {
  auto grammar = testing::CompileTiny("[abc][abc]");
  ASSERT_NE(grammar, nullptr);
  auto src = ScriptedSource::Parse(kTextbook);
  ASSERT_TRUE(src.ok()) << src.status().ToString();

  Matcher greedy_m(grammar);
  GenerateOptions greedy;
  greedy.sampler.temperature = 0;
  auto g = Generate(**src, greedy_m, {}, greedy);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->text, "aa");
  EXPECT_NEAR(std::exp(g->logprob), 0.20, 1e-6);

  Matcher m(grammar);
  auto beam = BeamSearch(**src, m, {}, {.beam_width = 2, .length_penalty = 1.0f, .max_tokens = 10});
  ASSERT_TRUE(beam.ok()) << beam.status().ToString();
  ASSERT_EQ(beam->hypotheses.size(), 2u);
  const BeamHypothesis& best = beam->hypotheses[0];
  EXPECT_EQ(best.text, "ba");
  EXPECT_EQ(best.tokens, (std::vector<TokenId>{1, 0}));
  EXPECT_EQ(best.finish, FinishReason::kEos);
  EXPECT_NEAR(std::exp(best.logprob), 0.315, 1e-6);
  EXPECT_NEAR(best.score, std::log(0.315) / 2.0, 1e-6);
  EXPECT_EQ(beam->hypotheses[1].text, "aa");
  EXPECT_NEAR(std::exp(beam->hypotheses[1].logprob), 0.20, 1e-6);
  EXPECT_FALSE(m.IsTerminated());  // the caller's matcher is untouched

  // Width 1 is greedy.
  auto one = BeamSearch(**src, m, {}, {.beam_width = 1, .length_penalty = 0.0f, .max_tokens = 10});
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->hypotheses[0].text, "aa");
}

TEST(BeamSearchTest, LengthPenaltyTradesProbabilityForLength) {
  // "a" (p .45, one token) against "bb" (p .55, two tokens); both then end with p 1.
  auto grammar = testing::CompileTiny("a|bb");
  ASSERT_NE(grammar, nullptr);
  auto src = ScriptedSource::Parse(R"({"width": 6, "probabilities": true, "contexts": {
      "": [0.45, 0.55, 0, 0, 0, 0], "1": [0, 1, 0, 0, 0, 0], "1 1": [0, 0, 0, 0, 0, 1],
      "0": [0, 0, 0, 0, 0, 1]}})");
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  Matcher m(grammar);
  // Scores log(.55) / 2^alpha against log(.45): "bb" wins at alpha 0 and 1 (-0.299 > -0.799).
  for (float alpha : {0.0f, 1.0f}) {
    auto r = BeamSearch(**src, m, {}, {.beam_width = 2, .length_penalty = alpha, .max_tokens = 5});
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->hypotheses.size(), 2u);
    EXPECT_EQ(r->hypotheses[0].text, "bb") << alpha;
    EXPECT_NEAR(r->hypotheses[0].score, std::log(0.55) / std::pow(2.0, alpha), 1e-6);
    EXPECT_NEAR(r->hypotheses[1].score, std::log(0.45), 1e-6);
  }
  // A negative alpha favours the short one: log(.55) * 2^1 = -1.196 < log(.45) = -0.799.
  auto r = BeamSearch(**src, m, {}, {.beam_width = 2, .length_penalty = -1.0f, .max_tokens = 5});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->hypotheses[0].text, "a");
}

TEST(GenerateTest, JumpForwardAppendsForcedTokensWithoutModelCalls) {
  auto grammar = testing::CompileTiny("(a|b)cabab");
  ASSERT_NE(grammar, nullptr);
  UniformSource src(grammar->logits_width(), 1);
  Matcher m(grammar);
  GenerateOptions opt;
  auto r = Generate(src, m, {}, opt);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->finish, FinishReason::kEos);
  EXPECT_EQ(r->text.substr(1), "cabab");
  // One draw for the first letter; "cabab" is forced: c, ab, ab, the last kept because only EOS
  // may follow; then one call for the EOS.
  EXPECT_EQ(r->forced_tokens, 3);
  EXPECT_EQ(r->model_calls, 2);
  EXPECT_EQ(std::vector<TokenId>(r->tokens.begin() + 1, r->tokens.end()),
            (std::vector<TokenId>{2, 3, 3}));

  Matcher m2(grammar);
  opt.jump_forward = false;
  auto plain = Generate(src, m2, {}, opt);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->forced_tokens, 0);
  EXPECT_GT(plain->model_calls, 3);
  EXPECT_EQ(plain->text.substr(1), "cabab");

  Matcher m3(grammar);
  opt.max_tokens = 2;
  auto cut = Generate(src, m3, {}, opt);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finish, FinishReason::kLength);
  EXPECT_EQ(cut->tokens.size(), 2u);
}

}  // namespace
}  // namespace lockstep
