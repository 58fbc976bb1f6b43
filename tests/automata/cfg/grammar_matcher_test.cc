// The Matcher API over grammar constraints: rollback over any number of tokens, forks that do
// not share state, jump-forward (ForcedBytes and canonical ForcedTokens), ValidateDraft for
// speculative decoding, and batch filling on a thread pool equal to one-by-one fills.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>

#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

using Mask = std::vector<std::uint32_t>;

std::shared_ptr<const Vocabulary> Llama3() {
  static auto v = *Vocabulary::Load("llama3");
  return v;
}

std::shared_ptr<const CompiledGrammar> Shipped(const std::string& name) {
  static GrammarCompiler compiler(Llama3());
  std::ifstream in(testing::SourceDataDir() + "/grammars/" + name + ".gbnf");
  std::stringstream ss;
  ss << in.rdbuf();
  auto g = compiler.CompileGrammar(ss.str());
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

Mask MaskOf(const Matcher& m) {
  Mask mask(BitmaskWords(m.grammar().logits_width()));
  m.FillNextTokenBitmask(mask);
  return mask;
}

std::vector<TokenId> Encode(const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  return *Llama3()->Encode(text, eo);
}

const std::string kToolCall =
    R"([{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2, 3], "units": null}}])";

// Grammars copied around carry rules their root never uses (llama.cpp and XGrammar accept them):
// they compile, with a warning naming each one's line:column, and the language is the one
// without them: the masks along a real tool call are the same at every step.
TEST(GrammarMatcherTest, UnusedRulesAreWarningsAndChangeNothing) {
  static GrammarCompiler compiler(Llama3());
  std::ifstream in(testing::SourceDataDir() + "/grammars/tool_calls.gbnf");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string base = ss.str();
  const std::size_t lines = static_cast<std::size_t>(std::count(base.begin(), base.end(), '\n'));
  ASSERT_EQ(base.back(), '\n');
  // An unused left-recursive rule, and one only an unused rule refers to.
  const std::string extra = "spare ::= spare \"x\" | digits\n  digits ::= [0-9]+\n";
  std::vector<std::string> warnings;
  auto with = compiler.CompileGrammar(base + extra, {}, "auto", &warnings);
  ASSERT_TRUE(with.ok()) << with.status().ToString();
  const std::string l1 = std::to_string(lines + 1), l2 = std::to_string(lines + 2);
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          l1 + ":1: rule 'spare' is never used (unreachable from 'root')",
                          l2 + ":3: rule 'digits' is never used (unreachable from 'root')"}));
  std::vector<std::string> none;
  auto without = compiler.CompileGrammar(base, {}, "auto", &none);
  ASSERT_TRUE(without.ok()) << without.status().ToString();
  EXPECT_TRUE(none.empty());
  Matcher a(*with), b(*without);
  EXPECT_EQ(MaskOf(a), MaskOf(b));
  for (TokenId id : Encode(kToolCall)) {
    ASSERT_EQ(a.AcceptToken(id), b.AcceptToken(id));
    ASSERT_EQ(MaskOf(a), MaskOf(b)) << "after " << a.NumSteps() << " tokens";
  }
  EXPECT_TRUE(a.CanEnd());
}

TEST(GrammarMatcherTest, RollbackOverAnyNumberOfTokens) {
  auto g = Shipped("tool_calls");
  std::vector<TokenId> ids = Encode(kToolCall);
  ASSERT_GT(ids.size(), 20u);
  Matcher m(g);
  std::vector<Mask> masks = {MaskOf(m)};
  for (TokenId id : ids) {
    ASSERT_TRUE(m.AcceptToken(id));
    masks.push_back(MaskOf(m));
  }
  EXPECT_TRUE(m.CanEnd());
  // Roll back in uneven chunks down to the start, checking the mask at each point.
  std::size_t at = ids.size();
  for (std::int32_t n : {1, 3, 7, 2, 5}) {
    ASSERT_TRUE(m.Rollback(n));
    at -= n;
    EXPECT_EQ(MaskOf(m), masks[at]) << "after rolling back to step " << at;
    EXPECT_EQ(m.NumSteps(), static_cast<std::int32_t>(at));
  }
  EXPECT_FALSE(m.Rollback(static_cast<std::int32_t>(at) + 1));
  ASSERT_TRUE(m.Rollback(static_cast<std::int32_t>(at)));
  EXPECT_EQ(MaskOf(m), masks[0]);
  // And forward again to the end.
  for (TokenId id : ids) ASSERT_TRUE(m.AcceptToken(id));
  EXPECT_TRUE(m.AcceptToken(Llama3()->eos()));
  EXPECT_TRUE(m.IsTerminated());
  ASSERT_TRUE(m.Rollback(1));
  EXPECT_FALSE(m.IsTerminated());
  EXPECT_TRUE(m.CanEnd());
}

