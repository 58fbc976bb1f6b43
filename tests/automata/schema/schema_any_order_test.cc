// Object members in any order (CompileOptions::schema_member_order = kAny,
// docs/json-schema-compiler.md "Member order"): each declared property at most once, in any
// order among the other members, every required one present, the rest as additionalProperties
// / patternProperties allow. Checked against the validator on every ordering of small member
// sets (with duplicates, extra keys and wrong values), against a brute-force mask along random
// walks on three vocabularies, at its budget (more than 12 declared properties on one object),
// and through the C-visible default (declared order stays the default).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grammar/schema/json_schema.h"
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

CompileOptions AnyOrder() {
  CompileOptions o;
  o.schema_member_order = SchemaMemberOrder::kAny;
  return o;
}

// Whether the grammar takes `text` byte by byte and may end there.
bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  return m.AcceptString(text) && m.CanEnd();
}

bool Valid(const std::string& schema_text, const json& instance) {
  auto schema = Schema::Load(schema_text);
  EXPECT_TRUE(schema.ok());
  auto v = Validator::Create(*schema, ValidateOptions{});
  EXPECT_TRUE(v.ok());
  auto r = v->Validate(instance);
  EXPECT_TRUE(r.ok());
  return *r;
}

// Every sequence of up to `max_len` members over `keys` (a key may repeat: duplicates), written
// compactly twice: each member's value taken from `values` in turn, and each key's value from
// `good`; with the keys it repeats.
struct Candidate {
  std::string text;
  std::vector<std::string> repeated;  // keys written more than once
};

// Whether `key` is in the `properties` of the schema or of one of its oneOf branches.
bool Declared(const json& schema, const std::string& key) {
  if (schema.contains("properties") && schema["properties"].contains(key)) return true;
  if (schema.contains("oneOf")) {
    for (const json& b : schema["oneOf"])
      if (Declared(b, key)) return true;
  }
  return false;
}
void Sequences(const std::vector<std::string>& keys, const std::vector<std::string>& values,
               const std::vector<std::string>& good, std::size_t max_len,
               std::vector<Candidate>* out) {
  std::vector<std::size_t> seq;
  std::size_t counter = 0;
  auto emit = [&](bool good_values) {
    Candidate c;
    c.text = "{";
    std::vector<std::size_t> seen;
    for (std::size_t i = 0; i < seq.size(); ++i) {
      if (i > 0) c.text += ",";
      c.text += "\"" + keys[seq[i]] + "\":" +
                (good_values ? good[seq[i]] : values[(counter + i) % values.size()]);
      if (std::find(seen.begin(), seen.end(), seq[i]) != seen.end())
        c.repeated.push_back(keys[seq[i]]);
      seen.push_back(seq[i]);
    }
    c.text += "}";
    ++counter;
    out->push_back(std::move(c));
  };
  // Iterative odometer over lengths 0..max_len.
  for (std::size_t len = 0; len <= max_len; ++len) {
    seq.assign(len, 0);
    while (true) {
      emit(false);
      emit(true);
      std::size_t i = len;
      while (i > 0 && ++seq[i - 1] == keys.size()) seq[--i] = 0;
      if (i == 0) break;
    }
  }
}

struct Case {
  const char* schema;
  std::vector<std::string> keys;    // declared names and extra keys
  std::vector<std::string> values;  // values to cycle through (right and wrong types)
  std::vector<std::string> good;    // per key: a value its subschema takes
  std::size_t max_len;
};

