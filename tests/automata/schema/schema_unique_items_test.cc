// uniqueItems over string items, checked at run time (automata/cfg/unique_items.h): the parser
// drops an item equal to an earlier one of its list, and the mask clears every token that would
// complete one. Checked against the validator on raw texts (escapes, whitespace, bounds, a branch
// that allows repeats next to one that does not; strings are spelt canonically, as the compiler
// expects them, docs/json-schema-compiler.md), against a
// brute-force mask (every id tried with AcceptToken) at every token of texts that approach a
// repeat or the end of a list's values, through an artifact, and at the GBNF export, which
// cannot express the check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "grammar/schema/json_schema.h"
#include "lockstep/artifact.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "unique_items_checks.h"
#include "util/grammar_walk.h"

namespace lockstep::schema {
namespace {

using unique_checks::Allowed;
using unique_checks::ExpectAgreementWithTheValidator;
using unique_checks::ExpectOutAndIn;
using unique_checks::MasksEqualBruteForceAlong;
using unique_checks::Valid;

using json = nlohmann::json;

const GrammarCompiler& Compiler() {
  static const GrammarCompiler* compiler = [] {
    auto vocab = Vocabulary::Load("llama3");
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    return new GrammarCompiler(*vocab);
  }();
  return *compiler;
}

std::vector<TokenId> Tokens(const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = Compiler().vocabulary().Encode(text, eo);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<TokenId>{};
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

const char* kStrings = R"({"type": "array", "items": {"type": "string"}, "uniqueItems": true})";

// ["i0","i1",...] with n distinct items.
std::string ManyItems(int n) {
  std::string text = "[";
  for (int i = 0; i < n; ++i) text += (i ? ",\"i" : "\"i") + std::to_string(i) + "\"";
  return text + "]";
}

// Random walks (testing::ExactnessWalks) through `schema` on `vocab`: every mask equal to the
// brute-force one, no dead end.
void WalkOn(const char* vocab, const char* schema, long steps, std::uint64_t seed, int len) {
  auto g = testing::CompilerFor(vocab).CompileSchema(schema);
  ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
  testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed, len);
  std::printf("%s: %s\n", vocab, st.Summary().c_str());
  EXPECT_TRUE(st.Exact()) << vocab << ": " << schema << ": " << st.Failure();
}

TEST(UniqueItems, ItemsAgreeWithTheValidator) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {kStrings,
       {"[]", R"(["a"])", R"(["a","b"])", R"(["a","a"])", R"(["a", "b", "a"])", R"(["ab","a"])",
        R"(["a","ab"])", R"(["",""])", R"(["", " "])", R"(["\"","\""])", R"(["\"","\"\""])",
        R"(["a\\","a\\\\"])", R"(["a\\\\","a\\\\"])", R"(["café","cafe"])", R"(["café","café"])",
        R"(["😀","😀"])", R"(["\n","\t"])", R"(["\u001f","\u001f"])", R"(["\u001f","\u001e"])",
        R"(["x","y","z","y"])", "[\n  \"a\",\n  \"b\"\n]", "[ \"a\" , \"a\" ]"}},
      {R"({"type": "array", "items": {"type": "string", "minLength": 1}, "uniqueItems": true,
           "minItems": 2, "maxItems": 3})",
       {R"(["a"])", R"(["a","b"])", R"(["a","a"])", R"(["a","b","c"])", R"(["a","b","c","d"])",
        R"(["","b"])", R"(["a","b","a"])"}},
      // A pattern that leaves infinitely many values past every prefix (an identifier).
      {R"({"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
           "uniqueItems": true})",
       {R"(["a","b"])", R"(["a","a"])", R"(["a1","a","a1"])", R"(["1a"])", R"(["A_","A__"])"}},
      // Items whose values run out: an enum of 12 strings, two letters of three, a date; the
      // last item of a full list, and a comma after it, are refused.
      {R"({"type": "array", "uniqueItems": true,
           "items": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]}})",
       {R"(["a","b"])", R"(["a","a"])", R"(["l","k","l"])",
        R"(["a","b","c","d","e","f","g","h","i","j","k","l"])",
        R"(["a","b","c","d","e","f","g","h","i","j","k","l","a"])"}},
      {R"({"type": "array", "items": {"type": "string", "pattern": "^[a-c]{2}$"},
           "uniqueItems": true})",
       {R"(["ab","ac"])", R"(["ab","ab"])", R"(["aa","ab","ac","ba","bb","bc","ca","cb","cc"])",
        R"(["aa","ab","ac","ba","bb","bc","ca","cb","cc","aa"])"}},
      {R"({"type": "array", "items": {"type": "string", "format": "date"}, "uniqueItems": true})",
       {R"(["2024-01-30","2024-01-31"])", R"(["2024-01-31","2024-01-31"])"}},
      // Strings of at most maxLength characters, counted at run time: at the bound only the
      // closing quote (or the rest of the last character) is left, so an item that reaches it
      // following an earlier one is refused there.
      {R"({"type": "array", "uniqueItems": true, "maxItems": 4,
           "items": {"type": "string", "minLength": 1, "maxLength": 3}})",
       {R"(["a","b"])", R"(["abc","abc"])", R"(["abc","ab"])", R"(["abcd"])", R"([""])",
        R"(["ab","abc","ab"])", R"(["é","é"])", R"(["aé","a"])", "[\"\\n\",\"\\n\"]",
        R"(["\"\"\"","\"\"\""])", R"(["a","b","c","d"])", R"(["a","b","c","d","e"])"}},
      // A pattern beside a maxLength past the automaton's budget (winget's protocols): the
      // pattern's automaton, the characters counted at run time.
      {R"({"type": "array", "uniqueItems": true, "maxItems": 3, "items": {"type": "string",
           "pattern": "^[a-z][-a-z0-9.+]*$", "maxLength": 70}})",
       {R"(["ab","ab"])", R"(["a","a+"])", R"(["a","A"])", R"(["a","b","c","d"])",
        "[\"" + std::string(70, 'x') + "\",\"" + std::string(70, 'x') + "\"]",
        "[\"" + std::string(70, 'x') + "\",\"" + std::string(69, 'x') + "\"]",
        "[\"" + std::string(71, 'x') + "\"]"}},
      // Lists of up to 1,000 such items (winget's capabilities): the bound is spelt out.
      {R"({"type": "array", "uniqueItems": true, "maxItems": 1000,
           "items": {"type": "string", "minLength": 1, "maxLength": 40}})",
       {ManyItems(1000), ManyItems(1001), ManyItems(3)}},
      {R"({"type": "array", "uniqueItems": true, "items": {"type": "string", "maxLength": 1}})",
       {R"(["",""])", R"(["","a"])", R"(["😀","😀"])", R"(["😀","😁"])", R"(["\\","\\"])"}},
      // Integers: spelt one way, compared by their text (0 can only be 0; 1 may go on to 10).
      {R"({"type": "array", "items": {"type": "integer"}, "uniqueItems": true})",
       {"[0,1]", "[0,0]", "[1,10,1]", "[1,10,100]", "[-1,1,-1]", "[ 7 , 7 ]", "[0,-0]", "[-0,0]",
        "[-0,1]"}},
      // Integers but some values (winget's installer exit codes: `"not": {"enum": [0]}`): a
      // choice of intervals, each without end, checked as items complete.
      {R"({"type": "array", "items": {"type": "integer", "not": {"enum": [0]}}, "maxItems": 16,
           "uniqueItems": true})",
       {"[1,2]", "[0]", "[1,1]", "[-1,1,-1]", "[10,1,10]", "[-0]", "[3010,-3010,3010]"}},
      {R"({"type": "array", "items": {"type": "integer", "not": {"enum": [-1, 5, 12]}},
           "uniqueItems": true})",
       {"[5]", "[4,6,11,13]", "[-2,0,-2]", "[12]", "[120,12]", "[1200,120,1200]"}},
      // -0 is 0: after it, `-` could only start -0 again.
      {R"({"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": true})",
       {"[-0,1]", "[-0,0]", "[0,-0]", "[1,-0,2]"}},
      {R"({"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 12},
           "uniqueItems": true})",
       {"[1,2]", "[1,12,1]", "[1,2,3,4,5,6,7,8,9,10,11,12]", "[1,2,3,4,5,6,7,8,9,10,11,12,1]"}},
      // Strings of alternatives, one automaton for their union (lazygit's colours: a name or a
      // hex code): a repeat is refused, and a list whose values run out stops.
      {R"({"type": "array", "uniqueItems": true, "minItems": 1, "items": {"type": "string",
           "oneOf": [{"enum": ["black", "red", "green", "bold", "x.y", "a b", "é\"", "#00"]},
                     {"pattern": "^#[0-9a-fA-F]{6}$"}]}})",
       {R"(["red","#ff00ff"])", R"(["red","red"])", R"(["#ff00ff","#ff00ff"])",
        R"(["#FF00FF","#ff00ff"])", R"(["blue"])", R"(["bold","black","green","red"])", "[]",
        R"(["#ff00f"])", R"(["x.y","xzy"])", R"(["x.y","a b","é\"","#00"])", R"(["a b","a b"])",
        R"(["é\"","é\""])", R"(["#00","#000000"])"}},
      {R"({"type": "array", "uniqueItems": true, "items": {"anyOf": [{"enum": ["a", "b"]},
           {"type": "string", "pattern": "^[b-d]$"}]}})",
       {R"(["a","b","c","d"])", R"(["a","b","c","d","a"])", R"(["b","c","b"])", R"(["e"])"}},
      // Repeats are allowed where one branch does not ask for unique items.
      {R"({"anyOf": [{"type": "array", "items": {"type": "string"}, "uniqueItems": true},
                     {"type": "array", "items": {"type": "string"}, "maxItems": 2}]})",
       {R"(["a","a"])", R"(["a","a","b"])", R"(["a","b","c"])", R"(["a","b","a"])"}},
      // Lists side by side and inside objects: each list's items are its own.
      {R"({"type": "object", "properties": {
             "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
             "more": {"type": "array", "items": {"type": "array", "items": {"type": "string"},
                                                   "uniqueItems": true}}},
           "additionalProperties": false})",
       {R"({"tags":["a","b"],"more":[["a","b"],["a","b"]]})",
        R"({"tags":["a","b"],"more":[["a","b"],["b","b"]]})", R"({"tags":["a","a"]})",
        R"({"more":[["x"],["y","x","y"]]})"}},
  };
  for (const auto& [schema, texts] : cases) {
    auto g = Compiler().CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
    for (const std::string& text : texts) {
      EXPECT_EQ(Feed(*g, text), Valid(schema, text)) << text << "\n  schema: " << schema;
    }
  }
}