// A rollback followed by other bytes of the same length, with no fill in between, rebuilds the
// parser's sets at the same indices with other items: the masks must be those of the new text,
// not of the state that was rolled back (a cache keyed by set index would return the old one).
TEST(GrammarMatcherTest, RollbackThenOtherTextOfTheSameLength) {
  auto g = Shipped("json");
  const std::string prefix = "{\"a\": [";
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"1, 2", "\"x\","}, {"\"x\",", "1, 2"}, {"12.5", "true"}, {"null", "-3e1"}, {"[1]]", "{}, "}};
  for (const auto& [first, second] : pairs) {
    ASSERT_EQ(first.size(), second.size());
    Matcher m(g);
    ASSERT_TRUE(m.AcceptString(prefix));
    MaskOf(m);
    ASSERT_TRUE(m.AcceptString(first)) << first;
    MaskOf(m);
    ASSERT_TRUE(m.Rollback(1));
    ASSERT_TRUE(m.AcceptString(second)) << second;
    Matcher fresh(g);
    ASSERT_TRUE(fresh.AcceptString(prefix + second));
    EXPECT_EQ(MaskOf(m), MaskOf(fresh)) << first << " rolled back, then " << second;
    // Twice back and forth, filling only at the end.
    ASSERT_TRUE(m.Rollback(1));
    ASSERT_TRUE(m.AcceptString(first));
    ASSERT_TRUE(m.Rollback(1));
    ASSERT_TRUE(m.AcceptString(second));
    EXPECT_EQ(MaskOf(m), MaskOf(fresh)) << first << " / " << second << ", twice";
  }
}

TEST(GrammarMatcherTest, ForksAreIndependent) {
  auto g = Shipped("json");
  Matcher a(g);
  ASSERT_TRUE(a.AcceptString("{\"a\": ["));
  Matcher b = a.Fork();
  Mask before = MaskOf(a);
  ASSERT_TRUE(b.AcceptString("1, 2]}"));
  EXPECT_TRUE(b.CanEnd());
  EXPECT_FALSE(a.CanEnd());
  EXPECT_EQ(MaskOf(a), before);
  ASSERT_TRUE(a.AcceptString("\"x\"]}"));
  EXPECT_TRUE(a.CanEnd());
  Matcher c(g);
  c = b;  // copy-assignment is a fork too
  ASSERT_TRUE(c.Rollback(1));
  EXPECT_FALSE(c.CanEnd());
  EXPECT_TRUE(b.CanEnd());
}

TEST(GrammarMatcherTest, JumpForwardForcedBytesAndCanonicalTokens) {
  GrammarCompiler compiler(Llama3());
  auto g = compiler.CompileGrammar(
      "root ::= \"{\\\"function\\\": \\\"\" name \"\\\", \\\"arguments\\\": {}}\"\n"
      "name ::= \"get_weather\" | \"get_time\"\n");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_EQ(m.ForcedBytes(), "{\"function\": \"get_");
  std::vector<TokenId> forced = m.ForcedTokens();
  // Canonical tokenisation of the forced bytes, minus the last token (kept back: "get" could be
  // spanned by a longer token such as "get_weather"-like pieces).
  std::vector<TokenId> canonical = Encode("{\"function\": \"get_");
  ASSERT_FALSE(canonical.empty());
  canonical.pop_back();
  EXPECT_EQ(forced, canonical);
  for (TokenId id : forced) ASSERT_TRUE(m.AcceptToken(id));
  // What was kept back is still forced, byte for byte.
  EXPECT_EQ(*Llama3()->Decode(forced) + m.ForcedBytes(), "{\"function\": \"get_");
  ASSERT_TRUE(m.AcceptString(m.ForcedBytes() + "weather"));
  EXPECT_EQ(m.ForcedBytes(), "\", \"arguments\": {}}");
  ASSERT_TRUE(m.AcceptString("\", \"arguments\": {}}"));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_EQ(m.ForcedBytes(), "");
}

TEST(GrammarMatcherTest, ValidateDraftStopsAtTheFirstInvalidToken) {
  auto g = Shipped("json");
  std::vector<TokenId> draft = Encode("{\"a\": [1, 2], \"b\": true}");
  Matcher m(g);
  ASSERT_TRUE(m.AcceptString("{"));  // the draft continues from the matcher's state
  std::vector<TokenId> cont = Encode("\"a\": [1, 2]}");
  EXPECT_EQ(m.ValidateDraft(cont), static_cast<std::int32_t>(cont.size()));
  std::vector<TokenId> bad = cont;
  bad.insert(bad.begin() + 3, Encode("}}")[0]);
  EXPECT_EQ(m.ValidateDraft(bad), 3);
  EXPECT_EQ(m.NumSteps(), 1);  // unchanged
  Matcher fresh(g);
  EXPECT_EQ(fresh.ValidateDraft(draft), static_cast<std::int32_t>(draft.size()));
}

TEST(GrammarMatcherTest, BatchFillEqualsOneByOne) {
  auto g = Shipped("tool_calls");
  std::vector<TokenId> ids = Encode(kToolCall);
  std::vector<Matcher> matchers;
  for (std::size_t i = 0; i < 40; ++i) {
    Matcher m(g);
    for (std::size_t k = 0; k < (i * 7) % ids.size(); ++k) m.AcceptToken(ids[k]);
    matchers.push_back(std::move(m));
  }
  std::vector<Matcher*> ptrs;
  for (auto& m : matchers) ptrs.push_back(&m);
  ptrs.push_back(nullptr);
  const std::size_t stride = PaddedBitmaskWords(g->logits_width());
  for (int threads : {1, 2, 4}) {
    BatchMaskFiller filler(threads);
    std::vector<std::uint32_t> out(ptrs.size() * stride, 0xFFFFFFFFu);
    ASSERT_TRUE(filler.Fill(ptrs, out, stride));
    for (std::size_t i = 0; i < matchers.size(); ++i) {
      Mask one = MaskOf(matchers[i]);
      Mask row(out.begin() + i * stride, out.begin() + i * stride + one.size());
      EXPECT_EQ(row, one) << "row " << i << " with " << threads << " threads";
    }
    Mask last(out.end() - stride, out.end());
    EXPECT_EQ(last, Mask(stride, 0u));
    EXPECT_FALSE(filler.Fill(ptrs, out, 10));  // stride too small: refused
  }
}

}  // namespace
}  // namespace lockstep

namespace lockstep {
namespace {

TEST(GrammarMatcherTest, SpecialTokensByName) {
  // A reasoning block closed by a special token, then a JSON-ish answer.
  GrammarCompiler compiler(Llama3());
  auto g = compiler.CompileGrammar(
      "root ::= \"think:\" [a-z ]{0,20} <[<|start_header_id|>]> \"{\\\"a\\\": 1}\"\n");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const TokenId special = Llama3()->FindToken("<|start_header_id|>");
  ASSERT_NE(special, kNoToken);
  Matcher m(*g);
  EXPECT_FALSE(MaskOf(m)[special >> 5] >> (special & 31) & 1);
  ASSERT_TRUE(m.AcceptString("think: hello"));
  Mask mask = MaskOf(m);
  EXPECT_TRUE((mask[special >> 5] >> (special & 31)) & 1);
  // Only the grammar's special token: no other special id, no EOS.
  const TokenId other = Llama3()->FindToken("<|end_header_id|>");
  EXPECT_FALSE((mask[other >> 5] >> (other & 31)) & 1);
  EXPECT_FALSE((mask[Llama3()->eos() >> 5] >> (Llama3()->eos() & 31)) & 1);
  // The special token's text never matches it: only the id does.
  EXPECT_FALSE(m.AcceptString("<|start_header_id|>"));
  ASSERT_TRUE(m.AcceptToken(special));
  EXPECT_FALSE(m.AcceptToken(special));
  ASSERT_TRUE(m.AcceptString("{\"a\": 1}"));
  EXPECT_TRUE(m.CanEnd());
  ASSERT_TRUE(m.Rollback(2));
  EXPECT_TRUE((MaskOf(m)[special >> 5] >> (special & 31)) & 1);
  // A name the vocabulary lacks is an error with the grammar location.
  auto bad = compiler.CompileGrammar("root ::= \"a\" <[<|no_such_token|>]>\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidGrammar);
  EXPECT_EQ(bad.status().location(), "1:14");
}

}  // namespace
}  // namespace lockstep
