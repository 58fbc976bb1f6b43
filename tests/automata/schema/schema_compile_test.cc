// The JSON Schema compiler (automata/schema/schema_compile.h) keyword by keyword: each schema is
// compiled and run through a real Matcher on the Llama-3 vocabulary (canonical tokenisation,
// mask checked before every token, EOS at the end) on many generated instances, rendered compact
// and indented; the validator (grammar/schema/json_schema.h) is the oracle. Then the errors: codes and
// JSON Pointers, lenient warnings, budgets, deep recursion, whitespace policy, declared order.
#include "automata/schema/schema_compile.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_grammar_peer.h"
#include "automata/cfg/cfg_program.h"
#include "automata/cfg/position_key.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"
#include "util/grammar_walk.h"

namespace lockstep::schema {
namespace {

using json = nlohmann::json;

const GrammarCompiler& Compiler() {
  static const GrammarCompiler* compiler = [] {
    auto vocab = Vocabulary::Load("llama3");
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    return new GrammarCompiler(*vocab);
  }();
  return *compiler;
}

// True when `text` is accepted token by token with the mask checked, then EOS.
bool Feed(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  const Vocabulary& vocab = Compiler().vocabulary();
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = vocab.Encode(text, eo);
  if (!ids.ok()) return false;
  Matcher m(g);
  std::vector<std::uint32_t> mask(BitmaskWords(vocab.logits_width()));
  for (TokenId id : *ids) {
    m.FillNextTokenBitmask(mask);
    if (!((mask[id >> 5] >> (id & 31)) & 1)) return false;
    if (!m.AcceptToken(id)) return false;
  }
  m.FillNextTokenBitmask(mask);
  TokenId eos = vocab.eos();
  return ((mask[eos >> 5] >> (eos & 31)) & 1) && m.AcceptToken(eos);
}

// Values found anywhere in the schema (consts, enums, bounds, property names) seed the
// generator so that many instances sit on the boundaries.
void Harvest(const json& s, std::vector<json>* values, std::vector<std::string>* keys) {
  if (s.is_object()) {
    for (auto& [k, v] : s.items()) {
      if (k == "properties" && v.is_object())
        for (auto& [name, sub] : v.items()) keys->push_back(name);
      if (k == "required" && v.is_array())
        for (const json& n : v) keys->push_back(n.get<std::string>());
      if (k == "const") values->push_back(v);
      if (k == "enum")
        for (const json& x : v) values->push_back(x);
      if (v.is_number()) {
        values->push_back(v);
        if (v.is_number_integer()) {
          values->push_back(v.get<std::int64_t>() + 1);
          values->push_back(v.get<std::int64_t>() - 1);
        }
      }
      Harvest(v, values, keys);
    }
  } else if (s.is_array()) {
    for (const json& x : s) Harvest(x, values, keys);
  }
}

class Gen {
 public:
  Gen(const json& schema, std::uint32_t seed) : rng_(seed) {
    Harvest(schema, &values_, &keys_);
    for (const char* k : {"x", "a", "b", "name"}) keys_.push_back(k);
    for (json v : {json(nullptr), json(true), json(false), json(0), json(1), json(-1), json(2.5),
                   json(10), json(100), json(""), json("a"), json("abc"), json("hello world"),
                   json("2024-01-31"), json("x@y.com"), json("ab\"c\\\n\u00e9")})
      values_.push_back(v);
  }
  json Value(int depth = 0) {
    int r = Pick(10);
    if (depth < 3 && r == 0) return Array(depth);
    if (depth < 3 && r == 1) return Object(depth);
    return values_[Pick(static_cast<int>(values_.size()))];
  }
  json Array(int depth) {
    json a = json::array();
    int n = Pick(5);
    for (int i = 0; i < n; ++i) a.push_back(Value(depth + 1));
    if (n >= 2 && Pick(3) == 0) a.push_back(a[0]);  // duplicates for uniqueItems
    return a;
  }
  json Object(int depth) {
    json o = json::object();
    int n = Pick(5);
    for (int i = 0; i < n; ++i) o[keys_[Pick(static_cast<int>(keys_.size()))]] = Value(depth + 1);
    return o;
  }
  int Pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

 private:
  std::mt19937 rng_;
  std::vector<json> values_;
  std::vector<std::string> keys_;
};

struct Outcome {
  int valid = 0, invalid = 0, over = 0, under = 0;
};

// Compiles `schema` and compares grammar acceptance with the validator on the given instances
// plus `generated` random ones (and the values found in the schema).
Outcome Compare(const std::string& schema_text, const std::vector<json>& instances,
                int generated = 150, bool format_assertion = false,
                bool openapi_formats = false) {
  Outcome out;
  auto schema = Schema::Load(schema_text);
  EXPECT_TRUE(schema.ok()) << schema.status().ToString();
  if (!schema.ok()) return out;
  SchemaCompileOptions so;
  so.format_assertion = format_assertion;
  so.openapi_formats = openapi_formats;
  auto ir = CompileSchemaToGrammar(**schema, so);
  EXPECT_TRUE(ir.ok()) << schema_text << ": " << ir.status().ToString();
  if (!ir.ok()) return out;
  auto g = CompileGrammarIr(Compiler(), ir->grammar);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  if (!g.ok()) return out;
  ValidateOptions vo;
  vo.format_assertion = format_assertion;
  vo.openapi_formats = openapi_formats;
  auto validator = Validator::Create(*schema, vo);
  EXPECT_TRUE(validator.ok());
  std::vector<json> all = instances;
  Gen gen(json::parse(schema_text), 7);
  for (int i = 0; i < generated; ++i) all.push_back(gen.Value());
  std::set<std::string> seen;
  for (const json& inst : all) {
    if (!seen.insert(inst.dump()).second) continue;
    auto valid = validator->Validate(inst);
    EXPECT_TRUE(valid.ok());
    (*valid ? out.valid : out.invalid) += 1;
    for (int indent : {-1, 2}) {
      std::string text = RenderInstance(**schema, inst, indent, so);
      bool accepted = Feed(*g, text);
      if (accepted == *valid) continue;
      (*valid ? out.over : out.under) += 1;
      ADD_FAILURE() << (*valid ? "valid instance rejected: " : "invalid instance accepted: ")
                    << text << "\n  schema: " << schema_text;
    }
  }
  return out;
}

void ExpectExact(const std::string& schema, const std::vector<json>& instances = {},
                 bool format_assertion = false) {
  Outcome o = Compare(schema, instances, 150, format_assertion);
  EXPECT_EQ(o.over, 0);
  EXPECT_EQ(o.under, 0);
}

TEST(SchemaCompile, TypesAndTypeArrays) {
  ExpectExact(R"({"type": "string"})");
  ExpectExact(R"({"type": "integer"})", {1.0, 1.5, -0.0});
  ExpectExact(R"({"type": ["null", "boolean", "number"]})");
  ExpectExact(R"({"type": "array"})");
  ExpectExact(R"({})", {json::parse(R"({"a": [1, {"b": null}], "c": "d"})")});
  ExpectExact(R"(true)");
}

TEST(SchemaCompile, EnumAndConst) {
  ExpectExact(R"({"enum": ["a", "b", 1, null, {"x": [1, 2]}, [true]]})",
              {json::parse(R"({"x": [1, 2]})"), json::parse("[true]"), 1.0});
  ExpectExact(R"({"const": "hello world"})");
  ExpectExact(R"({"type": "string", "enum": ["a", 1, "abc"], "maxLength": 1})");
}

TEST(SchemaCompile, LargeEnumCompilesFast) {
  json values = json::array();
  for (int i = 0; i < 10000; ++i) values.push_back("value-" + std::to_string(i * 7919 % 100003));
  std::string text = json{{"enum", values}}.dump();
  auto t0 = std::chrono::steady_clock::now();
  auto g = Compiler().CompileSchema(text);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_LT(s, 20.0);  // generous: a guard against quadratic blow-ups, not a benchmark
  EXPECT_TRUE(Feed(*g, "\"value-7919\""));
  EXPECT_FALSE(Feed(*g, "\"value-7\""));
}

TEST(SchemaCompile, ObjectsRequiredOptionalAdditional) {
  ExpectExact(
      R"({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"},
                 "c": {"type": "boolean"}}, "required": ["b"], "additionalProperties": false})",
      {json::parse(R"({"b": "x"})"), json::parse(R"({"a": 1, "b": "x", "c": true})"),
       json::parse(R"({"a": 1, "c": true})"), json::parse(R"({})")});
  ExpectExact(
      R"({"properties": {"a": {"type": "integer"}}, "additionalProperties": {"type": "string"}})",
      {json::parse(R"({"a": 1, "z": "s"})"), json::parse(R"({"z": 1})")});
  ExpectExact(R"({"properties": {"a": {"const": 1}}})",
              {json::parse(R"({"a": 1, "b": 2})"), json::parse(R"({"b": 2})")});
  ExpectExact(R"({"required": ["x"], "properties": {"a": false}})",
              {json::parse(R"({"x": 1})"), json::parse(R"({"x": 1, "a": 1})")});
}

TEST(SchemaCompile, PropertyCounts) {
  ExpectExact(
      R"({"properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2, "maxProperties": 3})");
  ExpectExact(R"({"maxProperties": 1})");
  ExpectExact(
      R"({"minProperties": 1, "additionalProperties": false, "properties": {"a": {}, "b": {}}})");
}

// More optional members than one chain of choices takes (32): the choice of the next member
// is a tree of blocks of members, a required member ends a run of them, and counts
// (minProperties / maxProperties) and extra members go on as with a few members.
TEST(SchemaCompile, LongRunsOfOptionalMembers) {
  auto key = [](int k) {
    std::string name = "p";  // (not "p" + std::to_string(k): GCC 12 warns, -Wrestrict)
    name += std::to_string(k);
    return name;
  };
  json props = json::object();
  for (int i = 0; i < 70; ++i) {
    props[key(i)] =
        i % 2 ? json{{"type", "integer"}} : json{{"type", "string"}, {"maxLength", 3}};
  }
  auto obj = [&](std::initializer_list<int> keys) {
    json o = json::object();
    for (int k : keys) o[key(k)] = k % 2 ? json(k) : json("ab");
    return o;
  };
  json all = json::object();
  for (int i = 0; i < 70; ++i) all[key(i)] = i % 2 ? json(i) : json("x");
  const std::vector<json> instances = {
      json::object(), obj({0}), obj({69}), obj({36, 37}), obj({37}), obj({5, 64}),
      obj({5, 37, 64}), obj({33, 34, 37, 68}), obj({0, 31, 32, 63, 64}), all,
      json{{"p1", "x"}}, json{{"p37", 1}, {"q", 2}}, json{{"q", 2}, {"r", 3}}};
  for (const json& rest :
       {json{{"additionalProperties", false}}, json{{"maxProperties", 3}},
        json{{"minProperties", 2}, {"additionalProperties", {{"type", "integer"}}}}}) {
    for (const json& required : {json::array(), json{"p37"}, json{"p5", "p64"}}) {
      json schema = rest;
      schema["type"] = "object";
      schema["properties"] = props;
      schema["required"] = required;
      SCOPED_TRACE(rest.dump() + " required " + required.dump());
      ExpectExact(schema.dump(), instances);
    }
  }
}

TEST(SchemaCompile, PatternPropertiesAndPropertyNames) {
  ExpectExact(
      R"({"patternProperties": {"^x": {"type": "integer"}}, "additionalProperties": false})",
      {json::parse(R"({"x1": 1, "xa": 2})"), json::parse(R"({"y": 1})")});
  ExpectExact(R"({"patternProperties": {"^x": {"type": "integer"}}})",
              {json::parse(R"({"x1": 1, "y": "s"})"), json::parse(R"({"x1": "s"})")});
  ExpectExact(R"({"properties": {"xa": {"maximum": 5}}, "patternProperties": {"a$": {"minimum": 2}},
                 "additionalProperties": {"type": "string"}})",
              {json::parse(R"({"xa": 1})"), json::parse(R"({"xa": 3, "ba": 7, "c": "s"})"),
               json::parse(R"({"c": 1})")});
  ExpectExact(R"({"patternProperties": {"^x": {"type": "integer"}, "y$": {"minimum": 3}},
                 "additionalProperties": {"type": "string"}})",
              {json::parse(R"({"xy": 4, "y": 1, "z": "s"})"), json::parse(R"({"xy": 2})")});
  // patternProperties of two merged subschemas: per subschema, the patterns a key matches or
  // that subschema's additionalProperties ("ax": integer and number; "bx", "b1", "cx": string
  // and boolean or number, never; "zz": string of at most 3; "id": declared at the root, still
  // additional to both).
  ExpectExact(R"({"type": "object", "properties": {"id": {}}, "allOf": [
                   {"patternProperties": {"^a": {"type": "integer"}},
                    "additionalProperties": {"type": "string"}},
                   {"patternProperties": {"^b": {"type": "boolean"}, "x$": {"type": "number"}},
                    "additionalProperties": {"maxLength": 3}}]})",
              {json::object(), json::parse(R"({"id": "abc"})"), json::parse(R"({"id": "abcd"})"),
               json::parse(R"({"id": 1})"), json::parse(R"({"ab": 1})"),
               json::parse(R"({"ab": "s"})"), json::parse(R"({"ax": 2})"),
               json::parse(R"({"ax": 2.5})"), json::parse(R"({"bx": true})"),
               json::parse(R"({"b1": true})"), json::parse(R"({"b1": "s"})"),
               json::parse(R"({"zz": "abc"})"), json::parse(R"({"zz": "abcd"})"),
               json::parse(R"({"cx": 1})"), json::parse(R"({"ab": 1, "zz": "q", "id": "x"})")});
  // The same with a closed second subschema: only keys both accept ("a...x", integers).
  ExpectExact(R"({"allOf": [
                   {"patternProperties": {"^a": {"type": "integer"}},
                    "additionalProperties": {"type": "string"}},
                   {"patternProperties": {"x$": {"minimum": 0}}, "additionalProperties": false}]})",
              {json::parse(R"({"ax": 1})"), json::parse(R"({"ax": -1})"),
               json::parse(R"({"bx": "s"})"), json::parse(R"({"ab": 1})"),
               json::parse(R"({"ax": 1, "aax": 2})")});
  // propertyNames unions: lists of names and at most one class of strings (JSON Schema Store
  // ansible-lint: a oneOf of a name list and a pattern every listed name matches, so the keys
  // are the pattern's minus the list).
  ExpectExact(R"({"additionalProperties": {"type": "integer"},
                 "propertyNames": {"oneOf": [{"enum": ["ab", "c-d", "Up"]},
                                             {"type": "string", "pattern": "^[a-z-]+$"}]}})",
              {json::parse(R"({"ab": 1})"), json::parse(R"({"abc": 1})"),
               json::parse(R"({"Up": 2, "x": 3})"), json::parse(R"({"c-d": 1})"),
               json::parse(R"({"Q": 1})"), json::parse(R"({"zz": "s"})")});
  ExpectExact(R"({"properties": {"id": {"type": "string"}},
                 "propertyNames": {"anyOf": [{"const": "id"}, {"const": "n"},
                                             {"maxLength": 2, "pattern": "^x"}]}})",
              {json::parse(R"({"id": "a", "n": 1})"), json::parse(R"({"x1": 1, "xyz": 2})"),
               json::parse(R"({"x": 1})"), json::parse(R"({"y": 1})")});
  ExpectExact(R"({"propertyNames": {"anyOf": [{"enum": ["a", "bb"]}, {"const": "ccc"}]},
                 "allOf": [{"propertyNames": {"maxLength": 2}}]})",
              {json::parse(R"({"a": 1, "bb": 2})"), json::parse(R"({"ccc": 1})"),
               json::parse(R"({"d": 1})")});
  ExpectExact(R"({"propertyNames": {"maxLength": 1}})");
  ExpectExact(
      R"({"propertyNames": {"enum": ["a", "b"]}, "properties": {"a": {"type": "string"}}})");
}

