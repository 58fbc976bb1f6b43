// The public JSON Schema validator (include/lockstep/validator.h). First the official
// JSON-Schema-Test-Suite (../shared/data/json-schema-test-suite) through the public API, given
// text as a user gives it, against the internal validator (grammar/schema/json_schema.h) given
// the parsed values: the same schema statuses, the same verdicts and the same errors on every
// test of every draft folder, and the suite's expected verdict on every required test of
// draft2020-12 and draft7. Then the API's own contract: errors and their pointers, options,
// failures of the call, JsonInstance reuse, concurrent validation on one validator.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "grammar/schema/json_schema.h"
#include "lockstep/validator.h"
#include "test_data.h"

namespace lockstep {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string SuiteDir() { return testing::SharedDataDir() + "/json-schema-test-suite"; }

std::vector<fs::path> SuiteFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Describe(const std::vector<ValidationError>& errors) {
  std::string out;
  for (const ValidationError& e : errors) {
    out += "\n    " + e.instance_pointer + " | " + e.schema_pointer + " | " + e.message;
  }
  return out;
}

std::vector<ValidationError> Public(const std::vector<schema::ValidationError>& errors) {
  std::vector<ValidationError> out;
  for (const auto& e : errors) out.push_back({e.instance_pointer, e.schema_pointer, e.message});
  return out;
}

bool SameErrors(const std::vector<ValidationError>& a, const std::vector<ValidationError>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const auto& x, const auto& y) {
    return x.instance_pointer == y.instance_pointer && x.schema_pointer == y.schema_pointer &&
           x.message == y.message;
  });
}

struct Agreement {
  int schemas = 0, unusable = 0, tests = 0, expected_misses = 0;
};

// One suite file: every case's schema through both APIs, then every test's data.
void CompareFile(const fs::path& file, const std::string& draft_dir, SchemaDraft draft,
                 bool formats, bool required, Agreement* tally) {
  const json cases = json::parse(testing::ReadFile(file.string()), nullptr, false);
  ASSERT_FALSE(cases.is_discarded()) << file;
  SchemaValidatorOptions options;
  options.default_draft = draft;
  options.format_assertion = formats;
  ASSERT_TRUE(options.AddRemoteDirectory("http://localhost:1234/", SuiteDir() + "/remotes").ok());
  schema::LoadOptions load;
  load.default_draft = draft;
  load.remotes = options.remotes;
  schema::ValidateOptions vo;
  vo.format_assertion = formats;
  for (const json& c : cases) {
    const std::string where =
        draft_dir + "/" + file.filename().string() + ": " + c["description"].get<std::string>();
    ++tally->schemas;
    auto internal_schema = schema::Schema::FromJson(c["schema"], load);
    Result<schema::Validator> internal = internal_schema.ok()
                                             ? schema::Validator::Create(*internal_schema, vo)
                                             : Result<schema::Validator>(internal_schema.status());
    Result<SchemaValidator> pub = SchemaValidator::Create(c["schema"].dump(), options);
    ASSERT_EQ(pub.ok(), internal.ok())
        << where << ": " << pub.status().ToString() << " vs " << internal.status().ToString();
    if (!pub.ok()) {
      EXPECT_EQ(pub.status().ToString(), internal.status().ToString()) << where;
      ++tally->unusable;
      continue;
    }
    EXPECT_EQ(pub->draft(), (*internal_schema)->dialect()) << where;
    for (const json& t : c["tests"]) {
      const std::string name = where + " / " + t["description"].get<std::string>();
      ++tally->tests;
      std::vector<schema::ValidationError> internal_errors;
      Result<bool> expected = internal->Validate(t["data"], &internal_errors);
      Result<ValidationResult> got = pub->Validate(t["data"].dump());
      ASSERT_EQ(got.ok(), expected.ok()) << name << ": " << got.status().ToString();
      if (!got.ok()) {
        EXPECT_EQ(got.status().ToString(), expected.status().ToString()) << name;
        continue;
      }
      EXPECT_EQ(got->valid, *expected) << name;
      EXPECT_TRUE(SameErrors(got->errors, Public(internal_errors)))
          << name << "\n  public:" << Describe(got->errors)
          << "\n  internal:" << Describe(Public(internal_errors));
      if (got->valid) {
        EXPECT_TRUE(got->errors.empty()) << name << Describe(got->errors);
      }
      if (got->valid != t["valid"].get<bool>()) {
        ++tally->expected_misses;
        // The suite's required tests all pass (tests/grammar/schema/json_schema_suite_test.cc).
        EXPECT_FALSE(required) << name << ": the suite expects "
                               << (t["valid"].get<bool>() ? "valid" : "invalid");
      }
    }
  }
}

void CompareDraft(const std::string& draft_dir, SchemaDraft draft, bool required_passes) {
  const fs::path dir = SuiteDir() + "/tests/" + draft_dir;
  if (!testing::HaveSharedData() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "shared data absent: " << dir.string();
  }
  Agreement tally;
  for (const fs::path& f : SuiteFiles(dir)) {
    const std::string rel = fs::relative(f, dir).generic_string();
    const bool optional = rel.rfind("optional/", 0) == 0;
    const bool formats = rel.rfind("optional/format/", 0) == 0;
    CompareFile(f, draft_dir, draft, formats, required_passes && !optional, &tally);
  }
  std::cout << "[ public   ] " << draft_dir << ": " << tally.schemas << " schemas ("
            << tally.unusable << " refused by both), " << tally.tests
            << " tests; the public and internal validators agree on each; " << tally.expected_misses
            << " verdicts differ from the suite's" << (required_passes ? " (optional tests)" : "")
            << "\n";
  EXPECT_GT(tally.tests, 500);
}

TEST(SchemaValidatorSuite, Draft2020_12) {
  CompareDraft("draft2020-12", SchemaDraft::k2020_12, true);
}
TEST(SchemaValidatorSuite, Draft7) { CompareDraft("draft7", SchemaDraft::k7, true); }
TEST(SchemaValidatorSuite, Draft2019_09) {
  CompareDraft("draft2019-09", SchemaDraft::k2019_09, true);
}
TEST(SchemaValidatorSuite, Draft6) { CompareDraft("draft6", SchemaDraft::k6, true); }
TEST(SchemaValidatorSuite, Draft4) { CompareDraft("draft4", SchemaDraft::k4, true); }

// ---- the API's contract -----------------------------------------------------------------------

SchemaValidator Make(const std::string& schema_text, const SchemaValidatorOptions& o = {}) {
  Result<SchemaValidator> v = SchemaValidator::Create(schema_text, o);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return std::move(v).value();
}

TEST(SchemaValidator, ErrorsNameInstanceAndSchemaPointers) {
  SchemaValidator v = Make(R"({"properties": {"a": {"type": "array", "items": {"minimum": 3}},
                                              "b": {"type": "string"}}})");
  Result<ValidationResult> r = v.Validate(R"({"a": [5, 1], "b": 2})");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->valid);
  ASSERT_EQ(r->errors.size(), 2u) << Describe(r->errors);
  EXPECT_EQ(r->errors[0].instance_pointer, "/a/1");
  EXPECT_EQ(r->errors[0].schema_pointer, "/properties/a/items/minimum");
  EXPECT_FALSE(r->errors[0].message.empty());
  EXPECT_EQ(r->errors[1].instance_pointer, "/b");
  EXPECT_EQ(r->errors[1].schema_pointer, "/properties/b/type");
  Result<ValidationResult> ok = v.Validate(R"({"a": [3, 4], "b": "x"})");
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(ok->valid);
  EXPECT_TRUE(ok->errors.empty());
}

TEST(SchemaValidator, FailedBranchesDoNotLeakErrors) {
  SchemaValidator v = Make(R"({"anyOf": [{"type": "string"}, {"minimum": 3}]})");
  Result<ValidationResult> r = v.Validate("5");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->valid);
  EXPECT_TRUE(r->errors.empty()) << Describe(r->errors);
}

TEST(SchemaValidator, InstanceThatIsNotJsonFailsTheCall) {
  SchemaValidator v = Make(R"({"type": "object"})");
  Result<ValidationResult> bad = v.Validate(R"({"a": [1, 2,]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().location(), "byte 12");
  Result<ValidationResult> two = v.Validate("{} {}");
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kInvalidArgument);
  Result<ValidationResult> deep = v.Validate(std::string(5000, '[') + std::string(5000, ']'));
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), StatusCode::kResourceLimit);
  EXPECT_TRUE(v.Validate(" {}\n").ok());  // surrounding whitespace is fine
}

TEST(SchemaValidator, UnusableSchemasAreLocatedErrors) {
  const struct {
    const char* schema;
    StatusCode code;
    const char* location;
  } kCases[] = {
      {"{", StatusCode::kInvalidSchema, "1:2"},  // not JSON: line:column
      {R"({"properties": {"a": {"minLength": -1}}})", StatusCode::kInvalidSchema,
       "/properties/a/minLength"},
      {R"({"$defs": {"x": {"$ref": "http://example.com/nope.json"}}})", StatusCode::kInvalidSchema,
       "/$defs/x/$ref"},
      {R"j({"properties": {"a": {"pattern": "x(?!y)"}}})j", StatusCode::kUnsupported,
       "/properties/a/pattern"},
  };
  for (const auto& c : kCases) {
    Result<SchemaValidator> v = SchemaValidator::Create(c.schema);
    ASSERT_FALSE(v.ok()) << c.schema;
    EXPECT_EQ(v.status().code(), c.code) << c.schema;
    EXPECT_EQ(v.status().location(), c.location) << c.schema;
  }
  Result<SchemaValidator> bad_json = SchemaValidator::Create("{\n  \"a\": tru\n}");
  ASSERT_FALSE(bad_json.ok());
  EXPECT_EQ(bad_json.status().location().rfind("2:", 0), 0u) << bad_json.status().ToString();
  EXPECT_NE(bad_json.status().message().find("schema is not valid JSON: "), std::string::npos);
  // A number the parser cannot hold is refused the same way (no offset), never thrown.
  Result<SchemaValidator> huge = SchemaValidator::Create(R"({"oneOf": 33333333e953})");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidSchema);
  SchemaValidatorOptions o;
  o.max_depth = 0;
  Result<SchemaValidator> v = SchemaValidator::Create("{}", o);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(v.status().location(), "max_depth");
}

TEST(SchemaValidator, DraftNames) {
  const std::pair<const char*, SchemaDraft> kNames[] = {
      {"4", SchemaDraft::k4},
      {"draft-04", SchemaDraft::k4},
      {"draft4", SchemaDraft::k4},
      {"http://json-schema.org/draft-04/schema#", SchemaDraft::k4},
      {"6", SchemaDraft::k6},
      {"draft-06", SchemaDraft::k6},
      {"7", SchemaDraft::k7},
      {"draft-07", SchemaDraft::k7},
      {"draft7", SchemaDraft::k7},
      {"2019-09", SchemaDraft::k2019_09},
      {"draft2019-09", SchemaDraft::k2019_09},
      {"https://json-schema.org/draft/2019-09/schema", SchemaDraft::k2019_09},
      {"2020-12", SchemaDraft::k2020_12},
      {"https://json-schema.org/draft/2020-12/schema", SchemaDraft::k2020_12},
  };
  for (const auto& [name, draft] : kNames) EXPECT_EQ(ParseSchemaDraft(name), draft) << name;
  for (const char* bad : {"", "5", "draft-05", "2021-01", "draft", "http://example.com/schema"}) {
    EXPECT_EQ(ParseSchemaDraft(bad), std::nullopt) << bad;
  }
  for (SchemaDraft d : {SchemaDraft::k4, SchemaDraft::k6, SchemaDraft::k7, SchemaDraft::k2019_09,
                        SchemaDraft::k2020_12}) {
    EXPECT_EQ(ParseSchemaDraft(SchemaDraftName(d)), d) << SchemaDraftName(d);
  }
}