// At every token of texts that come near a repeat, the mask equals the brute-force one: the
// token that would close a repeated item (`lo"]`, `"`, `",`) is out of both; a longer item and a
// new one stay in.
TEST(UniqueItems, MaskEqualsBruteForceNearRepeats) {
  auto g = Compiler().CompileSchema(
      R"({"type": "object", "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "n": {"type": "array", "items": {"type": "string"}, "uniqueItems": true,
                  "maxItems": 3},
            "ids": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"},
                    "uniqueItems": true},
            "e": {"type": "array", "uniqueItems": true, "items": {"enum": [
                     "red", "green", "blue", "cyan", "magenta", "yellow", "black", "white",
                     "gray", "orange", "purple", "brown"]}},
            "k": {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": true},
            "z": {"type": "array", "items": {"type": "integer", "not": {"enum": [0, 7]}},
                  "uniqueItems": true},
            "p": {"type": "array", "items": {"type": "string", "pattern": "^[a-c]{2}$"},
                  "uniqueItems": true},
            "m": {"type": "array", "items": {"type": "string", "maxLength": 3},
                  "uniqueItems": true},
            "one": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 1},
                    "uniqueItems": true},
            "pm": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]+$",
                   "maxLength": 64}, "maxItems": 8, "uniqueItems": true}},
          "required": ["tags"], "additionalProperties": false})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::vector<std::string> texts = {
      R"({"tags": ["hello", "world", "hello world", "hel"], "n": ["a", "b", "c"]})",
      R"({"tags": ["a\"b", "a", "", "a\"c", "a\"bc", "\u001f", "\u001fx"]})",
      R"({"tags": ["café", "caf", "x", "café!"], "n": ["", "q"]})",
      R"({"tags": [], "ids": ["user_id", "user", "user_id_2", "use", "x1", "x"]})",
      R"({"tags": [], "e": ["red", "green", "blue", "cyan", "magenta", "yellow", "black", "white",
          "gray", "orange", "purple", "brown"], "k": [0, 1, 10, 100, 12, 120, 2]})",
      R"({"tags": [], "p": ["aa", "ab", "ac", "ba", "bb", "bc", "ca", "cb", "cc"]})",
      R"({"tags": [], "z": [1, 70, 700, -7, 17, 71, -70, 8]})",
      R"({"tags": [], "m": ["abc", "abd", "ab", "abe", "a", "", "é", "éé", "ééé", "ééè"]})",
      R"({"tags": [], "one": ["a", "\n", "\"", "\\", "é", "😀", "\u001f", "b"]})",
  };
  // Two items that share 63 letters of 64 (pattern and maxLength counted at run time).
  texts.push_back("{\"tags\": [], \"pm\": [\"" + std::string(64, 'q') + "\", \"" +
                  std::string(63, 'q') + "r\", \"" + std::string(62, 'q') + "\"]}");
  long checked = 0;
  for (const std::string& text : texts) {
    Matcher m(*g);
    std::vector<std::uint32_t> fast(BitmaskWords(Compiler().vocabulary().logits_width()));
    for (TokenId id : Tokens(text)) {
      m.FillNextTokenBitmask(fast);
      testing::Mask slow = testing::BruteForceMaskFor(m, fast);
      ASSERT_EQ(fast, slow) << "at a token of " << text;
      ++checked;
      ASSERT_TRUE(m.AcceptToken(id)) << text;
    }
    EXPECT_TRUE(m.CanEnd());
  }
  EXPECT_GT(checked, 40);
  // A state right before a repeat: the mask leaves the closing quote out, and what makes the
  // item longer in.
  Matcher m(*g);
  const std::string prefix = R"({"tags": ["hello", "world", "hello)";
  for (TokenId id : Tokens(prefix)) ASSERT_TRUE(m.AcceptToken(id)) << prefix;
  std::vector<std::uint32_t> mask(BitmaskWords(Compiler().vocabulary().logits_width()));
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ(mask, testing::BruteForceMask(m));
  for (const char* closing : {"\"", "\",", "\"]", "\"],"}) {
    auto ids = Tokens(closing);
    if (ids.size() == 1) {
      EXPECT_FALSE(Allowed(mask, ids[0])) << closing;
    }
  }
  for (const char* going_on : {" world", "!", "o"}) {
    auto ids = Tokens(going_on);
    ASSERT_FALSE(ids.empty());
    EXPECT_TRUE(Allowed(mask, ids[0])) << going_on;
  }
  // At maxLength: the character that would leave only an earlier item to finish with is out
  // (the closing quote alone is left after it), another one stays in.
  for (const auto& [text, out, in] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {R"({"tags": [], "m": ["abc", "ab)", "c", "d"},
            {R"({"tags": [], "one": ["a", ")", "a", "b"}}) {
    Matcher mm(*g);
    for (TokenId id : Tokens(text)) ASSERT_TRUE(mm.AcceptToken(id)) << text;
    mm.FillNextTokenBitmask(mask);
    EXPECT_EQ(mask, testing::BruteForceMask(mm)) << text;
    auto out_ids = Tokens(out), in_ids = Tokens(in);
    ASSERT_EQ(out_ids.size(), 1u);
    ASSERT_EQ(in_ids.size(), 1u);
    EXPECT_FALSE(Allowed(mask, out_ids[0])) << text << " + " << out;
    EXPECT_TRUE(Allowed(mask, in_ids[0])) << text << " + " << in;
  }
}

