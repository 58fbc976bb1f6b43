// NgramModel::TrainFromCorpus on the shipped corpus (schemas/corpus) with the real Llama-3
// vocabulary (bundled, else the shared data's copy): after the tokens of `{"` the model must favour
// a JSON key that really follows `{"` in the corpus. Skips if the vocabulary cannot be loaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "lockstep/ngram_model.h"
#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

std::vector<std::string> CorpusFiles() { return DefaultNgramCorpus(LOCKSTEP_SOURCE_DATA_DIR); }

// Every string that follows `{"` up to the next `"` in the corpus texts.
std::set<std::string> KeysAfterBrace() {
  std::set<std::string> keys;
  for (const std::string& path : CorpusFiles()) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
      const std::string text = nlohmann::json::parse(line)["text"].get<std::string>();
      for (std::size_t p = text.find("{\""); p != std::string::npos; p = text.find("{\"", p + 1)) {
        const std::size_t end = text.find('"', p + 2);
        if (end != std::string::npos) keys.insert(text.substr(p + 2, end - p - 2));
      }
    }
  }
  return keys;
}

TEST(NgramCorpusTest, Llama3ModelPredictsKeysAfterOpenBrace) {
  auto vocab = Vocabulary::Load("llama3");
  if (!vocab.ok()) {  // not bundled yet: the shared copy of the same tokenizer
    vocab = Vocabulary::Load(std::string(LOCKSTEP_SHARED_DATA_DIR) +
                             "/tokenizers/llama3/tokenizer.json.gz");
  }
  if (!vocab.ok()) {
    GTEST_SKIP() << "llama3 vocabulary not available yet: " << vocab.status().ToString();
  }
  const Vocabulary& v = **vocab;
  Result<NgramModel> model = NgramModel::TrainFromCorpus(v, CorpusFiles(), 4);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->width(), v.logits_width());
  EXPECT_EQ(model->eos(), v.eos());
  EXPECT_GT(model->num_tokens(), 100000u);

  EncodeOptions no_prefix;
  no_prefix.add_dummy_prefix = false;
  Result<std::vector<TokenId>> brace = v.Encode("{\"", no_prefix);
  ASSERT_TRUE(brace.ok());
  std::vector<float> logits(model->width());
  model->Logits(*brace, logits);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l));
  EXPECT_NEAR(sum, 1.0, 1e-4);

  const std::set<std::string> keys = KeysAfterBrace();
  ASSERT_FALSE(keys.empty());
  std::vector<TokenId> order(logits.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<TokenId>(i);
  std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                    [&](TokenId a, TokenId b) { return logits[a] > logits[b]; });
  for (int rank = 0; rank < 5; ++rank) {
    const std::string bytes(v.TokenBytes(order[rank]));
    const bool prefix_of_key =
        !bytes.empty() && std::any_of(keys.begin(), keys.end(),
                                      [&](const std::string& k) { return k.rfind(bytes, 0) == 0; });
    if (rank == 0) {
      EXPECT_TRUE(prefix_of_key) << "top token after {\" is '" << bytes << "'";
    }
    std::printf("  #%d after {\": '%s' p=%.3f%s\n", rank + 1, bytes.c_str(),
                std::exp(static_cast<double>(logits[order[rank]])),
                prefix_of_key ? "" : " (not a key prefix)");
  }

  // EOS after a complete document is likely: the end of a trace line.
  Result<std::vector<TokenId>> doc = v.Encode("{\"location\":\"New York\"}", no_prefix);
  ASSERT_TRUE(doc.ok());
  model->Logits(*doc, logits);
  const TokenId top =
      static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(top, v.eos());

  // Save/Load with the vocabulary fingerprint.
  const std::string path = ::testing::TempDir() + "/lockstep_llama3_ngram.bin";
  ASSERT_TRUE(model->Save(path, v.Fingerprint()).ok());
  Result<NgramModel> loaded = NgramModel::Load(path, v.Fingerprint());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_FALSE(NgramModel::Load(path, v.Fingerprint() ^ 1).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace lockstep
