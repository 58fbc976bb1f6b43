// `format: regex` checked at run time (automata/cfg/earley.h, "ECMAScript patterns"): the
// parser reads the string's value with the ECMAScript pattern checker and drops it at the first
// character after which no text makes it a valid pattern; the mask takes out every token that
// would. Checked against the validator (the same checker, itself checked against V8's verdicts
// in tests/grammar/regex/ecma_pattern_test.cc) over the corpus of patterns, against brute-force
// masks (every id tried with AcceptToken) along pattern texts and on random walks on three
// vocabularies, through an artifact, and at the GBNF export, which cannot express the check.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "automata/schema/schema_lexical.h"
#include "grammar/regex/ecma_pattern.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/artifact.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep::schema {
namespace {

using json = nlohmann::json;

const char* kRegex = R"({"type": "string", "format": "regex"})";

std::shared_ptr<const CompiledGrammar> Compile(const char* vocab, const std::string& schema) {
  auto g = testing::CompilerFor(vocab).CompileSchema(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  return g.ok() ? *g : nullptr;
}

std::vector<TokenId> Tokens(const char* vocab, const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = testing::CompilerFor(vocab).vocabulary().Encode(text, eo);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

bool Allowed(const std::vector<std::uint32_t>& mask, TokenId id) {
  return ((mask[id >> 5] >> (id & 31)) & 1) != 0;
}

// Whether `text` is taken token by token, each token in the mask first, and then may end; with
// `brute`, every mask on the way is compared with the brute-force one.
bool Feed(const char* vocab, const std::shared_ptr<const CompiledGrammar>& g,
          const std::string& text, bool brute = false) {
  Matcher m(g);
  std::vector<std::uint32_t> mask(
      BitmaskWords(testing::CompilerFor(vocab).vocabulary().logits_width()));
  for (TokenId id : Tokens(vocab, text)) {
    m.FillNextTokenBitmask(mask);
    if (brute) {
      EXPECT_EQ(mask, testing::BruteForceMaskFor(m, mask)) << vocab << ": in " << text;
    }
    const bool in_mask = Allowed(mask, id);
    const bool taken = m.AcceptToken(id);
    EXPECT_EQ(in_mask, taken) << vocab << ": mask and AcceptToken disagree in " << text;
    if (!taken) return false;
  }
  return m.CanEnd();
}

bool Valid(const std::string& schema_text, const std::string& instance) {
  auto schema = Schema::Load(schema_text);
  EXPECT_TRUE(schema.ok());
  ValidateOptions vo;
  vo.format_assertion = true;  // (the compiler asserts formats)
  auto v = Validator::Create(*schema, vo);
  EXPECT_TRUE(v.ok());
  auto r = v->Validate(json::parse(instance));
  EXPECT_TRUE(r.ok());
  return r.ok() && *r;
}

// The corpus of patterns with V8's verdicts (tests/grammar/regex/ecma_pattern_test.cc's).
std::vector<std::pair<std::string, bool>> Corpus() {
  std::vector<std::pair<std::string, bool>> out;
  std::ifstream in(std::string(LOCKSTEP_TEST_DATA_DIR) + "/ecma_patterns.jsonl");
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const json j = json::parse(line);
    out.emplace_back(j["pattern"].get<std::string>(), j["valid"].get<bool>());
  }
  return out;
}

// Every pattern of the corpus as a JSON string: the matcher takes it exactly when V8 (and the
// validator) call it a valid pattern; a sample of them with every mask compared.
TEST(FormatRegex, MatcherAgreesWithTheValidatorOverTheCorpus) {
  const auto corpus = Corpus();
  ASSERT_GT(corpus.size(), 1000u) << "tests/data/ecma_patterns.jsonl is missing or short";
  auto g = Compile("llama3", kRegex);
  ASSERT_NE(g, nullptr);
  const std::size_t stride =
      std::max<std::size_t>(1, static_cast<std::size_t>(6 / testing::TestScale()));
  long valid = 0, checked = 0;
  for (std::size_t i = 0; i < corpus.size(); i += stride) {
    const auto& [pattern, v8] = corpus[i];
    const std::string text = json(pattern).dump();
    ASSERT_EQ(Valid(kRegex, text), v8) << text;
    EXPECT_EQ(Feed("llama3", g, text, /*brute=*/i % (64 * stride) == 0), v8) << text;
    valid += v8;
    ++checked;
  }
  std::printf("%ld patterns, %ld valid\n", checked, valid);
  EXPECT_GT(valid, checked / 5);
}

// Along texts that pass through every kind of place a check decides (counts, ranges, group
// names, escapes, back references, the closing quote), each mask equals the brute-force one, on
// three vocabularies; named tokens are out or in.
TEST(FormatRegex, MasksEqualBruteForceAlongPatterns) {
  const std::string schema = R"({"type": "object", "properties": {
      "pattern": {"type": "string", "format": "regex", "minLength": 1},
      "flags": {"type": "string"}}, "required": ["pattern"]})";
  const std::vector<std::string> texts = {
      R"({"pattern":"^(a|b)\\d{2,30}$"})",
      R"({"pattern":"[a-z\\-_]+(?:\\.[0-9A-F]{1,4})*","flags":"u"})",
      R"({"pattern":"(?<year>\\d{4})-(?<m>[01]\\d)\\k<year>"})",
      R"({"pattern":"\\u{1F600}[\\u0041-\\u005A]\\p{Script=Greek}+"})",
      R"j({"pattern":"(x)(y)\\2\\1(?=z)(?<!w)"})j",
  };
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = Compile(vocab, schema);
    ASSERT_NE(g, nullptr);
    for (const std::string& text : texts) {
      EXPECT_TRUE(Valid(schema, text)) << text;
      EXPECT_TRUE(Feed(vocab, g, text, /*brute=*/true)) << vocab << ": " << text;
    }
    // (prefix, a token out after it, a token in after it)
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {R"({"pattern":"a{5,3)", "}", "0"},         // n > m: `}` out; `{5,30}` still on
        {R"({"pattern":"[z-)", "a", "~"},             // a range out of order
        {R"({"pattern":"(?<n>x)(?<n)", ">", "m"},     // a duplicate group name
        {R"({"pattern":"\\)", "a", "d"},              // `\a` is no escape in Unicode mode
        {R"({"pattern":"(a)", "\"", ")"},  // an open group cannot close the string
        {R"({"pattern":"\\1)", "\"", "("},            // a back reference past the groups
        {R"({"pattern":"a*)", "*", "?"},              // nothing to repeat
    };
    for (const auto& [prefix, out, in] : cases) {
      Matcher m(g);
      ASSERT_TRUE(m.AcceptString(prefix)) << vocab << ": " << prefix;
      std::vector<std::uint32_t> mask(
          BitmaskWords(testing::CompilerFor(vocab).vocabulary().logits_width()));
      m.FillNextTokenBitmask(mask);
      EXPECT_EQ(mask, testing::BruteForceMaskFor(m, mask)) << vocab << ": " << prefix;
      const auto out_ids = Tokens(vocab, out), in_ids = Tokens(vocab, in);
      if (out_ids.size() == 1) {
        EXPECT_FALSE(Allowed(mask, out_ids[0])) << vocab << ": " << prefix << " + " << out;
      }
      if (in_ids.size() == 1) {
        EXPECT_TRUE(Allowed(mask, in_ids[0])) << vocab << ": " << prefix << " + " << in;
      }
    }
  }
}

// Random walks: every mask equal to the brute-force one, no dead end; also where a string of
// another kind shares the pattern's opening quote (an enum of invalid patterns beside it: the
// parser decides those tokens).
TEST(FormatRegex, RandomWalksOnThreeVocabularies) {
  const std::vector<std::string> schemas = {
      kRegex,
      R"({"type": "array", "items": {"type": "string", "format": "regex"}, "maxItems": 3})",
      R"({"anyOf": [{"type": "string", "format": "regex"}, {"enum": ["(", "[b-a]", "ok"]}]})",
  };
  const long steps = std::max(30L, static_cast<long>(70 * testing::TestScale()));
  std::uint64_t seed = 11;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const std::string& schema : schemas) {
      auto g = Compile(vocab, schema);
      ASSERT_NE(g, nullptr);
      testing::WalkStats st = testing::ExactnessWalks(g, steps, seed++, 16);
      std::printf("%s: %s\n", vocab, st.Summary().c_str());
      EXPECT_TRUE(st.Exact()) << vocab << ": " << schema << ": " << st.Failure();
    }
  }
}

// The check survives an artifact; the GBNF export cannot say it (strict refuses, lenient
// warns); beside maxLength or a pattern with values that are no patterns the format stays
// refused, naming itself.
TEST(FormatRegex, ArtifactGbnfAndWhatStaysRefused) {
  auto g = Compile("llama3", kRegex);
  ASSERT_NE(g, nullptr);
  const std::string bytes = SerializeArtifact(*g);
  auto back = LoadArtifact(testing::CompilerFor("llama3"), bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(Feed("llama3", *back, R"("a(b)c")"));
  EXPECT_FALSE(Feed("llama3", *back, R"("a(b")"));
  EXPECT_FALSE(Feed("llama3", *back, R"("[b-a]")"));

  auto gbnf = SchemaToGbnf(kRegex);
  ASSERT_FALSE(gbnf.ok());
  EXPECT_EQ(gbnf.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(gbnf.status().location(), "/format");
  CompileOptions lenient;
  lenient.schema_lenient = true;
  std::vector<std::string> warnings;
  EXPECT_TRUE(SchemaToGbnf(kRegex, lenient, &warnings).ok());
  EXPECT_FALSE(warnings.empty());

  for (const char* schema : {R"({"type": "string", "format": "regex", "maxLength": 9})",
                             R"({"type": "string", "format": "regex", "pattern": "^a"})",
                             R"({"type": "string", "format": "regex", "pattern": "^[a-z(]+$"})",
                             R"({"type": "string", "format": "regex", "pattern": "^[a-zé]+$"})"}) {
    auto r = testing::CompilerFor("llama3").CompileSchema(schema);
    ASSERT_FALSE(r.ok()) << schema;
    EXPECT_EQ(r.status().code(), StatusCode::kUnsupported) << r.status().ToString();
    EXPECT_NE(r.status().message().find("regex"), std::string::npos) << r.status().ToString();
  }
}

// Beside patterns and formats whose every value is a pattern, the format asserts nothing more
// and the string is theirs (Github_hard's o21780: time spans). ValuesAreEcmaPatterns against
// brute force: every string of up to 4 characters (69,905) over an alphabet of syntax
// characters that the pattern matches (as the validator reads it), checked by IsEcmaPattern;
// then compiled schemas against the validator and on random walks (sanitizers: 3 characters).
TEST(FormatRegex, BesidePatternsWhoseValuesArePatterns) {
  struct Case {
    std::string pattern;
    std::optional<bool> want;
  };
  const std::vector<Case> cases = {
      {"^[0-9]+$", true},
      {R"(^((?:-?0*\d+\.)?(?:0*)(?:2[0-3]|1[0-9]|[0-9]))(?::0*([0-5]?[0-9]))?$)", true},
      {"^a{1,3}[|]?$", true},
      {R"(^\\[dws]$)", true},
      {"^[a-z(]+$", false},
      {"^[*+?][0-9]*$", false},
      {R"(^[\[\]a]{1,3}$)", false},
      {R"(^\\[a-z]$)", false},  // `\d` is a pattern, `\a` is not (Unicode mode)
      {"^[a-zé]+$", std::nullopt},
  };
  const std::string alphabet = "0a(|)[]{}\\-*,1d";
  std::vector<std::string> strings = {""};
  const std::size_t max_len = testing::TestScale() < 1 ? 3 : 4;  // (sanitizers: 4,369 strings)
  for (std::size_t begin = 0, len = 0; len < max_len; ++len) {
    const std::size_t end = strings.size();
    for (std::size_t i = begin; i < end; ++i) {
      for (char c : alphabet) strings.push_back(strings[i] + c);
    }
    begin = end;
  }
  for (const Case& c : cases) {
    StringConstraint sc;
    sc.pattern = c.pattern;
    sc.format = "regex";
    auto got = ValuesAreEcmaPatterns(sc);
    ASSERT_TRUE(got.ok()) << c.pattern << ": " << got.status().ToString();
    EXPECT_EQ(*got, c.want) << c.pattern;
    if (!c.want) continue;
    const std::string schema = json{{"type", "string"}, {"pattern", c.pattern}}.dump();
    auto loaded = Schema::Load(schema);
    ASSERT_TRUE(loaded.ok()) << schema;
    auto v = Validator::Create(*loaded);
    ASSERT_TRUE(v.ok());
    std::string witness;
    for (const std::string& s : strings) {
      auto r = v->Validate(json(s));
      ASSERT_TRUE(r.ok());
      if (*r && !IsEcmaPattern(s)) {
        witness = s;
        break;
      }
    }
    EXPECT_EQ(witness.empty(), *c.want) << c.pattern << ": witness '" << witness << "'";
  }

  const std::string time_span =
      json{{"type", "string"}, {"format", "regex"}, {"minLength", 1}, {"pattern", cases[1].pattern}}
          .dump();
  const std::string date = R"({"allOf": [{"format": "date"}, {"format": "regex"}]})";
  for (const std::string& schema : {time_span, date}) {
    for (const char* text : {R"("12:30")", R"("-1.23:05:59")", R"("24:00")", R"("2024-02-29")",
                             R"("2023-02-29")", R"("1(")", R"("")"}) {
      auto g = Compile("llama3", schema);
      ASSERT_NE(g, nullptr);
      EXPECT_EQ(Feed("llama3", g, text, true), Valid(schema, text)) << schema << " " << text;
    }
  }
  const long steps = std::max(20L, static_cast<long>(40 * testing::TestScale()));
  std::uint64_t seed = 31;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = Compile(vocab, time_span);
    ASSERT_NE(g, nullptr);
    testing::WalkStats st = testing::ExactnessWalks(g, steps, seed++, 16);
    EXPECT_TRUE(st.Exact()) << vocab << ": " << st.Failure();
  }
}

}  // namespace
}  // namespace lockstep::schema
