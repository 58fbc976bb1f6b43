// Generation under grammars: text generated under every shipped grammar with the token
// n-gram logits source (trained here on schemas/corpus, as the build does for the CLI), 200
// samples per grammar over 4 seeds, always parses: JSON with simdjson and the strict RFC 8259
// checker, the other grammars with the independent recursive-descent checkers of
// tests/util/grammar_checkers. Samples stop at EOS; one that hits the token budget first is
// counted apart (it is a prefix, not a sentence) and must stay rare. The n-gram model knows JSON
// only (its corpus is JSON traces), so on the other grammars it rarely chooses to close a call
// or a list by itself: after 192 tokens the driver adds a logit bias of +6 to EOS and to tokens
// made only of closing punctuation, a plain sampler setting (the mask still decides).
#include <gtest/gtest.h>
#include <simdjson.h>

#include <fstream>
#include <functional>
#include <sstream>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/ngram_model.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_checkers.h"

namespace lockstep {
namespace {

bool SimdjsonParses(const std::string& text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element doc;
  return parser.parse(padded).get(doc) == simdjson::SUCCESS;
}

struct Case {
  const char* grammar;
  std::function<bool(const std::string&)> check;
};

TEST(GrammarGenerationTest, NgramSamplesAlwaysParse) {
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  const std::string corpus = testing::SourceDataDir() + "/corpus/";
  auto model = NgramModel::TrainFromCorpus(
      **vocab, {corpus + "json.jsonl", corpus + "values.jsonl", corpus + "toolcalls.jsonl"}, 3);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  GrammarCompiler compiler(*vocab);
  const std::vector<Case> cases = {
      {"json", [](const std::string& t) { return SimdjsonParses(t) && testing::CheckJsonRfc8259(t); }},
      {"tool_calls", [](const std::string& t) { return SimdjsonParses(t) && testing::CheckToolCalls(t); }},
      {"arithmetic", [](const std::string& t) { return testing::CheckArithmetic(t); }},
      {"arithmetic_leftrec", [](const std::string& t) { return testing::CheckArithmetic(t); }},
      {"c_call", [](const std::string& t) { return testing::CheckCCall(t); }},
      {"sql_select", [](const std::string& t) { return testing::CheckSqlSelect(t); }},
  };
  const int per_seed = std::max(2, static_cast<int>(50 * testing::TestScale()));
  const std::int32_t width = (*vocab)->logits_width();
  std::vector<float> logits(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));
  for (const Case& c : cases) {
    auto g = compiler.CompileGrammar(testing::ReadFile(testing::SourceDataDir() + "/grammars/" + c.grammar + ".gbnf"));
    ASSERT_TRUE(g.ok()) << c.grammar << ": " << g.status().ToString();
    int parsed = 0, failed = 0, length = 0;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SamplerConfig config;
      config.temperature = 0.9f;
      config.seed = seed;
      Sampler sampler(config, width);
      SamplerConfig closing = config;
      closing.logit_bias.emplace_back((*vocab)->eos(), 6.0f);
      for (TokenId id = 0; id < (*vocab)->size(); ++id) {
        std::string_view b = (*vocab)->TokenBytes(id);
        if (!b.empty() && b.find_first_not_of(")]}\"';") == std::string_view::npos) {
          closing.logit_bias.emplace_back(id, 6.0f);
        }
      }
      Sampler late(closing, width);
      for (int i = 0; i < per_seed; ++i) {
        Matcher m(*g);
        std::vector<TokenId> context, out;
        bool eos = false;
        for (int step = 0; step < 1024 && !eos; ++step) {
          m.FillNextTokenBitmask(mask);
          model->Logits(context, logits);
          TokenId tok = (step < 192 ? sampler : late).Sample(logits, mask.data(), i, step);
          ASSERT_NE(tok, kNoToken) << c.grammar << ": empty mask mid-generation";
          ASSERT_TRUE(m.AcceptToken(tok)) << c.grammar << ": the mask allowed a rejected token";
          if (m.IsTerminated()) {
            eos = true;
          } else {
            out.push_back(tok);
            context.push_back(tok);
          }
        }
        if (!eos) {
          ++length;
          continue;
        }
        std::string text = *(*vocab)->Decode(out);
        if (c.check(text)) {
          ++parsed;
        } else if (++failed <= 3) {
          ADD_FAILURE() << c.grammar << ": generated text does not parse: " << text;
        }
      }
    }
    std::printf("%-20s %d parsed, %d failed, %d hit the token budget\n", c.grammar, parsed, failed,
                length);
    EXPECT_EQ(failed, 0) << c.grammar;
    EXPECT_LE(length * 20, parsed + failed + length) << c.grammar << ": too many unfinished samples";
  }
}

}  // namespace
}  // namespace lockstep