TEST(SchemaCompile, Dependencies) {
  ExpectExact(R"({"dependentRequired": {"a": ["b"]}})",
              {json::parse(R"({"a": 1})"), json::parse(R"({"a": 1, "b": 2})")});
  ExpectExact(R"({"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}})",
              {json::parse(R"({"a": 1, "b": 2})"), json::parse(R"({"a": 1, "b": "s"})")});
  ExpectExact(R"({"$schema": "http://json-schema.org/draft-07/schema#",
                 "dependencies": {"a": ["b"], "x": {"required": ["name"]}}})");
}

TEST(SchemaCompile, Arrays) {
  ExpectExact(R"({"items": {"type": "integer"}, "minItems": 1, "maxItems": 3})");
  ExpectExact(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false})",
              {json::parse(R"(["a", 1])"), json::parse(R"(["a"])"), json::parse(R"(["a", 1, 2])")});
  ExpectExact(R"({"$schema": "http://json-schema.org/draft-07/schema#",
                 "items": [{"type": "string"}], "additionalItems": {"type": "boolean"}})");
  ExpectExact(R"({"contains": {"const": 1}, "minContains": 2, "maxContains": 3})",
              {json::parse("[1, 1]"), json::parse("[1, 2, 1, 1, 1]"), json::parse("[2, 1, 2, 1]")});
  ExpectExact(R"({"contains": {"type": "string"}, "minContains": 0, "maxContains": 1})");
  ExpectExact(R"({"items": {"enum": ["a", "b", "c"]}, "uniqueItems": true})",
              {json::parse(R"(["a", "b"])"), json::parse(R"(["a", "a"])")});
  ExpectExact(R"({"items": {"type": "boolean"}, "uniqueItems": true, "minItems": 1})");
  // String items: the parser's check at run time (automata/cfg/unique_items.h).
  ExpectExact(R"({"items": {"type": "string"}, "uniqueItems": true})",
              {json::parse(R"(["a", "b"])"), json::parse(R"(["a", "a"])"),
               json::parse(R"(["a", "b", "a"])"), json::parse(R"(["", ""])")});
  ExpectExact(R"({"type": "array", "items": {"type": "string", "minLength": 2}, "uniqueItems": true,
                 "minItems": 1, "maxItems": 3})",
              {json::parse(R"(["ab", "ab"])"), json::parse(R"(["ab", "cd", "ef", "gh"])")});
  ExpectExact(
      R"({"prefixItems": [{"type": "boolean"}, {"const": 1}], "items": {"enum": [1, true, "x"]},
                 "uniqueItems": true})",
      {json::parse(R"([true, 1, "x"])"), json::parse(R"([true, 1, true])"),
       json::parse(R"([false, 1, true, "x"])")});
}

TEST(SchemaCompile, StringsAndNumbers) {
  ExpectExact(R"({"type": "string", "minLength": 2, "maxLength": 5})");
  ExpectExact(R"({"type": "string", "pattern": "^[a-c]+$"})");
  ExpectExact(R"({"type": "integer", "minimum": -1, "exclusiveMaximum": 10, "multipleOf": 2})");
  ExpectExact(R"({"$schema": "http://json-schema.org/draft-07/schema#", "type": "number",
                 "minimum": 0, "maximum": 100})");
  ExpectExact(R"({"type": "string", "format": "date"})", {json("2024-02-30")}, true);
  ExpectExact(R"({"allOf": [{"multipleOf": 3}, {"multipleOf": 5}], "maximum": 100})",
              {json(15), json(30), json(9), json(10)});
  ExpectExact(R"({"allOf": [{"multipleOf": 0.5}, {"multipleOf": 0.3}], "maximum": 10})",
              {json(1.5), json(3), json(0.6), json(4.5)});
}

TEST(SchemaCompile, Combinators) {
  ExpectExact(R"({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer"}]})");
  ExpectExact(R"({"oneOf": [{"type": "integer"}, {"minimum": 2}]})", {json(1), json(2.5), json(3)});
  ExpectExact(
      R"({"oneOf": [{"properties": {"kind": {"const": "a"}, "x": {"type": "integer"}}, "required": ["kind"]},
                           {"properties": {"kind": {"const": "b"}, "y": {"type": "string"}}, "required": ["kind"]}]})",
      {json::parse(R"({"kind": "a", "x": 1})"), json::parse(R"({"kind": "b", "y": "s"})"),
       json::parse(R"({"kind": "b", "y": 1})")});
  ExpectExact(R"({"allOf": [{"type": ["integer", "string"]}, {"type": "integer", "minimum": 3},
                            {"maximum": 10}]})");
  ExpectExact(R"({"allOf": [{"properties": {"a": {"type": "integer"}}, "required": ["a"]},
                            {"properties": {"a": {"minimum": 0}, "b": {"type": "string"}}}]})",
              {json::parse(R"({"a": 1, "b": "s"})"), json::parse(R"({"a": -1})")});
  ExpectExact(R"({"not": {"type": "string"}})");
  ExpectExact(R"({"not": {"enum": [1, "a"]}})");
  ExpectExact(R"({"type": "object", "not": {"required": ["a"]}})");
  ExpectExact(R"({"if": {"properties": {"a": {"const": 1}}, "required": ["a"]},
                 "then": {"required": ["b"]}, "else": {"required": ["c"]}})",
              {json::parse(R"({"a": 1, "b": 1})"), json::parse(R"({"a": 2, "c": 1})")});
}

TEST(SchemaCompile, UnevaluatedNextToAllOfAndRef) {
  ExpectExact(R"({"$defs": {"base": {"properties": {"id": {"type": "integer"}}}},
                 "allOf": [{"$ref": "#/$defs/base"}, {"properties": {"name": {"type": "string"}}}],
                 "unevaluatedProperties": false})",
              {json::parse(R"({"id": 1, "name": "a"})"), json::parse(R"({"id": 1, "other": 2})")});
  ExpectExact(
      R"({"allOf": [{"prefixItems": [{"type": "integer"}]}], "unevaluatedItems": {"type": "string"}})",
      {json::parse(R"([1, "a", "b"])"), json::parse(R"([1, 2])")});
  ExpectExact(
      R"({"properties": {"a": {}}, "not": {"required": ["b"]}, "unevaluatedProperties": {"type": "integer"}})");
}

TEST(SchemaCompile, RefsAndRecursion) {
  ExpectExact(R"({"$defs": {"node": {"type": "object", "properties": {"value": {"type": "integer"},
                 "next": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/node"}]}}, "required": ["value"]}},
                 "$ref": "#/$defs/node"})",
              {json::parse(R"({"value": 1, "next": {"value": 2, "next": null}})"),
               json::parse(R"({"value": 1, "next": {"next": null}})")});
  ExpectExact(R"({"type": ["array", "integer"], "items": {"$ref": "#"}})",
              {json::parse("[1, [2, [3, []]]]"), json::parse("[1, [2, [\"x\"]]]")});
}

// Many `{"$ref": ...}` objects naming one definition (300 in a real audit-log schema, each
// with its own description) are one language with the definition: they compile into its rule
// once, not once per object, so a budget on the schema's expressions sees the definition once.
// The same schema stays exact.
TEST(SchemaCompile, RefsToOneDefinitionCompileOnce) {
  json props = json::object();
  for (int i = 0; i < 120; ++i) {
    std::string name = "f", description = "field ";
    name += std::to_string(i);
    description += std::to_string(i);
    props[name] = {{"$ref", "#/definitions/field"}, {"description", description}};
  }
  json records = json::object();
  for (int i = 0; i < 6; ++i) {
    std::string name = "r";
    name += std::to_string(i);
    records[name] = {{"allOf", json::array({{{"$ref", "#/definitions/generic"}},
                                                               {{"title", "record"}}})}};
  }
  json field = json::parse(R"({"type": "array", "items": {"type": "string", "maxLength": 8},
                              "minItems": 1, "maxItems": 2})");
  json schema = {{"definitions", {{"field", field},
                                  {"generic", {{"type", "object"}, {"properties", props},
                                               {"additionalProperties", false}}}}},
                 {"type", "object"},
                 {"properties", records}};
  auto s = Schema::Load(schema.dump());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // One copy of the field's and of the record's expressions fits this budget (under 4,000
  // expressions); a copy per property and per record (between 16,000 and 20,000) does not.
  SchemaCompileOptions so;
  so.max_exprs = 8000;
  auto g = CompileSchemaToGrammar(**s, so);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ExpectExact(schema.dump(),
              {json::parse(R"({"r0": {"f0": ["a"], "f119": ["b", "c"]}, "r5": {}})"),
               json::parse(R"({"r1": {"f3": []}})"), json::parse(R"({"r2": {"f3": ["a", 1]}})"),
               json::parse(R"({"r2": {"f120": ["a"]}})")});
}

TEST(SchemaCompile, BooleanFalseIsUnsatisfiable) {
  auto s = Schema::Load("false");
  ASSERT_TRUE(s.ok());
  auto g = CompileSchemaToGrammar(**s);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsatisfiable);
}

// ---- errors ----

Status CompileError(const std::string& text, SchemaCompileOptions so = {}) {
  auto s = Schema::Load(text);
  if (!s.ok()) return s.status();
  auto g = CompileSchemaToGrammar(**s, so);
  return g.ok() ? Status::Ok() : g.status();
}

TEST(SchemaCompileErrors, UnsupportedKeywordsNameTheirPointer) {
  const std::pair<const char*, const char*> kCases[] = {
      {R"({"properties": {"tags": {"type": "array", "items": {"type": "number", "maximum": 10},
                                   "uniqueItems": true}}})",
       "/properties/tags/uniqueItems"},
      {R"({"not": {"type": "array", "uniqueItems": true}})", "/not/uniqueItems"},
      // (format: regex is checked at run time, alone: not beside maxLength.)
      {R"({"$defs": {"s": {"type": "string", "format": "regex", "maxLength": 4}},
           "$ref": "#/$defs/s"})",
       "/$defs/s/format"},
      {R"({"allOf": [{"type": "string", "maxLength": 3}, {"format": "regex"}]})",
       "/allOf/1/format"},
      {R"({"unevaluatedProperties": false, "anyOf": [{"properties": {"a": {}}}]})",
       "/unevaluatedProperties"},
      // The compiler's own keywords, written in a schema (a node reference out of range).
      {R"({"properties": {"a": {"$ls:node": [99]}, "$ls:node": {}}})", "/properties/a/$ls:node"},
      // A union of two classes of names.
      {R"({"propertyNames": {"anyOf": [{"pattern": "^a"}, {"maxLength": 1}]}})",
       "/propertyNames"},
  };
  for (const auto& [text, where] : kCases) {
    Status st = CompileError(text);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << text << ": " << st.ToString();
    EXPECT_EQ(st.location(), where) << text << ": " << st.ToString();
  }
  // Seven patterns that any key can match together: 2^7 key classes, past the budget of 64.
  Status st = CompileError(
      R"({"patternProperties": {"a": {}, "b": {}, "c": {}, "d": {}, "e": {}, "f": {},
                                "g": {"type": "string"}}})");
  EXPECT_EQ(st.code(), StatusCode::kResourceLimit) << st.ToString();
  EXPECT_EQ(st.location(), "/patternProperties") << st.ToString();
  EXPECT_NE(st.message().find("more than 64 key classes"), std::string::npos) << st.ToString();
}

// Patterns under not / oneOf / if (the complement of a pattern's search automaton) and several
// patterns on one string (their intersection): exact against the validator.
TEST(SchemaCompile, NegatedAndIntersectedPatterns) {
  const std::vector<json> strings = {json(""),      json("a"),     json("abc"),  json("b"),
                                     json("cab"),   json("admin"), json("x1"),   json("aXc"),
                                     json("ac"),    json(12),      json(nullptr), json("ba")};
  for (const char* schema : {
           R"({"not": {"pattern": "^a"}})",
           R"({"type": "string", "not": {"pattern": "b"}})",
           R"({"allOf": [{"pattern": "^a"}, {"pattern": "c$"}]})",
           R"({"allOf": [{"pattern": "^a"}, {"pattern": "c$"}, {"pattern": "[A-Z]"}]})",
           R"({"type": "string", "pattern": "^[a-z]+$", "not": {"pattern": "^admin$"}})",
           R"({"oneOf": [{"type": "string", "pattern": "a"}, {"type": "string", "pattern": "b"}]})",
           R"({"if": {"pattern": "^a"}, "then": {"maxLength": 2}, "else": {"minLength": 2}})",
           R"({"not": {"not": {"pattern": "a"}}})",
           R"({"type": "object", "properties": {"k": {"not": {"pattern": "^x"}}}})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, strings);
  }
  // Formats likewise (as assertions): the complement of a format's automaton, and two formats.
  const std::vector<json> values = {
      json("2024-02-29"), json("2023-02-29"), json("12:30:00Z"), json("a@b.co"), json("b.co"),
      json("192.168.0.1"), json("::1"),       json("x"),         json(""),       json(7)};
  for (const char* schema : {
           R"({"not": {"format": "date"}})",
           R"({"type": "string", "not": {"format": "ipv4"}})",
           R"({"oneOf": [{"type": "string", "format": "ipv4"}, {"type": "string", "format": "ipv6"}]})",
           R"({"allOf": [{"format": "hostname"}, {"format": "ipv4"}]})",
           R"({"if": {"format": "date"}, "then": {"pattern": "^2024"}})",
           R"({"type": "string", "not": {"anyOf": [{"format": "date"}, {"pattern": "^a"}]}})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, values, /*format_assertion=*/true);
  }
}

// additionalProperties, patternProperties and propertyNames under not / oneOf / if: "some member
// breaks it" is a member list with at least one witness member (issue 22). Exact against the
// validator, alone, next to the object's own keywords, with counts, two requirements at once,
// and negated twice.
TEST(SchemaCompile, NegatedMemberClasses) {
  const std::vector<json> objects = {
      json::parse("{}"),
      json::parse(R"({"a": 1})"),
      json::parse(R"({"a": "s"})"),
      json::parse(R"({"b": 1})"),
      json::parse(R"({"b": "s"})"),
      json::parse(R"({"a": 1, "b": 2})"),
      json::parse(R"({"a": 1, "b": "s"})"),
      json::parse(R"({"x1": 1})"),
      json::parse(R"({"x1": "s"})"),
      json::parse(R"({"a": 2, "x1": "s", "long": null})"),
      json::parse(R"({"long": 1})"),
      json::parse(R"({"ab": true, "b": [1]})"),
      json::parse(R"({"\u00e9": 1})"),
      json::parse(R"({"\u00e9\u00e9\u00e9": "s", "a": 1})"),
      json("not an object"),
      json(3),
  };
  for (const char* schema : {
           R"({"not": {"additionalProperties": false}})",
           R"({"type": "object", "not": {"additionalProperties": {"type": "integer"}}})",
           R"({"properties": {"a": {"type": "integer"}},
               "not": {"properties": {"a": {}}, "additionalProperties": {"type": "string"}}})",
           R"({"not": {"patternProperties": {"^x": {"type": "integer"}},
                       "additionalProperties": false}})",
           R"({"oneOf": [
                 {"properties": {"a": {"type": "integer"}}, "required": ["a"],
                  "additionalProperties": false},
                 {"properties": {"b": {}}, "required": ["b"], "additionalProperties": false}]})",
           R"({"oneOf": [{"additionalProperties": {"type": "integer"}},
                         {"additionalProperties": {"type": "string"}}]})",
           R"({"not": {"patternProperties": {"^x": {"type": "integer"}, "b": {"type": "string"}}}})",
           R"({"type": "object", "not": {"propertyNames": {"maxLength": 1}}})",
           R"({"not": {"propertyNames": {"pattern": "^[a-z]+$", "maxLength": 2}}})",
           R"({"not": {"not": {"additionalProperties": {"type": "integer"}}}})",
           R"({"not": {"not": {"propertyNames": {"maxLength": 1}}}})",
           R"({"allOf": [{"not": {"additionalProperties": {"type": "integer"}}},
                         {"not": {"patternProperties": {"^x": {"type": "integer"}}}}]})",
           R"({"maxProperties": 1, "properties": {"a": {"type": "integer"}},
               "not": {"additionalProperties": {"type": "integer"}}})",
           R"({"minProperties": 2, "additionalProperties": {"type": ["integer", "string"]},
               "not": {"properties": {"b": {}}, "additionalProperties": {"type": "integer"}}})",
           R"({"if": {"additionalProperties": {"type": "integer"}},
               "then": {"required": ["a"]}, "else": {"maxProperties": 1}})",
           R"({"patternProperties": {"^x": {"type": "string"}},
               "not": {"additionalProperties": {"type": "integer"}}})",
           // The key classes of patternProperties under propertyNames' lengths and negated
           // patterns (their key automata now hold both).
           R"({"propertyNames": {"maxLength": 2}, "patternProperties": {"^x": {"type": "integer"}}})",
           R"({"propertyNames": {"not": {"pattern": "^a"}},
               "patternProperties": {"^x": {"type": "integer"}}})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, objects);
  }
}

