// Generation under the JSONSchemaBench dev set: for every schema of the JSONSchemaBench dev
// set (../shared/data/jsonschemabench-dev/maskbench) that compiles, a sample generated under its
// grammar with the token n-gram logits source (trained here on schemas/corpus, as the build does
// for the CLI) is an instance the validator accepts (formats asserted, as the compiler enforces
// them). Samples stop at EOS; one that hits the token budget first is counted apart (a prefix is
// not an instance) and must stay rare: after 160 tokens the driver adds a logit bias of +6 to EOS
// and to tokens made only of closing punctuation, a plain sampler setting (the mask decides).
// LOCKSTEP_TEST_SCALE < 1 samples a subset of the schemas (the sanitizer run).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/ngram_model.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

TEST(SchemaGenerationTest, NgramSamplesValidateForEveryDevSetSchema) {
  const std::string dir = testing::SharedDataDir() + "/jsonschemabench-dev/maskbench";
  if (!testing::HaveSharedData() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "shared data absent: " << dir;
  }
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const std::size_t stride =
      std::max<std::size_t>(1, static_cast<std::size_t>(1.0 / testing::TestScale() + 0.5));

  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  const std::string corpus = testing::SourceDataDir() + "/corpus/";
  auto model = NgramModel::TrainFromCorpus(
      **vocab, {corpus + "json.jsonl", corpus + "values.jsonl", corpus + "toolcalls.jsonl"}, 3);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  GrammarCompiler compiler(*vocab);
  const std::int32_t width = (*vocab)->logits_width();
  SamplerConfig config;
  config.temperature = 0.9f;
  config.seed = 11;
  Sampler sampler(config, width);
  SamplerConfig closing = config;
  closing.logit_bias.emplace_back((*vocab)->eos(), 6.0f);
  for (TokenId id = 0; id < (*vocab)->size(); ++id) {
    std::string_view b = (*vocab)->TokenBytes(id);
    if (!b.empty() && b.find_first_not_of(")]}\"") == std::string_view::npos) {
      closing.logit_bias.emplace_back(id, 6.0f);
    }
  }
  Sampler late(closing, width);
  std::vector<float> logits(width);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(width));

  int schemas = 0, not_compiled = 0, valid = 0, invalid = 0, budget = 0;
  for (std::size_t fi = 0; fi < files.size(); fi += stride) {
    json doc = json::parse(testing::ReadFile(files[fi].string()), nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << files[fi];
    const std::string schema_text = doc["schema"].dump();
    ++schemas;
    auto g = compiler.CompileSchema(schema_text);
    if (!g.ok()) {
      ++not_compiled;
      continue;
    }
    auto s = schema::Schema::Load(schema_text);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    schema::ValidateOptions vo;
    vo.format_assertion = true;
    auto v = schema::Validator::Create(*s, vo);
    ASSERT_TRUE(v.ok()) << v.status().ToString();

    Matcher m(*g);
    std::vector<TokenId> context, out;
    bool eos = false;
    for (int step = 0; step < 768 && !eos; ++step) {
      m.FillNextTokenBitmask(mask);
      model->Logits(context, logits);
      TokenId tok = (step < 160 ? sampler : late).Sample(logits, mask.data(), fi, step);
      ASSERT_NE(tok, kNoToken) << files[fi].filename() << ": empty mask mid-generation";
      ASSERT_TRUE(m.AcceptToken(tok)) << files[fi].filename() << ": the mask allowed a rejected token";
      if (m.IsTerminated()) {
        eos = true;
      } else {
        out.push_back(tok);
        context.push_back(tok);
      }
    }
    if (!eos) {
      ++budget;
      continue;
    }
    const std::string text = *(*vocab)->Decode(out);
    std::vector<schema::ValidationError> errors;
    Result<bool> r = v->ValidateText(text, &errors);
    if (r.ok() && *r) {
      ++valid;
    } else if (++invalid <= 5) {
      ADD_FAILURE() << files[fi].filename() << ": generated instance does not validate: " << text
                    << "\n  " << (r.ok() ? (errors.empty() ? "" : errors[0].instance_pointer + ": " +
                                                                      errors[0].message)
                                         : r.status().ToString());
    }
  }
  std::printf("[ devset   ] %d schemas: %d not compiled, %d samples valid, %d invalid, %d hit the "
              "token budget\n",
              schemas, not_compiled, valid, invalid, budget);
  EXPECT_EQ(invalid, 0);
  EXPECT_LE(budget * 20, valid + invalid + budget) << "too many unfinished samples";
}

}  // namespace
}  // namespace lockstep
