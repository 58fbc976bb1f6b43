// maxLength counted at run time (grammar::Rule::max_chars, automata/cfg/earley.h "String
// lengths"): when a pattern's or a format's automaton times maxLength is past max_dfa_states, the
// string is compiled without maxLength and the parser counts its characters (code points: an
// escape or a multi-byte character is one), refusing a byte that takes it past the bound or to
// a state from which it cannot end within it. Checked against the validator on raw texts at,
// under and over the bound, against a brute-force mask (every id tried with AcceptToken) at
// every token of texts that reach the bound, along random walks on three vocabularies, through
// an artifact, and at the GBNF export, which cannot express the count. Real shapes from
// GitHub schemas: a word-count pattern with maxLength 500, an email with maxLength 100.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_program.h"
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

using testing::CompilerFor;

const GrammarCompiler& Compiler() { return CompilerFor("llama3"); }

std::vector<TokenId> Tokens(const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = Compiler().vocabulary().Encode(text, eo);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

bool Allowed(const std::vector<std::uint32_t>& mask, TokenId id) {
  return ((mask[id >> 5] >> (id & 31)) & 1) != 0;
}

// Whether `text` is taken token by token, each token in the mask first, and then may end.
bool Feed(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  std::vector<std::uint32_t> mask(BitmaskWords(Compiler().vocabulary().logits_width()));
  for (TokenId id : Tokens(text)) {
    m.FillNextTokenBitmask(mask);
    const bool in_mask = Allowed(mask, id);
    const bool taken = m.AcceptToken(id);
    EXPECT_EQ(in_mask, taken) << "mask and AcceptToken disagree at a token of " << text;
    if (!taken) return false;
  }
  return m.CanEnd();
}

bool Valid(const std::string& schema_text, const std::string& instance) {
  auto schema = Schema::Load(schema_text);
  EXPECT_TRUE(schema.ok());
  ValidateOptions vo;
  vo.format_assertion = true;
  auto v = Validator::Create(*schema, vo);
  EXPECT_TRUE(v.ok());
  auto r = v->Validate(json::parse(instance));
  EXPECT_TRUE(r.ok());
  return *r;
}

// A budget under which words of 1 to 5 letters times 30 characters is past max_dfa_states while
// the words alone fit: the count is made at run time.
CompileOptions Small() {
  CompileOptions o;
  o.max_dfa_states = 150;
  return o;
}

const char* kWords =
    R"({"type": "object", "properties": {"s": {"type": "string",
        "pattern": "^[a-z]{1,5}( [a-z]{1,5})*$", "maxLength": 30}}, "required": ["s"],
        "additionalProperties": false})";

std::string Quoted(const std::string& s) { return "\"" + s + "\""; }

// The run-time count is what compiles these: GBNF, which has no count, refuses them in strict
// mode at the string's pointer, and without the count the product is over the budget.
TEST(CountedStrings, TheCountIsMadeAtRunTime) {
  auto gbnf = SchemaToGbnf(kWords, Small());
  ASSERT_FALSE(gbnf.ok());
  EXPECT_EQ(gbnf.status().code(), StatusCode::kUnsupported);
  // (At the string constraint's pointer: its first keyword.)
  EXPECT_EQ(gbnf.status().location(), "/properties/s/pattern") << gbnf.status().ToString();
  CompileOptions lenient = Small();
  lenient.schema_lenient = true;
  std::vector<std::string> warnings;
  auto text = SchemaToGbnf(kWords, lenient, &warnings);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("/properties/s/pattern: checked by lockstep's parser", 0), 0u)
      << warnings[0];
  // With the default budget the product fits: one automaton, and GBNF can say it.
  EXPECT_TRUE(SchemaToGbnf(kWords).ok());
}