// Several contains keywords on one array (typically contains next to a negated items, from
// not / oneOf), contains next to prefixItems, minItems or maxItems, and contains with
// minContains / maxContains under not: item classes with counters (issue 22). Exact against
// the validator.
TEST(SchemaCompile, ContainsPairsAndCounts) {
  std::vector<json> arrays = {json::array(), json("not an array"), json(1)};
  for (const char* a : {"[1]", "[\"s\"]", "[null]", "[1, \"s\"]", "[\"s\", 1]", "[2, 2]",
                        "[1, 2, 3]", "[\"a\", \"b\", 3]", "[1, null, \"x\", 4]",
                        "[true, 1, 1, 1, \"s\"]", "[\"s\", \"t\", \"u\"]", "[0.5, \"s\"]",
                        "[[1], {\"a\": 1}, 7, \"x\", null, 3, 4]"}) {
    arrays.push_back(json::parse(a));
  }
  for (const char* schema : {
           // Two contains: "a number and a string somewhere".
           R"({"allOf": [{"contains": {"type": "number"}}, {"contains": {"type": "string"}}]})",
           // oneOf over item types: each branch is "items: T and some item is not T'".
           R"({"type": "array", "oneOf": [{"items": {"type": "number"}},
                                         {"items": {"type": "string"}}]})",
           R"({"oneOf": [{"type": "array", "items": {"type": "number"}},
                         {"type": "array", "items": {"type": "string"}},
                         {"type": "array", "items": {"type": "null"}}]})",
           // contains and not contains.
           R"({"contains": {"type": "string"}, "not": {"contains": {"type": "null"}}})",
           R"({"items": {"type": ["integer", "string"]}, "contains": {"type": "integer"},
               "not": {"contains": {"const": "x"}}})",
           // With minItems, maxItems and prefixItems.
           R"({"contains": {"type": "string"}, "maxItems": 3})",
           R"({"contains": {"type": "string"}, "minItems": 3})",
           R"({"prefixItems": [{"type": "integer"}], "contains": {"type": "string"}})",
           R"({"prefixItems": [{"type": "string"}, {"type": "integer"}],
               "contains": {"type": "integer"}, "minContains": 2, "maxItems": 4})",
           // Counts, and counts negated.
           R"({"contains": {"type": "integer"}, "minContains": 2, "maxContains": 3,
               "allOf": [{"contains": {"type": "string"}}]})",
           R"({"not": {"contains": {"type": "integer"}, "minContains": 2}})",
           R"({"not": {"contains": {"type": "integer"}, "maxContains": 1}})",
           R"({"type": "array", "not": {"contains": {"type": "integer"}, "minContains": 2,
                                        "maxContains": 3}})",
           R"({"anyOf": [{"type": "string"},
                         {"not": {"contains": {"type": "integer"}, "minContains": 0}}]})",
           R"({"allOf": [{"contains": {"type": "integer"}}, {"contains": {"type": "string"}},
                         {"contains": {"type": "null"}}]})",
           // Unsatisfiable counts.
           R"({"anyOf": [{"type": "string"},
                         {"contains": {"type": "integer"}, "minContains": 3, "maxItems": 2}]})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, arrays);
  }
}

// multipleOf under not / oneOf / if: the numbers (same bounds, same texts) minus the multiples,
// as automata run in parallel. Exact against the validator, integers and decimals.
TEST(SchemaCompile, NegatedMultipleOf) {
  const std::vector<json> numbers = {json(0),    json(3),   json(4),    json(6),     json(-9),
                                     json(10),   json(12),  json(2.5),  json(0.75),  json(7.5),
                                     json(1.0),  json(-0.5), json(1024), json(2048),  json(3000),
                                     json("s"),  json(nullptr)};
  for (const char* schema : {
           R"({"not": {"multipleOf": 3}})",
           R"({"type": "integer", "not": {"multipleOf": 3}})",
           R"({"type": "integer", "minimum": 0, "maximum": 20, "not": {"multipleOf": 4}})",
           R"({"multipleOf": 2, "not": {"multipleOf": 4}})",
           R"({"type": "number", "not": {"multipleOf": 0.5}})",
           R"({"multipleOf": 0.25, "not": {"multipleOf": 0.5}, "maximum": 10})",
           R"({"not": {"anyOf": [{"multipleOf": 2}, {"multipleOf": 3}]}})",
           R"({"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]})",
           R"({"type": "integer", "if": {"multipleOf": 1024}, "then": {"minimum": 2048},
               "else": {"maximum": 100}})",
           R"({"not": {"not": {"multipleOf": 3}}})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, numbers);
  }
}

// Patterns opening with lookaheads ("^(?=A)(?!B)R": the intersection of the parts' searches,
// the negated ones complemented), as pattern, under not, as patternProperties keys (and so in
// the negated patterns of additionalProperties' keys). Exact against the validator.
TEST(SchemaCompile, LeadingLookaheadPatterns) {
  const std::vector<json> values = {json("@@x"), json("@x"),   json("a@@"),   json(""),
                                    json("a=b"), json("   "), json("ab c"), json("if"),
                                    json("iff"), json("_x"),  json("1a"),   json("a1"),
                                    json("{A}.txt"), json("b.txt"), json(3)};
  for (const char* schema : {
           R"j({"type": "string", "pattern": "^(?!@@)[\\w@]+$"})j",
           R"j({"pattern": "^(?=[^=]+$)(?!\\s+$)(.|\\n)+$"})j",
           R"j({"type": "string", "pattern": "^(?!(if|for)$)[a-zA-Z_]\\w*$"})j",
           R"j({"type": "string", "pattern": "^(?!.*(\\{A\\}|[<>])).*\\.txt$"})j",
           R"j({"type": "string", "pattern": "^(?=.*[0-9])(?=.*[a-z])"})j",
           R"j({"type": "string", "not": {"pattern": "^(?!@@)[\\w@]+$"}})j",
           R"j({"type": "string", "pattern": "^(?!a)", "not": {"pattern": "^(?=.*x)"}})j",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, values);
  }
  const std::vector<json> objects = {
      json::parse(R"j({"@@x": 1})j"), json::parse(R"j({"ab": 1, "if": "s"})j"),
      json::parse(R"j({"iff": 2})j"), json::parse(R"j({"if": 2})j"), json::parse("{}"),
      json::parse(R"j({"1a": null})j")};
  for (const char* schema : {
           R"j({"patternProperties": {"^(?!(if|for)$)[a-z]+$": {"type": "integer"}},
               "additionalProperties": false})j",
           R"j({"patternProperties": {"^(?!@@)": {"type": "integer"}},
               "additionalProperties": {"type": "string"}})j",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, objects);
  }
}

// A pattern of many alternatives searched for (unanchored, as `pattern` is a search): one
// automaton `[\s\S]*(A|B|...)[\s\S]*`, not the union of one search per alternative, whose
// subset construction tracked which alternatives had matched (30 game names of a real schema:
// past max_subset_elements). Alternatives with anchors keep their own groups; all exact against
// the validator, as a string and as patternProperties.
TEST(SchemaCompile, PatternOfManyAlternatives) {
  const std::string names =
      "Red|Blue|Yellow|Gold|Silver|Crystal|Ruby|Sapphire|Emerald|FireRed|LeafGreen|Diamond|Pearl|"
      "Platinum|HeartGold|SoulSilver|Black|White|Black 2|White 2|X|Y|Omega Ruby|Alpha Sapphire|"
      "Sun|Moon|Ultra Sun|Ultra Moon|Let's Go Pikachu|Let's Go Eevee";
  std::vector<json> strings;
  for (const char* v : {"Red", "my Red one", "red", "", "Let's Go Eevee!", "Let's Go", "xX",
                        "Sunny", "Mon", "Ultra", "é Moon é", "ab", "ba", "c", "dd", "zc"})
    strings.push_back(json(v));
  ExpectExact(json{{"type", "string"}, {"pattern", names}}.dump(), strings);
  ExpectExact(json{{"type", "string"}, {"pattern", "^a|b$|c|^dd$|" + names}}.dump(), strings);
  std::vector<json> objects = {json::object()};
  for (const json& v : strings) objects.push_back(json{{v.get<std::string>(), "v"}});
  objects.push_back(json{{"Gold", 1}});
  ExpectExact(json{{"type", "object"},
                   {"patternProperties", json{{names, json{{"type", "string"}}}}},
                   {"additionalProperties", false}}
                  .dump(),
              objects);
}

// Many patternProperties: only the sets of patterns some key matches together are classes
// (anchored patterns with distinct prefixes: n + 1 of them), so 10 patterns compile; exact
// against the validator, with overlapping patterns among them and additionalProperties.
TEST(SchemaCompile, ManyPatternProperties) {
  const std::vector<json> objects = {
      json::object(),
      json::parse(R"({"name:en": "x", "name:nl": "y"})"),
      json::parse(R"({"name:fr": "x"})"),
      json::parse(R"({"title:en": 1})"),
      json::parse(R"({"acs:3:Binding": "b", "acs:33:Binding": "b"})"),
      json::parse(R"({"x-a": true, "x-ab": 1})"),
      json::parse(R"({"x-b": 2, "y": null})"),
      json::parse(R"({"k0": 1, "k9": "s"})"),
      json::parse(R"({"other": 1})"),
  };
  for (const char* schema : {
           R"({"patternProperties": {
                 "^name:(en|nl)$": {"type": "string"}, "^title:(en|nl)$": {"type": "string"},
                 "^desc:(en|nl)$": {"type": "string"}, "^acs:[0-9]:Binding$": {"enum": ["b"]},
                 "^k0$": {"type": "integer"}, "^k1$": {}, "^k2$": {}, "^k3$": {}, "^k4$": {},
                 "^k9$": {"type": "integer"}},
               "additionalProperties": false})",
           R"({"patternProperties": {
                 "^x-": {"type": ["integer", "boolean"]}, "a": {"type": "boolean"},
                 "b$": {"type": "integer"}, "^k": {"type": "integer"}, "^name": {"type": "string"},
                 "^title": {}, "^acs:": {}},
               "additionalProperties": {"type": "null"}})",
       }) {
    SCOPED_TRACE(schema);
    ExpectExact(schema, objects);
  }
}

// oneOf branches told apart by a property that the oneOf's own node requires (GeoJSON's
// "type"): disjoint there, so the oneOf is an anyOf, with no negated branches and no bound on
// their number. Exact against the validator, 14 branches (over the 12 allowed to overlap).
TEST(SchemaCompile, OneOfDisjointByTheParentsRequiredProperty) {
  json branches = json::array();
  for (int i = 0; i < 14; ++i) {
    // (std::string::append, not operator+ on a literal: g++ 12 warns falsely about that one.)
    std::string k = std::string("k").append(std::to_string(i));
    std::string v = std::string("v").append(std::to_string(i));
    std::string req = std::string("v").append(std::to_string(i % 3));
    branches.push_back(json{{"properties", json{{"kind", json{{"const", k}}},
                                                {v, json{{"type", "integer"}}}}},
                            {"required", json::array({req})}});
  }
  json schema = {{"type", "object"}, {"required", json::array({"kind"})}, {"oneOf", branches}};
  std::vector<json> objects = {json::object(), json::parse(R"({"kind": "k0", "v0": 1})"),
                               json::parse(R"({"kind": "k1", "v1": 1})"),
                               json::parse(R"({"kind": "k3", "v0": 1, "v3": "s"})"),
                               json::parse(R"({"kind": "k13", "v1": 2, "v13": 3})"),
                               json::parse(R"({"kind": "k14", "v0": 1})"),
                               json::parse(R"({"v0": 1})"), json("k0")};
  ExpectExact(schema.dump(), objects);
  // Without the parent's `required` the branches overlap (an object with no "kind" satisfies
  // every branch that asks for its v): still exact, through negated branches (12 at most).
  json overlapping = {{"type", "object"}, {"oneOf", json(std::vector<json>(branches.begin(),
                                                                          branches.begin() + 4))}};
  ExpectExact(overlapping.dump(), objects);
}

// A oneOf whose branches overlap only in pairs (a real shape: one "invalid" branch that does not
// require the discriminating key, and two branches per protocol that differ by other required
// keys): each branch negates only the branches it may overlap, so 14 branches compile, exactly.
// A property that one side requires and the other only bounds when present tells them apart, also
// through a $ref. The overlapping pairs stay exact: an instance of both is refused.
// Branches told apart by a property one requires and the other forbids (closed objects, the
// JSON Schema Store conjure shape): disjoint, so no branch is negated, and a keyword that has no
// negation (uniqueItems) may stand in one of them.
TEST(SchemaCompile, OneOfDisjointByARequiredPropertyTheOtherForbids) {
  const std::string schema = R"({"oneOf": [
      {"type": "object", "additionalProperties": false, "required": ["alias"],
       "properties": {"alias": {"type": "string"}, "docs": {"type": "string"}}},
      {"type": "object", "additionalProperties": false, "required": ["values"],
       "properties": {"values": {"type": "array", "items": {"type": "string"},
                                 "uniqueItems": true},
                      "docs": {"type": "string"}}},
      {"type": "object", "required": ["kind"], "properties": {"alias": false}}]})";
  std::vector<json> instances;
  for (const char* text : {R"({"alias": "a"})", R"({"alias": "a", "docs": "d"})",
                           R"({"values": ["a", "b"]})", R"({"values": ["a", "a"]})",
                           R"({"values": [], "alias": "a"})", R"({"kind": 1, "values": ["x"]})",
                           R"({"kind": 1, "alias": "x"})", R"({"kind": 1})", R"({"docs": "d"})"}) {
    instances.push_back(json::parse(text));
  }
  ExpectExact(schema, instances);
}

TEST(SchemaCompile, OneOfNegatesOnlyTheBranchesItMayOverlap) {
  json branches = json::array();
  branches.push_back(json::parse(R"({"properties": {"protocol": {"$ref": "#/$defs/invalid"}}})"));
  for (int i = 1; i < 14; ++i) {
    const int p = i <= 2 ? 1 : i;  // branches 1 and 2 share their protocol
    branches.push_back(json{
        {"properties", json{{"protocol", json{{"enum", json::array({std::string("p").append(std::to_string(p))})}}},
                            {"n", json{{"type", "integer"}}}}},
        {"required", json::array({"protocol", i == 2 ? "b" : "a"})}});
  }
  json schema = {{"type", "object"},
                 {"$defs", json{{"invalid", json{{"const", "invalid"}}}}},
                 {"oneOf", branches}};
  std::vector<json> objects = {
      json::object(),
      json::parse(R"({"protocol": "invalid", "n": 1})"),
      json::parse(R"({"protocol": "p1", "a": 1})"),
      json::parse(R"({"protocol": "p1", "b": 1})"),
      json::parse(R"({"protocol": "p1", "a": 1, "b": 2})"),  // branches 1 and 2: invalid
      json::parse(R"({"protocol": "p7", "a": true, "n": 3})"),
      json::parse(R"({"protocol": "p7", "a": true, "n": 3.5})"),
      json::parse(R"({"protocol": "p7"})"),
      json::parse(R"({"protocol": "p13", "a": null, "b": 1})"),
      json::parse(R"({"protocol": "p14", "a": 1})")};
  ExpectExact(schema.dump(), objects);
  // Every branch overlapping every other (no protocol required): more than 11 to negate is a
  // resource limit naming the budget.
  for (json& b : branches) b["required"] = json::array({"a"});
  schema["oneOf"] = branches;
  auto loaded = Schema::Load(schema.dump());
  ASSERT_TRUE(loaded.ok());
  auto g = CompileSchemaToGrammar(**loaded, SchemaCompileOptions{});
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit);
  EXPECT_EQ(g.status().location(), "/oneOf");
  EXPECT_NE(g.status().message().find("may overlap 13 others"), std::string::npos)
      << g.status().ToString();
  EXPECT_NE(g.status().message().find("max_oneof_overlaps (11"), std::string::npos)
      << g.status().ToString();
}

// A oneOf whose branches hold the oneOf again through a property that only one branch requires:
// telling the branches apart must not expand that property (it would rewrite the same oneOf
// again, without end; a real SchemaStore schema crashed that way).
TEST(SchemaCompile, OneOfOverARecursiveProperty) {
  const std::string text = R"({"$defs": {"n": {"oneOf": [
      {"type": "object", "properties": {"kind": {"const": "a"}, "child": {"$ref": "#/$defs/n"}},
       "required": ["child"], "additionalProperties": false},
      {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"],
       "additionalProperties": false}]}},
      "$ref": "#/$defs/n"})";
  ExpectExact(text, {json::parse(R"({"kind": "b"})"), json::parse(R"({"child": {"kind": "b"}})"),
                     json::parse(R"({"kind": "a", "child": {"kind": "b"}})"),
                     json::parse(R"({"kind": "b", "child": {"kind": "b"}})"),
                     json::parse(R"({"child": {"child": {"kind": "b"}}})")});
}

// Draft 2020-12: a format the validator does not know is an annotation. The compiler accepts
// what the validator accepts and says so in a warning at the keyword's pointer, in strict mode
// too; under `not` it asserts nothing, so it negates to nothing.
TEST(SchemaCompileFormats, UnknownFormatsAreAnnotationsWithAWarning) {
  const std::string text = R"({"type": "object", "properties": {
      "v": {"type": "string", "format": "semver"}, "n": {"type": "integer", "format": "int32"}},
      "required": ["v"]})";
  auto s = Schema::Load(text);
  ASSERT_TRUE(s.ok());
  auto g = CompileSchemaToGrammar(**s, SchemaCompileOptions{});
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::map<std::string, std::string> warned;
  for (const auto& r : g->relaxed) warned[r.pointer] = r.message;
  EXPECT_EQ(warned.size(), 2u);
  EXPECT_NE(warned["/properties/v/format"].find("\"semver\" is unknown"), std::string::npos);
  EXPECT_NE(warned["/properties/n/format"].find("--openapi-formats"), std::string::npos);
  auto compiled = CompileGrammarIr(Compiler(), g->grammar);
  ASSERT_TRUE(compiled.ok());
  // (Members in key order: no declared order is given here.)
  EXPECT_TRUE(Feed(*compiled, R"({"n":99999999999,"v":"not a version at all"})"));
  ExpectExact(text, {json::parse(R"({"v": "1.2.3", "n": 5000000000})"), json::parse(R"({"n": 1})")},
              /*format_assertion=*/true);
  // The negation of an annotation: {"not": {"type": "string", "format": "semver"}} is "not a
  // string", whatever the format says.
  ExpectExact(R"({"not": {"type": "string", "format": "semver"}})",
              {json("1.2.3"), json(1), json(nullptr)}, /*format_assertion=*/true);
  // A format the validator asserts but the compiler cannot enforce there stays an error (strict
  // mode): `regex` is checked at run time, but not beside maxLength.
  Status st = CompileError(R"({"type": "string", "format": "regex", "maxLength": 5})");
  EXPECT_EQ(st.code(), StatusCode::kUnsupported) << st.ToString();
  EXPECT_EQ(st.location(), "/format");
}

// --openapi-formats: int32 / int64 are integer ranges, byte is base64 with padding; the verdicts
// below are OpenAPI's (written by hand), and the compiled grammar agrees with the validator.
TEST(SchemaCompileFormats, OpenApiFormatsAgreeWithTheValidator) {
  struct Case {
    const char* schema;
    std::vector<std::pair<json, bool>> instances;
  };
  const Case kCases[] = {
      {R"({"type": "integer", "format": "int32"})",
       {{json(0), true},
        {json(2147483647), true},
        {json(-2147483648LL), true},
        {json(2147483648LL), false},
        {json(-2147483649LL), false},
        {json(7.0), true},
        {json(7.5), false}}},
      {R"({"format": "int64"})",
       {{json(std::numeric_limits<std::int64_t>::max()), true},
        {json(std::numeric_limits<std::int64_t>::min()), true},
        {json(9223372036854775808ULL), false},
        {json(1e19), false},
        {json(-0.5), false},
        {json("not a number"), true}}},
      {R"({"type": "number", "format": "int32", "minimum": -5, "maximum": 3000000000})",
       {{json(-5), true}, {json(-6), false}, {json(2147483647), true}, {json(2147483648LL), false}}},
      {R"({"type": "string", "format": "byte"})",
       {{json(""), true},
        {json("QQ=="), true},
        {json("QUI="), true},
        {json("QUJD"), true},
        {json("aGVsbG8gd29ybGQ="), true},
        {json("QQ="), false},
        {json("QUJ"), false},
        {json("Q==="), false},
        {json("QU JD"), false},
        {json("QUJD\n"), false}}},
      {R"({"type": "string", "format": "password"})", {{json("anything at all"), true}}},
      {R"({"type": "number", "format": "double"})", {{json(1e300), true}, {json(-0.25), true}}},
  };
  for (const Case& c : kCases) {
    auto schema = Schema::Load(c.schema);
    ASSERT_TRUE(schema.ok());
    ValidateOptions vo;
    vo.openapi_formats = true;
    auto validator = Validator::Create(*schema, vo);
    ASSERT_TRUE(validator.ok());
    std::vector<json> instances;
    for (const auto& [inst, valid] : c.instances) {
      auto v = validator->Validate(inst);
      ASSERT_TRUE(v.ok());
      EXPECT_EQ(*v, valid) << c.schema << " on " << inst.dump();
      instances.push_back(inst);
    }
    Outcome o = Compare(c.schema, instances, 150, /*format_assertion=*/true,
                        /*openapi_formats=*/true);
    EXPECT_EQ(o.over, 0) << c.schema;
    EXPECT_EQ(o.under, 0) << c.schema;
  }
  // Without the option they are unknown formats: nothing is checked.
  auto schema = Schema::Load(R"({"format": "int32"})");
  auto validator = Validator::Create(*schema, ValidateOptions{});
  EXPECT_TRUE(*validator->Validate(json(1e12)));
}

TEST(SchemaCompileErrors, LenientRelaxesAndReportsEachKeyword) {
  auto s = Schema::Load(
      R"({"properties": {"tags": {"type": "array", "items": {"type": "number", "maximum": 10},
                                  "uniqueItems": true},
          "id": {"type": "string", "format": "regex", "maxLength": 8}}})");
  ASSERT_TRUE(s.ok());
  SchemaCompileOptions so;
  so.lenient = true;
  auto g = CompileSchemaToGrammar(**s, so);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::set<std::string> where;
  for (const auto& r : g->relaxed) where.insert(r.pointer);
  EXPECT_TRUE(where.count("/properties/tags/uniqueItems"));
  EXPECT_TRUE(where.count("/properties/id/format"));
  auto compiled = CompileGrammarIr(Compiler(), g->grammar);
  ASSERT_TRUE(compiled.ok());
  EXPECT_TRUE(Feed(*compiled, R"({"id":"x","tags":[1.5,1.5]})"));
}

TEST(SchemaCompileErrors, OneOfNotProvablyDisjointLenientIsAnyOf) {
  const char* text = R"({"oneOf": [{"type": "array", "maxItems": 2},
                                    {"items": {"enum": [1, 2, 3]}, "uniqueItems": true}]})";
  Status st = CompileError(text);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.location(), "/oneOf/1/uniqueItems");  // branch 0 needs "not branch 1"
  SchemaCompileOptions so;
  so.lenient = true;
  auto s = Schema::Load(text);
  auto g = CompileSchemaToGrammar(**s, so);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_FALSE(g->relaxed.empty());
}

TEST(SchemaCompileErrors, BudgetIsAResourceLimit) {
  SchemaCompileOptions so;
  so.max_exprs = 50;
  Status st = CompileError(
      R"({"properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"items": {}}}})",
      so);
  EXPECT_EQ(st.code(), StatusCode::kResourceLimit) << st.ToString();
}

TEST(SchemaCompileErrors, DeepNestingIsAResourceLimitNotACrash) {
  std::string text = "{\"type\": \"integer\"}";
  for (int i = 0; i < 400; ++i) text = "{\"properties\": {\"a\": " + text + "}}";
  Status st = CompileError(text);
  EXPECT_EQ(st.code(), StatusCode::kResourceLimit) << st.ToString();
}

TEST(SchemaCompileErrors, LongRefChainsAndCyclesCompile) {
  json defs = json::object();
  for (int i = 0; i < 2000; ++i) {
    std::string target = "#/$defs/d";
    target += std::to_string(i + 1);
    std::string name = "d";
    name += std::to_string(i);
    defs[name] = {{"$ref", target}};
  }
  defs["d2000"] = {{"type", "integer"}};
  json root = {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
  auto g = Compiler().CompileSchema(root.dump());
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Feed(*g, "12"));
  EXPECT_FALSE(Feed(*g, "\"a\""));
}

// Counts past max_repeat (100,000 by default, a budget on repetitions written in grammar and
// regex text) are native counters in a schema: maxLength 150,000 and maxItems 1,000,000 compile
// and hold exactly.
TEST(SchemaCompileErrors, LargeCountsAreCountersNotRepeatBudgets) {
  auto g = Compiler().CompileSchema(R"({"type": "object", "properties": {
      "a": {"type": "array", "items": {"type": "integer"}, "maxItems": 1000000},
      "s": {"type": "string", "maxLength": 150000}}})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  std::string body;
  for (int i = 0; i < 50000; ++i) body += "ab ";
  EXPECT_TRUE(Feed(*g, "{\"s\":\"" + body + "\"}"));
  EXPECT_FALSE(Feed(*g, "{\"s\":\"" + body + "c\"}"));
  EXPECT_TRUE(Feed(*g, R"({"a":[1,2,3],"s":""})"));
}

TEST(SchemaCompileErrors, PublicEntryKeepsThePointer) {
  auto g = Compiler().CompileSchema(
      R"({"properties": {"a": {"not": {"type": "array", "uniqueItems": true}}}})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(g.status().location(), "/properties/a/not/uniqueItems");
  auto bad = Compiler().CompileSchema(R"({"type": "nope"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidSchema);
  EXPECT_EQ(bad.status().location(), "/type");
}

TEST(SchemaCompileErrors, BadPatternNamesItsPointerAndOffset) {
  auto g = Compiler().CompileSchema(R"({"properties": {"a": {"type": "string", "pattern": "^[a-z"}}})");
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kInvalidRegex);
  EXPECT_EQ(g.status().location(), "/properties/a/pattern");
  EXPECT_NE(g.status().message().find("offset"), std::string::npos) << g.status().ToString();
}

// ---- formatting policy ----

TEST(SchemaCompileFormat, WhitespaceIsBoundedAndCompactHasNone) {
  const char* text = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  auto flexible = Compiler().CompileSchema(text);
  ASSERT_TRUE(flexible.ok());
  EXPECT_TRUE(Feed(*flexible, " {\n  \"a\" : 1\n}\n"));
  EXPECT_TRUE(Feed(*flexible, std::string(1, '{').append(32, ' ').append(1, '}')));
  EXPECT_FALSE(Feed(*flexible, std::string(1, '{').append(33, ' ').append(1, '}')));
  CompileOptions co;
  co.schema_whitespace_compact = true;
  auto compact = Compiler().CompileSchema(text, co);
  ASSERT_TRUE(compact.ok());
  EXPECT_TRUE(Feed(*compact, "{\"a\":1}"));
  EXPECT_FALSE(Feed(*compact, "{\"a\": 1}"));
}

TEST(SchemaCompileFormat, PropertiesInDeclaredOrder) {
  const char* text = R"({"properties": {"zeta": {"type": "integer"}, "alpha": {"type": "integer"}},
                         "required": ["zeta", "alpha"], "additionalProperties": false})";
  auto g = Compiler().CompileSchema(text);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Feed(*g, R"({"zeta":1,"alpha":2})"));
  EXPECT_FALSE(Feed(*g, R"({"alpha":2,"zeta":1})"));
  auto s = Schema::Load(text);
  SchemaCompileOptions so;
  so.property_order = std::make_shared<const PropertyOrder>(PropertyOrderOf(text));
  EXPECT_EQ(RenderInstance(**s, json::parse(R"({"alpha":2,"zeta":1})"), -1, so),
            R"({"zeta":1,"alpha":2})");
  EXPECT_EQ(RenderInstance(**s, json::parse(R"({"alpha":2,"zeta":1})"), 2, so),
            "{\n  \"zeta\": 1,\n  \"alpha\": 2\n}");
}

// The program up to the numbering of its DFA states: rules in order, each rule's states
// breadth-first from its start (byte classes in order, then rule and special edges as stored).
std::vector<std::int64_t> CanonicalProgram(const CfgProgram& p) {
  std::vector<std::int64_t> out(p.byte_class.begin(), p.byte_class.end());
  out.push_back(p.num_classes);
  out.push_back(p.root);
  for (const auto& ri : p.rules) {
    out.push_back(static_cast<std::int64_t>(ri.kind));
    out.push_back(ri.child);
    out.push_back(ri.min);
    out.push_back(ri.max);
    out.push_back(ri.nullable);
    if (ri.kind != CfgProgram::RuleKind::kDfa || ri.start == CfgProgram::kDead) continue;
    std::map<StateId, std::int64_t> number;
    std::vector<StateId> queue = {ri.start};
    number[ri.start] = 0;
    auto id = [&](StateId t) -> std::int64_t {
      if (t == CfgProgram::kDead) return -1;
      auto [it, fresh] = number.emplace(t, static_cast<std::int64_t>(number.size()));
      if (fresh) queue.push_back(t);
      return it->second;
    };
    for (std::size_t q = 0; q < queue.size(); ++q) {
      const StateId s = queue[q];
      out.push_back(-2);
      out.push_back(p.accepting[s]);
      out.push_back(p.state_rule[s]);
      for (std::int32_t c = 0; c < p.num_classes; ++c) {
        out.push_back(id(p.next[static_cast<std::size_t>(s) * p.num_classes + c]));
      }
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1]; ++e) {
        out.push_back(p.nt_edges[e].first);
        out.push_back(id(p.nt_edges[e].second));
      }
      for (std::int32_t e = p.sp_begin[s]; e < p.sp_begin[s + 1]; ++e) {
        out.push_back(p.sp_edges[e].first);
        out.push_back(id(p.sp_edges[e].second));
      }
    }
  }
  return out;
}

// Rules that do not depend on the schema (the "any value" rules of open objects and untyped
// subschemas) are lowered once per process and reused: the program must be the one a fresh
// determinisation gives, whatever the rule numbering of the schema that reuses it.
// Positions shared between the grammars of one vocabulary (CompileOptions::share_positions,
// automata/cfg/position_key.h): every position a grammar takes from another grammar must equal the
// one its own trie walk computes. Tool schemas that share structure under other names and
// orders, then dev-set schemas (when ../shared/data is there), each compiled by the same
// compiler; states sampled across each grammar.
// Appends the schemas of every `step`-th dev-set file from `first`, up to `count` (scaled by
// LOCKSTEP_TEST_SCALE, at least 4); says so when ../shared/data is absent.
// Adds `count` (scaled) schemas of the shared dev set, every `step`-th from `first`. Returns
// false, having added none, when the shared data is absent.
bool AddDevSetSchemas(std::vector<std::string>& texts, std::size_t first, std::size_t step,
                      int count) {
  const std::filesystem::path dev = testing::SharedDataDir() + "/jsonschemabench-dev/maskbench";
  if (!std::filesystem::is_directory(dev)) {
    std::printf("note: %s absent; only the inline schemas are checked\n", dev.string().c_str());
    return false;
  }
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dev)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const std::size_t want = std::max<std::size_t>(4, static_cast<std::size_t>(count * testing::TestScale()));
  for (std::size_t i = first, taken = 0; i < files.size() && taken < want; i += step) {
    std::ifstream in(files[i]);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("schema")) continue;
    texts.push_back(j["schema"].dump());
    ++taken;
  }
  return true;
}

// A grammar's first mask, as a decoder fills it before anything else: that fill hashes the
// grammar's rules into the keys its positions are shared by (later fills hash a little more
// each, and the background worker the rest).
void FirstMask(const std::shared_ptr<const CompiledGrammar>& g) {
  Matcher m(g);
  std::vector<std::uint32_t> mask(BitmaskWords(g->logits_width()));
  ASSERT_TRUE(m.FillNextTokenBitmask(mask));
}

TEST(SharedPositions, EqualThePositionsWalkedAfresh) {
  std::vector<std::string> texts;
  for (const char* names : {"city,days", "town,count", "city,unit", "q,limit", "days,city"}) {
    const std::string n(names);
    const std::string a = n.substr(0, n.find(',')), b = n.substr(n.find(',') + 1);
    texts.push_back(R"({"type": "object", "properties": {")" + a + R"(": {"type": "string"}, ")" +
                    b + R"(": {"type": "integer", "minimum": 1}}, "required": [")" + a + R"("]})");
    texts.push_back(R"({"type": "object", "properties": {")" + a +
                    R"(": {"type": "string", "enum": ["x", "y"]}, "tags": {"type": "array", "items": {"type": "string"}}, ")" +
                    b + R"(": {"type": "object"}}, "required": [")" + b + R"("]})");
  }
  AddDevSetSchemas(texts, 0, 11, 40);
  std::int64_t checked = 0, shared = 0;
  for (const std::string& text : texts) {
    auto g = Compiler().CompileSchema(text);
    if (!g.ok()) continue;  // (a dev-set schema that is refused)
    const CfgGrammar& cfg = *CfgOf(**g);
    FirstMask(*g);
    const std::int32_t n = cfg.program().num_states;
    const std::int32_t stride = std::max(1, n / 40);
    for (StateId s = 0; s < n; s += stride) {
      const CfgPosition* p = CfgGrammarPeer(cfg).PositionOfState(s);
      ASSERT_NE(p, nullptr);
      auto fresh = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      EXPECT_TRUE(p->SameContent(*fresh)) << "state " << s << " of " << text;
      ++checked;
    }
    shared += (*g)->Stats().shared_positions;
  }
  // The structure repeats: a good part of the positions came from other grammars.
  EXPECT_GT(shared, checked / 4) << shared << " shared of " << checked << " checked";
  std::printf("%lld positions checked, %lld taken from other grammars\n",
              static_cast<long long>(checked), static_cast<long long>(shared));
}

// A state that calls its own rule is described with a reference to that rule, whose start it may
// not reach: after "(" the two rules below read alike, but `()` is valid only in the second (its
// rule matches empty). Each grammar, compiled after the other, must keep its own positions.
TEST(SharedPositions, RecursiveRulesAreKeyedWhole) {
  const char* word = "root ::= word{1,5}\nword ::= [a-z]+ | \"(\" word \")\"";
  const char* item = "root ::= item{0,5}\nitem ::= [a-z]* | \"(\" item \")\"";
  for (const auto& order : {std::pair{word, item}, std::pair{item, word}}) {
    auto first = Compiler().CompileGrammar(order.first);
    auto second = Compiler().CompileGrammar(order.second);
    ASSERT_TRUE(first.ok() && second.ok());
    for (const auto& g : {*first, *second}) {
      Matcher m(g);
      ASSERT_TRUE(m.AcceptString("ab("));
      std::vector<std::uint32_t> fast(BitmaskWords(g->logits_width()));
      ASSERT_TRUE(m.FillNextTokenBitmask(fast));
      const testing::Mask slow = testing::BruteForceMask(m);
      EXPECT_EQ(testing::AllowedIds(slow), testing::AllowedIds(fast)) << order.first;
      const bool empty_item = g.get() == (order.first == item ? first->get() : second->get());
      const Vocabulary& v = g->vocabulary();
      TokenId parens = kNoToken;
      for (TokenId t = 0; t < v.size() && parens == kNoToken; ++t) {
        if (v.TokenBytes(t) == "()") parens = t;
      }
      ASSERT_NE(parens, kNoToken);
      EXPECT_EQ((fast[parens >> 5] >> (parens & 31)) & 1, empty_item ? 1u : 0u);
    }
  }
}

// A big format automaton (email: 25k states) is too big for the structural key but is copied
// unchanged into every grammar that uses it: its positions are shared by cache entry and rank.
TEST(SharedPositions, BigFormatAutomataAreSharedToo) {
  const std::string a = R"({"type": "object", "properties": {"to": {"type": "string", "format": "email"}}})";
  // Other keys and values around it, the same bytes after it (the follow set is in the key).
  const std::string b = R"({"type": "object", "properties": {"n": {"type": "integer"},
      "sender": {"type": "string", "format": "email"}}, "required": ["n"]})";
  std::int64_t checked = 0;
  std::int32_t shared_in_b = 0;
  // No background positions: a fill's key does not wait for the keyer (KeyOf, may_wait false),
  // so while b's background thread hashes its rules, a state looked up here got no key and was
  // walked instead of shared (b had 3 shared positions, not 20, in one CI run on a loaded host).
  CompileOptions quiet;
  quiet.background_positions = false;
  for (const std::string& text : {a, b}) {
    auto g = Compiler().CompileSchema(text, quiet);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    FirstMask(*g);
    const CfgProgram& p = cfg.program();
    std::vector<StateId> big;
    for (StateId s = 0; s < p.num_states; ++s) {
      if (p.rules[p.state_rule[s]].shared_source != 0) big.push_back(s);
    }
    ASSERT_GT(big.size(), 4096u);
    for (std::size_t i = 0; i < big.size(); i += big.size() / 25) {
      const CfgPosition* pos = CfgGrammarPeer(cfg).PositionOfState(big[i]);
      ASSERT_NE(pos, nullptr);
      EXPECT_TRUE(pos->SameContent(*CfgGrammarPeer(cfg).FreshPositionOfState(big[i])))
          << "state " << big[i];
      ++checked;
    }
    if (text == b) shared_in_b = (*g)->Stats().shared_positions;
  }
  // The second grammar took its format positions from the first.
  EXPECT_GE(shared_in_b, 20) << checked << " checked";
}

// The states of a big format automaton that no token tells apart take one position (the email
// automaton counts up to 253 bytes of domain, date-time tracks leap years through the year's
// digits; a token cannot see that far from most of their states). A folded state's position must
// equal the walk of the trie from that state itself, and the fold must be large (else the
// precompute walks every state again).
TEST(SharedPositions, FoldedFormatStatesEqualTheirOwnWalks) {
  CompileOptions options;
  options.share_positions = false;  // the positions come from the fold, not from the store
  for (const char* format : {"email", "hostname", "date-time"}) {
    const std::string text =
        std::string(R"({"type": "object", "properties": {"to": {"type": "string", "format": ")") +
        format + R"("}}, "required": ["to"]})";
    auto g = Compiler().CompileSchema(text, options);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::vector<StateId> big, folded;
    std::set<StateId> firsts;
    for (StateId s = 0; s < p.num_states; ++s) {
      if (p.rules[p.state_rule[s]].shared_source == 0) continue;
      big.push_back(s);
      firsts.insert(CfgGrammarPeer(cfg).FoldedState(s));
      if (CfgGrammarPeer(cfg).FoldedState(s) != s) folded.push_back(s);
    }
    ASSERT_GT(big.size(), 4096u) << format;
    EXPECT_LT(firsts.size() * 3, big.size())
        << format << ": " << firsts.size() << " folds of " << big.size();
    // Every folded state of date-time (its walks are short), a sample of the others.
    const std::size_t want =
        std::string(format) == "date-time"
            ? folded.size()
            : std::max<std::size_t>(24, static_cast<std::size_t>(240 * testing::TestScale()));
    std::size_t checked = 0;
    for (std::size_t i = 0; i < folded.size();
         i += std::max<std::size_t>(1, folded.size() / want)) {
      const StateId s = folded[i];
      const CfgPosition* pos = CfgGrammarPeer(cfg).PositionOfState(s);
      ASSERT_NE(pos, nullptr);
      EXPECT_TRUE(pos->SameContent(*CfgGrammarPeer(cfg).FreshPositionOfState(s)))
          << format << " state " << s << " folded into " << CfgGrammarPeer(cfg).FoldedState(s);
      ++checked;
    }
    std::printf("%s: %zu states, %zu folds, %zu folded states checked against their own walks\n",
                format, big.size(), firsts.size(), checked);
  }
}

// A precomputed grammar leaves its positions, state by state, in the store under its program's
// fingerprint; the same schema precomputed again takes them all from there (no key, no lookup,
// no walk per state). Each taken position must equal the walk from its state, the second grammar
// must hold as many positions as the first, and a new program must not take another's table.
TEST(SharedPositions, APrecomputedProgramLeavesItsPositionsForTheNextCompile) {
  CompileOptions pre;
  pre.precompute_masks = true;
  pre.precompute_threads = 1;
  std::vector<std::string> texts = {
      R"({"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
          "n": {"type": "integer", "minimum": -5, "maximum": 120}, "tags": {"type": "array",
          "items": {"enum": ["a", "b", "c"]}}}, "required": ["when"]})",
  };
  AddDevSetSchemas(texts, 7, 41, 10);
  std::int64_t compared = 0;
  for (const std::string& text : texts) {
    auto first = Compiler().CompileSchema(text, pre);
    if (!first.ok()) continue;  // (a dev-set schema that is refused)
    auto again = Compiler().CompileSchema(text, pre);
    ASSERT_TRUE(again.ok());
    const CfgGrammar& a = *CfgOf(**first);
    const CfgGrammar& b = *CfgOf(**again);
    EXPECT_TRUE(CfgGrammarPeer(b).PositionsTakenFromProgram()) << text;
    EXPECT_EQ(b.Stats().positions, a.Stats().positions) << text;
    const std::int32_t n = b.program().num_states;
    const std::int32_t stride = std::max(1, n / 30);
    for (StateId s = 0; s < n; s += stride) {
      const CfgPosition* p = CfgGrammarPeer(b).PositionOfState(s);
      ASSERT_NE(p, nullptr);
      EXPECT_TRUE(p->SameContent(*CfgGrammarPeer(b).FreshPositionOfState(s)))
          << "state " << s << " of " << text;
      ++compared;
    }
  }
  // A program no grammar had before finds no table.
  auto fresh = Compiler().CompileSchema(
      R"({"type": "object", "properties": {"zq_unique_name_4711": {"type": "boolean"}}})", pre);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(CfgGrammarPeer(*CfgOf(**fresh)).PositionsTakenFromProgram());
  std::printf("%lld positions taken from program tables compared with fresh walks\n",
              static_cast<long long>(compared));
}

// A schema compiled again (a new grammar, the same program) reads its position keys from the
// keyer the first compile left in the vocabulary's store instead of hashing its automata again:
// while the stored keyer knows a state, and from a copy of it when it does not. Every key must
// equal the first grammar's, and those of a fresh keyer of the new program asked in the first
// grammar's order.
TEST(SharedPositions, KeysOfAProgramCompiledAgainComeFromTheStore) {
  std::vector<std::string> texts = {
      R"({"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array",
          "items": {"type": "string", "maxLength": 8}}, "meta": {"type": "object"}}, "required": ["id"]})",
      R"({"anyOf": [{"type": "string", "format": "date"}, {"type": "array", "items": {"$ref": "#"}}]})",
  };
  AddDevSetSchemas(texts, 5, 29, 12);
  std::int64_t compared = 0;
  for (const std::string& text : texts) {
    auto first = Compiler().CompileSchema(text);
    if (!first.ok()) continue;  // (a dev-set schema that is refused)
    const CfgGrammar& a = *CfgOf(**first);
    const std::int32_t n = a.program().num_states;
    // The first grammar's first key is of its last state (a rule of its own, usually not the
    // root's): the stored keyer knows that rule early, the others only once asked.
    std::vector<StateId> order = {n - 1};
    for (StateId s = 0; s + 1 < n; ++s) order.push_back(s);
    std::vector<std::optional<PositionKey>> keys(n);
    for (StateId s : order) keys[s] = CfgGrammarPeer(a).KeyOfState(s);
    auto again = Compiler().CompileSchema(text);
    ASSERT_TRUE(again.ok());
    const CfgGrammar& b = *CfgOf(**again);
    ASSERT_EQ(b.program().num_states, n);
    const std::vector<std::optional<PositionKey>> fresh = CfgGrammarPeer(b).FreshKeysInOrder(order);
    for (StateId s = 0; s < n; ++s) {
      const std::optional<PositionKey> k = CfgGrammarPeer(b).KeyOfState(s);
      const std::optional<PositionKey>& f = fresh[s == n - 1 ? 0 : s + 1];
      ASSERT_EQ(k.has_value(), f.has_value()) << "state " << s << " of " << text;
      ASSERT_EQ(k.has_value(), keys[s].has_value()) << "state " << s << " of " << text;
      if (k) {
        EXPECT_TRUE(*k == *f) << "state " << s << " of " << text;
        EXPECT_TRUE(*k == *keys[s]) << "state " << s << " of " << text;
      }
      ++compared;
    }
    EXPECT_TRUE(CfgGrammarPeer(b).KeysTakenFromStore()) << text;
  }
  EXPECT_GT(compared, 100);
  std::printf("%lld keys of recompiled grammars compared with fresh keyers\n",
              static_cast<long long>(compared));
}

// A number value is a rule of its own (grammar::Rule::called), so its positions are the same
// whatever member it is the value of and whatever follows it: a grammar takes them from another
// grammar of the vocabulary instead of walking the trie again (inlined into the member, each
// number state was a position of its grammar alone). Its masks stay exact.
TEST(SharedPositions, NumberValuesAreTakenFromOtherGrammars) {
  CompileOptions quiet;
  quiet.background_positions = false;  // (every key made by the fills themselves)
  const std::string a = R"({"type": "object", "properties": {"price": {"type": "number"},
      "name": {"type": "string"}}, "required": ["price", "name"]})";
  const std::string b = R"({"type": "object", "properties": {"tags": {"type": "array",
      "items": {"type": "string"}}, "weight": {"type": "number"}, "unit": {"enum": ["kg", "lb"]}},
      "required": ["weight"]})";
  const std::vector<std::string> numbers = {"", "1", "12", "-", "-0", "3.", "3.25", "1e", "1e+5"};
  std::int32_t shared_in_b = 0;
  for (const auto& [text, member] : {std::pair{a, "price"}, std::pair{b, "weight"}}) {
    auto g = Compiler().CompileSchema(text, quiet);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (const std::string& n : numbers) {
      Matcher m(*g);
      const std::string prefix = std::string("{\"") + member + "\": " + n;
      ASSERT_TRUE(m.AcceptString(prefix)) << prefix;
      std::vector<std::uint32_t> fast(BitmaskWords((*g)->logits_width()));
      ASSERT_TRUE(m.FillNextTokenBitmask(fast));
      EXPECT_EQ(testing::AllowedIds(testing::BruteForceMask(m)), testing::AllowedIds(fast))
          << prefix;
    }
    if (text == b) shared_in_b = (*g)->Stats().shared_positions;
  }
  // The number's start (a member's value composed from it), its digits, its fraction and its
  // exponent: positions of the number rule, which the first grammar left in the store.
  EXPECT_GE(shared_in_b, 4);
}

// A fill's key call has a bound on the states it hashes. It must not start a rule it cannot
// finish within that bound (a pass over a rule runs to its end), and must then give up on the
// same rule at once when asked again; an unbounded call afterwards (the background worker's)
// still gives every state the key a fresh keyer gives it.
// An object of 12 integer members: its rule (the program's biggest, far over a bound of 16
// states) and the states of each rule.
struct TwelveMembers {
  TwelveMembers() {
    std::string props;
    for (int i = 0; i < 12; ++i) {
      props += (i ? ", " : "") + std::string("\"member_") + std::to_string(i) +
               R"(": {"type": "integer"})";
    }
    auto compiled = Compiler().CompileSchema(R"({"type": "object", "properties": {)" + props + "}}");
    EXPECT_TRUE(compiled.ok()) << compiled.status().message();
    if (!compiled.ok()) return;
    g = *compiled;
    const CfgProgram& program = CfgOf(*g)->program();
    size.assign(program.NumRules(), 0);
    for (StateId s = 0; s < program.num_states; ++s) ++size[program.state_rule[s]];
    big = static_cast<std::int32_t>(std::max_element(size.begin(), size.end()) - size.begin());
  }
  std::shared_ptr<const CompiledGrammar> g;
  std::vector<std::int32_t> size;
  std::int32_t big = -1;
};

TEST(SharedPositions, ABoundedKeyCallStartsNoRuleItCannotFinish) {
  const TwelveMembers twelve;
  ASSERT_NE(twelve.g, nullptr);
  const CfgProgram& program = CfgOf(*twelve.g)->program();
  const std::vector<std::int32_t>& size = twelve.size;
  const std::int32_t big = twelve.big;
  ASSERT_GT(size[big], 32) << "the object's rule should be far over the bound below";
  const std::array<std::uint64_t, 4> follow = {1, 0, 0, 0};
  PositionKeyer bounded(&program), fresh(&program);
  for (StateId s = 0; s < program.num_states; ++s) {
    if (program.state_rule[s] != big) continue;
    EXPECT_FALSE(bounded.Key(s, follow, /*max_work=*/16).has_value()) << "state " << s;
    EXPECT_EQ(bounded.work(), 0) << "a bounded call hashed part of a rule it could not finish";
  }
  std::int32_t keyed = 0;
  for (StateId s = 0; s < program.num_states; ++s) {
    const std::optional<PositionKey> a = bounded.Key(s, follow), b = fresh.Key(s, follow);
    ASSERT_EQ(a.has_value(), b.has_value()) << "state " << s;
    if (a) {
      EXPECT_TRUE(*a == *b) << "state " << s;
    }
    keyed += a.has_value();
  }
  EXPECT_GT(keyed, size[big] / 2);
}

// A fill's bound is shared by its keys: a key asked when little of it is left gives up on a rule
// that fits a whole bound (rule_work) but not what is left (max_work), and only for that call;
// a rule too big for a whole bound is given up for good, as above.
TEST(SharedPositions, ARuleOverWhatIsLeftOfAFillsBoundIsOnlyPutOff) {
  const TwelveMembers twelve;
  ASSERT_NE(twelve.g, nullptr);
  const CfgProgram& program = CfgOf(*twelve.g)->program();
  ASSERT_GT(twelve.size[twelve.big], 32);
  const StateId start = program.rules[twelve.big].start;
  const std::array<std::uint64_t, 4> follow = {1, 0, 0, 0};
  const std::int64_t whole = 1 << 20;
  PositionKeyer put_off(&program), given_up(&program), fresh(&program);
  EXPECT_FALSE(put_off.Key(start, follow, /*max_work=*/16, /*rule_work=*/whole).has_value());
  EXPECT_EQ(put_off.work(), 0);
  const std::optional<PositionKey> later = put_off.Key(start, follow, whole);
  ASSERT_TRUE(later.has_value()) << "a rule put off by one fill was given up for good";
  const std::optional<PositionKey> expected = fresh.Key(start, follow);
  ASSERT_TRUE(expected.has_value());
  EXPECT_TRUE(*later == *expected);
  EXPECT_FALSE(given_up.Key(start, follow, /*max_work=*/16).has_value());
  EXPECT_FALSE(given_up.Key(start, follow, whole).has_value())
      << "a rule over a whole bound is asked again by bounded calls";
  EXPECT_TRUE(given_up.Key(start, follow).has_value()) << "an unbounded call keys it";
}

// The fingerprint that identifies a program for the keyer store changes with every field the
// keyer reads.
TEST(SharedPositions, ProgramFingerprintChangesWithEveryFieldTheKeysRead) {
  auto g = Compiler().CompileSchema(R"({"type": "object", "properties": {"a": {"type": "array",
      "items": {"type": "integer"}, "minItems": 2, "maxItems": 40}, "b": {"type": "string"}}})");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const CfgProgram& p = CfgOf(**g)->program();
  const PositionKey base = ProgramFingerprint(p);
  CfgProgram copy = p;
  EXPECT_TRUE(ProgramFingerprint(copy) == base);
  std::int32_t counter = -1;
  for (std::int32_t r = 0; r < p.NumRules(); ++r) {
    if (p.IsCounter(r)) counter = r;
  }
  ASSERT_GE(counter, 0) << "the schema should lower its array to a counter rule";
  ASSERT_FALSE(p.nt_edges.empty());
  std::vector<std::pair<const char*, std::function<void(CfgProgram&)>>> changes = {
      {"a transition", [](CfgProgram& q) {
         const std::size_t i = q.next.size() / 2;
         q.next.Set(i, q.next[i] ^ 1);
       }},
      {"acceptance", [](CfgProgram& q) { q.accepting[q.num_states / 2] ^= 1; }},
      {"a byte class", [](CfgProgram& q) { q.byte_class['a'] = q.byte_class['{']; }},
      {"a state's rule", [](CfgProgram& q) { q.state_rule[0] = q.state_rule[0] == 0 ? 1 : 0; }},
      {"a rule edge's rule", [](CfgProgram& q) { q.nt_edges[0].first ^= 1; }},
      {"a rule edge's target", [](CfgProgram& q) { q.nt_edges[0].second ^= 1; }},
      {"where rule edges begin", [](CfgProgram& q) { ++q.nt_begin[q.num_states / 2]; }},
      {"where special edges begin", [](CfgProgram& q) { ++q.sp_begin[q.num_states / 2]; }},
      {"a counter's minimum", [counter](CfgProgram& q) { ++q.rules[counter].min; }},
      {"a counter's maximum", [counter](CfgProgram& q) { ++q.rules[counter].max; }},
      {"a counter's child", [counter](CfgProgram& q) { q.rules[counter].child ^= 1; }},
      {"a rule's start", [](CfgProgram& q) { q.rules[q.root].start ^= 1; }},
      {"a rule's kind", [counter](CfgProgram& q) { q.rules[counter].kind = CfgProgram::RuleKind::kDfa; }},
      {"a rule's source", [](CfgProgram& q) { q.rules[q.root].shared_source = 7; }},
      {"the root", [](CfgProgram& q) { q.root ^= 1; }},
  };
  for (const auto& [what, change] : changes) {
    CfgProgram q = p;
    change(q);
    EXPECT_FALSE(ProgramFingerprint(q) == base) << what;
  }
}

// Positions of string bodies and of the states just before them come from the vocabulary's
// region views (docs/grammars.md): the view of the body, with the state's own first bytes walked
// directly and, for a state that continues a declared key name, the view's results for those
// first bytes taken out. Every such position must equal a walk of the whole trie.
TEST(RegionViews, PositionsEqualTheWholeTrieWalk) {
  std::vector<std::string> texts = {
      // Open objects: keys are any string but the declared names, which share prefixes.
      R"({"type": "object", "properties": {"name": {"type": "string"}, "nation": {"type": "string"},
          "nav": {"type": "integer"}, "id": {"type": "string", "maxLength": 5}, "ids": {"type": "array",
          "items": {"type": "string"}}, "x\"y": {"type": "string"}}})",
      R"({"type": "object", "properties": {"a": {"type": "string", "pattern": "^[a-z]+$"},
          "ab": {"type": ["string", "number", "null"]}, "abc": {"enum": ["abc", "abd", 3]}},
          "additionalProperties": {"type": "string"}})",
      R"({"type": "object", "properties": {"q": {"type": "string", "format": "email"},
          "\u00e9t\u00e9": {"type": "string"}}, "additionalProperties": {"type": "object",
          "properties": {"k": {}}}})",
      R"({"type": "object", "properties": {"id": {"type": "string", "minLength": 1}, "tags":
          {"type": "array", "items": {"type": "string", "minLength": 1}}, "n": {"type": "string",
          "minLength": 2, "maxLength": 9}}, "required": ["id"]})",
  };
  AddDevSetSchemas(texts, 3, 13, 30);
  std::int64_t viewed = 0, taken_out = 0, parted = 0;
  for (const std::string& text : texts) {
    auto g = Compiler().CompileSchema(text);
    if (!g.ok()) continue;  // (a dev-set schema that is refused)
    const CfgGrammar& cfg = *CfgOf(**g);
    std::vector<std::pair<StateId, int>> states;
    for (StateId s = 0; s < cfg.program().num_states; ++s) {
      const int use = CfgGrammarPeer(cfg).RegionUseOfState(s);
      if (use != 0) states.push_back({s, use});
    }
    // Up to 40 per grammar, the taken-out kind first (a whole-trie walk is a few ms).
    std::stable_sort(states.begin(), states.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    states.resize(std::min<std::size_t>(states.size(), 40));
    for (const auto& [s, use] : states) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << "state " << s << " (view use " << use << ") of " << text;
      ++viewed;
      taken_out += use == 2;
      parted += !CfgGrammarPeer(cfg).RegionCutsOfState(s).prefixes.empty();
    }
  }
  // Both kinds ran: string bodies, and key states whose continuations were taken out.
  EXPECT_GT(viewed, 20);
  EXPECT_GT(taken_out, 5);
  std::printf("%lld positions from region views checked, %lld with first bytes taken out or "
              "followed, %lld with paths parting below them\n",
              static_cast<long long>(viewed), static_cast<long long>(taken_out),
              static_cast<long long>(parted));
}

// A state whose only way on is a call (a member's value) takes its position from the callee's
// start position and the callee's tails walked on from the return state. It must equal a walk
// of the whole trie through the call, on both tokenizers' vocabularies.
TEST(PositionsThroughACall, EqualWholeTrieWalks) {
  std::vector<std::string> texts = {
      R"({"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number",
          "minimum": 0}, "o": {"type": "object", "properties": {"k": {"type": "boolean"}}},
          "a": {"type": "array", "items": {"type": "integer"}}, "s": {"type": "string",
          "maxLength": 3}, "any": {}}, "required": ["n", "o"]})",
      R"({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "null"},
          {"type": "object", "properties": {"deep": {"$ref": "#"}}}]}})",
      R"({"type": "object", "additionalProperties": {"type": "number"}})",
      // Callees that may match nothing: strings of maxLength only (a counter from 0), arrays
      // of maxItems only, a nullable member list; the return state's position joins in.
      R"({"type": "object", "properties": {"url": {"type": "string", "maxLength": 4096},
          "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 5},
          "short": {"type": "string", "maxLength": 2}, "o": {"type": "object", "properties":
          {"p": {"type": "integer"}}}}, "required": ["url", "tags", "short", "o"],
          "additionalProperties": false})",
  };
  const bool dev_set = AddDevSetSchemas(texts, 7, 17, 24);
  for (const char* tokenizer : {"llama3", "qwen2.5"}) {
    auto vocab = Vocabulary::Load(tokenizer);
    ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
    GrammarCompiler compiler(*vocab);
    std::int64_t composed = 0, skippable = 0;
    for (const std::string& text : texts) {
      CompileOptions o;
      o.share_positions = false;  // (each composition computes its callee here)
      auto g = compiler.CompileSchema(text, o);
      if (!g.ok()) continue;  // (a dev-set schema that is refused)
      const CfgGrammar& cfg = *CfgOf(**g);
      const CfgProgram& p = cfg.program();
      std::int32_t here = 0, nullable_here = 0;
      for (StateId s = 0; s < p.num_states && (here < 30 || nullable_here < 30); ++s) {
        if (!CfgGrammarPeer(cfg).ComposesThroughCall(s)) continue;
        const bool nullable = p.rules[p.nt_edges[p.nt_begin[s]].first].nullable;
        if ((nullable ? nullable_here : here) >= 30) continue;
        auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
        auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
        ASSERT_TRUE(fast->SameContent(*walked))
            << tokenizer << ": state " << s << " (" << fast->num_accepted << " accepted, "
            << fast->num_uncertain << " tails; walked " << walked->num_accepted << ", "
            << walked->num_uncertain << ") of " << text;
        ++(nullable ? nullable_here : here);
      }
      composed += here + nullable_here;
      skippable += nullable_here;
    }
    // The inline schemas alone give about 24 compositions; with the dev set, well over 40.
    EXPECT_GT(composed, dev_set ? 40 : 15) << tokenizer;
    EXPECT_GE(skippable, 4) << tokenizer;  // the maxLength strings, the maxItems array
    std::printf("%s: %lld composed positions equal whole-trie walks (%lld through a callee that "
                "may match nothing)\n",
                tokenizer, static_cast<long long>(composed), static_cast<long long>(skippable));
  }
}

