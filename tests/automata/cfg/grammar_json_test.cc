// The shipped JSON grammar (schemas/grammars/json.gbnf)
// accepts every `data` value of the official JSON-Schema-Test-Suite, compact and indented, token
// by token in the vocabulary's canonical tokenisation (each token allowed by the mask and
// accepted, then EOS), and rejects every document of the malformed corpus
// (schemas/grammars/json-malformed.jsonl: truncations, trailing commas, bad escapes, lone
// surrogates, ...). Skips, saying so, when ../shared/data is not there.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/json_suite.h"

namespace lockstep {
namespace {

class GrammarJsonTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    auto vocab = Vocabulary::Load(GetParam());
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    vocab_ = *vocab;
    GrammarCompiler compiler(vocab_);
    auto g = compiler.CompileGrammar(testing::ReadFile(testing::SourceDataDir() + "/grammars/json.gbnf"));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    grammar_ = *g;
  }
  // "" if the text is accepted token by token (mask and AcceptToken) and may end; else why not.
  std::string Check(const std::string& text) {
    EncodeOptions eo;
    eo.add_dummy_prefix = false;
    auto ids = vocab_->Encode(text, eo);
    if (!ids.ok()) return "encode failed: " + ids.status().ToString();
    Matcher m(grammar_);
    std::vector<std::uint32_t> mask(BitmaskWords(vocab_->logits_width()));
    for (std::size_t i = 0; i < ids->size(); ++i) {
      TokenId id = (*ids)[i];
      m.FillNextTokenBitmask(mask);
      if (!((mask[id >> 5] >> (id & 31)) & 1)) {
        return "token " + std::to_string(i) + " '" + std::string(vocab_->TokenBytes(id)) +
               "' not in the mask";
      }
      if (!m.AcceptToken(id)) return "token " + std::to_string(i) + " rejected";
    }
    m.FillNextTokenBitmask(mask);
    TokenId eos = vocab_->eos();
    if (!((mask[eos >> 5] >> (eos & 31)) & 1)) return "EOS not in the mask at the end";
    if (!m.AcceptToken(eos)) return "EOS rejected at the end";
    return "";
  }
  std::shared_ptr<const Vocabulary> vocab_;
  std::shared_ptr<const CompiledGrammar> grammar_;
};

TEST_P(GrammarJsonTest, AcceptsEveryTestSuiteValue) {
  const std::string suite = testing::SharedDataDir() + "/json-schema-test-suite";
  if (!testing::HaveSharedData()) {
    GTEST_SKIP() << "../shared/data is not there: the JSON-Schema-Test-Suite check is skipped";
  }
  for (bool indented : {false, true}) {
    std::string error;
    std::vector<std::string> values = testing::LoadJsonSchemaTestSuiteData(suite, indented, &error);
    ASSERT_TRUE(error.empty()) << error;
    ASSERT_GE(values.size(), 1000u);
    std::size_t step = testing::TestScale() < 1 ? 7 : 1;  // sanitizer build: a sample
    int checked = 0, failed = 0;
    for (std::size_t i = 0; i < values.size(); i += step) {
      std::string why = Check(values[i]);
      ++checked;
      if (!why.empty() && ++failed <= 5) ADD_FAILURE() << why << " in: " << values[i];
    }
    EXPECT_EQ(failed, 0);
    std::printf("%s %s: %d of %zu values accepted\n", GetParam(), indented ? "indented" : "compact",
                checked - failed, values.size());
  }
}

TEST_P(GrammarJsonTest, RejectsEveryMalformedDocument) {
  std::string error;
  std::vector<testing::MalformedJson> docs =
      testing::LoadMalformedJson(testing::SourceDataDir() + "/grammars/json-malformed.jsonl", &error);
  ASSERT_TRUE(error.empty()) << error;
  ASSERT_GE(docs.size(), 200u);
  int wrongly_accepted = 0;
  for (const auto& d : docs) {
    Matcher bytes(grammar_);
    const bool byte_level = bytes.AcceptString(d.doc) && bytes.CanEnd();
    if (byte_level || Check(d.doc).empty()) {
      ++wrongly_accepted;
      ADD_FAILURE() << "accepted malformed (" << d.kind << "): " << d.doc;
    }
  }
  EXPECT_EQ(wrongly_accepted, 0);
  std::printf("%s: %zu malformed documents, all rejected\n", GetParam(), docs.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, GrammarJsonTest, ::testing::Values("llama3", "qwen2.5"));

}  // namespace
}  // namespace lockstep
