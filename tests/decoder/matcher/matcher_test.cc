// Matcher semantics a host relies on: masks over real Llama-3 tokens, EOS only at a full match,
// special and padding ids never, rejected tokens leave the state alone, rollback/fork/reset,
// jump-forward bytes, draft validation, and concurrent use of one compiled grammar.
#include "lockstep/matcher.h"

#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

bool Bit(const std::vector<std::uint32_t>& m, TokenId id) { return (m[id >> 5] >> (id & 31)) & 1; }

class MatcherTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto v = Vocabulary::Load("llama3");
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    vocab_ = *v;
    compiler_ = new GrammarCompiler(vocab_);
  }
  static void TearDownTestSuite() { delete compiler_; }

  std::shared_ptr<const CompiledGrammar> Compile(const std::string& re) {
    auto g = compiler_->CompileRegex(re);
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    return *g;
  }
  std::vector<TokenId> Enc(const std::string& s) {
    auto ids = vocab_->Encode(s, EncodeOptions{false});
    EXPECT_TRUE(ids.ok());
    return *ids;
  }
  std::vector<std::uint32_t> Mask(const Matcher& m) {
    std::vector<std::uint32_t> w(BitmaskWords(vocab_->logits_width()));
    m.FillNextTokenBitmask(w);
    return w;
  }

  static inline std::shared_ptr<const Vocabulary> vocab_;
  static inline GrammarCompiler* compiler_ = nullptr;
};

TEST_F(MatcherTest, DateWalkAllowsExactlyTheDateAndEosAtTheEnd) {
  Matcher m(Compile(R"(\d{4}-\d{2}-\d{2})"));
  std::vector<TokenId> ids = Enc("2024-01-15");
  ASSERT_GT(ids.size(), 3u);
  TokenId eos = vocab_->eos();
  for (TokenId id : ids) {
    auto mask = Mask(m);
    EXPECT_TRUE(Bit(mask, id)) << "token " << id << " '" << vocab_->TokenBytes(id) << "'";
    EXPECT_FALSE(Bit(mask, eos));
    EXPECT_FALSE(m.CanEnd());
    ASSERT_TRUE(m.AcceptToken(id));
  }
  EXPECT_TRUE(m.CanEnd());
  auto mask = Mask(m);
  for (TokenId e : vocab_->eos_ids()) EXPECT_TRUE(Bit(mask, e));
  // Nothing but EOS may follow a complete date.
  std::int64_t allowed = 0;
  for (auto w : mask) allowed += __builtin_popcount(w);
  EXPECT_EQ(allowed, static_cast<std::int64_t>(vocab_->eos_ids().size()));
  ASSERT_TRUE(m.AcceptToken(eos));
  EXPECT_TRUE(m.IsTerminated());
  EXPECT_FALSE(m.CanEnd());
  mask = Mask(m);
  for (auto w : mask) EXPECT_EQ(w, 0u);
  EXPECT_FALSE(m.AcceptToken(ids[0]));
  ASSERT_TRUE(m.Rollback(1));
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.CanEnd());
}

TEST_F(MatcherTest, RejectedTokenLeavesStateUnchanged) {
  Matcher m(Compile(R"([0-9]+(\.[0-9]+)?)"));
  ASSERT_TRUE(m.AcceptToken(Enc("12")[0]));
  auto before = Mask(m);
  StateId s = m.state();
  for (const char* bad : {"a", " ", "..", "-", "\""}) {
    TokenId id = Enc(bad)[0];
    EXPECT_FALSE(Bit(before, id)) << bad;
    EXPECT_FALSE(m.AcceptToken(id)) << bad;
    EXPECT_EQ(m.state(), s);
  }
  EXPECT_FALSE(m.AcceptToken(-1));
  EXPECT_FALSE(m.AcceptToken(vocab_->logits_width()));
  EXPECT_EQ(Mask(m), before);
}

TEST_F(MatcherTest, SpecialTokensNeverAllowedEvenWhereTheRegexMayEnd) {
  Matcher m(Compile("a*"));
  auto mask = Mask(m);
  ASSERT_TRUE(m.CanEnd());
  for (TokenId id = 0; id < vocab_->size(); ++id) {
    if (!vocab_->IsSpecial(id)) continue;
    bool is_eos = false;
    for (TokenId e : vocab_->eos_ids()) is_eos |= (e == id);
    EXPECT_EQ(Bit(mask, id), is_eos) << "special token " << id << " " << vocab_->TokenText(id);
    if (!is_eos) {
      EXPECT_FALSE(m.AcceptToken(id));
    }
  }
}