// Random walks through lists whose values run out (12 enum values, 9 two-letter strings, 13
// integers, 12 values that are prefixes of one another) or that end at 16 items (integers but
// 0): the walks fill them up, and at every step the mask equals the brute-force one and
// allows something (no token leads into a list with no value left for its next item).
TEST(UniqueItems, RandomWalksThatFillListsUp) {
  const char* schemas[] = {
      R"({"type": "array", "uniqueItems": true,
          "items": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]}})",
      R"({"type": "array", "items": {"type": "string", "pattern": "^[a-c]{2}$"},
          "uniqueItems": true, "minItems": 1})",
      R"({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 12},
          "uniqueItems": true})",
      // Strings of one character (counted at run time), up to 24 of them: repeats are likely.
      R"({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 1},
          "maxItems": 24, "uniqueItems": true})",
      // Integers but 0, up to 16 of them (winget's installer exit codes).
      R"({"type": "array", "items": {"type": "integer", "not": {"enum": [0]}}, "maxItems": 16,
          "uniqueItems": true})",
      // Values that are prefixes of one another, with escapes and a multi-byte character: a
      // value under way runs out when every value that starts with it has been used.
      // Alternatives of strings, their union one automaton: 3 names or 1-2 letters of c-e.
      R"({"type": "array", "uniqueItems": true, "items": {"type": "string", "anyOf": [
          {"enum": ["a", "b", "ab"]}, {"pattern": "^[c-e]{1,2}$"}]}})",
      R"({"type": "array", "uniqueItems": true, "items": {"enum": ["c", "ca", "can", "css/a",
          "css/ab", "css/b", "canvas/x", "\u00e9", "\u00e9a", "a\"q", "a\"", "a\\"]}})",
  };
  const long steps = std::max(20L, static_cast<long>(100 * testing::TestScale()));
  std::uint64_t seed = 11;
  for (const char* schema : schemas) {
    auto g = Compiler().CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
    testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed++, 80);
    std::printf("%s\n", st.Summary().c_str());
    EXPECT_TRUE(st.Exact()) << schema << ": " << st.Failure();
  }
}

// Strings with maxLength counted at run time and unions of string automata, on three
// vocabularies: random walks that fill such lists (every mask equals the brute-force one, no
// dead end), and the masks along texts that reach the bound right behind an earlier item.
TEST(UniqueItems, CountedStringsAndUnionsOnThreeVocabularies) {
  const char* walked[] = {
      R"({"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 1},
          "maxItems": 24, "uniqueItems": true})",
      R"({"type": "array", "uniqueItems": true, "items": {"type": "string", "anyOf": [
          {"enum": ["a", "b", "ab"]}, {"pattern": "^[c-e]{1,2}$"}]}})",
      R"({"type": "array", "uniqueItems": true, "maxItems": 6, "items": {"type": "string",
          "pattern": "^[a-z][-a-z0-9.+]*$", "maxLength": 66}})",
  };
  const std::string bound = R"({"type": "array", "uniqueItems": true, "items": {"type": "string",
      "maxLength": 3}})";
  const long steps = std::max(20L, static_cast<long>(50 * testing::TestScale()));
  std::uint64_t seed = 41;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const char* schema : walked) WalkOn(vocab, schema, steps, seed++, 30);
    auto g = testing::CompilerFor(vocab).CompileSchema(bound);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const int width = testing::CompilerFor(vocab).vocabulary().logits_width();
    for (const std::string text : {R"(["abc", "abd", "ab", "abe", "é", "éé", "ééé", "ééè"])",
                                   R"(["\n\t\"", "\n\t", "\n\t\\", "x"])"}) {
      ASSERT_TRUE(Valid(bound, text)) << text;
      EncodeOptions eo;
      eo.add_dummy_prefix = false;
      auto ids = testing::CompilerFor(vocab).vocabulary().Encode(text, eo);
      ASSERT_TRUE(ids.ok());
      Matcher m(*g);
      std::vector<std::uint32_t> fast(BitmaskWords(width));
      for (TokenId id : *ids) {
        m.FillNextTokenBitmask(fast);
        ASSERT_EQ(fast, testing::BruteForceMaskFor(m, fast)) << vocab << ": at a token of " << text;
        ASSERT_TRUE(m.AcceptToken(id)) << vocab << ": " << text;
      }
      EXPECT_TRUE(m.CanEnd()) << vocab << ": " << text;
    }
    // Right behind an earlier item at the bound: its last character is out, another one in.
    Matcher m(*g);
    ASSERT_TRUE(m.AcceptString(R"(["abc", "ab)")) << vocab;
    std::vector<std::uint32_t> mask(BitmaskWords(width));
    m.FillNextTokenBitmask(mask);
    EncodeOptions eo;
    eo.add_dummy_prefix = false;
    auto c = testing::CompilerFor(vocab).vocabulary().Encode("c", eo);
    auto x = testing::CompilerFor(vocab).vocabulary().Encode("x", eo);
    ASSERT_TRUE(c.ok() && x.ok() && c->size() == 1 && x->size() == 1) << vocab;
    EXPECT_FALSE(Allowed(mask, (*c)[0])) << vocab;
    EXPECT_TRUE(Allowed(mask, (*x)[0])) << vocab;
  }
}

// A value under way whose every completion has been used is refused at the byte that commits
// to it, counted without enumerating (keys read with that start against the automaton's ways):
// values that are prefixes of one another, an escape, a multi-byte character. The mask at each
// token of such lists equals the brute-force one.
TEST(UniqueItems, AValueUnderWayRunsOutWithItsPrefix) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"enum": [
      "c", "ca", "can", "css/a", "css/ab", "css/b", "canvas/x", "\u00e9", "\u00e9a", "a\"q"]}})";
  auto g = Compiler().CompileSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  for (const auto& [text, goes_on] : std::vector<std::pair<std::string, bool>>{
           {R"(["css/a","css/ab","css/b","css/)", false},
           {R"(["css/a","css/b","css/)", true},
           {R"(["css/a","css/b","css/a)", true},  // ("css/ab")
           {R"(["css/a","css/ab","css/b","css/a)", false},
           {R"(["c","ca","can","canvas/x","ca)", false},
           {R"(["c","ca","canvas/x","ca)", true},
           {R"(["c","ca","can","canvas/x","c)", true},  // ("css/...")
           {"[\"\u00e9\",\"\u00e9a\",\"\u00e9", false},
           {"[\"\u00e9\",\"\u00e9", true},
           {R"(["a\"q","a)", false},
           {R"(["a)", true}}) {
    Matcher m(*g);
    EXPECT_EQ(m.AcceptString(text), goes_on) << text;
  }
  for (const std::string text : {R"(["css/a","css/ab","css/b","c","ca","can","canvas/x"])",
                                 "[\"\u00e9a\",\"\u00e9\",\"a\\\"q\",\"css/ab\"]"}) {
    Matcher m(*g);
    std::vector<std::uint32_t> fast(BitmaskWords(Compiler().vocabulary().logits_width()));
    for (TokenId id : Tokens(text)) {
      m.FillNextTokenBitmask(fast);
      ASSERT_EQ(fast, testing::BruteForceMaskFor(m, fast)) << "at a token of " << text;
      ASSERT_TRUE(m.AcceptToken(id)) << text;
    }
    EXPECT_TRUE(m.CanEnd()) << text;
  }
}

TEST(UniqueItems, ArtifactKeepsTheCheck) {
  auto g = Compiler().CompileSchema(kStrings);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string bytes = SerializeArtifact(**g);
  auto loaded = LoadArtifact(Compiler(), bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(Feed(*loaded, R"(["a","b"])"));
  EXPECT_FALSE(Feed(*loaded, R"(["a","b","a"])"));
}

TEST(UniqueItems, GbnfCannotSayItStrictRefusesLenientWarns) {
  const std::string schema =
      R"({"properties": {"tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}}})";
  auto strict = SchemaToGbnf(schema);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(strict.status().location(), "/properties/tags/uniqueItems");
  CompileOptions lenient;
  lenient.schema_lenient = true;
  std::vector<std::string> warnings;
  auto text = SchemaToGbnf(schema, lenient, &warnings);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind("/properties/tags/uniqueItems: ", 0), 0u) << warnings[0];
}

// Objects that can always take one more member (extra keys allowed, no maxProperties): items
// compared by JSON value (members in any order, a repeated key's last value, 1 = 1.0 = 1e0,
// escapes decoded, nested values), checked as they complete. Every text is checked against the
// validator, including ones the grammar refuses for other reasons (both say no).
const char* kObjects = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
    "properties": {"name": {"type": "string"}, "value": {}}, "required": ["name"]}})";

TEST(UniqueItems, ObjectItemsAgreeWithTheValidator) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {kObjects,
       {R"([{"name":"a"},{"name":"b"}])", R"([{"name":"a"},{"name":"a"}])",
        R"([{"name":"a"},{"name":"a","value":1}])", R"([{"name":"a","value":1},{"name":"a","value":1.0}])",
        R"([{"name":"a","value":100},{"name":"a","value":1e2}])",
        R"([{"name":"a","value":1.5},{"name":"a","value":1.50}])",
        R"([{"name":"a","value":1.5},{"name":"a","value":1.25}])",
        R"([{"name":"a","x":1,"y":2},{"name":"a","y":2,"x":1}])",
        R"([{"name":"a","x":1,"y":2},{"name":"a","y":1,"x":2}])",
        R"([{"name":"a","z":1,"z":2},{"name":"a","z":2}])",
        R"([{"name":"a","z":1,"z":2},{"name":"a","z":1}])",
        R"([{"name":"a"}, { "name" : "a" }])", "[\n  {\"name\": \"a\"},\n  {\"name\": \"b\"}\n]",
        R"([{"name":"a","value":{"p":[1,{"q":null}]}},{"name":"a","value":{"p":[1,{"q":null}]}}])",
        R"([{"name":"a","value":{"p":[1,{"q":null}]}},{"name":"a","value":{"p":[1,{"q":false}]}}])",
        R"([{"name":"a","value":[1,2]},{"name":"a","value":[2,1]}])",
        R"([{"name":"a","value":"}"},{"name":"a","value":"}"}])",
        R"([{"name":"a\"}"},{"name":"a\"}"}])", R"([{"name":"a\\"},{"name":"a\\\\"}])",
        R"([{"name":"café"},{"name":"cafe"},{"name":"café"}])",
        R"([{"name":"a"},{"name":"b"},{"name":"c"},{"name":"b","value":true},{"name":"b"}])",
        R"([{"value":1}])", R"([{"name":"a"},{"name":"a","value":null}])"}},
      // Bounds on the list, and items that are alternatives of open objects (anyOf, if/then).
      {R"({"type": "array", "uniqueItems": true, "minItems": 2, "maxItems": 3,
           "items": {"anyOf": [{"type": "object", "properties": {"a": {"type": "integer"}},
                                "required": ["a"]},
                               {"type": "object", "properties": {"b": {"type": "string"}},
                                "required": ["b"]}]}})",
       {R"([{"a":1}])", R"([{"a":1},{"b":"x"}])", R"([{"a":1},{"a":1}])",
        R"([{"a":1,"b":"x"},{"b":"x","a":1}])", R"([{"a":1},{"b":"x"},{"a":2}])",
        R"([{"a":1},{"b":"x"},{"a":2},{"a":3}])", R"([{"a":1},{"b":"x"},{"b":"x"}])"}},
      {R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
           "properties": {"kind": {"enum": ["x", "y"]}}, "required": ["kind"],
           "if": {"properties": {"kind": {"const": "x"}}},
           "then": {"properties": {"n": {"type": "integer"}}, "required": ["n"]}}})",
       {R"([{"kind":"y"},{"kind":"y"}])", R"([{"kind":"x","n":1},{"kind":"x","n":1}])",
        R"([{"kind":"x","n":1},{"kind":"x","n":2},{"kind":"y"}])", R"([{"kind":"x"}])"}},
      // Strings beside objects (backportrc's branches: a name, or an object with one).
      {R"({"type": "array", "uniqueItems": true, "items": {"oneOf": [
             {"type": "string", "minLength": 1},
             {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}]}})",
       {R"(["a",{"name":"a"}])", R"(["a","a"])", R"([{"name":"a"},"a",{"name":"a"}])",
        R"(["{}",{"name":"{}"},"{}"])", R"([{"name":"a"},"b","a",{"name":"b"}])", R"([""])"}},
      // Lists of objects inside objects of lists: each list's items are its own.
      {R"({"type": "array", "uniqueItems": true, "items": {"type": "object", "properties": {
             "tags": {"type": "array", "uniqueItems": true, "items": {"type": "object"}}}}})",
       {R"([{"tags":[{},{"a":1}]},{"tags":[{"a":1},{}]}])", R"([{"tags":[{},{}]}])",
        R"([{"tags":[{"a":1}]},{"tags":[{"a":1}]}])", R"([{"tags":[{"a":[]}]},{"tags":[]}])"}},
  };
  ExpectAgreementWithTheValidator(cases);
  // Token by token on Llama-3, the mask agreeing with AcceptToken.
  auto g = Compiler().CompileSchema(kObjects);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Feed(*g, R"([{"name":"a"},{"name":"a","value":2},{"name":"b"}])"));
  EXPECT_FALSE(Feed(*g, R"([{"name":"a"},{"name":"b"},{"name":"a"}])"));
  EXPECT_FALSE(Feed(*g, R"([{"name":"a","value":[1]},{"name":"a","value":[1.0]}])"));
}

