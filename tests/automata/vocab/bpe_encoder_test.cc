// Tests of the canonical BPE encoder against the reference tokenizations of the shared data
// (HF tokenizers, tiktoken, sentencepiece), llama.cpp's vectors, and of each fast
// pre-tokenizer against ICU's regex engine on the same pattern.
#include <gtest/gtest.h>

#include <thread>

#include "automata/vocab/pretokenizer.h"
#include "automata/vocab/vocab_test_util.h"
#include "automata/vocab/vocabulary_impl.h"

namespace lockstep {
namespace {

using testing::CorpusTexts;
using testing::ReadJsonLines;
using testing::SharedVocab;
using testing::TokenizerDir;

std::string Ids(const std::vector<TokenId>& ids) {
  std::string s;
  for (TokenId id : ids) s += std::to_string(id) + " ";
  return s;
}

class ReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ReferenceTest, EveryCorpusLineMatchesTheReferenceIds) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  const std::string name = GetParam();
  auto vocab = SharedVocab(name);
  ASSERT_NE(vocab, nullptr);
  const auto& texts = CorpusTexts();
  auto refs = ReadJsonLines(TokenizerDir() + "/reference/" + name + ".jsonl");
  ASSERT_EQ(refs.size(), texts.size());
  int matched = 0;
  int shown = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto want = refs[i].at("ids").get<std::vector<TokenId>>();
    auto got = vocab->Encode(texts[i]);
    ASSERT_TRUE(got.ok()) << name << " line " << i << ": " << got.status().ToString();
    if (got.value() == want) {
      ++matched;
    } else if (shown++ < 5) {
      ADD_FAILURE() << name << " line " << i << " text " << nlohmann::json(texts[i]).dump()
                    << "\n  want " << Ids(want) << "\n  got  " << Ids(got.value());
    }
  }
  std::printf("%s: %d/%zu\n", name.c_str(), matched, texts.size());
  RecordProperty("matched", matched);
  EXPECT_EQ(matched, static_cast<int>(texts.size()));
}

INSTANTIATE_TEST_SUITE_P(AllVocabularies, ReferenceTest,
                         ::testing::ValuesIn(testing::ReferenceNames()), [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '.') c = '_';
                           }
                           return n;
                         });

TEST(LlamaCppVectorsTest, DecodeReproducesTextAndEncodeReproducesIds) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto lines = ReadJsonLines(TokenizerDir() + "/llama.cpp-tokenization-vectors.jsonl");
  ASSERT_GT(lines.size(), 100u);
  std::map<std::string, std::pair<int, int>> decoded, encoded;  // name -> (ok, total)
  for (const auto& line : lines) {
    std::string name = line.at("vocab").get<std::string>();
    std::string text = line.at("text").get<std::string>();
    auto ids = line.at("ids").get<std::vector<TokenId>>();
    auto vocab = SharedVocab(name);
    ASSERT_NE(vocab, nullptr);
    auto d = vocab->Decode(ids);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    std::string got = d.value();
    if (name == "llama2" && !got.empty() && got[0] == ' ') got.erase(0, 1);  // dummy prefix
    ++decoded[name].second;
    if (got == text) {
      ++decoded[name].first;
    } else {
      ADD_FAILURE() << name << " decode of " << nlohmann::json(text).dump() << " gave "
                    << nlohmann::json(got).dump();
    }
    auto e = vocab->Encode(text);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    ++encoded[name].second;
    if (e.value() == ids) {
      ++encoded[name].first;
    } else {
      ADD_FAILURE() << name << " encode of " << nlohmann::json(text).dump() << "\n  want "
                    << Ids(ids) << "\n  got  " << Ids(e.value());
    }
  }
  for (const auto& [name, c] : decoded) {
    std::printf("llama.cpp vectors %s: decode %d/%d, encode %d/%d\n", name.c_str(), c.first,
                c.second, encoded[name].first, encoded[name].second);
  }
}

TEST(BpeEncoderTest, Llama3TraceTextsGiveTheRecordedIds) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto vocab = SharedVocab("llama3");
  ASSERT_NE(vocab, nullptr);
  auto lines = ReadJsonLines(testing::SharedDataDir() + "/traces/llama3-glaive-dev.jsonl");
  ASSERT_GT(lines.size(), 1000u);
  int matched = 0;
  for (const auto& line : lines) {
    auto got = vocab->Encode(line.at("text").get<std::string>());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (got.value() == line.at("ids").get<std::vector<TokenId>>()) ++matched;
  }
  std::printf("llama3 traces: %d/%zu\n", matched, lines.size());
  EXPECT_EQ(matched, static_cast<int>(lines.size()));
}

