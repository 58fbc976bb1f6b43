// Shared helpers of the vocabulary tests: the seven reference vocabularies of the shared data,
// loaded once per test binary, and the corpus / reference files.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep::testing {

inline std::string TokenizerDir() { return SharedDataDir() + "/tokenizers"; }

// Path of a shared-data vocabulary by reference name.
inline std::string SharedVocabPath(const std::string& name) {
  const std::string d = TokenizerDir();
  if (name == "gpt2") return d + "/gpt2/tokenizer.json";
  if (name == "llama3") return d + "/llama3/tokenizer.json.gz";
  if (name == "qwen2.5") return d + "/qwen2.5/tokenizer.json.gz";
  if (name == "mistral") return d + "/mistral/tokenizer.json";
  if (name == "llama2") return d + "/llama2/tokenizer.model";
  return d + "/tiktoken/" + name + ".tiktoken";
}

inline const std::vector<std::string>& ReferenceNames() {
  static const std::vector<std::string> names = {"gpt2",   "llama3",      "qwen2.5",   "mistral",
                                                 "llama2", "cl100k_base", "o200k_base"};
  return names;
}

// Loads (once per process) a shared-data vocabulary; nullptr with a test failure on error.
inline std::shared_ptr<const Vocabulary> SharedVocab(const std::string& name) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const Vocabulary>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto r = Vocabulary::Load(SharedVocabPath(name));
  if (!r.ok()) {
    ADD_FAILURE() << name << ": " << r.status().ToString();
    return nullptr;
  }
  cache[name] = r.value();
  return r.value();
}

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::vector<nlohmann::json> out;
  for (const std::string& line : ReadLines(path)) out.push_back(nlohmann::json::parse(line));
  return out;
}

inline const std::vector<std::string>& CorpusTexts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> t;
    for (const auto& j : ReadJsonLines(TokenizerDir() + "/corpus.jsonl")) {
      t.push_back(j.at("text").get<std::string>());
    }
    return t;
  }();
  return texts;
}

#define LOCKSTEP_REQUIRE_SHARED_DATA()                                                   \
  do {                                                                                   \
    if (!::lockstep::testing::HaveSharedData()) {                                        \
      GTEST_SKIP() << "shared data directory " << ::lockstep::testing::SharedDataDir()   \
                   << " is absent; skipping a test that needs the reference tokenizers"; \
    }                                                                                    \
  } while (0)

}  // namespace lockstep::testing
