// The JSON Schema compiler on the JSONSchemaBench dev set (compilation and exactness)
// (../shared/data/jsonschemabench-dev/maskbench, 1,707 Glaiveai2K tool-call schemas, 1,634 valid
// and 1,104 invalid instances) with the Llama-3 vocabulary:
//   - every schema compiles in strict mode, or fails with an error that names a keyword's JSON
//     Pointer; the failures are printed, grouped by message;
//   - every valid instance is accepted token by token, each token allowed by the mask first, then
//     EOS, in the canonical tokenisation of RenderInstance (the formatting policy: declared
//     property order, compact);
//   - the real Llama-3 ids of ../shared/data/traces/llama3-glaive-dev.jsonl (HF tokenizers'
//     tokenisation of the instance as the model wrote it) are accepted whenever that text is the
//     policy's rendering; traces whose text differs (the model wrote the keys in another order than
//     the schema declares them: the dev set's schemas list properties alphabetically) are counted
//     and printed, not required;
//   - every invalid instance, rendered by RenderInstance and tokenised canonically, is rejected at
//     some token (or EOS is refused at the end).
// Over- and under-constraint must both be 0 over the schemas that compile.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "automata/schema/schema_compile.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Feeds `ids` then EOS, checking the mask before each token. True iff all are accepted.
bool AcceptsWithMask(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<TokenId>& ids,
                     TokenId eos, std::vector<std::uint32_t>* mask) {
  Matcher m(g);
  for (std::size_t i = 0; i <= ids.size(); ++i) {
    const TokenId tok = i < ids.size() ? ids[i] : eos;
    m.FillNextTokenBitmask(*mask);
    const bool allowed = ((*mask)[tok >> 5] >> (tok & 31)) & 1;
    const bool accepted = m.AcceptToken(tok);
    EXPECT_EQ(allowed, accepted) << "mask and AcceptToken disagree on token " << tok;
    if (!accepted) return false;
  }
  return m.IsTerminated();
}

TEST(SchemaDevSetTest, CompilesAndIsExactOnEveryInstance) {
  const std::string root = testing::SharedDataDir();
  const std::string dir = root + "/jsonschemabench-dev/maskbench";
  if (!testing::HaveSharedData() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "shared data absent: " << dir;
  }
  struct Trace {
    std::string text;
    std::vector<TokenId> ids;
  };
  std::map<std::pair<std::string, int>, Trace> traces;
  for (const std::string& line : testing::ReadLines(root + "/traces/llama3-glaive-dev.jsonl")) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    traces[{j["file"].get<std::string>(), j["test"].get<int>()}] = {
        j["text"].get<std::string>(), j["ids"].get<std::vector<TokenId>>()};
  }
  EXPECT_EQ(traces.size(), 1634u) << "traces file incomplete";
  // (Every trace is checked when every schema is: LOCKSTEP_TEST_SCALE=1.)

  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords((*vocab)->logits_width()));
  const TokenId eos = (*vocab)->eos();

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  int compiled = 0, valid_ok = 0, valid_rejected = 0, invalid_ok = 0, invalid_accepted = 0;
  int traces_ok = 0, traces_rejected = 0, skipped_valid = 0, skipped_invalid = 0;
  int off_policy = 0, off_policy_accepted = 0;
  std::map<std::string, std::vector<std::string>> failures;  // message -> files
  // The sanitizer run (LOCKSTEP_TEST_SCALE=0.05) checks every 20th schema.
  const std::size_t stride =
      std::max<std::size_t>(1, static_cast<std::size_t>(1.0 / testing::TestScale() + 0.5));
  std::size_t checked = 0;
  for (std::size_t fi = 0; fi < files.size(); fi += stride) {
    const fs::path& f = files[fi];
    ++checked;
    json doc = json::parse(testing::ReadFile(f.string()), nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << f;
    const std::string name = f.filename().string();
    const std::string schema_text = doc["schema"].dump();
    auto g = compiler.CompileSchema(schema_text);
    const json& tests = doc["tests"];
    if (!g.ok()) {
      // A keyword the compiler refuses is named by its pointer; a schema that admits no instance
      // at all may be reported at the root (pointer "").
      EXPECT_TRUE(!g.status().location().empty() ||
                  g.status().code() == StatusCode::kUnsatisfiable)
          << name << ": compile error without a location: " << g.status().ToString();
      EXPECT_TRUE(g.status().code() == StatusCode::kUnsupported ||
                  g.status().code() == StatusCode::kUnsatisfiable ||
                  g.status().code() == StatusCode::kResourceLimit)
          << name << ": " << g.status().ToString();
      failures[g.status().message()].push_back(
          name + " at " + (g.status().location().empty() ? "(root)" : g.status().location()));
      for (const json& t : tests) (t["valid"].get<bool>() ? skipped_valid : skipped_invalid) += 1;
      continue;
    }
    ++compiled;
    auto s = schema::Schema::Load(schema_text);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const schema::SchemaCompileOptions so =
        schema::SchemaOptionsFrom(CompileOptions{}, schema_text, CompileDeadline());
    for (std::size_t i = 0; i < tests.size(); ++i) {
      const bool valid = tests[i]["valid"].get<bool>();
      const std::string rendered = schema::RenderInstance(**s, tests[i]["data"], -1, so);
      auto ids = (*vocab)->Encode(rendered);
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      const bool accepted = AcceptsWithMask(*g, *ids, eos, &mask);
      if (valid) {
        if (accepted) {
          ++valid_ok;
        } else if (++valid_rejected <= 10) {
          ADD_FAILURE() << name << " test " << i << ": valid instance rejected: " << rendered;
        }
        auto tr = traces.find({name, static_cast<int>(i)});
        if (tr != traces.end()) {
          const bool ok = AcceptsWithMask(*g, tr->second.ids, eos, &mask);
          if (tr->second.text != rendered) {
            ++off_policy;
            off_policy_accepted += ok ? 1 : 0;
          } else if (ok) {
            ++traces_ok;
          } else if (++traces_rejected <= 10) {
            ADD_FAILURE() << name << " test " << i << ": trace rejected: " << tr->second.text;
          }
        }
      } else {
        if (!accepted) {
          ++invalid_ok;
        } else if (++invalid_accepted <= 10) {
          ADD_FAILURE() << name << " test " << i << ": invalid instance accepted: " << rendered;
        }
      }
    }
  }
  std::printf("[ devset   ] %zu schemas: %d compiled, %zu not compiled\n", checked, compiled,
              checked - compiled);
  for (const auto& [msg, names] : failures) {
    std::printf("  %3zu x %s (e.g. %s)\n", names.size(), msg.c_str(), names[0].c_str());
  }
  std::printf("[ devset   ] valid: %d accepted, %d rejected (over-constraint)\n", valid_ok,
              valid_rejected);
  std::printf("[ devset   ] traces written as the policy renders them: %d accepted, %d rejected; "
              "written otherwise (key order): %d, of which %d accepted\n",
              traces_ok, traces_rejected, off_policy, off_policy_accepted);
  std::printf("[ devset   ] invalid: %d rejected, %d accepted (under-constraint)\n", invalid_ok,
              invalid_accepted);
  std::printf("[ devset   ] instances of schemas that did not compile: %d valid, %d invalid\n",
              skipped_valid, skipped_invalid);
  EXPECT_EQ(valid_rejected, 0);
  EXPECT_EQ(traces_rejected, 0);
  EXPECT_EQ(invalid_accepted, 0);
}

