// The validator on the official JSON-Schema-Test-Suite (../shared/data/json-schema-test-suite):
// every required test of draft2020-12, draft2019-09, draft7, draft6 and draft4, with remote
// references served from the suite's remotes/ directory as preloaded documents (never the network).
// optional/format is run with format assertions on and only reported.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "grammar/schema/json_schema.h"
#include "test_data.h"

namespace lockstep::schema {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// Required tests we knowingly fail, as "draft/file.json: case / test", each with its reason.
const std::set<std::string> kKnownFailures = {
    // None: the tests that `$ref` the official meta-schemas resolve to lockstep's own
    // (grammar/schema/json_schema_meta.cc).
};

std::string SuiteDir() { return testing::SharedDataDir() + "/json-schema-test-suite"; }

struct Tally {
  int passed = 0, total = 0;
  std::vector<std::string> failures;
};

std::vector<fs::path> JsonFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

void RunFile(const fs::path& file, const std::string& draft_name, bool formats,
             const LoadOptions& load, Tally* tally) {
  json cases = json::parse(testing::ReadFile(file.string()), nullptr, false);
  ASSERT_FALSE(cases.is_discarded()) << file;
  for (const json& c : cases) {
    auto schema = Schema::FromJson(c["schema"], load);
    ValidateOptions vo;
    vo.format_assertion = formats;
    Result<Validator> validator =
        schema.ok() ? Validator::Create(*schema, vo) : Result<Validator>(schema.status());
    for (const json& t : c["tests"]) {
      std::string name = draft_name + "/" + file.filename().string() + ": " +
                         c["description"].get<std::string>() + " / " +
                         t["description"].get<std::string>();
      ++tally->total;
      bool expected = t["valid"].get<bool>();
      std::string why;
      bool pass = false;
      if (!validator.ok()) {
        why = "schema error: " + validator.status().ToString();
      } else {
        Result<bool> r = validator->Validate(t["data"]);
        if (!r.ok()) {
          why = "validation error: " + r.status().ToString();
        } else {
          pass = *r == expected;
          if (!pass) why = std::string("expected ") + (expected ? "valid" : "invalid");
        }
      }
      if (pass) {
        ++tally->passed;
      } else {
        tally->failures.push_back(name + "  [" + why + "]");
      }
    }
  }
}

LoadOptions SuiteLoadOptions(SchemaDraft draft) {
  LoadOptions load;
  load.default_draft = draft;
  Status st = AddRemoteDirectory("http://localhost:1234/", SuiteDir() + "/remotes", &load.remotes);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return load;
}

void RunDraft(const std::string& draft_name, SchemaDraft draft) {
  if (!testing::HaveSharedData() || !fs::is_directory(SuiteDir() + "/tests/" + draft_name)) {
    GTEST_SKIP() << "shared data absent: " << SuiteDir() << "/tests/" << draft_name;
  }
  LoadOptions load = SuiteLoadOptions(draft);
  Tally tally;
  for (const fs::path& f : JsonFiles(SuiteDir() + "/tests/" + draft_name)) {
    RunFile(f, draft_name, false, load, &tally);
  }
  int known = 0;
  for (const std::string& f : tally.failures) {
    std::string key = f.substr(0, f.find("  ["));
    if (kKnownFailures.count(key)) {
      ++known;
      continue;
    }
    ADD_FAILURE() << "unexpected failure: " << f;
  }
  std::cout << "[ suite    ] " << draft_name << " required: " << tally.passed << "/" << tally.total
            << " passed (" << known << " known failures listed in the test)\n";

  Tally opt;
  fs::path fmt = SuiteDir() + "/tests/" + draft_name + "/optional/format";
  if (fs::is_directory(fmt)) {
    for (const fs::path& f : JsonFiles(fmt)) RunFile(f, draft_name, true, load, &opt);
    std::cout << "[ suite    ] " << draft_name << " optional/format (assertions on): " << opt.passed
              << "/" << opt.total << " passed\n";
    if (std::getenv("LOCKSTEP_SUITE_VERBOSE")) {
      for (const std::string& f : opt.failures) std::cout << "  optional miss: " << f << "\n";
    }
  }
  Tally other;  // optional/*.json: bignum, ECMA regex, cross-draft, ...
  fs::path optional = SuiteDir() + "/tests/" + draft_name + "/optional";
  if (fs::is_directory(optional)) {
    for (const fs::path& f : JsonFiles(optional)) RunFile(f, draft_name, false, load, &other);
    std::cout << "[ suite    ] " << draft_name << " optional (other): " << other.passed << "/"
              << other.total << " passed\n";
    if (std::getenv("LOCKSTEP_SUITE_VERBOSE")) {
      for (const std::string& f : other.failures) std::cout << "  optional miss: " << f << "\n";
    }
  }
}

TEST(JsonSchemaSuite, Draft2020_12) { RunDraft("draft2020-12", SchemaDraft::k2020_12); }
TEST(JsonSchemaSuite, Draft2019_09) { RunDraft("draft2019-09", SchemaDraft::k2019_09); }
TEST(JsonSchemaSuite, Draft7) { RunDraft("draft7", SchemaDraft::k7); }
TEST(JsonSchemaSuite, Draft6) { RunDraft("draft6", SchemaDraft::k6); }
TEST(JsonSchemaSuite, Draft4) { RunDraft("draft4", SchemaDraft::k4); }

TEST(JsonSchemaValidator, ErrorsNameInstanceAndSchemaPointers) {
  auto schema =
      Schema::Load(R"({"properties": {"a": {"type": "array", "items": {"minimum": 3}}}})");
  ASSERT_TRUE(schema.ok()) << schema.status().ToString();
  auto v = Validator::Create(*schema);
  ASSERT_TRUE(v.ok());
  std::vector<ValidationError> errors;
  auto r = v->ValidateText(R"({"a": [5, 1]})", &errors);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].instance_pointer, "/a/1");
  EXPECT_EQ(errors[0].schema_pointer, "/properties/a/items/minimum");
}