// A pattern's loops over 16 bytes or more (`[a-z0-9-]+`, 37 bytes; not only a string body's 200)
// use a shared view of the vocabulary: without one, each state of a loop a fill meets is a walk of
// the whole trie (350-450 us on Llama-3 for these). Every position still equals that walk.
TEST(RegionViews, APatternsNarrowerLoopsUseViews) {
  const char* text = R"({"type": "object", "properties": {"s": {"type": "string", "pattern":
      "^pbj:([a-z0-9-]+):([a-z0-9\\.-]+):([0-9]+-[0-9]+)$"}}, "required": ["s"]})";
  for (const char* tokenizer : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::int32_t viewed = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
      // A state on a loop of the two letter-and-digit groups: it loops on 'q' and on '7'.
      if (p.Step(s, 'q') == s && p.Step(s, '7') == s) {
        EXPECT_NE(CfgGrammarPeer(cfg).RegionUseOfState(s), 0) << tokenizer << ": state " << s;
        ++viewed;
      }
    }
    EXPECT_GE(viewed, 2) << tokenizer;
  }
}

// A string of minLength 3 beside a search pattern counts its first three characters in states of
// their own before the loop: the states of that chain use a view of a region that starts at them
// (without one, each was a walk of the whole trie: 7-11 ms on Llama-3). Every position still
// equals that walk.
TEST(RegionViews, ChainsBeforeAPatternsLoopUseViews) {
  const char* text = R"({"type": "object", "properties": {"s": {"type": "string", "minLength": 3,
      "maxLength": 64, "pattern": "[A-z]+"}}, "required": ["s"]})";
  for (const char* tokenizer : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::int32_t chained = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
      // The state after the opening quote: 3 letters before a state that loops on letters.
      StateId t = s;
      int k = 0;
      while (k < 9 && p.Step(t, 'a') != t && p.Step(t, 'a') != CfgProgram::kDead) {
        t = p.Step(t, 'a');
        ++k;
      }
      if (k == 3 && p.Step(t, 'a') == t) {
        EXPECT_NE(CfgGrammarPeer(cfg).RegionUseOfState(s), 0) << tokenizer << ": state " << s;
        ++chained;
      }
    }
    EXPECT_GE(chained, 1) << tokenizer;
  }
}

// The key of an extra member (additionalProperties) is any string but the declared names: after
// its opening quote the state differs from the string body's on each declared initial. Those
// first bytes are not taken out of the body's view whole (thousands of tokens each): the state's
// path is followed beside the view's, token prefix by token prefix, and only the tokens under
// the prefixes where the two part (a declared name's closing quote: a dead end for the key, the
// end of a string for the view) are walked. Every position equals a walk of the whole trie.
TEST(RegionViews, DeclaredNamesAreFollowedBesideTheView) {
  const char* text = R"({"type": "object", "properties": {"name": {"type": "string"},
      "nation": {"type": "string"}, "namespace": {"type": "string"}, "type": {"type": "integer"},
      "a": {"type": "boolean"}, "tab": {"type": "string"}},
      "patternProperties": {"^[0-9]+$": {"type": "boolean"}},
      "additionalProperties": {"type": "integer"}})";
  const std::set<std::string> names = {"name", "nation", "namespace", "type", "a", "tab"};
  for (const char* tokenizer : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::int32_t key_starts = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
      const CfgGrammarPeer::RegionCuts cuts = CfgGrammarPeer(cfg).RegionCutsOfState(s);
      // Where the paths part: a declared name's closing quote, or a run of digits' (a key the
      // pattern's member takes).
      for (const std::string& prefix : cuts.prefixes) {
        ASSERT_FALSE(prefix.empty());
        const std::string head = prefix.substr(0, prefix.size() - 1);
        EXPECT_TRUE(prefix.back() == '"' &&
                    (names.count(head) == 1 ||
                     head.find_first_not_of("0123456789") == std::string::npos))
            << tokenizer << ": state " << s << ", " << prefix;
      }
      // After the key's opening quote: the declared initials are followed, not taken out.
      const std::set<std::uint8_t> followed(cuts.followed.begin(), cuts.followed.end());
      if (followed.count('n') == 0 || followed.count('t') == 0 || followed.count('a') == 0) continue;
      ++key_starts;
      EXPECT_EQ(CfgGrammarPeer(cfg).RegionUseOfState(s), 2) << tokenizer << ": state " << s;
      for (const std::uint8_t b : cuts.first_bytes) {
        EXPECT_TRUE(b != 'n' && b != 't' && b != 'a') << tokenizer << ": state " << s;
      }
    }
    EXPECT_GT(key_starts, 0) << tokenizer;
  }
}

// The extra members' keys here are strings that are not a UUID (the pattern's member takes
// those): the states that count a run of hex digits are on the string body's loop (any other
// byte goes back to it) but differ from it. Each took a view of its own, a pass over every token
// (about 1 ms on Llama-3) at each state a fill met; they now share the loop's view and follow
// their hex digits beside it. Every position equals a walk of the whole trie.
TEST(RegionViews, StatesOfALoopShareItsView) {
  const char* text = R"({"type": "object", "patternProperties": {
      "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$": {"type": "integer"}},
      "additionalProperties": {"type": "string"}})";
  for (const char* tokenizer : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::set<std::vector<std::int16_t>> tables;
    std::int32_t viewed = 0, followed = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
      std::vector<std::int16_t> table = CfgGrammarPeer(cfg).RegionTableOfState(s);
      if (table.empty()) continue;
      ++viewed;
      followed += !CfgGrammarPeer(cfg).RegionCutsOfState(s).followed.empty();
      tables.insert(std::move(table));
    }
    // The key's hex runs (8, 4, 4, 4 and 12 digits) are some 36 states of the loop.
    EXPECT_GT(followed, 30) << tokenizer;
    EXPECT_LE(tables.size(), 4u) << tokenizer << ": " << viewed << " states use views";
  }
}

// Equal constraints in one schema are one automaton, so normalisation merges the rules holding
// them, whatever the process's cache of lexical automata keeps. Before, a process whose cache
// was full (64 MiB of automata: one big schema, Github_hard o21819, filled it) built them apart
// and stopped caching: every later schema compiled to a bigger grammar (JsonSchemaStore's
// rust-toolchain: 30 rules and 4,398 states instead of 25 and 4,049, lowered 76% slower), and an
// artifact written by `compile --batch` depended on what the process had compiled before. A
// cache past its budget is now emptied to keep the new automaton.
TEST(LexicalCache, AGrammarDoesNotDependOnWhatTheCacheKeeps) {
  std::string text = R"({"type": "object", "required": ["a", "b", "c", "n", "m"], "properties": {
      "a": {"type": "string", "pattern": "^[a-z]{2,8}-[0-9]+$"},
      "b": {"type": "string", "pattern": "^[a-z]{2,8}-[0-9]+$"},
      "c": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{2,8}-[0-9]+$"}},
      "n": {"type": "integer", "minimum": 3, "maximum": 4000},
      "m": {"type": "integer", "minimum": 3, "maximum": 4000})";
  // (Distinct automata of a few hundred bytes to a few kilobytes each.)
  for (int k = 1; k <= 24; ++k) {
    const std::string n = std::to_string(k);
    text += ", \"p" + n + "\": {\"type\": \"string\", \"pattern\": \"^[a-z]{" + n + "}-[0-9]{" + n +
            "}$\"}";
  }
  text += "}}";
  const GrammarCompiler& compiler = testing::CompilerFor("llama3");
  auto cached = compiler.CompileSchema(text);
  ASSERT_TRUE(cached.ok()) << cached.status().ToString();
  const std::size_t budget = SetLexicalCacheBytesForTesting(0);  // keeps nothing
  auto uncached = compiler.CompileSchema(text);
  // A budget that holds some of the schema's automata but not all of them: emptied on the way.
  SetLexicalCacheBytesForTesting(8192);
  const std::int64_t flushes = LexicalCacheFlushes();
  auto flushed = compiler.CompileSchema(text);
  const std::int64_t flushes_after = LexicalCacheFlushes();
  SetLexicalCacheBytesForTesting(budget);
  ASSERT_TRUE(uncached.ok()) << uncached.status().ToString();
  ASSERT_TRUE(flushed.ok()) << flushed.status().ToString();
  EXPECT_GT(flushes_after, flushes);
  const CompiledGrammarStats want = (*cached)->Stats();
  for (const auto* g : {&*uncached, &*flushed}) {
    const CompiledGrammarStats got = (*g)->Stats();
    EXPECT_EQ(got.rules, want.rules);
    EXPECT_EQ(got.dfa_states, want.dfa_states);
    EXPECT_EQ(got.byte_classes, want.byte_classes);
  }
}

// The process's caches of lowered automata (big format terminals, shared rules) empty
// themselves past their budgets instead of keeping nothing more. Before, a terminal met after
// the 64 MiB of terminals had filled got no `shared_source` for the rest of the process, so no
// grammar shared its positions with another. The grammars are the same whatever the caches keep.
TEST(LoweringCache, AFullCacheKeepsTheNewAutomaton) {
  const GrammarCompiler& compiler = testing::CompilerFor("llama3");
  auto schema = [](const char* format) {
    return std::string(R"({"type": "object", "properties": {"x": {"type": "string", "format": ")") +
           format + R"("}, "n": {"type": "integer", "minimum": 2, "maximum": 70},
           "f": {"type": "number", "minimum": 0.5}}})";
  };
  auto source_of = [](const std::shared_ptr<const CompiledGrammar>& g) {
    std::uint64_t s = 0;
    for (const auto& r : CfgOf(*g)->program().rules) s = std::max(s, r.shared_source);
    return s;
  };
  const auto old = SetLoweringCacheBudgetsForTesting(std::size_t{1} << 40, std::size_t{1} << 16);
  auto email = compiler.CompileSchema(schema("email"));
  const LoweringCacheStats one = GetLoweringCacheStats();
  auto host = compiler.CompileSchema(schema("hostname"));
  const LoweringCacheStats two = GetLoweringCacheStats();
  ASSERT_TRUE(email.ok()) << email.status().ToString();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  ASSERT_GT(one.big_dfa_bytes, 0u);
  ASSERT_GT(two.big_dfa_bytes, one.big_dfa_bytes);
  ASSERT_GT(one.rule_dfa_states, 0u) << "the schema should lower a shared rule";
  // Each terminal fits alone, the two together do not; the schema's shared rules do not either.
  SetLoweringCacheBudgetsForTesting(
      std::max(one.big_dfa_bytes, two.big_dfa_bytes - one.big_dfa_bytes), one.rule_dfa_states - 1);
  const LoweringCacheStats before = GetLoweringCacheStats();
  auto email2 = compiler.CompileSchema(schema("email"));
  auto host2 = compiler.CompileSchema(schema("hostname"));
  auto host3 = compiler.CompileSchema(schema("hostname"));
  const LoweringCacheStats after = GetLoweringCacheStats();
  SetLoweringCacheBudgetsForTesting(old.first, old.second);
  ASSERT_TRUE(email2.ok() && host2.ok() && host3.ok());
  EXPECT_GT(after.big_dfa_flushes, before.big_dfa_flushes);
  EXPECT_GT(after.rule_dfa_flushes, before.rule_dfa_flushes);
  EXPECT_NE(source_of(*email2), 0u);
  EXPECT_NE(source_of(*host2), 0u) << "a terminal met past the budget is not shared";
  EXPECT_NE(source_of(*host2), source_of(*email2));
  EXPECT_EQ(source_of(*host3), source_of(*host2)) << "the terminal kept is not found again";
  for (const auto& [want, got] : {std::pair{*email, *email2}, std::pair{*host, *host2},
                                  std::pair{*host, *host3}}) {
    EXPECT_EQ(got->Stats().rules, want->Stats().rules);
    EXPECT_EQ(got->Stats().dfa_states, want->Stats().dfa_states);
    EXPECT_EQ(got->Stats().byte_classes, want->Stats().byte_classes);
  }
}

// Every state that enters a string body's loop by its anchor's row (the anchor itself, a state
// before it that goes where it goes) has the same loop, numbering and table: a grammar builds
// them once per anchor and later plans take them (CfgGrammar::AnchorRegion). Planned in
// opposite orders, two grammars of one schema take different states' plans from what they
// kept; each state's plan (table and cuts) is the same in both, and every position equals a
// walk of the whole trie.
TEST(RegionViews, AGrammarPlansEachAnchorsLoopOnce) {
  const char* text = R"({"type": "object", "properties": {"name": {"type": "string"},
      "city": {"type": "string", "minLength": 1}, "code": {"type": "string",
      "pattern": "^[A-Z]{3}$"}, "hex": {"type": "string", "pattern": "^[0-9a-f]{4}-[0-9a-f]+$"},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 12}}},
      "additionalProperties": {"type": "string"}})";
  for (const char* tokenizer : {"llama3", "qwen2.5"}) {
    auto forward = testing::CompilerFor(tokenizer).CompileSchema(text);
    auto backward = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(forward.ok()) << forward.status().ToString();
    ASSERT_TRUE(backward.ok()) << backward.status().ToString();
    const CfgGrammar& f = *CfgOf(**forward);
    const CfgGrammar& b = *CfgOf(**backward);
    const std::int32_t n = f.program().num_states;
    ASSERT_EQ(b.program().num_states, n);
    std::vector<std::vector<std::int16_t>> tables(n);
    std::vector<CfgGrammarPeer::RegionCuts> cuts(n);
    std::int32_t viewed = 0;
    for (StateId s = 0; s < n; ++s) {
      tables[s] = CfgGrammarPeer(f).RegionTableOfState(s);
      cuts[s] = CfgGrammarPeer(f).RegionCutsOfState(s);
      viewed += !tables[s].empty();
    }
    const std::size_t kept = CfgGrammarPeer(f).AnchorRegionsKept();
    EXPECT_GT(kept, 0u) << tokenizer;
    // (Several states per anchor: the plans of the others were taken, not built.)
    EXPECT_LT(static_cast<std::int32_t>(kept) * 2, viewed) << tokenizer;
    for (StateId s = n - 1; s >= 0; --s) {
      EXPECT_EQ(CfgGrammarPeer(b).RegionTableOfState(s), tables[s]) << tokenizer << ": state " << s;
      const CfgGrammarPeer::RegionCuts c = CfgGrammarPeer(b).RegionCutsOfState(s);
      EXPECT_EQ(c.first_bytes, cuts[s].first_bytes) << tokenizer << ": state " << s;
      EXPECT_EQ(c.followed, cuts[s].followed) << tokenizer << ": state " << s;
      EXPECT_EQ(c.prefixes, cuts[s].prefixes) << tokenizer << ": state " << s;
      auto fast = CfgGrammarPeer(b).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(b).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
    }
    EXPECT_EQ(CfgGrammarPeer(b).AnchorRegionsKept(), kept) << tokenizer;
  }
}

