// JSON Schema grammars on real vocabularies: the fast token mask equals the brute-force mask
// (every id tried with AcceptToken + Rollback) along seeded random walks, for the bundled
// tool-call schemas and for schemas whose format automata are large enough to run as rules of
// their own (date-time, email: thousands of states copied as they are, not re-determinised).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep {
namespace {

struct Case {
  std::string name;
  std::string schema;
};

std::string ManyMembers() {
  std::string props;
  for (int i = 0; i < 40; ++i) {
    props += "\"m" + std::to_string(i) + "\": ";
    props += i % 3 == 0   ? R"({"type": "string", "maxLength": 6})"
             : i % 3 == 1 ? R"({"type": "integer"})"
                          : R"({"enum": [true, "no"]})";
    props += ", ";
  }
  return R"({"type": "object", "properties": {)" + props +
         R"("child": {"$ref": "#"}}, "required": ["m20"], "additionalProperties": false})";
}

std::vector<Case> Cases() {
  const std::string tools = testing::SourceDataDir() + "/tools/";
  return {
      {"book_flight", testing::ReadFile(tools + "book_flight.json")},
      {"get_weather", testing::ReadFile(tools + "get_weather.json")},
      {"formats", R"({"type": "object", "properties": {
          "when": {"type": "string", "format": "date-time"},
          "to": {"type": "string", "format": "email"},
          "at": {"type": "string", "format": "time"}},
        "required": ["when"], "additionalProperties": false})"},
      {"any_extra", R"({"type": "object", "properties": {"id": {"type": "integer", "minimum": 1}},
        "required": ["id"]})"},
      // Negated additionalProperties and propertyNames: members with a witness (issue 22).
      {"some_member", R"({"type": "object", "oneOf": [
          {"properties": {"id": {"type": "integer"}}, "required": ["id"],
           "additionalProperties": false},
          {"properties": {"name": {"type": "string"}}, "required": ["name"]}],
        "not": {"propertyNames": {"maxLength": 3}}})"},
      // Two contains on one array, contains with maxItems, contains counts negated (issue 22).
      {"contains_pair", R"({"type": "object", "properties": {
          "tags": {"type": "array", "items": {"type": ["integer", "string"]},
                   "contains": {"type": "integer"}, "not": {"contains": {"const": "x"}},
                   "maxItems": 4},
          "kind": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                             {"type": "array", "items": {"type": "string"}}]},
          "few": {"type": "array", "not": {"contains": {"type": "string"}, "minContains": 2}}},
        "required": ["tags", "kind", "few"], "additionalProperties": false})"},
      // Patterns opening with lookaheads (intersections and complements of their parts), and
      // negated multipleOf (the numbers minus the multiples).
      {"complements", R"({"type": "object", "properties": {
          "name": {"type": "string", "pattern": "^(?!(if|for|while)$)[a-zA-Z_][a-zA-Z0-9_]*$"},
          "file": {"type": "string", "pattern": "^(?!.*[<>])(?=.*[a-z]).*\\.txt$",
                   "maxLength": 24},
          "n": {"type": "integer", "minimum": 0, "maximum": 5000, "not": {"multipleOf": 3}},
          "x": {"type": "number", "oneOf": [{"multipleOf": 0.5}, {"multipleOf": 0.2}]}},
        "required": ["name", "file", "n", "x"], "additionalProperties": false})"},
      // patternProperties of two merged subschemas (issue 22): a key class is a set of
      // patterns of both, each subschema's additionalProperties for the keys none of its
      // patterns match.
      {"merged_patterns", R"({"type": "object", "properties": {"id": {"type": "string"}},
        "required": ["id"], "maxProperties": 4, "allOf": [
          {"patternProperties": {"^a": {"type": "integer"}},
           "additionalProperties": {"type": "string"}},
          {"patternProperties": {"^b": {"type": "boolean"}, "x$": {"type": "number"}},
           "additionalProperties": {"maxLength": 3}}]})"},
      // An object of 40 optional members (past 32: the next member is chosen through a tree of
      // blocks), one required in the middle, strings of maxLength (counters whose tails are
      // checked once per origin, not once per count), recursive through "child".
      {"many_members", ManyMembers()},
      // uniqueItems checked at run time (issue 22): strings, integers, and items whose values
      // run out (an enum of 12, two letters of three), which the walks exhaust.
      {"unique_items", R"({"type": "object", "properties": {
          "e": {"type": "array", "uniqueItems": true,
                "items": {"enum": ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]}},
          "p": {"type": "array", "items": {"type": "string", "pattern": "^[a-c]{2}$"},
                "uniqueItems": true, "minItems": 1},
          "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true,
                   "maxItems": 8},
          "k": {"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": true},
          "ids": {"type": "array", "items": {"type": "string", "minLength": 1},
                  "uniqueItems": true, "minItems": 2}},
        "required": ["e", "p", "tags", "k", "ids"], "additionalProperties": false})"},
  };
}

class SchemaExactnessTest : public ::testing::TestWithParam<const char*> {};

TEST_P(SchemaExactnessTest, FastMaskEqualsBruteForce) {
  auto vocab = Vocabulary::Load(GetParam());
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  const long steps = std::max(20L, static_cast<long>(120 * testing::TestScale()));
  std::uint64_t seed = 1;
  long completed = 0;
  // What is checked is exactness, not compile speed: no wall-clock deadline (the `formats`
  // schema's e-mail and date-time automata take seconds to build in the sanitizer build).
  CompileOptions options;
  options.compile_timeout_ms = 0;
  for (const Case& c : Cases()) {
    auto g = compiler.CompileSchema(c.schema, options);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed++, 30);
    std::printf("%-12s %-12s %ld steps, %ld walks (%ld ended with EOS), %ld over, %ld under\n",
                GetParam(), c.name.c_str(), st.steps, st.walks, st.completed, st.over, st.under);
    EXPECT_EQ(st.over, 0) << c.name << ": " << st.first_mismatch;
    EXPECT_EQ(st.under, 0) << c.name << ": " << st.first_mismatch;
    // Every allowed token leaves the text completable: no state with nothing allowed.
    EXPECT_EQ(st.dead_ends, 0) << c.name << ": after '" << st.first_dead_end << "'";
    completed += st.completed;
  }
  // At full scale the walks must also reach EOS (and compare the masks there) repeatedly; the
  // sanitizer run's 20 steps per schema are too short for a whole tool call.
  if (steps >= 100) {
    EXPECT_GE(completed, 3) << "the walks should reach EOS (and check the masks there) repeatedly";
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, SchemaExactnessTest,
                         ::testing::Values("llama3", "qwen2.5", "mistral"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '.') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace lockstep