TEST(BpeEncoderTest, EncodeIsThreadSafeOnASharedVocabulary) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto vocab = SharedVocab("llama3");
  ASSERT_NE(vocab, nullptr);
  const auto& texts = CorpusTexts();
  std::vector<std::vector<TokenId>> want;
  for (const auto& t : texts) want.push_back(vocab->Encode(t).value());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = static_cast<std::size_t>(t); i < texts.size() * 2; i += 3) {
        std::size_t k = i % texts.size();
        auto got = vocab->Encode(texts[k]);
        if (!got.ok() || got.value() != want[k]) ++mismatches;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(BpeEncoderTest, LongWordsAndRunsRoundTrip) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  for (const std::string name : {"llama3", "mistral", "o200k_base"}) {
    auto vocab = SharedVocab(name);
    ASSERT_NE(vocab, nullptr);
    for (std::string text : {std::string(5000, 'a'), std::string(3000, ' ') + "x",
                             std::string(2000, '7'), std::string(1000, '{')}) {
      auto ids = vocab->Encode(text, EncodeOptions{false});
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      EXPECT_EQ(vocab->Decode(ids.value()).value(), text) << name;
    }
  }
}

TEST(BpeEncoderTest, InvalidUtf8IsAnErrorNotACrash) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto vocab = SharedVocab("gpt2");
  ASSERT_NE(vocab, nullptr);
  auto r = vocab->Encode(std::string("ab\xC3", 3));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().location(), "offset 2");
}

TEST(FastSplitterTest, TheFilesPatternsSelectTheFastSplitters) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  for (const auto& [name, kind] :
       std::vector<std::pair<std::string, std::string>>{{"gpt2", "gpt2"},
                                                        {"llama3", "llama3"},
                                                        {"qwen2.5", "qwen2"},
                                                        {"cl100k_base", "cl100k"},
                                                        {"o200k_base", "o200k"}}) {
    auto vocab = SharedVocab(name);
    ASSERT_NE(vocab, nullptr);
    const auto& steps = VocabularyAccess::Tables(*vocab).pre_tokenizers_;
    ASSERT_EQ(steps.size(), 1u) << name;
    ASSERT_NE(steps[0].splitter, nullptr);
    EXPECT_EQ(steps[0].splitter->kind(), kind) << name;
  }
}

struct SplitterCase {
  const char* name;
  std::string_view pattern;
};

void PrintTo(const SplitterCase& c, std::ostream* os) { *os << c.name; }

class FastSplitterTest : public ::testing::TestWithParam<SplitterCase> {};

TEST_P(FastSplitterTest, EqualsIcuRegexOnTheWholeCorpus) {
  LOCKSTEP_REQUIRE_SHARED_DATA();
  auto fast = vocab::MakeRegexSplitter(GetParam().pattern);
  auto icu = vocab::MakeRegexSplitter(GetParam().pattern, /*force_icu=*/true);
  ASSERT_TRUE(fast.ok() && icu.ok());
  ASSERT_NE(fast.value()->kind(), "icu");
  ASSERT_EQ(icu.value()->kind(), "icu");
  std::vector<std::string> texts = CorpusTexts();
  // Extra cases around the alternatives' edges.
  for (const char* extra :
       {"  \n  ", "a  \n  ", "x \t\n\r\n  y", "'S 'LL 'Ve 're", "HELLo WORLD Mc\u0301Donald",
        "\u0301ABC \u0301abc", "a/b//\n/", " {\"a\": 1}  ", "123456789 ４５６ ١٢٣", "   ",
        "e\u0301\u0301x", "ǅungla ǅ", "x\u000b\u000cy\u0085z", "'ſ 'K"}) {
    texts.emplace_back(extra);
  }
  int mismatched = 0;
  for (const std::string& text : texts) {
    std::vector<std::string_view> a, b;
    ASSERT_TRUE(fast.value()->Split(text, &a));
    ASSERT_TRUE(icu.value()->Split(text, &b));
    if (a != b && mismatched++ < 5) {
      std::string sa, sb;
      for (auto p : a) sa += nlohmann::json(std::string(p)).dump() + " ";
      for (auto p : b) sb += nlohmann::json(std::string(p)).dump() + " ";
      ADD_FAILURE() << GetParam().name << " on " << nlohmann::json(text).dump() << "\n  fast " << sa
                    << "\n  icu  " << sb;
    }
  }
  EXPECT_EQ(mismatched, 0);
}

INSTANTIATE_TEST_SUITE_P(KnownPatterns, FastSplitterTest,
                         ::testing::Values(SplitterCase{"gpt2", vocab::kGpt2Pattern},
                                           SplitterCase{"llama3", vocab::kLlama3Pattern},
                                           SplitterCase{"qwen2", vocab::kQwen2Pattern},
                                           SplitterCase{"cl100k", vocab::kCl100kPattern},
                                           SplitterCase{"o200k", vocab::kO200kPattern}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep
