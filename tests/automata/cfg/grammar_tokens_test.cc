// Token items in grammars (llama.cpp's GBNF token syntax): <[ID]>, <TEXT> and their negations
// !<[ID]>, !<TEXT> are matched by id, never by bytes, on the Llama-3 and Qwen2.5 vocabularies.
// What a user checks: which ids the mask allows where (computed here from the vocabulary's own
// tables), that a token's text spelled out in bytes is not the token, that a text token a
// grammar may take both as an item and as bytes keeps both parses, exactness walks against
// brute force, and generations that end with a required <|eot_id|>.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "lockstep/matcher.h"
#include "lockstep/ngram_model.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

using testing::Mask;

std::shared_ptr<const Vocabulary> Load(const std::string& name, std::int32_t width = 0) {
  VocabularyOptions vo;
  vo.logits_width = width;
  auto v = Vocabulary::Load(name, vo);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : nullptr;
}

Mask MaskOf(Matcher& m) {
  Mask mask(PaddedBitmaskWords(m.grammar().logits_width()));
  m.FillNextTokenBitmask(mask);
  return mask;
}

bool Has(const Mask& mask, TokenId id) { return (mask[id >> 5] >> (id & 31)) & 1; }

bool IsEosId(const Vocabulary& v, TokenId id) {
  return std::find(v.eos_ids().begin(), v.eos_ids().end(), id) != v.eos_ids().end();
}

// The one token `text` encodes to (the test's precondition on the vocabulary).
TokenId OneToken(const Vocabulary& v, const std::string& text) {
  auto ids = v.Encode(text);
  EXPECT_TRUE(ids.ok() && ids->size() == 1) << "'" << text << "' is not one token";
  return ids.ok() && ids->size() == 1 ? ids->front() : kNoToken;
}