TEST(JsonSchemaValidator, UnknownRemoteRefIsAnErrorWithItsPointer) {
  auto schema = Schema::Load(R"({"$defs": {"x": {"$ref": "http://example.com/nope.json"}}})");
  ASSERT_FALSE(schema.ok());
  EXPECT_EQ(schema.status().code(), StatusCode::kInvalidSchema);
  EXPECT_EQ(schema.status().location(), "/$defs/x/$ref");
}

TEST(JsonSchemaValidator, LookaroundPatternIsUnsupportedNotSilent) {
  // (Lookaheads right after a leading '^' are supported: LeadingLookaheadsKeepEcmaMeaning.)
  auto schema = Schema::Load(R"j({"properties": {"a": {"pattern": "a(?!x)"}}})j");
  ASSERT_TRUE(schema.ok());
  auto v = Validator::Create(*schema);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kUnsupported);
  EXPECT_EQ(v.status().location(), "/properties/a/pattern");
}

// "^(?=A)(?!B)R": the verdicts are ECMA-262's, written by hand (a lookahead at the start looks at
// the whole text from there, and the rest must still match from the start).
TEST(JsonSchemaValidator, LeadingLookaheadsKeepEcmaMeaning) {
  const struct {
    const char* pattern;
    std::vector<std::pair<const char*, bool>> strings;
  } kCases[] = {
      {R"(^(?!@@)[\w@]+$)", {{"@@x", false}, {"@x", true}, {"a@@", true}, {"", false}}},
      {R"(^(?=[^=]+$)(?!\s+$)(.|\n)+$)",
       {{"a=b", false}, {"   ", false}, {"ab c", true}, {"", false}, {" x", true}}},
      {R"(^(?!(if|for)$)[a-zA-Z_]\w*$)",
       {{"if", false}, {"iff", true}, {"for", false}, {"_x", true}, {"fo", true}, {"1a", false}}},
      {R"(^(?!.*(\{A\}|[<>])).*\.txt$)",
       {{"a.txt", true}, {"{A}.txt", false}, {"x<y.txt", false}, {"{B}.txt", true},
        {"a.txt.gz", false}}},
      {R"(^(?=.*[0-9])(?=.*[a-z]))", {{"a1", true}, {"1", false}, {"a", false}, {"--9-z", true}}},
  };
  for (const auto& c : kCases) {
    json schema = {{"type", "string"}, {"pattern", c.pattern}};
    auto s = Schema::Load(schema.dump());
    ASSERT_TRUE(s.ok()) << c.pattern;
    auto v = Validator::Create(*s);
    ASSERT_TRUE(v.ok()) << c.pattern << ": " << v.status().ToString();
    for (const auto& [text, valid] : c.strings) {
      auto r = v->Validate(json(text));
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(*r, valid) << c.pattern << " on \"" << text << "\"";
    }
  }
}