TEST(CountedStrings, TextsAgreeWithTheValidator) {
  auto g = Compiler().CompileSchema(kWords, Small());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string w29 = "abcde abcde abcde abcde abcde";  // 29 characters
  const std::vector<std::string> values = {
      "a", "ab cd", w29, w29 + "x", w29 + "xy", w29 + " ", w29 + " a", "abcdef", "ab  cd",
      "abcde abcde abcde abcde abcd a", "abcde abcde abcde abcde abcd ab", ""};
  long valid = 0, invalid = 0;
  for (const std::string& v : values) {
    const std::string text = "{\"s\":" + Quoted(v) + "}";
    const bool ok = Valid(kWords, text);
    (ok ? valid : invalid) += 1;
    EXPECT_EQ(Feed(*g, text), ok) << text;
  }
  EXPECT_GE(valid, 4);
  EXPECT_GE(invalid, 4);
}

// Characters, not bytes: an escape, a two-byte and a four-byte UTF-8 character are one each.
TEST(CountedStrings, EscapesAndMultiByteCharactersCountOne) {
  const std::string schema = R"({"type": "string", "pattern": "^[^x]*(x[^x]*){0,3}$",
                                 "maxLength": 6})";
  CompileOptions o;
  o.max_dfa_states = 100;
  auto g = Compiler().CompileSchema(schema, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_FALSE(SchemaToGbnf(schema, o).ok());  // (counted at run time)
  for (const char* text :
       {R"("abcdef")", R"("abcdefg")", R"("\n\t\"\\ab")", R"("\n\t\"\\abc")", R"("ééééé😀")",
        R"("ééééé😀!")", R"("\u001fxxx")", R"("\u001fxxxx")", R"("😀😀😀😀😀😀")",
        R"("😀😀😀😀😀😀😀")", R"("xxxx")"}) {
    EXPECT_EQ(Feed(*g, text), Valid(schema, text)) << text;
  }
}

// At every token of texts that reach the bound, the mask equals the brute-force one; at 29
// characters after a word, a space (which needs one more letter) and two letters are out, one
// letter in.
TEST(CountedStrings, MaskEqualsBruteForceUpToTheBound) {
  auto g = Compiler().CompileSchema(kWords, Small());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<std::string> texts = {
      R"({"s": "abcde abcde abcde abcde abcd x"})", R"({"s": "hello world this is it ok go"})",
      R"({"s": "a b c d e f g h i j k l m n o"})", R"({"s": "abc"})"};
  long checked = 0;
  for (const std::string& text : texts) {
    Matcher m(*g);
    std::vector<std::uint32_t> fast(BitmaskWords(Compiler().vocabulary().logits_width()));
    for (TokenId id : Tokens(text)) {
      m.FillNextTokenBitmask(fast);
      ASSERT_EQ(fast, testing::BruteForceMaskFor(m, fast)) << "at a token of " << text;
      ++checked;
      ASSERT_TRUE(m.AcceptToken(id)) << text;
    }
    EXPECT_TRUE(m.CanEnd());
  }
  EXPECT_GT(checked, 30);
  Matcher m(*g);
  for (TokenId id : Tokens(R"({"s": "abcde abcde abcde abcde abcde)")) ASSERT_TRUE(m.AcceptToken(id));
  std::vector<std::uint32_t> mask(BitmaskWords(Compiler().vocabulary().logits_width()));
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(mask, testing::BruteForceMask(m));
  for (const auto& [piece, allowed] : std::vector<std::pair<std::string, bool>>{
           {" ", false}, {"\"", true}, {"\"}", true}, {"x", false}}) {
    auto ids = Tokens(piece);
    ASSERT_EQ(ids.size(), 1u) << piece;
    EXPECT_EQ(Allowed(mask, ids[0]), allowed) << piece;
  }
  for (TokenId id : Tokens(" ")) ASSERT_FALSE(m.AcceptToken(id));
}

// Random walks on Llama-3, Qwen2.5 and Mistral: strings that run into their bound, a counted
// string next to another, a list of them (a token may close one and open the next), and an
// anyOf of two bounds on one pattern (two counted items at once: masks by the parser).
TEST(CountedStrings, RandomWalksAgainstBruteForce) {
  const std::vector<std::string> schemas = {
      R"({"type": "string", "pattern": "^[a-z]{1,5}( [a-z]{1,5})*$", "maxLength": 30,
          "minLength": 20})",
      kWords,
      R"({"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,5}( [a-z]{1,5})*$",
          "maxLength": 24, "minLength": 18}})",
      R"({"anyOf": [{"type": "string", "pattern": "^[a-z]{1,5}( [a-z]{1,5})*$", "maxLength": 20},
                    {"type": "string", "pattern": "^[a-z]{1,5}( [a-z]{1,5})*$", "maxLength": 30,
                     "minLength": 25}]})",
  };
  const long steps = std::max(20L, static_cast<long>(120 * testing::TestScale()));
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    std::uint64_t seed = 5;
    for (const std::string& schema : schemas) {
      auto g = CompilerFor(vocab).CompileSchema(schema, Small());
      ASSERT_TRUE(g.ok()) << vocab << ": " << schema << ": " << g.status().ToString();
      testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed++, 60);
      std::printf("%s: %s\n", vocab, st.Summary().c_str());
      EXPECT_TRUE(st.Exact()) << vocab << ": " << schema << ": " << st.Failure();
    }
  }
}