// Every ordering of small member sets, with repeated keys, extra keys and values of the wrong
// type: accepted exactly when the validator accepts the instance (a repeated declared key is
// never accepted: the validator cannot see it, the grammar refuses it).
TEST(AnyOrder, EveryOrderingAgreesWithTheValidator) {
  const std::vector<Case> cases = {
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
           "c": {"type": "boolean"}}, "required": ["a", "c"], "additionalProperties": false})",
       {"a", "b", "c", "z"}, {"1", "\"s\"", "true", "null"}, {"1", "\"s\"", "true", "1"}, 4},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
           "additionalProperties": {"type": "integer"}, "minProperties": 2, "maxProperties": 3})",
       {"a", "b", "x", "y"}, {"1", "\"s\"", "2"}, {"1", "\"s\"", "2", "3"}, 4},
      {R"({"type": "object", "properties": {"xa": {"type": "string"}, "b": {}},
           "patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false,
           "required": ["b"]})",
       {"xa", "b", "xb", "y"}, {"1", "\"s\"", "2", "false"}, {"\"s\"", "1", "2", "3"}, 3},
      {R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}},
           "dependentRequired": {"a": ["b"]}, "additionalProperties": false})",
       {"a", "b", "c"}, {"0", "1"}, {"0", "1", "2"}, 4},
      {R"({"type": "object", "properties": {"a": {"type": "integer"}},
           "not": {"additionalProperties": {"type": "integer"}}})",
       {"a", "x", "y"}, {"1", "\"s\"", "2"}, {"1", "\"s\"", "2"}, 3},
      {R"({"type": "object", "properties": {"p": {"type": "object",
             "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
             "required": ["b"], "additionalProperties": false}, "q": {"type": "integer"}},
           "required": ["p"], "additionalProperties": false})",
       {"p", "q"}, {"{\"b\":1,\"a\":2}", "3", "{\"a\":1}", "{\"b\":1,\"b\":2}"},
       {"{\"b\":1,\"a\":2}", "3"}, 3},
      {R"({"oneOf": [{"type": "object", "properties": {"k": {"const": "x"}, "v": {"type": "integer"}},
                      "required": ["k", "v"], "additionalProperties": false},
                     {"type": "object", "properties": {"k": {"const": "y"}, "w": {"type": "string"}},
                      "required": ["k"], "additionalProperties": false}]})",
       {"k", "v", "w"}, {"\"x\"", "1", "\"y\"", "\"s\""}, {"\"y\"", "1", "\"s\""}, 3},
  };
  long accepted = 0, refused = 0;
  for (const Case& c : cases) {
    auto g = Compiler().CompileSchema(c.schema, AnyOrder());
    ASSERT_TRUE(g.ok()) << c.schema << ": " << g.status().ToString();
    std::vector<Candidate> candidates;
    Sequences(c.keys, c.values, c.good, c.max_len, &candidates);
    for (const Candidate& cand : candidates) {
      const bool got = Accepts(*g, cand.text);
      if (!cand.repeated.empty()) {
        // (json::parse keeps a repeated key's last value: the validator cannot judge the text.)
        // A repeated declared property is refused; extra keys, as in declared order, are not
        // told apart from one another.
        for (const std::string& k : cand.repeated) {
          if (Declared(json::parse(c.schema), k)) {
            EXPECT_FALSE(got) << c.schema << "\n" << cand.text;
            ++refused;
          }
        }
        continue;
      }
      const bool want = Valid(c.schema, json::parse(cand.text));
      EXPECT_EQ(got, want) << c.schema << "\n" << cand.text;
      (got ? accepted : refused) += 1;
    }
  }
  std::printf("%ld texts accepted, %ld refused, as the validator says\n", accepted, refused);
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 100);
}

// Declared order stays the default: the same text in another order is refused without kAny.
TEST(AnyOrder, DeclaredOrderIsTheDefault) {
  const char* schema = R"({"type": "object", "properties": {"name": {"type": "string"},
      "age": {"type": "integer"}}, "required": ["name", "age"]})";
  auto declared = Compiler().CompileSchema(schema);
  auto any = Compiler().CompileSchema(schema, AnyOrder());
  ASSERT_TRUE(declared.ok() && any.ok());
  EXPECT_TRUE(Accepts(*declared, R"({"name": "Ann", "age": 3})"));
  EXPECT_FALSE(Accepts(*declared, R"({"age": 3, "name": "Ann"})"));
  EXPECT_TRUE(Accepts(*any, R"({"name": "Ann", "age": 3})"));
  EXPECT_TRUE(Accepts(*any, R"({ "age" : 3 , "name" : "Ann" })"));
  EXPECT_FALSE(Accepts(*any, R"({"age": 3, "name": "Ann", "age": 4})"));
  EXPECT_FALSE(Accepts(*any, R"({"age": 3})"));
}