// At every token of texts that come near a repeated object, on three vocabularies, the mask
// equals the brute-force one: the tokens that would close a repeat (`}`, `},`, `"}`, `}]`, and
// `{}` after an empty object) are out, what adds a member or changes a value stays in.
TEST(UniqueItems, ObjectMasksEqualBruteForceNearRepeats) {
  const std::string schema = R"({"type": "object", "properties": {
      "list": {"type": "array", "uniqueItems": true, "items": {"type": "object",
               "properties": {"name": {"type": "string"}, "n": {"type": "integer"}}}},
      "any": {"type": "array", "uniqueItems": true, "maxItems": 4, "items": {"type": "object"}},
      "mixed": {"type": "array", "uniqueItems": true, "items": {"anyOf": [{"type": "string"},
                {"type": "object", "properties": {"s": {"type": "string"}}}]}}},
    "additionalProperties": false})";
  const std::vector<std::string> texts = {
      R"({"list": [{"name": "a"}, {"name": "a", "n": 1}, {"name": "a", "n": 12}, {"name": "b"}]})",
      R"({"list": [{"n": 1}, {"name": "}", "n": 1}, {"name": "}"}, {"name": "}\""}, {"n": 10}]})",
      R"({"list": [], "any": [{}, {"a": {}}, {"a": {"b": []}}, {"a": [{}, {}]}]})",
      R"({"list": [{"name": "x", "k": {"p": 1}}, {"name": "x", "k": {"p": 10}}]})",
      R"({"mixed": ["{}", {}, "{\"s\": 1}", {"s": "{}"}, "s", {"s": "s"}, "{", {"s": "}"}]})",
  };
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(vocab).CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_GT(MasksEqualBruteForceAlong(*g, schema, texts, vocab), 80) << vocab;
    // Right before a repeat: the closing brace is out, more of the item is in.
    for (const auto& [prefix, closing, going_on] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {R"({"list": [{"name": "a"}, {"name": "a")", "}", ","},
             {R"({"list": [{"name": "a", "n": 1}, {"name": "a", "n": 1)", "}", "0"},
             {R"({"any": [{}, )", "{}", "{\""},
             {R"({"mixed": [{"s": "a"}, "b", {"s": "a")", "}", ","},
             {R"({"mixed": [{"s": "a"}, "b", "b)", "\"", "c"}}) {
      ExpectOutAndIn(*g, vocab, prefix, closing, going_on);
    }
  }
}

// Random walks through lists of small objects whose members have few values (so that repeats
// come up), on three vocabularies: every mask equals the brute-force one, and no walk meets a
// dead end.
TEST(UniqueItems, RandomWalksThroughListsOfObjects) {
  const char* schemas[] = {
      R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
          "properties": {"a": {"type": "boolean"}, "b": {"enum": [1, 2]}}}})",
      R"({"type": "array", "uniqueItems": true, "minItems": 2, "maxItems": 6,
          "items": {"type": "object", "properties": {"k": {"enum": ["x", "y"]}},
                    "required": ["k"]}})",
      R"({"type": "array", "uniqueItems": true, "items": {"oneOf": [{"type": "string"},
          {"type": "object", "properties": {"a": {"type": "boolean"}}}]}})",
  };
  const long steps = std::max(20L, static_cast<long>(60 * testing::TestScale()));
  std::uint64_t seed = 23;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const char* schema : schemas) WalkOn(vocab, schema, steps, seed++, 24);
  }
}

// Items of any type (`{}`, an untyped `pattern`), numbers, and several types at once, checked
// at run time: numbers equal as the validator compares them (1 = 1.0 = 1e0, -0 = 0, integers
// past 2^64 by their binary value), literals, strings, objects and arrays by value.
const char* kAnyItems = R"({"type": "array", "items": {}, "uniqueItems": true})";
const char* kUntypedOrClosed = R"({"type": "array", "uniqueItems": true, "items": {"anyOf": [
    {"pattern": "^[A-Z]+$"},
    {"type": "object", "additionalProperties": false, "required": ["value"],
     "properties": {"value": {"pattern": "^[A-Z]+$"}, "docs": {"type": "string"}}}]}})";