TEST(CountedStrings, ArtifactKeepsTheCount) {
  auto g = Compiler().CompileSchema(kWords, Small());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto loaded = LoadArtifact(Compiler(), SerializeArtifact(**g));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(Feed(*loaded, R"({"s":"abcde abcde abcde abcde abcde"})"));
  EXPECT_FALSE(Feed(*loaded, R"({"s":"abcde abcde abcde abcde abcde a"})"));
}

// The shapes that were refused for max_dfa_states in GitHub schemas compile with the default
// budget, and agree with the validator at the bound.
TEST(CountedStrings, RealShapesCompileAndHoldTheBound) {
  const std::string words = R"({"type": "object", "properties": {"summary": {"type": "string",
      "pattern": "^(?:\\S+\\s+){0,49}\\S+$", "maxLength": 500}}, "required": ["summary"]})";
  auto g = Compiler().CompileSchema(words);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string fifty;  // 50 words of 9 letters: 499 characters
  for (int i = 0; i < 50; ++i) fifty.append(i ? " " : "").append("abcdefghi");
  for (const std::string& v : std::vector<std::string>{fifty, fifty + "x", fifty + "xy", fifty + " a", "one two"}) {
    const std::string text = R"({"summary":")" + v + "\"}";
    EXPECT_EQ(Feed(*g, text), Valid(words, text)) << v.size();
  }
  const std::string email = R"({"type": "object", "properties": {"contact": {"type": "string",
      "format": "email", "maxLength": 100}}})";
  auto e = Compiler().CompileSchema(email);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  const std::string local(88, 'a');  // 88 + "@example.com" (12) = 100
  for (const std::string& v : std::vector<std::string>{local + "@example.com", local + "a@example.com",
                               local + "@example.co", "a@b.c", local + "@examplex.com"}) {
    const std::string text = R"({"contact":")" + v + "\"}";
    EXPECT_EQ(Feed(*e, text), Valid(email, text)) << v;
  }
}

