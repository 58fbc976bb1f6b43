// The JSON acceptance corpora themselves: the suite loader finds the values, every value is RFC
// 8259 JSON (our oracle and simdjson agree) in both serialisations, and every malformed document
// is rejected by the oracle and by simdjson.
#include "util/json_suite.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <iostream>
#include <string>

#include "test_data.h"
#include "util/grammar_checkers.h"

namespace lockstep::testing {
namespace {

std::string SuiteDir() { return SharedDataDir() + "/json-schema-test-suite"; }
std::string MalformedPath() { return SourceDataDir() + "/grammars/json-malformed.jsonl"; }

// simdjson 3.0.1 rejects integers beyond 64 bits with NUMBER_ERROR; RFC 8259 allows them. True
// when that is the reason: the error is NUMBER_ERROR and the text has a run of 20+ digits.
bool IsBigInteger(simdjson::error_code e, std::string_view text) {
  if (e != simdjson::NUMBER_ERROR) return false;
  std::size_t run = 0;
  for (char c : text) {
    run = (c >= '0' && c <= '9') ? run + 1 : 0;
    if (run >= 20) return true;
  }
  return false;
}

class JsonSuiteTest : public ::testing::TestWithParam<bool> {};

TEST_P(JsonSuiteTest, EveryValueIsRfc8259Json) {
  if (!HaveSharedData()) GTEST_SKIP() << "needs ../shared/data (json-schema-test-suite)";
  const bool indented = GetParam();
  std::string error;
  const auto values = LoadJsonSchemaTestSuiteData(SuiteDir(), indented, &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_GE(values.size(), 1000u);
  std::cout << "suite values (" << (indented ? "indented" : "compact") << "): " << values.size()
            << "\n";
  simdjson::dom::parser parser;
  std::size_t big = 0;
  for (const auto& v : values) {
    EXPECT_TRUE(CheckJsonRfc8259(v)) << v;
    auto e = parser.parse(v).error();
    if (IsBigInteger(e, v)) {
      ++big;
      continue;
    }
    EXPECT_EQ(e, simdjson::SUCCESS) << v;
    if (indented) continue;
    // Compact means no whitespace outside strings: simdjson's minifier leaves it unchanged.
    std::string minified(v.size(), '\0');
    std::size_t len = 0;
    ASSERT_EQ(simdjson::minify(v.data(), v.size(), minified.data(), len), simdjson::SUCCESS);
    EXPECT_EQ(minified.substr(0, len), v);
  }
  EXPECT_LT(big, 20u);
}

INSTANTIATE_TEST_SUITE_P(Serialisations, JsonSuiteTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Indented" : "Compact"; });

TEST(JsonSuite, SerialisationKeepsNumberTextAndEscapes) {
  if (!HaveSharedData()) GTEST_SKIP() << "needs ../shared/data (json-schema-test-suite)";
  const auto compact = LoadJsonSchemaTestSuiteData(SuiteDir(), false);
  auto has = [&](const std::string& s) {
    return std::find(compact.begin(), compact.end(), s) != compact.end();
  };
  EXPECT_TRUE(has("1.0"));
  EXPECT_TRUE(has("12345678910111213141516171819202122232425262728293031"));
  EXPECT_TRUE(has("-972783798187987123879878123.188781371"));
  EXPECT_TRUE(has("\"\xf0\x9f\x92\xa9\""));  // "\uD83D\uDCA9" decoded to UTF-8
  const auto indented = LoadJsonSchemaTestSuiteData(SuiteDir(), true);
  EXPECT_EQ(indented.size(), compact.size());
  auto has_indented = [&](const std::string& s) {
    return std::find(indented.begin(), indented.end(), s) != indented.end();
  };
  EXPECT_TRUE(has_indented("[\n  1,\n  2,\n  3\n]"));
  EXPECT_TRUE(has_indented("{}"));
  EXPECT_TRUE(has_indented("[]"));
}

TEST(JsonMalformed, EveryDocumentIsRejected) {
  std::string error;
  const auto docs = LoadMalformedJson(MalformedPath(), &error);
  ASSERT_TRUE(error.empty()) << error;
  EXPECT_GE(docs.size(), 200u);
  std::cout << "malformed documents: " << docs.size() << "\n";
  simdjson::dom::parser parser;
  std::size_t simdjson_accepts_surrogates = 0;
  for (const auto& d : docs) {
    EXPECT_FALSE(CheckJsonRfc8259(d.doc)) << d.kind << ": " << d.doc;
    const bool simdjson_ok = parser.parse(d.doc).error() == simdjson::SUCCESS;
    if (d.kind == "lone-high-surrogate" || d.kind == "lone-low-surrogate") {
      simdjson_accepts_surrogates += simdjson_ok;
    } else {
      EXPECT_FALSE(simdjson_ok) << d.kind << ": " << d.doc;
    }
  }
  std::cout << "lone-surrogate documents simdjson accepts: " << simdjson_accepts_surrogates << "\n";
}

}  // namespace
}  // namespace lockstep::testing