TEST(UniqueItems, AnyTypeItemsAgreeWithTheValidator) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {kAnyItems,
       {R"([1,2,"1",true,null,false,{},[],{"a":1},[1]])", R"([1,1.0])", R"([1,1e0])",
        R"([100,1e2])", R"([0,-0])", R"([0.5,5e-1])", R"([0.5,0.25])", R"([true,true])",
        R"([null,null])", R"([false,true,false])", R"([[1],[1.0]])", R"([[1,2],[2,1]])",
        R"([{"a":1},{"a":1.0}])", R"([{},[]])", R"(["a","a"])", R"(["1",1])", R"(["true",true])",
        R"([18446744073709551616,18446744073709551617])",
        R"([123456789012345678901,123456789012345678902])",
        R"([12345678901234567890,12345678901234567891])", R"([1, 1 ])",
        R"([ true , null , true ])", "[\n  1,\n  1.00\n]", R"([-1.5,-15e-1])",
        R"([[], [[]], [[], []]])", R"([[], [[]], [[]]])"}},
      {R"({"type": "array", "uniqueItems": true, "items": {"pattern": "^\\.[^/]+$"}})",
       {R"([".a",".b",1,true])", R"([".a",".a"])", R"([1,{"x":".a"},[".a"],".a"])", R"(["a"])",
        R"([null,null])", R"([{"p":1},{"p":1}])", R"([".a",".a/"])"}},
      {R"({"type": "array", "uniqueItems": true, "items": {"type": "number"}})",
       {R"([1,2,3.5])", R"([1,1.0])", R"([3.5,35e-1])", R"([0.1,0.10])", R"([-0.0,0])",
        R"([1E2,100.0])", R"([7,70e-1,0.7e1])"}},
      {R"({"type": "array", "uniqueItems": true, "maxItems": 4,
           "items": {"type": ["boolean", "null", "array"]}})",
       {R"([true,false,null,[]])", R"([true,false,null,[],[1]])", R"([[],[]])",
        R"([[true],[true]])", R"([false,false])", R"([[null],[false],[null]])"}},
      // An untyped pattern or a closed object (JsonSchemaStore's conjure): the first holds every
      // object, so the closed one adds none; a literal still runs out.
      {kUntypedOrClosed,
       {R"(["AB",{"value":"AB"},1,true])", R"(["AB","AB"])", R"([{"value":"X"},{"value":"X"}])",
        R"([{"value":"X","docs":"d"},{"docs":"d","value":"X"}])", R"([{"value":"x"}])",
        R"([true,null,true])", R"([{"other":1},{"value":"X"}])", R"(["ab"])",
        R"([[1],{"value":[1]},[1.0]])"}},
      // minItems 3 over items that run out only along literals.
      {R"({"type": "array", "uniqueItems": true, "minItems": 3,
           "items": {"type": ["null", "integer"]}})",
       {R"([null,1,2])", R"([null,null,1])", R"([1,2])", R"([1,2,3])", R"([1,-0,0])"}},
  };
  ExpectAgreementWithTheValidator(cases);
  // Token by token on Llama-3, the mask agreeing with AcceptToken.
  auto g = Compiler().CompileSchema(kAnyItems);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Feed(*g, R"([true, 1, 1.5, "1", [1], {"a": 1}, null, 15, false])"));
  EXPECT_FALSE(Feed(*g, R"([true, 1, 1.0])"));
  EXPECT_FALSE(Feed(*g, R"([null, 2, null])"));
  EXPECT_FALSE(Feed(*g, R"([[1, {"a": []}], [1, {"a": []}]])"));
}

// At every token of texts through lists of items of any type, on three vocabularies, the mask
// equals the brute-force one; right before a repeat the token that would make it is out and
// one that goes on is in: a literal already used cannot start (`t` has one way on), a number
// equal to an earlier one cannot end (`1.0` after 1), an array cannot close on a repeat.
TEST(UniqueItems, AnyTypeMasksEqualBruteForceNearRepeats) {
  const std::string schema = R"({"type": "object", "properties": {
      "any": {"type": "array", "uniqueItems": true, "items": {}},
      "num": {"type": "array", "uniqueItems": true, "items": {"type": "number"}},
      "pat": {"type": "array", "uniqueItems": true, "items": {"pattern": "^[a-z]+$"}},
      "oc": {"type": "array", "uniqueItems": true, "items": {"anyOf": [{"$ref": "#/$defs/upper"},
             {"type": "object", "additionalProperties": false, "required": ["value"],
              "properties": {"value": {"type": "string"}, "docs": {"type": "string"}}}]}},
      "u": {"$ref": "#/$defs/upper"}, "v": {"type": "array", "items": {"$ref": "#/$defs/upper"}},
      "oa": {"type": "array", "uniqueItems": true, "items": {"anyOf": [{},
             {"type": "object", "additionalProperties": false,
              "properties": {"k": {"type": "boolean"}}}]}}},
    "$defs": {"upper": {"pattern": "^[A-Z]+$"}},
    "additionalProperties": false})";
  const std::vector<std::string> texts = {
      R"({"any": [true, 1, "t", [1], {"a": null}, null, 1.5, [true], false, {"a": [null]}, 2e0, []]})",
      R"({"num": [1, 10, 1.5, 15e-2, -1, 100, 0.5e1]})",
      R"({"pat": ["ab", 1, "abc", true, [1], {"x": "ab"}, null, "b", false, -0.5]})",
      R"({"oc": ["A", {"value": "A"}, {"value": "A", "docs": "x"}, true, "B", {"k": null}, 2]})",
  };
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(vocab).CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    EXPECT_GT(MasksEqualBruteForceAlong(*g, schema, texts, vocab), 60) << vocab;
    for (const auto& [prefix, out, in] :
         std::vector<std::tuple<std::string, std::string, std::string>>{
             {R"({"any": [true, null, )", "t", "f"},
             {R"({"any": [true, null, )", "n", "1"},
             {R"({"any": [1, 1.0)", "]", "1"},
             {R"({"any": [1, 1.0)", ",", "5"},
             {R"({"any": [[1], [1)", "]", ","},
             {R"({"any": [{"a": 1}, {"a": 1.0)", "}", "1"},
             {R"({"num": [1, 10, 1)", "]", "0"},
             {R"({"num": [0.5, 5e-1)", "]", "2"},
             {R"({"pat": ["ab", null, )", "n", "t"},
             {R"({"pat": ["ab", "ab)", "\"", "c"},
             {R"({"oc": [{"value": "A"}, true, )", "t", "f"},
             {R"({"oc": [{"value": "A"}, {"value": "A")", "}", ","},
             {R"({"oc": ["A", "A)", "\"", "B"},
             {R"({"oa": [{"k": true}, true, )", "t", "f"},
             {R"({"oa": [{"k": true}, null, {"k": true)", "}", ","}}) {
      ExpectOutAndIn(*g, vocab, prefix, out, in);
    }
  }
}