// The length tables of a big format automaton (`email`, 25,000 states) are kept per process by
// the automaton's cache entry and copied into every later program that holds it: in two schemas
// of different bounds compiled one after the other, each state's character mode and fewest
// characters to the end equal those of the program's own computation from scratch (the same
// program with the rule's cache link cut).
TEST(CountedStrings, SharedLengthTablesEqualAFreshComputation) {
  int checked = 0;
  for (int bound : {100, 80, 100}) {
    const std::string email = R"({"type": "object", "properties": {"contact": {"type": "string",
        "format": "email", "maxLength": )" + std::to_string(bound) + "}}}";
    auto g = Compiler().CompileSchema(email);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar* cfg = CfgOf(**g);
    ASSERT_NE(cfg, nullptr);
    const CfgProgram& p = cfg->program();
    CfgProgram fresh = p;
    bool shared = false;
    for (CfgProgram::RuleInfo& r : fresh.rules) {
      shared |= r.max_chars >= 0 && r.shared_source != 0;
      r.shared_source = 0;
    }
    ASSERT_TRUE(shared) << "the counted email rule is no copy of the cached automaton";
    ASSERT_TRUE(ComputeLengthTables(&fresh).ok());
    ASSERT_EQ(p.min_chars, fresh.min_chars);
    ASSERT_EQ(p.char_mode, fresh.char_mode);
    ASSERT_EQ(p.max_min_chars, fresh.max_min_chars);
    ++checked;
  }
  EXPECT_EQ(checked, 3);
}

// A long maxLength beside a pattern (a GitHub shape: ids of up to 255 characters) is counted at
// run time even where the product would fit max_dfa_states: in the product every count is a
// state, so every token of a long value met a position of its own, walked over the vocabulary
// (300-800 us each on Llama-3). Along a 255-character value the fills walk a few positions in
// all; the masks equal brute force at the bound, and the validator agrees at, under and over it.
// The GBNF export, which has no count, still gets the product.
TEST(CountedStrings, LongBoundsBesideAPatternAreCountedAtRunTime) {
  const std::string schema = R"({"type": "object", "properties": {"id": {"type": "string",
      "pattern": "^[A-Za-z0-9:_\\-]+$", "maxLength": 255}}, "required": ["id"],
      "additionalProperties": false})";
  CompileOptions o;
  o.background_positions = false;  // (every position a fill needs is walked by that fill)
  o.share_positions = false;
  auto g = Compiler().CompileSchema(schema, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string value;
  for (int i = 0; value.size() < 255; ++i) {
    value += "Ab3:x_9-Qz"[i % 10];
    if (i % 7 == 3) value += "k";
  }
  value.resize(255);
  const std::string text = R"({"id":")" + value + R"("})";
  Matcher m(*g);
  std::vector<std::uint32_t> mask(BitmaskWords(Compiler().vocabulary().logits_width()));
  const std::vector<TokenId> ids = Tokens(text);
  std::int32_t walked_in_value = 0, fills_in_value = 0;
  std::size_t at = 0;  // bytes taken
  for (std::size_t k = 0; k < ids.size(); ++k) {
    m.FillNextTokenBitmask(mask);
    if (at > 7 && at < 7 + 255) {
      walked_in_value += Matcher::LastFillTrace().positions_walked;
      ++fills_in_value;
    }
    if (k + 4 >= ids.size()) {
      ASSERT_EQ(mask, testing::BruteForceMaskFor(m, mask)) << "token " << k;
    }
    ASSERT_TRUE(Allowed(mask, ids[k])) << "token " << k;
    ASSERT_TRUE(m.AcceptToken(ids[k]));
    at += Compiler().vocabulary().TokenBytes(ids[k]).size();
  }
  EXPECT_TRUE(m.CanEnd());
  EXPECT_GT(fills_in_value, 40);
  EXPECT_LE(walked_in_value, 8) << "over " << fills_in_value << " fills inside the value";
  for (const std::string& v : {value, value + "a", value.substr(0, 254), std::string("a b")}) {
    const std::string t = R"({"id":")" + v + R"("})";
    EXPECT_EQ(Feed(*g, t), Valid(schema, t)) << v.size();
  }
  auto gbnf = SchemaToGbnf(schema);
  EXPECT_TRUE(gbnf.ok()) << gbnf.status().ToString();
}

