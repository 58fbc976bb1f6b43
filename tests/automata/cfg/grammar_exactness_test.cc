// The grammar runtime is exact: along seeded random walks over every shipped grammar, on
// the Llama-3, Qwen2.5 and Mistral vocabularies, the fast token mask (adaptive position cache +
// uncertain-tail checks + state-signature cache) equals a brute-force mask that tries each id on
// the matcher (AcceptToken, Rollback). Steps per vocabulary: 600 per grammar at scale 1
// (LOCKSTEP_TEST_SCALE); LOCKSTEP_GRAMMAR_STEPS=N sets the per-grammar count for long runs
// (bench/RESULTS.md records a 100,000-step-per-vocabulary run). Grammars run on parallel threads
// against one shared CompiledGrammar each, which also exercises the caches' thread safety.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

const char* kGrammars[] = {"json", "arithmetic", "arithmetic_leftrec", "c_call", "sql_select",
                           "tool_calls"};

long StepsPerGrammar() {
  if (const char* s = std::getenv("LOCKSTEP_GRAMMAR_STEPS")) return std::atol(s);
  return static_cast<long>(600 * testing::TestScale());
}

void RunVocabulary(const std::string& name, std::int32_t logits_width) {
  VocabularyOptions vo;
  vo.logits_width = logits_width;
  auto vocab = Vocabulary::Load(name, vo);
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  const long steps = StepsPerGrammar();
  std::vector<testing::WalkStats> stats(std::size(kGrammars));
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  for (const char* g : kGrammars) {
    auto c = compiler.CompileGrammar(
        testing::ReadFile(testing::SourceDataDir() + "/grammars/" + g + ".gbnf"));
    ASSERT_TRUE(c.ok()) << g << ": " << c.status().ToString();
    grammars.push_back(*c);
  }
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < grammars.size(); ++i) {
    threads.emplace_back([&, i] {
      stats[i] = testing::ExactnessWalks(grammars[i], steps, 1000 + i, 30);
    });
  }
  for (auto& t : threads) t.join();
  long total = 0;
  for (std::size_t i = 0; i < grammars.size(); ++i) {
    const testing::WalkStats& st = stats[i];
    total += st.steps;
    std::printf("%-8s %-20s steps %6ld walks %5ld completed %5ld over %ld under %ld\n",
                name.c_str(), kGrammars[i], st.steps, st.walks, st.completed, st.over, st.under);
    EXPECT_EQ(st.over, 0) << kGrammars[i] << ": " << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << kGrammars[i] << ": " << st.first_mismatch;
    if (steps >= 300) {
      EXPECT_GT(st.walks, 1) << kGrammars[i] << ": the walk never restarted";
    }
  }
  std::printf("%-8s total steps %ld, 0 mismatches required\n", name.c_str(), total);
}

TEST(GrammarExactnessTest, Llama3) { RunVocabulary("llama3", 0); }
TEST(GrammarExactnessTest, Qwen25) { RunVocabulary("qwen2.5", 151936); }
TEST(GrammarExactnessTest, Mistral) { RunVocabulary("mistral", 0); }

}  // namespace
}  // namespace lockstep