TEST(GrammarTokens, ItemsAreMatchedByIdNeverByBytes) {
  auto v = Load("llama3");
  ASSERT_NE(v, nullptr);
  GrammarCompiler compiler(v);
  const TokenId eot = v->FindToken("<|eot_id|>");
  const TokenId header = v->FindToken("<|start_header_id|>");
  const TokenId qm = OneToken(*v, "<?>");
  ASSERT_TRUE(eot != kNoToken && header != kNoToken && qm != kNoToken);
  // By text and by id: the same grammar, the same masks.
  auto by_text = compiler.CompileGrammar("root ::= \"Answer: \" [0-9]+ <|eot_id|>");
  auto by_id = compiler.CompileGrammar("root ::= \"Answer: \" [0-9]+ <[" + std::to_string(eot) + "]>");
  ASSERT_TRUE(by_text.ok()) << by_text.status().ToString();
  ASSERT_TRUE(by_id.ok()) << by_id.status().ToString();
  for (const auto& g : {*by_text, *by_id}) {
    Matcher m(g);
    ASSERT_TRUE(m.AcceptString("Answer: 42"));
    const Mask mask = MaskOf(m);
    EXPECT_TRUE(Has(mask, eot));
    EXPECT_FALSE(Has(mask, header));
    for (TokenId e : v->eos_ids()) {
      if (e != eot) {
        EXPECT_FALSE(Has(mask, e)) << "EOS " << e << " before the grammar ends";
      }
    }
    EXPECT_FALSE(m.CanEnd());
    // <|eot_id|> is an EOS id of Llama-3, but here the grammar takes it as its last item.
    ASSERT_TRUE(m.AcceptToken(eot));
    EXPECT_FALSE(m.IsTerminated());
    EXPECT_TRUE(m.CanEnd());
    std::vector<TokenId> allowed;
    const Mask end = MaskOf(m);
    for (TokenId t = 0; t < v->size(); ++t) {
      if (Has(end, t)) allowed.push_back(t);
    }
    std::vector<TokenId> eos = v->eos_ids();
    std::sort(eos.begin(), eos.end());
    EXPECT_EQ(allowed, eos);  // only the end now
    ASSERT_TRUE(m.AcceptToken(eot));
    EXPECT_TRUE(m.IsTerminated());
  }
  // A text token by its text: the token, never its bytes spelled out.
  auto html = compiler.CompileGrammar("root ::= \"x\" <?> \"y\"");
  ASSERT_TRUE(html.ok()) << html.status().ToString();
  Matcher m(*html);
  EXPECT_FALSE(m.AcceptString("x<?>y"));
  ASSERT_TRUE(m.AcceptString("x"));
  EXPECT_FALSE(m.AcceptString("<"));
  EXPECT_TRUE(Has(MaskOf(m), qm));
  EXPECT_FALSE(Has(MaskOf(m), OneToken(*v, "<")));
  ASSERT_TRUE(m.AcceptToken(qm));
  ASSERT_TRUE(m.AcceptString("y"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(GrammarTokens, UnknownTokensAreErrorsNamingThem) {
  auto v = Load("llama3");
  ASSERT_NE(v, nullptr);
  GrammarCompiler compiler(v);
  auto not_one = compiler.CompileGrammar("root ::= \"a\" <not one token>");
  ASSERT_FALSE(not_one.ok());
  EXPECT_EQ(not_one.status().code(), StatusCode::kInvalidGrammar);
  EXPECT_EQ(not_one.status().location(), "1:14");
  EXPECT_NE(not_one.status().message().find("'<not one token>' is not one token"),
            std::string::npos)
      << not_one.status().ToString();
  auto no_special = compiler.CompileGrammar("root ::= \"a\" <[<|no_such_token|>]>");
  ASSERT_FALSE(no_special.ok());
  EXPECT_EQ(no_special.status().location(), "1:14");
  auto out_of_range = compiler.CompileGrammar("root ::= !<[999999]>");
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_EQ(out_of_range.status().location(), "1:11");
  EXPECT_NE(out_of_range.status().message().find("token id 999999 is not in the vocabulary"),
            std::string::npos)
      << out_of_range.status().ToString();
}

TEST(GrammarTokens, NegatedItemTakesAnyOneTokenButThatOneAndNeverEos) {
  auto v = Load("llama3");
  ASSERT_NE(v, nullptr);
  GrammarCompiler compiler(v);
  const TokenId start = v->FindToken("<|start_header_id|>");
  const TokenId end = v->FindToken("<|end_header_id|>");
  auto g = compiler.CompileGrammar(
      "root ::= <|start_header_id|> (!<|end_header_id|>)* <|end_header_id|> \"ok\"");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  EXPECT_FALSE(m.AcceptString("<|start_header_id|>"));
  ASSERT_TRUE(m.AcceptToken(start));
  // Every id of the vocabulary but EOS and unused ids (the end marker too, as the item after).
  const Mask mask = MaskOf(m);
  long wrong = 0;
  for (TokenId t = 0; t < v->logits_width(); ++t) {
    const bool want = t < v->size() && v->Kind(t) != TokenKind::kUnused && !IsEosId(*v, t);
    wrong += Has(mask, t) != want;
  }
  EXPECT_EQ(wrong, 0);
  // Text tokens, other special tokens (even the start marker again) are single items.
  ASSERT_TRUE(m.AcceptToken(OneToken(*v, " hello")));
  ASSERT_TRUE(m.AcceptToken(start));
  ASSERT_TRUE(m.AcceptToken(OneToken(*v, "ok")));
  EXPECT_FALSE(m.AcceptToken(v->eos_ids().front()));
  ASSERT_TRUE(m.AcceptToken(end));
  EXPECT_FALSE(m.AcceptToken(end));
  ASSERT_TRUE(m.AcceptString("ok"));
  EXPECT_TRUE(m.CanEnd());
}

TEST(GrammarTokens, TextTokenTakenAsItemAndAsBytesKeepsBothParses) {
  auto v = Load("llama3");
  ASSERT_NE(v, nullptr);
  GrammarCompiler compiler(v);
  const TokenId ab = OneToken(*v, "ab");
  const TokenId a = OneToken(*v, "a");
  const TokenId x = OneToken(*v, "x");
  // "ab" is one token: one !<[a]> item (the loop goes on) or the closing literal (the end).
  auto g = compiler.CompileGrammar("root ::= (!<[" + std::to_string(a) + "]>)* \"ab\"");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  ASSERT_TRUE(m.AcceptToken(ab));
  EXPECT_TRUE(m.CanEnd());
  EXPECT_TRUE(Has(MaskOf(m), x));
  EXPECT_FALSE(Has(MaskOf(m), a) && !m.Fork().AcceptToken(a)) << "mask and accept disagree";
  // The token "a" is excluded as an item but still starts the literal, byte by byte.
  Matcher n(*g);
  ASSERT_TRUE(n.AcceptToken(a));
  EXPECT_FALSE(n.CanEnd());
  EXPECT_FALSE(n.AcceptToken(x));
  ASSERT_TRUE(n.AcceptString("b"));
  EXPECT_TRUE(n.CanEnd());
}

struct Case {
  std::string name;
  std::string grammar;
};

// Grammars with every token form over one vocabulary's own markers.
std::vector<Case> TokenGrammars(const Vocabulary& v, const std::string& open,
                                const std::string& close, const std::string& stop) {
  const std::string a = std::to_string(OneToken(v, "a"));
  const std::string dot = std::to_string(OneToken(v, "."));
  const std::string stop_id = std::to_string(v.FindToken(stop));
  return {
      {"markers", "root ::= " + open + " [a-z ]{0,8} " + close + " (!" + stop + ")* " + stop},
      {"mixed", "root ::= (\"x\" | !<[" + a + "]> | <?>) (\"ab\" | <[" + a + "]> \"b\")* \".\""},
      {"counted", "root ::= item{1,3} <[" + stop_id + "]>\nitem ::= !<[" + dot +
                      "]> | \".\" [0-9] | " + open + " \"x\""},
  };
}

void Walks(const std::string& vocab_name, std::int32_t width, const std::string& open,
           const std::string& close, const std::string& stop) {
  auto v = Load(vocab_name, width);
  ASSERT_NE(v, nullptr);
  GrammarCompiler compiler(v);
  const long steps = std::max(20L, static_cast<long>(150 * testing::TestScale()));
  std::uint64_t seed = 7;
  for (const Case& c : TokenGrammars(*v, open, close, stop)) {
    auto g = compiler.CompileGrammar(c.grammar);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    const testing::WalkStats st = testing::ExactnessWalks(*g, steps, ++seed, 10);
    std::printf("%-8s %-8s steps %ld walks %ld completed %ld over %ld under %ld\n",
                vocab_name.c_str(), c.name.c_str(), st.steps, st.walks, st.completed, st.over,
                st.under);
    EXPECT_EQ(st.over, 0) << c.name << ": " << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << c.name << ": " << st.first_mismatch;
    EXPECT_EQ(st.steps, steps);
  }
}

TEST(GrammarTokens, ExactAgainstBruteForceLlama3) {
  Walks("llama3", 0, "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>");
}

TEST(GrammarTokens, ExactAgainstBruteForceQwen25) {
  Walks("qwen2.5", 151936, "<|im_start|>", "<|object_ref_end|>", "<|im_end|>");
}

TEST(GrammarTokens, GenerationsEndWithTheRequiredEotId) {
  auto v = Load("llama3");
  ASSERT_NE(v, nullptr);
  const std::string corpus = testing::SourceDataDir() + "/corpus/";
  auto model = NgramModel::TrainFromCorpus(*v, {corpus + "json.jsonl", corpus + "values.jsonl"}, 3);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  GrammarCompiler compiler(v);
  auto g = compiler.CompileGrammar(
      "root ::= \"{\\\"answer\\\": \" [0-9]{1,6} \"}\" <|eot_id|>");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const TokenId eot = v->FindToken("<|eot_id|>");
  const int samples = std::max(4, static_cast<int>(20 * testing::TestScale()));
  for (int i = 0; i < samples; ++i) {
    Matcher m(*g);
    GenerateOptions options;
    options.sampler.temperature = 1.0f;
    options.sampler.seed = 100 + i;
    options.max_tokens = 64;
    auto r = Generate(*model, m, {}, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->finish, FinishReason::kEos);
    ASSERT_FALSE(r->tokens.empty());
    EXPECT_EQ(r->tokens.back(), eot) << "sample " << i << ": " << r->text;
    EXPECT_EQ(std::count(r->tokens.begin(), r->tokens.end(), eot), 1);
    EXPECT_EQ(r->text.rfind("{\"answer\": ", 0), 0u) << r->text;
  }
}

}  // namespace
}  // namespace lockstep