// Member order any (CompileOptions::schema_member_order = kAny): every schema compiles as in
// declared order (the dev set's objects have at most 8 properties), every real trace is
// accepted whatever order the model wrote its keys in (the 33 traces declared order refuses
// included), and every invalid instance is still rejected.
TEST(SchemaDevSetTest, AnyOrderAcceptsEveryTraceAndNoInvalidInstance) {
  const std::string root = testing::SharedDataDir();
  const std::string dir = root + "/jsonschemabench-dev/maskbench";
  if (!testing::HaveSharedData() || !fs::is_directory(dir)) {
    GTEST_SKIP() << "shared data absent: " << dir;
  }
  std::map<std::pair<std::string, int>, std::vector<TokenId>> traces;
  for (const std::string& line : testing::ReadLines(root + "/traces/llama3-glaive-dev.jsonl")) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    traces[{j["file"].get<std::string>(), j["test"].get<int>()}] =
        j["ids"].get<std::vector<TokenId>>();
  }
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  std::vector<std::uint32_t> mask(PaddedBitmaskWords((*vocab)->logits_width()));
  const TokenId eos = (*vocab)->eos();
  CompileOptions any;
  any.schema_member_order = SchemaMemberOrder::kAny;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  const std::size_t stride =
      std::max<std::size_t>(1, static_cast<std::size_t>(1.0 / testing::TestScale() + 0.5));
  int compiled = 0, differ = 0, traces_ok = 0, traces_rejected = 0, invalid_ok = 0,
      invalid_accepted = 0;
  for (std::size_t fi = 0; fi < files.size(); fi += stride) {
    const fs::path& f = files[fi];
    json doc = json::parse(testing::ReadFile(f.string()), nullptr, false);
    ASSERT_FALSE(doc.is_discarded()) << f;
    const std::string name = f.filename().string();
    const std::string schema_text = doc["schema"].dump();
    auto g = compiler.CompileSchema(schema_text, any);
    const bool declared_ok = compiler.CompileSchema(schema_text).ok();
    if (g.ok() != declared_ok) {
      ++differ;
      ADD_FAILURE() << name << ": compiles in declared order " << declared_ok
                    << ", in any order " << g.ok()
                    << (g.ok() ? std::string() : ": " + g.status().ToString());
    }
    if (!g.ok()) continue;
    ++compiled;
    auto s = schema::Schema::Load(schema_text);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    const schema::SchemaCompileOptions so =
        schema::SchemaOptionsFrom(CompileOptions{}, schema_text, CompileDeadline());
    const json& tests = doc["tests"];
    for (std::size_t i = 0; i < tests.size(); ++i) {
      if (tests[i]["valid"].get<bool>()) {
        auto tr = traces.find({name, static_cast<int>(i)});
        if (tr == traces.end()) continue;
        if (AcceptsWithMask(*g, tr->second, eos, &mask)) {
          ++traces_ok;
        } else if (++traces_rejected <= 10) {
          ADD_FAILURE() << name << " test " << i << ": trace rejected in any order";
        }
        continue;
      }
      const std::string rendered = schema::RenderInstance(**s, tests[i]["data"], -1, so);
      auto ids = (*vocab)->Encode(rendered);
      ASSERT_TRUE(ids.ok()) << ids.status().ToString();
      if (!AcceptsWithMask(*g, *ids, eos, &mask)) {
        ++invalid_ok;
      } else if (++invalid_accepted <= 10) {
        ADD_FAILURE() << name << " test " << i << ": invalid instance accepted: " << rendered;
      }
    }
  }
  std::printf("[ devset   ] any order: %d compiled; traces: %d accepted, %d rejected; invalid: "
              "%d rejected, %d accepted\n",
              compiled, traces_ok, traces_rejected, invalid_ok, invalid_accepted);
  EXPECT_EQ(differ, 0);
  EXPECT_EQ(traces_rejected, 0);
  EXPECT_EQ(invalid_accepted, 0);
  EXPECT_GT(traces_ok, 0);
}

}  // namespace
}  // namespace lockstep