// A pattern that is one class counted, `^C{m,n}$` (184 of the 1,176 patterns of the real-world
// sample: ids of 24 hex digits, names of 1 to 32 letters and punctuation), is a native counter
// over C's characters: in its automaton every count was a state of its own, walked over the
// whole vocabulary at each token of a value (1.9 ms per token for the class below on Llama-3).
// minLength and maxLength fold into its bounds. The masks equal brute force along random walks
// on three vocabularies, texts agree with the validator at, under and over the bounds, every
// position inside a value comes from the counted view, and the GBNF export keeps the count.
TEST(CountedStrings, ACountedClassPatternIsACounter) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string", "pattern": "^[A-Za-z0-9 &'\\(\\)\\*,\\-\\./@£]{1,32}$",
               "minLength": 3},
      "hex": {"type": "string", "pattern": "^[A-Fa-f\\d]{24}$"},
      "code": {"type": "string", "pattern": "^(?:[a-z]){2,}$", "maxLength": 5}},
      "required": ["name", "hex", "code"], "additionalProperties": false})";
  const long steps = std::max(20L, static_cast<long>(150 * testing::TestScale()));
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = CompilerFor(vocab).CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << vocab << ": " << g.status().ToString();
    testing::WalkStats st = testing::ExactnessWalks(*g, steps, 11, 80);
    std::printf("%s: %s\n", vocab, st.Summary().c_str());
    EXPECT_TRUE(st.Exact()) << vocab << ": " << st.Failure();
  }
  CompileOptions o;
  o.background_positions = false;  // (every position a fill needs is walked by that fill)
  o.share_positions = false;
  auto g = Compiler().CompileSchema(schema, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string name = "My Savings (£) 2024/@&*, a.b-c";
  const std::string hex = "0123456789abcdefABCDEF01";
  auto text = [](const std::string& n, const std::string& h, const std::string& c) {
    return R"({"name":")" + n + R"(","hex":")" + h + R"(","code":")" + c + R"("})";
  };
  // Inside the name's value, the positions come from the counted view.
  Matcher m(*g);
  std::vector<std::uint32_t> mask(BitmaskWords(Compiler().vocabulary().logits_width()));
  const std::string full = text(name + "xy", hex, "abcde");
  std::int32_t walked = 0, from_views = 0, fills = 0;
  std::string done;
  for (TokenId id : Tokens(full)) {
    m.FillNextTokenBitmask(mask);
    // Inside the name's value ({"name":" is 9 bytes), up to its last characters.
    if (done.size() >= 9 && done.size() < 9 + name.size() + 2) {
      walked += Matcher::LastFillTrace().positions_walked;
      from_views += Matcher::LastFillTrace().region_walks;
      ++fills;
      ASSERT_EQ(mask, testing::BruteForceMaskFor(m, mask)) << "after " << done;
    }
    ASSERT_TRUE(Allowed(mask, id)) << "after " << done;
    ASSERT_TRUE(m.AcceptToken(id));
    done += Compiler().vocabulary().TokenBytes(id);
  }
  EXPECT_TRUE(m.CanEnd());
  EXPECT_GT(fills, 5);
  // (The counter's start and one composed position are walked apart from the view; with an
  // automaton state per count, every fill walked one.)
  EXPECT_LE(walked - from_views, 2) << walked << " positions walked over " << fills << " fills";
  for (const auto& [n, h, c] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {name, hex, "ab"},
           {name + "xy", hex, "abcde"},             // 32 characters (£ is one)
           {name + "xyz", hex, "ab"},               // 33
           {"ab", hex, "ab"},                       // under minLength
           {"abc", hex, "ab"},
           {name, hex.substr(1), "ab"},             // 23 hex digits
           {name, hex + "0", "ab"},                 // 25
           {name, "0123456789abcdefABCDEF0g", "ab"},
           {name, hex, "a"},
           {name, hex, "abcdef"},                   // past maxLength
           {name, hex, "abCd"},
           {"tab\\there", hex, "ab"},
           {"ok #1", hex, "ab"}}) {
    const std::string t = text(n, h, c);
    EXPECT_EQ(Feed(*g, t), Valid(schema, t)) << t;
  }
  auto gbnf = SchemaToGbnf(schema);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
}

}  // namespace
}  // namespace lockstep::schema