// What each older draft changes (docs/json-schema.md, "Drafts").
TEST(SchemaValidator, OlderDraftsAreReadAsTheirOwn) {
  auto with = [](SchemaDraft d, const std::string& schema) {
    SchemaValidatorOptions o;
    o.default_draft = d;
    return Make(schema, o);
  };
  // Draft-04: 1.0 is no integer; boolean exclusive bounds; `id`; no `const`.
  SchemaValidator d4 = with(SchemaDraft::k4, R"({"type": "integer"})");
  EXPECT_FALSE(d4.Validate("12345.0")->valid);
  EXPECT_TRUE(d4.Validate("12345")->valid);
  EXPECT_TRUE(with(SchemaDraft::k6, R"({"type": "integer"})").Validate("12345.0")->valid);
  SchemaValidator ex = with(SchemaDraft::k4, R"({"maximum": 5, "exclusiveMaximum": true})");
  EXPECT_FALSE(ex.Validate("5")->valid);
  EXPECT_TRUE(ex.Validate("4.5")->valid);
  EXPECT_TRUE(with(SchemaDraft::k4, R"({"const": 1})").Validate("2")->valid);
  SchemaValidator id = with(SchemaDraft::k4, R"({"id": "http://x.test/root.json",
      "properties": {"id": {"type": "string"}}, "definitions": {"i": {"type": "integer"}},
      "items": {"$ref": "http://x.test/root.json#/definitions/i"}})");
  EXPECT_TRUE(id.Validate(R"({"id": "a"})")->valid);
  EXPECT_FALSE(id.Validate(R"({"id": 1})")->valid);
  EXPECT_FALSE(id.Validate(R"(["a"])")->valid);
  // Draft-06: no if/then/else.
  EXPECT_TRUE(with(SchemaDraft::k6, R"({"if": true, "then": false})").Validate("1")->valid);
  EXPECT_FALSE(with(SchemaDraft::k7, R"({"if": true, "then": false})").Validate("1")->valid);
  // 2019-09: `items` arrays and additionalItems; prefixItems is unknown; $recursiveRef.
  SchemaValidator tuple =
      with(SchemaDraft::k2019_09, R"({"items": [{"type": "integer"}], "additionalItems": false})");
  EXPECT_TRUE(tuple.Validate("[1]")->valid);
  EXPECT_FALSE(tuple.Validate("[1, 2]")->valid);
  EXPECT_FALSE(tuple.Validate(R"(["a"])")->valid);
  EXPECT_TRUE(with(SchemaDraft::k2019_09, R"({"prefixItems": [{"type": "integer"}]})")
                  .Validate(R"(["a"])")
                  ->valid);
  SchemaValidator tree = with(SchemaDraft::k2019_09, R"({"$recursiveAnchor": true,
      "type": "object", "additionalProperties": {"$recursiveRef": "#"}})");
  EXPECT_TRUE(tree.Validate(R"({"a": {"b": {}}})")->valid);
  EXPECT_FALSE(tree.Validate(R"({"a": {"b": 1}})")->valid);
}

TEST(SchemaValidator, DraftFromSchemaElseTheDefault) {
  // `dependencies` is a draft-07 keyword; 2020-12 reads it as an unknown one (an annotation).
  const std::string s = R"({"dependencies": {"a": ["b"]}})";
  EXPECT_EQ(Make(s).draft(), SchemaDraft::k2020_12);
  EXPECT_TRUE(Make(s).Validate(R"({"a": 1})")->valid);
  SchemaValidatorOptions d7;
  d7.default_draft = SchemaDraft::k7;
  SchemaValidator v7 = Make(s, d7);
  EXPECT_EQ(v7.draft(), SchemaDraft::k7);
  EXPECT_FALSE(v7.Validate(R"({"a": 1})")->valid);
  EXPECT_TRUE(v7.Validate(R"({"a": 1, "b": 2})")->valid);
  // A known $schema wins over the default.
  SchemaValidator named = Make(
      R"({"$schema": "http://json-schema.org/draft-07/schema#", "dependencies": {"a": ["b"]}})");
  EXPECT_EQ(named.draft(), SchemaDraft::k7);
  EXPECT_FALSE(named.Validate(R"({"a": 1})")->valid);
  SchemaValidator newer = Make(R"({"$schema": "https://json-schema.org/draft/2020-12/schema",
                                   "dependencies": {"a": ["b"]}})",
                               d7);
  EXPECT_EQ(newer.draft(), SchemaDraft::k2020_12);
  EXPECT_TRUE(newer.Validate(R"({"a": 1})")->valid);
}

