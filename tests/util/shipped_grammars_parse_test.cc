// Every shipped grammar (schemas/grammars/*.gbnf) parses with ParseGbnf, has a root, and
// survives the printer round trip; recursion is where the README says it is.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "grammar/ir/grammar_ir.h"
#include "test_data.h"

namespace lockstep::testing {
namespace {

std::string ReadGrammar(const std::string& name) {
  std::ifstream in(SourceDataDir() + "/grammars/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ShippedGrammarTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ShippedGrammarTest, Parses) {
  const std::string text = ReadGrammar(GetParam());
  ASSERT_FALSE(text.empty()) << GetParam() << " is missing";
  auto g = grammar::ParseGbnf(text);
  ASSERT_TRUE(g.ok()) << GetParam() << ": " << g.status().ToString();
  ASSERT_GE(g->root, 0);
  EXPECT_EQ(g->rule(g->root).name, "root");
  // No shipped language contains the empty string.
  EXPECT_FALSE(grammar::NullableRules(*g)[g->root]) << GetParam();
}

TEST_P(ShippedGrammarTest, PrintRoundTrip) {
  auto g = grammar::ParseGbnf(ReadGrammar(GetParam()));
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string printed = grammar::PrintGbnf(*g);
  auto again = grammar::ParseGbnf(printed);
  ASSERT_TRUE(again.ok()) << again.status().ToString() << "\n" << printed;
  EXPECT_TRUE(grammar::StructurallyEqual(*g, *again)) << printed;
}

INSTANTIATE_TEST_SUITE_P(Grammars, ShippedGrammarTest,
                         ::testing::Values("json.gbnf", "arithmetic.gbnf",
                                           "arithmetic_leftrec.gbnf", "c_call.gbnf",
                                           "sql_select.gbnf", "tool_calls.gbnf"),
                         [](const auto& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           for (char& c : name)
                             if (c == '_') c = 'X';  // gtest names: alphanumerics only
                           return name;
                         });

}  // namespace
}  // namespace lockstep::testing