TEST_F(MatcherTest, PaddingIdsBeyondTheVocabularyAreNeverAllowed) {
  VocabularyOptions vo;
  vo.logits_width = vocab_->size() + 200;  // as in models whose embedding rows are padded
  auto padded = Vocabulary::Load("llama3", vo);
  ASSERT_TRUE(padded.ok()) << padded.status().ToString();
  GrammarCompiler compiler(*padded);
  auto g = compiler.CompileRegex(".*");
  ASSERT_TRUE(g.ok());
  Matcher m(*g);
  std::vector<std::uint32_t> w(BitmaskWords(vo.logits_width), 0xFFFFFFFFu);
  ASSERT_TRUE(m.FillNextTokenBitmask(w));
  for (TokenId id = vocab_->size(); id < vo.logits_width; ++id) EXPECT_FALSE(Bit(w, id)) << id;
  EXPECT_FALSE(m.AcceptToken(vocab_->size() + 5));
  // A too-small caller buffer is refused rather than overrun.
  std::vector<std::uint32_t> small(BitmaskWords(vo.logits_width) - 1);
  EXPECT_FALSE(m.FillNextTokenBitmask(small));
}

TEST_F(MatcherTest, RollbackForkAndReset) {
  auto g = Compile(R"((yes|no|maybe), (yes|no|maybe))");
  Matcher m(g);
  std::vector<TokenId> ids = Enc("maybe, no");
  std::vector<std::vector<std::uint32_t>> masks;
  for (TokenId id : ids) {
    masks.push_back(Mask(m));
    ASSERT_TRUE(m.AcceptToken(id));
  }
  ASSERT_TRUE(m.CanEnd());
  Matcher f = m.Fork();
  ASSERT_TRUE(m.Rollback(static_cast<std::int32_t>(ids.size()) - 1));
  EXPECT_EQ(Mask(m), masks[1]);
  EXPECT_TRUE(f.CanEnd());  // the fork kept its own state
  EXPECT_FALSE(m.Rollback(static_cast<std::int32_t>(ids.size())));  // more than accepted
  m.Reset();
  EXPECT_EQ(Mask(m), masks[0]);
  EXPECT_EQ(m.NumSteps(), 0);
  EXPECT_TRUE(m.AcceptString("maybe, "));
  EXPECT_FALSE(m.AcceptString("perhaps"));
  EXPECT_TRUE(m.AcceptString("yes"));
  EXPECT_TRUE(m.CanEnd());
}

TEST_F(MatcherTest, ForcedBytesAndDraftValidation) {
  Matcher m(Compile(R"(\{"id": [0-9]+\})"));
  EXPECT_EQ(m.ForcedBytes(), "{\"id\": ");
  Matcher e(Compile("(red|green)"));
  EXPECT_EQ(e.ForcedBytes(), "");
  ASSERT_TRUE(e.AcceptString("gr"));
  EXPECT_EQ(e.ForcedBytes(), "een");
  std::vector<TokenId> good = Enc("{\"id\": 42}");
  EXPECT_EQ(m.ValidateDraft(good), static_cast<std::int32_t>(good.size()));
  std::vector<TokenId> bad = Enc("{\"id\": 4x}");
  std::int32_t n = m.ValidateDraft(bad);
  EXPECT_LT(n, static_cast<std::int32_t>(bad.size()));
  EXPECT_EQ(m.NumSteps(), 0);  // validation does not move the matcher
}

TEST_F(MatcherTest, ConcurrentMatchersShareOneGrammarAndAgree) {
  auto g = Compile(R"([a-z]{2,12}@[a-z]{2,10}\.(com|org|net|de))");
  std::vector<TokenId> ids = Enc("someone@example.org");
  // Reference masks from a fresh grammar, single-threaded.
  auto ref_g = Compile(R"([a-z]{2,12}@[a-z]{2,10}\.(com|org|net|de))");
  std::vector<std::vector<std::uint32_t>> ref;
  Matcher r(ref_g);
  for (TokenId id : ids) {
    ref.push_back(Mask(r));
    ASSERT_TRUE(r.AcceptToken(id));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        Matcher m(g);
        for (std::size_t i = 0; i < ids.size(); ++i) {
          std::vector<std::uint32_t> w(BitmaskWords(vocab_->logits_width()));
          m.FillNextTokenBitmask(w);
          if (w != ref[i]) ++mismatches;
          m.AcceptToken(ids[i]);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(MatcherTest, RegexErrorsAreTypedAndLocated) {
  auto bad = compiler_->CompileRegex("ab(c");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidRegex);
  EXPECT_NE(bad.status().location().find("offset"), std::string::npos);
  auto look = compiler_->CompileRegex("a(?=b)");
  ASSERT_FALSE(look.ok());
  EXPECT_EQ(look.status().code(), StatusCode::kInvalidRegex);
  CompileOptions tight;
  tight.max_dfa_states = 50;
  auto blow = compiler_->CompileRegex("(a|b)*a(a|b){12}", tight);
  ASSERT_FALSE(blow.ok());
  EXPECT_EQ(blow.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(blow.status().ToString().find("resource limit"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