TEST(SchemaValidator, FormatsAreAnnotationsUnlessAsserted) {
  const std::string s = R"({"format": "date"})";
  EXPECT_TRUE(Make(s).Validate(R"("2024-02-30")")->valid);
  SchemaValidatorOptions o;
  o.format_assertion = true;
  Result<ValidationResult> r = Make(s, o).Validate(R"("2024-02-30")");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->valid);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].schema_pointer, "/format");
  EXPECT_TRUE(Make(s, o).Validate(R"("2024-02-29")")->valid);
}

TEST(SchemaValidator, UriTemplateLiteralsExcludeTheApostrophe) {
  // RFC 6570 section 2.1: literals are any Unicode character except CTL, SP, DQUOTE, "'", "%"
  // (aside from pct-encoded), "<", ">", "\", "^", "`", "{", "|", "}".
  SchemaValidatorOptions o;
  o.format_assertion = true;
  SchemaValidator v = Make(R"({"format": "uri-template"})", o);
  EXPECT_TRUE(v.Validate(R"("http://example.com/{id}?q=a!b(c)*")")->valid);
  EXPECT_FALSE(v.Validate(R"("http://example.com/{id}'s")")->valid);
  EXPECT_TRUE(v.Validate(R"("http://example.com/%27")")->valid);
}

TEST(SchemaValidator, RemoteDocumentsFromTextAndFromADirectory) {
  const std::string s = R"({"properties": {"n": {"$ref": "http://example.test/int.json"}}})";
  SchemaValidatorOptions o;
  o.remotes["http://example.test/int.json"] = R"({"type": "integer"})";
  SchemaValidator v = Make(s, o);
  EXPECT_TRUE(v.Validate(R"({"n": 3})")->valid);
  Result<ValidationResult> r = v.Validate(R"({"n": 3.5})");
  ASSERT_FALSE(r->valid);
  ASSERT_EQ(r->errors.size(), 1u);
  EXPECT_EQ(r->errors[0].schema_pointer, "http://example.test/int.json#/type");

  const fs::path dir =
      fs::temp_directory_path() / ("lockstep_remote_" + std::to_string(::getpid()));
  fs::create_directories(dir / "sub");
  { std::ofstream(dir / "sub" / "int.json") << R"({"type": "integer"})"; }
  SchemaValidatorOptions from_dir;
  ASSERT_TRUE(from_dir.AddRemoteDirectory("http://example.test/", dir.string()).ok());
  EXPECT_EQ(from_dir.remotes.count("http://example.test/sub/int.json"), 1u);
  // A base without its trailing '/' names the same directory.
  SchemaValidatorOptions no_slash;
  ASSERT_TRUE(no_slash.AddRemoteDirectory("http://example.test/v1", dir.string()).ok());
  EXPECT_EQ(no_slash.remotes.count("http://example.test/v1/sub/int.json"), 1u);
  EXPECT_EQ(no_slash.remotes.size(), 1u);
  EXPECT_TRUE(Make(R"({"$ref": "http://example.test/v1/sub/int.json"})", no_slash)
                  .Validate("3")
                  ->valid);
  fs::remove_all(dir);
  SchemaValidator vd = Make(R"({"$ref": "http://example.test/sub/int.json"})", from_dir);
  EXPECT_TRUE(vd.Validate("3")->valid);
  EXPECT_FALSE(vd.Validate("\"3\"")->valid);

  Status missing = from_dir.AddRemoteDirectory("http://x.test/", (dir / "absent").string());
  EXPECT_EQ(missing.code(), StatusCode::kIoError);
  EXPECT_EQ(missing.location(), (dir / "absent").string());
}

TEST(SchemaValidator, MaxErrorsBoundsTheListNotTheVerdict) {
  const std::string s = R"({"items": {"type": "string"}})";
  SchemaValidatorOptions two;
  two.max_errors = 2;
  Result<ValidationResult> r = Make(s, two).Validate("[1, 2, 3, 4]");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->valid);
  EXPECT_EQ(r->errors.size(), 2u);
  SchemaValidatorOptions none;
  none.max_errors = 0;
  SchemaValidator verdict_only = Make(s, none);
  r = verdict_only.Validate("[1, 2, 3, 4]");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->valid);
  EXPECT_TRUE(r->errors.empty());
  EXPECT_TRUE(verdict_only.Validate(R"(["a", "b"])")->valid);
}

TEST(SchemaValidator, RunawayRecursionFailsAndValidateIntoKeepsTheErrorsFoundBefore) {
  SchemaValidator v = Make(R"({"allOf": [{"type": "string"}, {"$ref": "#"}]})");
  Result<ValidationResult> r = v.Validate("1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
  Result<JsonInstance> one = JsonInstance::Parse("1");
  ASSERT_TRUE(one.ok());
  ValidationResult partial;
  partial.valid = true;
  Status st = v.ValidateInto(*one, &partial);
  EXPECT_EQ(st.code(), StatusCode::kResourceLimit);
  EXPECT_FALSE(partial.valid);
  EXPECT_FALSE(partial.errors.empty());
  EXPECT_LE(partial.errors.size(), SchemaValidatorOptions().max_errors);
  EXPECT_EQ(partial.errors[0].schema_pointer, "/allOf/0/type");
}

TEST(SchemaValidator, OneParsedInstanceAgainstSeveralValidators) {
  Result<JsonInstance> inst = JsonInstance::Parse(R"({"a": 18446744073709551615})");
  ASSERT_TRUE(inst.ok()) << inst.status().ToString();
  EXPECT_TRUE(Make(R"({"properties": {"a": {"type": "integer"}}})").Validate(*inst)->valid);
  EXPECT_FALSE(Make(R"({"properties": {"a": {"maximum": 5}}})").Validate(*inst)->valid);
  JsonInstance copy = *inst;  // copies share the parsed value
  EXPECT_TRUE(Make(R"({"required": ["a"]})").Validate(copy)->valid);
  Result<JsonInstance> bad = JsonInstance::Parse("[1,");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
}

// The header promises concurrent Validate calls on one validator: every thread gets the verdicts
// and errors of a single-threaded run.
TEST(SchemaValidator, ConcurrentValidationOnOneValidator) {
  const SchemaValidator v = Make(R"({
      "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer", "minimum": 0},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                "required": ["v"], "unevaluatedProperties": false}},
      "$ref": "#/$defs/node"})");
  std::vector<std::string> instances;
  for (int i = 0; i < 64; ++i) {
    instances.push_back(R"({"v": )" + std::to_string(i % 7 - 1) + R"(, "kids": [{"v": 1}, {"v": )" +
                        std::to_string(i % 5 - 2) + (i % 3 ? "}]}" : R"(, "x": 1}]})"));
  }
  std::vector<ValidationResult> serial;
  for (const std::string& s : instances) serial.push_back(*v.Validate(s));
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (std::size_t i = 0; i < instances.size(); ++i) {
          Result<ValidationResult> r = v.Validate(instances[(i + t) % instances.size()]);
          const ValidationResult& want = serial[(i + t) % instances.size()];
          if (!r.ok() || r->valid != want.valid || !SameErrors(r->errors, want.errors)) {
            ++mismatches[t];
          }
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_TRUE(std::any_of(serial.begin(), serial.end(), [](auto& r) { return r.valid; }));
  EXPECT_TRUE(std::any_of(serial.begin(), serial.end(), [](auto& r) { return !r.valid; }));
}

}  // namespace
}  // namespace lockstep