// Random walks on Llama-3, Qwen2.5 and Mistral: every mask equals the brute-force one, and no
// walk reaches a state where nothing is allowed (a key used up, a required key still missing
// under maxProperties).
TEST(AnyOrder, RandomWalksAgainstBruteForce) {
  const std::vector<std::string> schemas = {
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
          "names": {"type": "integer"}, "n": {"type": "boolean"}, "id": {"enum": [1, 2]}},
          "required": ["n", "id"], "additionalProperties": false})",
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string",
          "maxLength": 4}, "c": {"type": "object", "properties": {"x": {"type": "boolean"},
          "y": {"type": "null"}}, "required": ["y"], "additionalProperties": false}},
          "required": ["a"], "additionalProperties": {"type": "boolean"}, "maxProperties": 4})",
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
          "c": {"type": "integer"}}, "required": ["c"], "minProperties": 2, "maxProperties": 2,
          "additionalProperties": false})",
  };
  const long steps = std::max(20L, static_cast<long>(150 * testing::TestScale()));
  long completed = 0;
  for (const char* vocab : {"llama3", "qwen2.5", "mistral"}) {
    std::uint64_t seed = 11;
    for (const std::string& schema : schemas) {
      auto g = CompilerFor(vocab).CompileSchema(schema, AnyOrder());
      ASSERT_TRUE(g.ok()) << vocab << ": " << schema << ": " << g.status().ToString();
      testing::WalkStats st = testing::ExactnessWalks(*g, steps, seed++, 30);
      std::printf("%s: %s\n", vocab, st.Summary().c_str());
      EXPECT_TRUE(st.Exact()) << vocab << ": " << schema << ": " << st.Failure();
      completed += st.completed;
    }
  }
  // (Walks that closed their object and ended; the sanitizer run's 20 steps end none.)
  if (testing::TestScale() >= 1) {
    EXPECT_GT(completed, 5);
  }
}

// 10 declared properties compile by default (1,024 member sets); 11 are a resource limit that
// names itself and the object, and compile once the limit is raised; declared order compiles
// them anyway, and lenient mode keeps declared order for that object, with a warning.
TEST(AnyOrder, PropertiesPastTheLimitAreABudgetThatNamesItself) {
  auto object_of = [](int n) {
    json s = {{"type", "object"}, {"properties", json::object()}};
    for (int i = 0; i < n; ++i) {
      s["properties"][std::string("p").append(std::to_string(i))] = {{"type", "integer"}};
    }
    return json{{"type", "object"}, {"properties", {{"inner", s}}}}.dump();
  };
  auto ten = Compiler().CompileSchema(object_of(10), AnyOrder());
  ASSERT_TRUE(ten.ok()) << ten.status().ToString();
  EXPECT_TRUE(Accepts(*ten, R"({"inner": {"p9": 1, "p0": 2, "p5": 3}})"));
  EXPECT_FALSE(Accepts(*ten, R"({"inner": {"p9": 1, "p0": 2, "p9": 3}})"));
  auto eleven = Compiler().CompileSchema(object_of(11), AnyOrder());
  ASSERT_FALSE(eleven.ok());
  EXPECT_EQ(eleven.status().code(), StatusCode::kResourceLimit);
  EXPECT_EQ(eleven.status().location(), "/properties/inner/properties");
  EXPECT_NE(eleven.status().message().find("member_order any"), std::string::npos)
      << eleven.status().message();
  EXPECT_NE(eleven.status().message().find("any_order_max_properties (10"), std::string::npos)
      << eleven.status().message();
  CompileOptions raised = AnyOrder();
  raised.schema_any_order_max_properties = 11;
  auto eleven_raised = Compiler().CompileSchema(object_of(11), raised);
  ASSERT_TRUE(eleven_raised.ok()) << eleven_raised.status().ToString();
  EXPECT_TRUE(Accepts(*eleven_raised, R"({"inner": {"p10": 1, "p0": 2}})"));
  EXPECT_TRUE(Compiler().CompileSchema(object_of(11)).ok());
  CompileOptions lenient = AnyOrder();
  lenient.schema_lenient = true;
  std::vector<std::string> warnings;
  auto relaxed = Compiler().CompileSchema(object_of(11), lenient, &warnings);
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("/properties/inner/properties"), std::string::npos) << warnings[0];
  EXPECT_TRUE(Accepts(*relaxed, R"({"inner": {"p0": 1, "p10": 2}})"));
  EXPECT_FALSE(Accepts(*relaxed, R"({"inner": {"p10": 1, "p0": 2}})"));  // (declared order)
}

}  // namespace
}  // namespace lockstep::schema
