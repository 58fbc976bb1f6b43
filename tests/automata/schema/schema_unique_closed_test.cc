// uniqueItems over objects that can run out of values (closed objects: additionalProperties
// false, maxProperties, constrained keys), automata/cfg/unique_search.h: a prefix of an item may
// have only repeats of earlier items left to finish with, so both the mask and AcceptToken
// search for a new way to finish. Checked against the validator on whole texts, against a
// brute-force mask (every id tried with AcceptToken) at every token of texts that come near
// repeats, with the tokens that would lead into a dead end named, and by random walks through
// items with few values (a walk that meets a dead end fails) on Llama-3, Qwen2.5 and Mistral.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>
#include <vector>

#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "unique_items_checks.h"
#include "util/grammar_walk.h"

namespace lockstep::schema {
namespace {

using unique_checks::ExpectAgreementWithTheValidator;
using unique_checks::ExpectOutAndIn;
using unique_checks::MasksEqualBruteForceAlong;

// A member that can be a string or null: after `"b":` with `"b":null` used, `n` is a dead end.
const char* kNullable = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
    "additionalProperties": false, "required": ["a"],
    "properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}}}})";
// Six values in all: k is x or y, f absent, true or false.
const char* kSix = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
    "additionalProperties": false, "required": ["k"],
    "properties": {"k": {"enum": ["x", "y"]}, "f": {"type": "boolean"}}}})";
// Lists of closed objects inside the items of one (sergen's tables inside its connections).
const char* kNested = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
    "additionalProperties": false, "required": ["n"],
    "properties": {"n": {"enum": [1, 2]}, "t": {"type": "array", "uniqueItems": true,
      "items": {"type": "object", "additionalProperties": false, "required": ["c"],
                "properties": {"c": {"type": "boolean"}}}}}}})";
// A string or a closed object (backportrc's branches), and a bound on the members.
const char* kMixed = R"({"type": "array", "uniqueItems": true, "items": {"oneOf": [
    {"type": "string", "minLength": 1},
    {"type": "object", "required": ["name", "checked"], "additionalProperties": false,
     "properties": {"name": {"type": "string", "minLength": 1}, "checked": {"type": "boolean"}}}]}})";
// Two values: {} and {"p":0}.
const char* kTwo = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
    "propertyNames": {"const": "p"}, "properties": {"p": {"const": 0}}}})";

TEST(UniqueClosedObjects, ItemsAgreeWithTheValidator) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {kNullable,
       {R"([{"a":"x"},{"a":"x","b":null}])", R"([{"a":"x"},{"a":"x"}])",
        R"([{"a":"x","b":null},{"a":"x","b":null}])", R"([{"a":"x","b":"y"},{"a":"x","b":null}])",
        R"([{"a":"x","b":"\u0079"},{"a":"x","b":"y"}])", R"([{"a":"}"},{"a":"}","b":"}"}])",
        R"([ {"a": "x"} , {"a": "x", "b": null} , {"a": "x"} ])", R"([{"b":null}])"}},
      {kSix,
       {R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":"y"},{"k":"y","f":true},{"k":"y","f":false}])",
        R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":"y"},{"k":"y","f":true},{"k":"y","f":false},{"k":"x"}])",
        R"([{"k":"x","f":true},{"k":"x","f":true}])"}},
      {kNested,
       {R"([{"n":1,"t":[{"c":true},{"c":false}]},{"n":1,"t":[{"c":false},{"c":true}]}])",
        R"([{"n":1,"t":[{"c":true},{"c":true}]}])", R"([{"n":1,"t":[]},{"n":1}])",
        R"([{"n":1,"t":[]},{"n":1,"t":[]}])", R"([{"n":2,"t":[{"c":true}]},{"n":2,"t":[{"c":true}]}])"}},
      {kMixed,
       {R"(["a",{"name":"a","checked":true}])", R"([{"name":"a","checked":true},{"name":"a","checked":true}])",
        R"([{"name":"a","checked":true},{"name":"a","checked":false},"a","a"])"}},
      {kTwo, {R"([{},{"p":0}])", R"([{},{}])", R"([{"p":0},{"p":0}])"}},
  };
  ExpectAgreementWithTheValidator(cases);
}

TEST(UniqueClosedObjects, MasksEqualBruteForceNearRepeats) {
  const std::vector<std::pair<const char*, std::vector<std::string>>> cases = {
      {kNullable,
       {R"([{"a":"x"},{"a":"x","b":null},{"a":"x","b":"null"},{"a":"xy"}])",
        R"([{"a": "n"}, {"a": "n", "b": "n"}, {"a": "n", "b": null}, {"a": "nu"}])"}},
      {kSix,
       {R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":"y","f":false},{"k":"y"}])"}},
      {kNested, {R"([{"n":1,"t":[{"c":true},{"c":false}]},{"n":1,"t":[{"c":false}]},{"n":1}])"}},
      {kMixed, {R"([{"name":"a","checked":true},"a",{"name":"a","checked":false},"b"])"}},
  };
  const std::vector<std::tuple<const char*, std::string, std::string, std::string>> dead_ends = {
      {kNullable, R"([{"a":"x"},{"a":"x")", "}", ","},
      {kNullable, R"([{"a":"x"},{"a":"x","b":null},{"a":"x","b":)", "null", "\""},
      {kNullable, R"([{"a":"x"},{"a":"x","b":null},{"a":"x","b":)", "n", "\""},
      {kSix, R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":")", "x", "y"},
      {kSix,
       R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":"y"},{"k":"y","f":true},{"k":"y","f":false})",
       ",", "]"},
      {kSix, R"([{"k":"x"},{"k":"x","f":true},{"k":"x","f":false},{"k":"y","f":true},{"k":"y",)",
       "\"f\":t", "\"f\":f"},
      {kNested, R"([{"n":1,"t":[{"c":true}]},{"n":1,"t":[{"c":true})", "]", ","},
      {kMixed, R"([{"name":"a","checked":true},{"name":"a","checked":)", "true", "false"},
      {kTwo, R"([{},{"p":0})", ",", "]"},
  };
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const auto& [schema, texts] : cases) {
      auto g = testing::CompilerFor(vocab).CompileSchema(schema);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      EXPECT_GT(MasksEqualBruteForceAlong(*g, schema, texts, vocab), 10) << vocab;
    }
    for (const auto& [schema, prefix, out, in] : dead_ends) {
      auto g = testing::CompilerFor(vocab).CompileSchema(schema);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      ExpectOutAndIn(*g, vocab, prefix, out, in);
    }
  }
}

// Random walks through lists of closed objects with few values, so that lists fill up and
// repeats come near: every mask equals the brute-force one and no walk meets a dead end.
TEST(UniqueClosedObjects, RandomWalksMeetNoDeadEnd) {
  const long steps = std::max(40L, static_cast<long>(200 * testing::TestScale()));
  std::uint64_t seed = 71;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    for (const char* schema : {kSix, kNested, kTwo}) {
      auto g = testing::CompilerFor(vocab).CompileSchema(schema);
      ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
      testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed++, 80);
      std::printf("%s: %s\n", vocab, st.Summary().c_str());
      EXPECT_TRUE(st.Exact()) << vocab << ": " << schema << ": " << st.Failure();
    }
  }
}

// Every kind of object that can run out of values compiles, and its lists fill up to their last
// value and no further: no extra member (`[{}]` and no second item), a bound on the members,
// constrained keys, typed extra members, pattern members, and alternatives of such objects.
TEST(UniqueClosedObjects, EveryClosedKindCompilesAndFillsUp) {
  for (const char* items : {R"({"type": "object", "additionalProperties": false})",
                            R"({"type": "object", "maxProperties": 0})",
                            R"({"type": "object", "propertyNames": false})",
                            R"({"type": "object", "additionalProperties": {"type": "integer"},
                                "maxProperties": 0})",
                            R"({"type": "object", "patternProperties": {"^x$": {}},
                                "additionalProperties": false, "maxProperties": 0})",
                            R"({"anyOf": [{"type": "object", "maxProperties": 0},
                                          {"type": "object", "additionalProperties": false}]})"}) {
    const std::string schema =
        std::string(R"({"type": "array", "uniqueItems": true, "items": )") + items + "}";
    SCOPED_TRACE(schema);
    for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
      auto g = testing::CompilerFor(vocab).CompileSchema(schema);
      ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
      ExpectOutAndIn(*g, vocab, "[{}", ",", "]");
      Matcher m(*g);
      EXPECT_TRUE(m.AcceptString("[{}]") && m.CanEnd()) << schema;
    }
  }
}

// The searches' budget names itself: past max_unique_search_bytes a fill leaves the tokens it
// could not decide out of the mask (never a dead end in), FillTrace counts them, and
// AcceptToken refuses such a token with kResourceLimit naming the option.
TEST(UniqueClosedObjects, TheSearchBudgetNamesItself) {
  CompileOptions tight;
  tight.max_unique_search_bytes = 3;
  auto g = testing::CompilerFor("llama3").CompileSchema(kSix, tight);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  auto roomy = testing::CompilerFor("llama3").CompileSchema(kSix);
  ASSERT_TRUE(roomy.ok()) << roomy.status().ToString();
  // (After three items the view is settled; a comma asks for a fourth, {"k":"x"} or
  // {"k":"y","f":...}, which takes a search of more than 3 bytes to find.)
  const std::string prefix = R"([{"k":"y"},{"k":"x","f":true},{"k":"x","f":false})";
  const int width = testing::CompilerFor("llama3").vocabulary().logits_width();
  Matcher m(*g), full(*roomy);
  ASSERT_TRUE(m.AcceptString(prefix));
  ASSERT_TRUE(full.AcceptString(prefix));
  testing::Mask tight_mask(BitmaskWords(width)), full_mask(BitmaskWords(width));
  m.FillNextTokenBitmask(tight_mask);
  const FillTrace trace = Matcher::LastFillTrace();
  full.FillNextTokenBitmask(full_mask);
  EXPECT_GT(trace.unique_search_over, 0);
  EXPECT_EQ(full_mask, testing::BruteForceMask(full));
  for (std::size_t w = 0; w < tight_mask.size(); ++w) {
    EXPECT_EQ(tight_mask[w] & ~full_mask[w], 0u) << "a token out of the full mask in the tight one";
  }
  EXPECT_NE(tight_mask, full_mask);
  // The comma: the full search finds a fourth item; the tight one gives up, and says so.
  const std::vector<TokenId> comma = unique_checks::Encode("llama3", ",");
  ASSERT_EQ(comma.size(), 1u);
  EXPECT_TRUE(unique_checks::Allowed(full_mask, comma[0]));
  EXPECT_FALSE(unique_checks::Allowed(tight_mask, comma[0]));
  EXPECT_TRUE(full.AcceptToken(comma[0]));
  EXPECT_FALSE(m.AcceptToken(comma[0]));
  EXPECT_EQ(m.last_error().code(), StatusCode::kResourceLimit) << m.last_error().ToString();
  EXPECT_NE(m.last_error().message().find("max_unique_search_bytes"), std::string::npos)
      << m.last_error().ToString();
}

// A search looks for one new item: with minItems 2 or more the items after it would need one
// too, which stays an error.
TEST(UniqueClosedObjects, MinItemsOfTwoStaysRefused) {
  auto g = testing::CompilerFor("llama3").CompileSchema(
      R"({"type": "array", "uniqueItems": true, "minItems": 2, "items": {"type": "object",
          "additionalProperties": false, "properties": {"a": {"type": "string"}}}})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported) << g.status().ToString();
  EXPECT_EQ(g.status().location(), "/uniqueItems") << g.status().ToString();
}

}  // namespace
}  // namespace lockstep::schema