TEST(JsonSchemaValidator, MalformedKeywordsAreSchemaErrors) {
  const std::pair<const char*, const char*> kCases[] = {
      {R"({"properties": {"a": {"minLength": -1}}})", "/properties/a/minLength"},
      {R"({"type": "int"})", "/type"},
      {R"({"items": {"multipleOf": 0}})", "/items/multipleOf"},
      {R"({"allOf": []})", "/allOf"},
      {R"({"$defs": {"a": 3}})", "/$defs/a"},
      {R"({"$ref": "#/$defs/missing"})", "/$ref"},
      {R"({"$ref": "#nowhere"})", "/$ref"},
  };
  for (const auto& [text, where] : kCases) {
    auto s = Schema::Load(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidSchema) << text;
    EXPECT_EQ(s.status().location(), where) << text;
  }
}

TEST(JsonSchemaValidator, Draft7RefOverridesSiblings) {
  auto s = Schema::Load(R"({"$schema": "http://json-schema.org/draft-07/schema#",
      "definitions": {"s": {"type": "string"}}, "$ref": "#/definitions/s", "maxLength": 1})");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->draft(), Draft::k7);
  EXPECT_EQ((*s)->dialect(), SchemaDraft::k7);
  auto v = Validator::Create(*s);
  EXPECT_TRUE(*v->ValidateText(R"("long string")"));
  EXPECT_FALSE(*v->ValidateText("1"));
}

TEST(JsonSchemaValidator, MultipleOfIsExactOnDecimals) {
  auto check = [](const char* schema_text, const char* inst) {
    auto s = Schema::Load(schema_text);
    auto v = Validator::Create(*s);
    return *v->ValidateText(inst);
  };
  EXPECT_TRUE(check(R"({"multipleOf": 0.01})", "19.99"));
  EXPECT_FALSE(check(R"({"multipleOf": 0.01})", "19.999"));
  EXPECT_TRUE(check(R"({"multipleOf": 1e-8})", "12391239123"));
  EXPECT_FALSE(check(R"({"multipleOf": 0.123456789})", "1e308"));
  EXPECT_TRUE(check(R"({"multipleOf": 3})", "18446744073709551615"));
}

TEST(JsonSchemaValidator, RunawayRecursionIsAResourceLimit) {
  auto s = Schema::Load(R"({"$ref": "#"})");
  ASSERT_TRUE(s.ok());
  auto v = Validator::Create(*s);
  auto r = v->ValidateText("1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
}


// Every schema of the official suite is itself a valid schema: our own meta-schemas must accept
// them all (and reject malformed ones), under the draft each suite is written for.
TEST(JsonSchemaMeta, BuiltinMetaSchemasAcceptEverySuiteSchema) {
  if (!testing::HaveSharedData()) GTEST_SKIP() << "shared data absent: " << SuiteDir();
  struct Draft_ {
    const char* dir;
    const char* meta;
    SchemaDraft draft;
  };
  for (const Draft_& d :
       {Draft_{"draft2020-12", "https://json-schema.org/draft/2020-12/schema",
               SchemaDraft::k2020_12},
        Draft_{"draft2019-09", "https://json-schema.org/draft/2019-09/schema",
               SchemaDraft::k2019_09},
        Draft_{"draft7", "http://json-schema.org/draft-07/schema#", SchemaDraft::k7},
        Draft_{"draft6", "http://json-schema.org/draft-06/schema#", SchemaDraft::k6},
        Draft_{"draft4", "http://json-schema.org/draft-04/schema#", SchemaDraft::k4}}) {
    LoadOptions load;
    load.default_draft = d.draft;
    auto meta = Schema::Load(std::string(R"({"$ref": ")") + d.meta + "\"}", load);
    ASSERT_TRUE(meta.ok()) << meta.status().ToString();
    auto v = Validator::Create(*meta);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    int checked = 0;
    for (const fs::path& f : JsonFiles(SuiteDir() + "/tests/" + d.dir)) {
      json cases = json::parse(testing::ReadFile(f.string()), nullptr, false);
      for (const json& c : cases) {
        std::vector<ValidationError> errors;
        Result<bool> r = v->Validate(c["schema"], &errors);
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_TRUE(*r) << d.dir << "/" << f.filename().string() << ": "
                        << c["description"].get<std::string>() << ": "
                        << (errors.empty() ? "" : errors[0].schema_pointer + " " + errors[0].message);
        ++checked;
      }
    }
    std::cout << "[ meta     ] " << d.dir << ": " << checked << " suite schemas checked\n";
    EXPECT_GT(checked, 150);
    for (const char* bad : {R"({"minLength": "3"})", R"({"type": ["string", "string"]})",
                            R"({"properties": {"a": {"required": [1]}}})", R"({"allOf": []})",
                            R"({"items": {"maxItems": -1}})", R"({"enum": 3})"}) {
      EXPECT_FALSE(*v->ValidateText(bad)) << d.dir << ": " << bad;
    }
  }
}

TEST(JsonSchemaValidator, InstancesParseWithSimdjsonAndReportBadJsonWithAnOffset) {
  auto ok = ParseInstance(R"({"a": [1, -2, 3.5, "x", null, true], "b": 18446744073709551615})");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE((*ok)["a"][0].is_number_integer());
  EXPECT_TRUE((*ok)["b"].is_number_unsigned());
  auto big = ParseInstance("123456789012345678901234567890");  // past 64 bits: still JSON
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_TRUE(big->is_number_float());
  auto bad = ParseInstance(R"({"a": [1, 2,]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().location(), "byte 12");
  auto deep = ParseInstance(std::string(5000, '[') + std::string(5000, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kResourceLimit);
}


// JSONSchemaBench dev set (Glaiveai2K): every schema loads, and the validator's verdict on each
// test instance is its label (1,634 valid, 1,104 invalid). MaskBench's labels treat `format` as
// an assertion (many invalid instances differ only in a date or an email), so formats are on.
TEST(JsonSchemaBenchDev, ValidatorAgreesWithEveryLabel) {
  const std::string dir = testing::SharedDataDir() + "/jsonschemabench-dev/maskbench";
  if (!testing::HaveSharedData() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "shared data absent: " << dir;
  }
  int schemas = 0, valid = 0, invalid = 0;
  for (const fs::path& f : JsonFiles(dir)) {
    json doc = json::parse(testing::ReadFile(f.string()), nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << f;
    auto s = Schema::FromJson(doc["schema"]);
    ASSERT_TRUE(s.ok()) << f.filename() << ": " << s.status().ToString();
    ValidateOptions vo;
    vo.format_assertion = true;
    auto v = Validator::Create(*s, vo);
    ASSERT_TRUE(v.ok()) << f.filename() << ": " << v.status().ToString();
    ++schemas;
    for (const json& t : doc["tests"]) {
      const bool expected = t["valid"].get<bool>();
      Result<bool> r = v->ValidateText(t["data"].dump());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(*r, expected) << f.filename() << ": " << t.value("description", "");
      (expected ? valid : invalid) += 1;
    }
  }
  std::cout << "[ devset   ] " << schemas << " schemas, " << valid << " valid and " << invalid
            << " invalid instances checked\n";
  EXPECT_EQ(valid, 1634);
  EXPECT_EQ(invalid, 1104);
}


// Patterns keep ECMA-262's meaning where RE2's differs.
TEST(JsonSchemaValidator, PatternsFollowEcmaNotRe2) {
  auto check = [](const char* pattern, const std::string& value) {
    auto s = Schema::FromJson(json{{"pattern", pattern}});
    auto v = Validator::Create(*s);
    EXPECT_TRUE(v.ok()) << pattern << ": " << v.status().ToString();
    return *v->Validate(json(value));
  };
  EXPECT_FALSE(check("^a.b$", "a\rb"));           // `.` excludes every line terminator
  EXPECT_FALSE(check("^a.b$", "a\u2028b"));
  EXPECT_TRUE(check("^a.b$", "a\tb"));
  EXPECT_TRUE(check("^\\s$", "\u00a0"));          // `\s` is Unicode white space
  EXPECT_TRUE(check("^\\s$", "\ufeff"));
  EXPECT_FALSE(check("^\\S$", "\u3000"));
  EXPECT_TRUE(check("^[\\s.]+$", " ."));          // inside a class `.` is a dot
  EXPECT_FALSE(check("^[\\s.]+$", "x"));
  EXPECT_TRUE(check("^\\u0041\\u00e9$", "A\u00e9"));  // \uXXXX escapes
  EXPECT_TRUE(check("^\\cC$", "\x03"));           // control escapes
  EXPECT_FALSE(check("^\\cC$", "C"));
}

}  // namespace
}  // namespace lockstep::schema