// Random walks through lists of items of any type with few values of some kinds (literals,
// short arrays), on three vocabularies: every mask equals the brute-force one, and no walk
// meets a dead end (a literal whose only value is used, a list of booleans and null full).
TEST(UniqueItems, RandomWalksThroughListsOfAnyType) {
  const char* schemas[] = {
      R"({"type": "array", "uniqueItems": true, "items": {}})",
      R"({"type": "array", "uniqueItems": true, "items": {"type": ["boolean", "null", "array"]}})",
      R"({"type": "array", "uniqueItems": true, "minItems": 2,
          "items": {"type": ["boolean", "null", "number"]}})",
      kUntypedOrClosed,
  };
  const long steps = std::max(20L, static_cast<long>(60 * testing::TestScale()));
  std::uint64_t seed = 57;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const char* schema : schemas) WalkOn(vocab, schema, steps, seed++, 24);
  }
}

// An integer whose range holds 0 is spelt `0` or `-0`: four ways to three values for 0..2. A
// list that holds 0, 1 and 2 has no value left, so the comma after them is refused (it was let
// through, counting ways as values: a dead end), on three vocabularies and along random walks
// that fill such lists.
TEST(UniqueItems, ZeroSpeltTwiceIsOneValue) {
  const char* schema = R"({"type": "array", "uniqueItems": true,
                            "items": {"type": "integer", "minimum": 0, "maximum": 2}})";
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(vocab).CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    // Prefixes the parser takes (some valid instance goes on from them) and those it refuses.
    for (const auto& [text, taken] : std::vector<std::pair<std::string, bool>>{
             {"[0,1,2", true}, {"[0,1,2,", false}, {"[-0,2,1", true}, {"[-0,2,1,", false},
             {"[2,-0,", true}, {"[2,-0,0", false}, {"[1,-0", true}}) {
      Matcher m(*g);
      EXPECT_EQ(m.AcceptString(text), taken) << vocab << ": " << text;
    }
    for (const char* text : {"[0,1,2]", "[-0,2,1]", "[2,-0,1]", "[1,-0]"}) {
      Matcher m(*g);
      EXPECT_TRUE(m.AcceptString(text) && m.CanEnd()) << vocab << ": " << text;
      EXPECT_TRUE(Valid(schema, text)) << text;
    }
    EXPECT_FALSE(Valid(schema, "[0,-0]"));
    ExpectOutAndIn(*g, vocab, "[0,1,2", ",", "]");
    ExpectOutAndIn(*g, vocab, "[0,2,", "-", "1");
    WalkOn(vocab, schema, std::max(20L, static_cast<long>(40 * testing::TestScale())), 71, 12);
  }
}

// What stays refused (objects that can run out of values, closed ones, are searched at run time:
// schema_unique_closed_test.cc): arrays with item constraints, alternatives of objects
// and integers, bounded numbers (`1.` under a maximum of 1 goes on only as 1.0, 1.00, ...: one
// value), items of several types one of which can run out (bounded, a closed string pattern,
// excluded values), strings bounded by a length counter only, and items that can run out under
// a minItems of 2 or more (which would need the values left counted).
TEST(UniqueItems, WhatStaysRefused) {
  for (const char* tail : {R"("items": {"type": "string", "maxLength": 0}})",
                           // (after "a" only the closing quote or one more "b" within one
                           // character: 2 ways, fewer than a list of 5 can repeat)
                           R"("maxItems": 5, "items": {"type": "string", "pattern": "^ab*$",
                                                       "maxLength": 100}})",
                           R"("maxItems": 1100, "items": {"type": "string"}})",
                           R"("items": {"anyOf": [{"type": "object"},
                                                  {"type": "integer", "maximum": 3}]}})",
                           R"("items": {"anyOf": [{"type": "object"},
                                                  {"type": "string", "maxLength": 3}]}})",
                           R"("items": {"type": "array", "items": {"type": "string"}}})",
                           R"("items": {"type": ["string", "integer"], "maximum": 5}})",
                           R"("items": {"type": "number", "maximum": 1}})",
                           R"("items": {"type": ["number", "string"], "maxLength": 4}})",
                           R"("items": {"type": ["null", "string"], "pattern": "^a$"}})",
                           R"("items": {"not": {"const": 1}}})",
                           R"("items": {"type": "string", "pattern": "^[ab]$"}, "minItems": 2})",
                           R"("minItems": 2, "items": {"enum": ["a", "b", "c", "d", "e", "f", "g",
                                                                 "h", "i", "j", "k"]}})"}) {
    const std::string schema = std::string(R"({"type": "array", "uniqueItems": true, )") + tail;
    auto g = Compiler().CompileSchema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().code(), StatusCode::kUnsupported) << g.status().ToString();
    EXPECT_EQ(g.status().location(), "/uniqueItems") << g.status().ToString();
  }
}

}  // namespace
}  // namespace lockstep::schema
