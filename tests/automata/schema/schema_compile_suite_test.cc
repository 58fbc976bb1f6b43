// The JSON Schema compiler on the official suite: every schema of the official
// JSON-Schema-Test-Suite
// (../shared/data/json-schema-test-suite/tests/draft2020-12, draft2019-09, draft7, draft6 and
// draft4, required tests only) is
// compiled in strict mode with `format` as an annotation (what the required tests expect); for
// each one that compiles, every test instance is rendered (RenderInstance, compact and indented)
// and fed token by token, in the Llama-3 vocabulary's canonical tokenisation, through a Matcher:
// each token must be in the mask before it is accepted, and EOS must be allowed at the end.
// Valid instances must be accepted, invalid ones rejected somewhere: over-constraint (valid
// rejected) and under-constraint (invalid accepted) both fail the test. Schemas that do not
// compile are counted by error reason and printed. Skips, saying so, without ../shared/data.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/schema/schema_compile.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/validator.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep::schema {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

std::string SuiteDir() { return testing::SharedDataDir() + "/json-schema-test-suite"; }

std::vector<fs::path> JsonFiles(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// "" when `text` is accepted token by token (mask checked before every token) and EOS may
// follow; else where it stopped.
std::string Feed(const Vocabulary& vocab, const std::shared_ptr<const CompiledGrammar>& g,
                 const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = vocab.Encode(text, eo);
  if (!ids.ok()) return "encode failed: " + ids.status().ToString();
  Matcher m(g);
  std::vector<std::uint32_t> mask(BitmaskWords(vocab.logits_width()));
  for (std::size_t i = 0; i < ids->size(); ++i) {
    TokenId id = (*ids)[i];
    m.FillNextTokenBitmask(mask);
    if (!((mask[id >> 5] >> (id & 31)) & 1)) {
      return "token " + std::to_string(i) + " '" + std::string(vocab.TokenBytes(id)) +
             "' not in the mask";
    }
    if (!m.AcceptToken(id)) return "token " + std::to_string(i) + " rejected";
  }
  m.FillNextTokenBitmask(mask);
  TokenId eos = vocab.eos();
  if (!((mask[eos >> 5] >> (eos & 31)) & 1)) return "EOS not in the mask at the end";
  if (!m.AcceptToken(eos)) return "EOS rejected at the end";
  return "";
}

// Groups errors by code and the message up to its first ':' or '(' (details vary per schema).
std::string Reason(const Status& st) {
  std::string msg = st.message();
  std::size_t cut = msg.find_first_of(":(");
  if (cut != std::string::npos) msg = msg.substr(0, cut);
  while (!msg.empty() && msg.back() == ' ') msg.pop_back();
  return std::string(StatusCodeName(st.code())) + ": " + msg;
}

struct Figures {
  int schemas = 0, compiled = 0, instances = 0, over = 0, under = 0, not_idempotent = 0;
  std::map<std::string, int> not_compiled;
  std::vector<std::string> failures;
};

void RunDraft(const std::string& draft_name, SchemaDraft draft, const GrammarCompiler& compiler,
              Figures* fig) {
  LoadOptions load;
  load.default_draft = draft;
  Status st = AddRemoteDirectory("http://localhost:1234/", SuiteDir() + "/remotes", &load.remotes);
  ASSERT_TRUE(st.ok()) << st.ToString();
  SchemaCompileOptions so;
  so.format_assertion = false;  // required tests treat `format` as an annotation
  const Vocabulary& vocab = compiler.vocabulary();
  for (const fs::path& file : JsonFiles(SuiteDir() + "/tests/" + draft_name)) {
    json cases = json::parse(testing::ReadFile(file.string()), nullptr, false);
    ASSERT_FALSE(cases.is_discarded()) << file;
    for (const json& c : cases) {
      ++fig->schemas;
      std::string where =
          draft_name + "/" + file.filename().string() + ": " + c["description"].get<std::string>();
      auto schema = Schema::FromJson(c["schema"], load);
      if (!schema.ok()) {
        ++fig->not_compiled["load: " + Reason(schema.status())];
        continue;
      }
      auto ir = CompileSchemaToGrammar(**schema, so);
      if (!ir.ok()) {
        ++fig->not_compiled[Reason(ir.status())];
        if (std::getenv("LOCKSTEP_SUITE_VERBOSE")) {
          std::cout << "  not compiled: " << where << ": " << ir.status().ToString() << "\n";
        }
        continue;
      }
      {
        // The schema compiler's grammar is normalised (Normalize stops as soon as another round
        // could change nothing): normalising it again must leave it as it is.
        lockstep::grammar::Grammar again = ir->grammar;
        ASSERT_TRUE(lockstep::grammar::Normalize(again).ok()) << where;
        if (!lockstep::grammar::StructurallyEqual(again, ir->grammar)) ++fig->not_idempotent;
      }
      auto g = CompileGrammarIr(compiler, ir->grammar);
      if (!g.ok()) {
        ++fig->not_compiled["grammar: " + Reason(g.status())];
        if (std::getenv("LOCKSTEP_SUITE_VERBOSE")) {
          std::cout << "  not compiled: " << where << ": " << g.status().ToString() << "\n";
        }
        continue;
      }
      ++fig->compiled;
      const std::size_t step = testing::TestScale() < 1 ? 3 : 1;  // sanitizer build: a sample
      std::size_t index = 0;
      for (const json& t : c["tests"]) {
        if (index++ % step != 0) continue;
        bool valid = t["valid"].get<bool>();
        for (int indent : {-1, 2}) {
          ++fig->instances;
          std::string text = RenderInstance(**schema, t["data"], indent, so);
          std::string why = Feed(vocab, *g, text);
          bool accepted = why.empty();
          if (accepted == valid) continue;
          (valid ? fig->over : fig->under) += 1;
          fig->failures.push_back(
              std::string(valid ? "over-constrained" : "under-constrained") + ": " + where + " / " +
              t["description"].get<std::string>() + "\n    schema: " + c["schema"].dump() +
              "\n    instance: " + text + (valid ? "\n    rejected: " + why : ""));
        }
      }
    }
  }
}

TEST(SchemaCompileSuite, NoOverOrUnderConstraint) {
  if (!testing::HaveSharedData() || !fs::is_directory(SuiteDir() + "/tests/draft2020-12")) {
    GTEST_SKIP() << "shared data absent: " << SuiteDir()
                 << "/tests (the schema compiler's suite check is skipped)";
  }
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  for (const auto& [name, draft] :
       {std::pair<std::string, SchemaDraft>{"draft2020-12", SchemaDraft::k2020_12},
        {"draft2019-09", SchemaDraft::k2019_09},
        {"draft7", SchemaDraft::k7},
        {"draft6", SchemaDraft::k6},
        {"draft4", SchemaDraft::k4}}) {
    Figures fig;
    RunDraft(name, draft, compiler, &fig);
    std::cout << "[ schemas  ] " << name << ": " << fig.compiled << " of " << fig.schemas
              << " schemas compiled; " << fig.instances << " renderings checked; over-constrained "
              << fig.over << ", under-constrained " << fig.under << "\n";
    std::vector<std::pair<int, std::string>> reasons;
    for (const auto& [r, n] : fig.not_compiled) reasons.emplace_back(-n, r);
    std::sort(reasons.begin(), reasons.end());
    for (const auto& [n, r] : reasons) std::cout << "    not compiled " << -n << "  " << r << "\n";
    for (std::size_t i = 0; i < fig.failures.size() && i < 30; ++i) {
      ADD_FAILURE() << fig.failures[i];
    }
    EXPECT_EQ(fig.over, 0);
    EXPECT_EQ(fig.under, 0);
    EXPECT_EQ(fig.not_idempotent, 0) << "grammars that a second Normalize changed";
  }
  std::cout << "[ schemas  ] total "
            << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()
            << " s\n";
}

// Draft-04: 12345.0 is not an integer (it is from draft-06 on). The validator rejects it for
// {"type": "integer"} in draft-04 only; the compiled grammar never generates it in any draft (an
// integer is written without a fraction), so what it generates is valid in every draft.
TEST(SchemaCompileDrafts, Draft04IntegerIsNeverAFloat) {
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  const std::string object = R"({"type": "object", "properties": {"userId": {"type": "integer"}},
                                 "required": ["userId"]})";
  const std::string named =
      R"({"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"})";
  for (SchemaDraft d : {SchemaDraft::k4, SchemaDraft::k6, SchemaDraft::k7, SchemaDraft::k2019_09,
                        SchemaDraft::k2020_12}) {
    SchemaValidatorOptions vo;
    vo.default_draft = d;
    auto v = SchemaValidator::Create(object, vo);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(v->draft(), d);
    EXPECT_EQ(v->Validate(R"({"userId": 12345.0})")->valid, d != SchemaDraft::k4)
        << SchemaDraftName(d);
    EXPECT_TRUE(v->Validate(R"({"userId": 12345})")->valid) << SchemaDraftName(d);
    CompileOptions co;
    co.schema_default_draft = d;
    for (const std::string& text : {object, named}) {
      auto g = compiler.CompileSchema(text, co);
      ASSERT_TRUE(g.ok()) << g.status().ToString();
      const bool is_object = text == object;
      EXPECT_NE(Feed(**vocab, *g, is_object ? R"({"userId":12345.0})" : "12345.0"), "")
          << SchemaDraftName(d);
      EXPECT_NE(Feed(**vocab, *g, is_object ? R"({"userId":1.0e4})" : "1e4"), "")
          << SchemaDraftName(d);
      EXPECT_EQ(Feed(**vocab, *g, is_object ? R"({"userId":12345})" : "12345"), "")
          << SchemaDraftName(d);
    }
  }
  // "A number but not an integer": 1.0 is one in draft-04 only, for the grammar as for the
  // validator.
  const std::string fraction = R"({"type": "number", "not": {"type": "integer"}})";
  for (SchemaDraft d : {SchemaDraft::k4, SchemaDraft::k7}) {
    SchemaValidatorOptions vo;
    vo.default_draft = d;
    auto v = SchemaValidator::Create(fraction, vo);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    CompileOptions co;
    co.schema_default_draft = d;
    auto g = compiler.CompileSchema(fraction, co);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    for (const char* text : {"1.0", "1.5", "1", "-2.5"}) {
      const bool valid = v->Validate(text)->valid;
      EXPECT_EQ(Feed(**vocab, *g, text).empty(), valid) << SchemaDraftName(d) << " " << text;
      const std::string t = text;
      EXPECT_EQ(valid, t == "1.5" || t == "-2.5" || (d == SchemaDraft::k4 && t == "1.0"))
          << SchemaDraftName(d) << " " << text;
    }
  }
  auto named_v = SchemaValidator::Create(named);
  ASSERT_TRUE(named_v.ok());
  EXPECT_EQ(named_v->draft(), SchemaDraft::k4);
  EXPECT_FALSE(named_v->Validate("12345.0")->valid);
}

}  // namespace
}  // namespace lockstep::schema