// A pattern without anchors is a search: `"[a-z]"` is `.*[a-z].*`, any string once a letter has
// come. The string body before the match is a loop whose view every token with a lowercase
// letter leaves, into the loop after it: most of the vocabulary, so the view was unusable and
// each such state's position walked the whole trie (2-7 ms on Llama-3). The loop after the match
// now joins the region, as do the partial matches of several words (over 64 states with their
// escapes). Every position equals the whole-trie walk.
TEST(RegionViews, ASearchPatternsMatchedRestJoinsTheView) {
  const char* text = R"({"type": "object", "properties": {"t": {"type": "string", "pattern": "wifi"},
      "n": {"type": "string", "pattern": "[a-z][a-z0-9]*"}, "u": {"type": "string", "pattern":
      "^(portal)|(console)|(signup)|(libraries)|(swagger)|(X-[a-z0-9\\-]*)$"}},
      "required": ["t", "n", "u"], "additionalProperties": false})";
  for (const char* tokenizer : {"llama3", "qwen2.5", "mistral"}) {
    auto g = testing::CompilerFor(tokenizer).CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::int32_t loops = 0, before_match = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << tokenizer << ": state " << s;
      // A string body's loop (the declared keys are closed: only the three values loop on
      // an upper-case letter, a digit and a space), before or after its match.
      if (p.Step(s, 'Q') != s || p.Step(s, '7') != s || p.Step(s, ' ') != s) continue;
      ++loops;
      EXPECT_NE(CfgGrammarPeer(cfg).RegionUseOfState(s), 0) << tokenizer << ": state " << s;
      // Before `[a-z]`'s match: a lower-case letter leads to the loop after it.
      const StateId after = p.Step(s, 'q');
      before_match += after != s && after != CfgProgram::kDead && p.Step(after, 'q') == after;
    }
    EXPECT_GE(loops, 4) << tokenizer;
    EXPECT_GE(before_match, 1) << tokenizer;
  }
}

// A string of `minLength: 1` (`"` then a character then the loop) has a state for its first
// character apart from the loop's, which it equals (rule automata are not minimised): the state
// after the opening quote is two bytes before the loop and must still use the body's view, with
// every position equal to a walk of the whole trie.
TEST(RegionViews, AStringOfMinLengthOneUsesTheBodyView) {
  for (const char* text : {R"({"type": "string", "minLength": 1})",
                           R"({"type": "array", "items": {"type": "string", "minLength": 1}})"}) {
    auto g = Compiler().CompileSchema(text);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    const CfgProgram& p = cfg.program();
    std::int32_t two_before = 0;
    for (StateId s = 0; s < p.num_states; ++s) {
      auto fast = CfgGrammarPeer(cfg).FreshPositionOfState(s);
      auto walked = CfgGrammarPeer(cfg).TrieWalkedPositionOfState(s);
      ASSERT_TRUE(fast->SameContent(*walked)) << "state " << s << " of " << text;
      // The state after an opening quote of a non-empty string: it refuses `"`.
      bool after_quote = false;
      for (StateId q = 0; q < p.num_states; ++q) after_quote |= p.Step(q, '"') == s && q != s;
      if (after_quote && p.Step(s, '"') == CfgProgram::kDead && p.Step(s, 'a') != CfgProgram::kDead) {
        EXPECT_NE(CfgGrammarPeer(cfg).RegionUseOfState(s), 0) << "state " << s << " of " << text;
        ++two_before;
      }
    }
    EXPECT_GT(two_before, 0) << text;
  }
}

// A string constraint with a pattern, a format, lengths or exclusions is built into one token
// automaton per process (LexicalCache in schema_lexical.cc): equal constraints, in one schema
// or in two, are the same automaton, so the grammar keeps one rule for them and the lowering
// shares it. The languages must not change: the members still take exactly the strings the
// validator takes.
TEST(LexicalCache, EqualStringConstraintsShareOneAutomatonAcrossCompiles) {
  const std::string c =
      R"({"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "minLength": 3000})";
  const std::string two_members = R"({"type": "object", "properties": {"a": )" + c +
                                  R"(, "b": )" + c + R"(}, "required": ["a", "b"]})";
  const std::string one_member =
      R"({"type": "object", "properties": {"a": )" + c + R"(}, "required": ["a"]})";
  const std::string array = R"({"type": "array", "items": )" + c + "}";
  auto g2 = Compiler().CompileSchema(two_members);
  auto g1 = Compiler().CompileSchema(one_member);
  auto ga = Compiler().CompileSchema(array);
  ASSERT_TRUE(g2.ok() && g1.ok() && ga.ok());
  // The big rule (a few thousand states: a word pattern times 3,001 lengths; a minLength, since
  // a long maxLength beside a pattern is counted at run time instead) once per grammar,
  // with one source in all three.
  auto big_rules = [](const CfgProgram& p) {
    std::map<std::uint64_t, int> by_source;
    for (std::int32_t r = 0; r < p.NumRules(); ++r) {
      if (p.rules[r].shared_source != 0) ++by_source[p.rules[r].shared_source];
    }
    return by_source;
  };
  const auto b2 = big_rules(CfgOf(**g2)->program()), b1 = big_rules(CfgOf(**g1)->program()),
             ba = big_rules(CfgOf(**ga)->program());
  ASSERT_EQ(b2.size(), 1u);
  EXPECT_EQ(b2.begin()->second, 1) << "two members, two copies of the automaton";
  EXPECT_EQ(b1, b2);
  EXPECT_EQ(ba, b2);
  // Two members cost about what one does, not twice.
  EXPECT_LT(CfgOf(**g2)->program().num_states, CfgOf(**g1)->program().num_states + 100);
  const std::string words_2999 = std::string(1500, 'a') + " " + std::string(1498, 'b');
  ASSERT_EQ(words_2999.size(), 2999u);
  const std::string words_3000 = words_2999 + "z";  // the limit
  EXPECT_TRUE(Feed(*g2, R"({"a":")" + words_3000 + R"(","b":")" + words_3000 + R"("})"));
  EXPECT_FALSE(Feed(*g2, R"({"a":")" + words_3000 + R"(","b":")" + words_2999 + R"("})"));
  EXPECT_FALSE(Feed(*g2, R"({"a":")" + words_3000 + R"(","b":"x  y"})"));
  EXPECT_TRUE(Feed(*ga, R"([")" + words_3000 + R"(",")" + words_3000 + R"(z"])"));
  EXPECT_FALSE(Feed(*ga, R"([")" + words_3000 + R"(","Y"])"));
}

// Bounded numbers too: a schema whose objects repeat one bounded integer and one number range
// (as generated API schemas do) holds one automaton for each, and a member whose bounds differ
// keeps its own. Every value is still checked against its own bounds.
TEST(LexicalCache, EqualNumberConstraintsAreOneAutomaton) {
  const std::string port = R"({"type": "integer", "minimum": 1, "maximum": 65535})";
  const std::string ratio = R"({"type": "number", "exclusiveMinimum": 0, "maximum": 1})";
  const std::string schema = R"({"type": "object", "properties": {"a": )" + port +
                             R"(, "b": )" + ratio + R"(, "c": {"type": "object", "properties":
      {"a": )" + port + R"(, "b": )" + ratio + R"(, "n": {"type": "integer", "minimum": 1,
      "maximum": 65534}}, "additionalProperties": false}}, "additionalProperties": false})";
  auto s = Schema::Load(schema);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  auto lowered = schema::CompileSchemaToGrammar(**s);
  ASSERT_TRUE(lowered.ok()) << lowered.status().ToString();
  // The bounded values' automata: 1..65535 and the ratio, each met twice, and 1..65534 (no
  // other value here is an automaton node: the objects are closed).
  std::set<const ByteDfa*> automata;
  for (const grammar::Expr& e : lowered->grammar.exprs) {
    if (e.kind == grammar::ExprKind::kByteDfa) automata.insert(e.dfa.get());
  }
  EXPECT_EQ(automata.size(), 3u);
  auto g = Compiler().CompileSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Feed(*g, R"({"a":65535,"b":1,"c":{"a":1,"b":0.5,"n":65534}})"));
  EXPECT_FALSE(Feed(*g, R"({"a":65536,"b":1})"));
  EXPECT_FALSE(Feed(*g, R"({"a":1,"b":0})"));
  EXPECT_FALSE(Feed(*g, R"({"c":{"n":65535}})"));
  EXPECT_TRUE(Feed(*g, R"({"c":{"a":65535,"n":7}})"));
}

// What the cache keeps of a failure: a budget that ran out (max_dfa_states) is a property of the
// constraint and is kept; a deadline or a cancel is a property of one compile and is not, so the
// same constraint compiles afterwards.
TEST(LexicalCache, AStoppedCompileLeavesNoFailureBehind) {
  // (A pattern no other test uses, so the first compile below builds it.)
  const std::string schema = R"({"type": "array", "items": {"type": "string", "pattern":
      "^[a-z]+(-[a-z]+)*-stop$", "minLength": 5000}})";
  CompileOptions quick;
  quick.compile_timeout_ms = 1;
  auto stopped = Compiler().CompileSchema(schema, quick);
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(stopped.status().message().find("deadline"), std::string::npos)
      << stopped.status().ToString();
  auto again = Compiler().CompileSchema(schema);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  const std::string long_enough = std::string(4992, 'a') + "-cd-stop";  // 5,000 characters
  EXPECT_TRUE(Feed(*again, R"([")" + long_enough + R"("])"));
  EXPECT_FALSE(Feed(*again, R"([")" + long_enough.substr(1) + R"("])"));
  EXPECT_FALSE(Feed(*again, R"([")" + long_enough.substr(0, 4999) + R"("])"));
  // A budget: the same error each time, naming it. (A minLength: past the budget, a maxLength
  // would be counted at run time instead.)
  const std::string at_least = R"({"type": "array", "items": {"type": "string", "pattern":
      "^[a-z]+(-[a-z]+)*-stop$", "minLength": 5001}})";
  CompileOptions small;
  small.max_dfa_states = 1000;
  for (int i = 0; i < 2; ++i) {
    auto over = Compiler().CompileSchema(at_least, small);
    ASSERT_FALSE(over.ok());
    EXPECT_EQ(over.status().code(), StatusCode::kResourceLimit);
    EXPECT_NE(over.status().message().find("max_dfa_states = 1000"), std::string::npos)
        << over.status().ToString();
  }
  EXPECT_TRUE(Compiler().CompileSchema(at_least).ok());
}

TEST(SchemaLowering, SharedRuleCacheGivesTheSameAutomata) {
  const char* texts[] = {
      R"({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})",
      R"({"type": "array", "items": {"type": "object", "properties": {"x": {}, "y": {"enum": [1, "b"]}}}})",
      R"({})",
      R"({"properties": {"deep": {"properties": {"deeper": {"type": "object"}}}}, "required": ["deep"]})",
      R"({"anyOf": [{"type": "string", "format": "date"}, {"type": "object", "minProperties": 1}]})",
  };
  const Vocabulary& vocab = Compiler().vocabulary();
  int shared_rules = 0;
  for (const char* text : texts) {
    SCOPED_TRACE(text);
    auto s = Schema::Load(text);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    auto g = CompileSchemaToGrammar(**s);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (const auto& r : g->grammar.rules) shared_rules += r.shared ? 1 : 0;
    CfgCompileOptions fresh;
    fresh.max_unrolled_states = 256;
    fresh.reuse_shared_rules = false;
    CfgCompileOptions reuse = fresh;
    reuse.reuse_shared_rules = true;
    auto a = CompileCfg(g->grammar, vocab, fresh);
    auto b1 = CompileCfg(g->grammar, vocab, reuse);  // stores (or reuses an earlier schema's)
    auto b2 = CompileCfg(g->grammar, vocab, reuse);  // reuses
    ASSERT_TRUE(a.ok() && b1.ok() && b2.ok());
    EXPECT_EQ(a->num_states, b2->num_states);
    EXPECT_EQ(CanonicalProgram(*a), CanonicalProgram(*b1));
    EXPECT_EQ(CanonicalProgram(*a), CanonicalProgram(*b2));
    // byte_first (the bytes with a transition, from the lowering's ranges) matches the table.
    ASSERT_EQ(b2->byte_first.size(), static_cast<std::size_t>(b2->num_states));
    for (StateId st = 0; st < b2->num_states; ++st) {
      std::array<std::uint64_t, 4> bits{};
      for (int b = 0; b < 256; ++b) {
        if (b2->Step(st, static_cast<std::uint8_t>(b)) != CfgProgram::kDead) bits[b >> 6] |= 1ull << (b & 63);
      }
      EXPECT_EQ(bits, b2->byte_first[st]) << "state " << st;
    }
  }
  EXPECT_GT(shared_rules, 0);  // the cache was exercised
  // And through the compiler: instances of the any-value rules still behave.
  auto g = Compiler().CompileSchema(texts[1]);
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(Feed(*g, R"([{"x": {"k": [1, "s", null, {"z": true}]}, "y": "b"}])"));
  EXPECT_FALSE(Feed(*g, R"([{"x": {"k": [1, "s", null, {"z": tru}]}}])"));
}

}  // namespace
}  // namespace lockstep::schema

namespace lockstep::schema {
namespace {

// Where a compile's time went, as a user tracing a slow compile reads it: the schema compiled
// to a grammar, its rules lowered into automata, the runtime's tables, each timed and together
// within the compile's wall time; a grammar given as IR has no source phase, grammar text has
// its parse.
TEST(SchemaCompile, StatsSayWhereTheCompileWent) {
  const std::string text =
      ::lockstep::testing::ReadFile(::lockstep::testing::SourceDataDir() + "/tools/book_flight.json");
  ASSERT_FALSE(text.empty());
  const auto t0 = std::chrono::steady_clock::now();
  auto g = Compiler().CompileSchema(text);
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const CompiledGrammarStats s = (*g)->Stats();
  EXPECT_TRUE(s.is_grammar);
  EXPECT_GT(s.source_ms, 0);
  EXPECT_GT(s.compile_ms, 0);
  EXPECT_GT(s.tables_ms, 0);
  EXPECT_LE(s.source_ms + s.compile_ms + s.tables_ms, wall_ms);

  auto schema = Schema::Load(text);
  ASSERT_TRUE(schema.ok());
  auto ir = CompileSchemaToGrammar(**schema, SchemaCompileOptions());
  ASSERT_TRUE(ir.ok());
  auto from_ir = CompileGrammarIr(Compiler(), ir->grammar);
  ASSERT_TRUE(from_ir.ok());
  EXPECT_EQ((*from_ir)->Stats().source_ms, 0);
  EXPECT_GT((*from_ir)->Stats().tables_ms, 0);

  auto from_text = Compiler().CompileGrammar("root ::= \"a\" [0-9]+");
  ASSERT_TRUE(from_text.ok());
  EXPECT_GT((*from_text)->Stats().source_ms, 0);
}

}  // namespace
}  // namespace lockstep::schema
