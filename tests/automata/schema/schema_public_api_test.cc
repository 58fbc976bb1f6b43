// The schema entry points of the public compiler API (lockstep/compiler.h), through installed
// headers only, as a host uses them: SchemaToGbnf (the grammar a schema compiles to, as GBNF
// text to read), SchemaInstanceRenderer (instances as the schema's grammar expects them, which
// its matcher accepts), and CompiledGrammar::AllowedTokensPerState (each state's count of
// accepted tokens, against a brute force over the vocabulary).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string& BookFlight() {
  static const std::string text = ReadFile(testing::SourceDataDir() + "/tools/book_flight.json");
  return text;
}

const GrammarCompiler& Compiler() {
  static const GrammarCompiler* c = [] {
    auto vocab = Vocabulary::Load("llama3");
    EXPECT_TRUE(vocab.ok()) << vocab.status().ToString();
    return new GrammarCompiler(*vocab);
  }();
  return *c;
}

bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  Matcher m(g);
  return m.AcceptString(text) && m.CanEnd();
}

// Instances of book_flight, valid and not (as the validator would say), with keys out of the
// declared order: the renderer puts them in order, and the matcher takes the rendered text.
const std::vector<std::string> kValid = {
    R"({"arguments": {"passengers": 2, "destination": "JFK", "origin": "LAX",
        "departure_date": "2025-03-01"}, "name": "book_flight"})",
    R"({"name": "book_flight", "arguments": {"origin": "SFO", "destination": "SEA",
        "departure_date": "2024-02-29", "passengers": 9, "cabin": "first", "max_price": 420.5}})",
};
const std::vector<std::string> kInvalid = {
    R"({"name": "book_flight", "arguments": {"origin": "lax", "destination": "JFK",
        "departure_date": "2025-03-01", "passengers": 2}})",
    R"({"name": "book_flight", "arguments": {"origin": "LAX", "destination": "JFK",
        "departure_date": "2025-02-30", "passengers": 2}})",
    R"({"name": "book_flight", "arguments": {"origin": "LAX", "destination": "JFK",
        "departure_date": "2025-03-01", "passengers": 10}})",
    R"({"name": "book_flight", "arguments": {"origin": "LAX", "destination": "JFK",
        "departure_date": "2025-03-01"}})",
};

TEST(SchemaInstanceRenderer, RendersWhatTheSchemaGrammarAccepts) {
  auto schema_grammar = Compiler().CompileSchema(BookFlight());
  ASSERT_TRUE(schema_grammar.ok()) << schema_grammar.status().ToString();
  auto renderer = SchemaInstanceRenderer::Create(BookFlight());
  ASSERT_TRUE(renderer.ok()) << renderer.status().ToString();
  for (const std::string& instance : kValid) {
    auto text = (*renderer)->Render(instance);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    // Declared order: "name" before "arguments", "origin" first among the arguments.
    EXPECT_LT(text->find("\"name\""), text->find("\"arguments\"")) << *text;
    EXPECT_LT(text->find("\"origin\""), text->find("\"destination\"")) << *text;
    EXPECT_TRUE(Accepts(*schema_grammar, *text)) << *text;
  }
  // The first instance as written (keys out of the declared order) is not what the grammar takes.
  EXPECT_FALSE(Accepts(*schema_grammar, kValid[0]));
  for (const std::string& instance : kInvalid) {
    auto text = (*renderer)->Render(instance);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    EXPECT_FALSE(Accepts(*schema_grammar, *text)) << *text;
  }
  auto pretty = (*renderer)->Render(kValid[0], 2);
  ASSERT_TRUE(pretty.ok());
  EXPECT_NE(pretty->find("\n  \"name\""), std::string::npos) << *pretty;

  auto bad = (*renderer)->Render("{\"name\": ");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto no_schema = SchemaInstanceRenderer::Create("{\"type\": ");
  EXPECT_FALSE(no_schema.ok());
}

TEST(SchemaToGbnf, PrintsTheSchemaGrammar) {
  auto gbnf = SchemaToGbnf(BookFlight());
  ASSERT_TRUE(gbnf.ok()) << gbnf.status().ToString();
  // The root rule spells the members in their declared order, the required ones outside any
  // alternative; lexemes compiled to automata (the IATA pattern, the date format) are named by
  // their automata.
  const std::size_t root = gbnf->find("root ::=");
  ASSERT_NE(root, std::string::npos) << *gbnf;
  std::size_t at = root;
  for (const char* key : {"name", "arguments", "origin", "destination", "departure_date",
                          "passengers", "cabin", "max_price"}) {
    const std::size_t k = gbnf->find("\\\"" + std::string(key) + "\\\"", at);
    ASSERT_NE(k, std::string::npos) << key << " after offset " << at << " in\n" << *gbnf;
    at = k;
  }
  EXPECT_NE(gbnf->find("/<dfa "), std::string::npos) << *gbnf;
  EXPECT_NE(gbnf->find("book_flight\\\""), std::string::npos) << *gbnf;
  // Errors are located like CompileSchema's.
  auto bad = SchemaToGbnf(R"({"type": "object", "minProperties": "x"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().location(), "/minProperties") << bad.status().ToString();
  // Lenient mode: a keyword it relaxes is a warning, not an error.
  const std::string unique = R"({"type": "array", "items": {"type": "object"}, "uniqueItems": true})";
  EXPECT_FALSE(SchemaToGbnf(unique).ok());
  CompileOptions lenient;
  lenient.schema_lenient = true;
  std::vector<std::string> warnings;
  auto relaxed = SchemaToGbnf(unique, lenient, &warnings);
  ASSERT_TRUE(relaxed.ok()) << relaxed.status().ToString();
  ASSERT_FALSE(warnings.empty());
  EXPECT_NE(warnings[0].find("uniqueItems"), std::string::npos) << warnings[0];
}

// Brute force: at each state along "abx", every id of the vocabulary is tried with
// AcceptToken (the token's bytes stepped through the DFA, EOS by id) and taken back; the count
// of ids accepted is the state's entry (live states in order, state s at index s - 1).
TEST(AllowedTokensPerState, CountsTheTokensEachStateAccepts) {
  auto g = Compiler().CompileRegex("[a-c]{2}x|yz");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::vector<std::int64_t> per_state = (*g)->AllowedTokensPerState();
  ASSERT_FALSE(per_state.empty());
  const std::int32_t width = (*g)->logits_width();
  Matcher m(*g);
  auto accepted_here = [&] {
    std::int64_t n = 0;
    for (TokenId id = 0; id < width; ++id) {
      if (!m.AcceptToken(id)) continue;
      ++n;
      EXPECT_TRUE(m.Rollback(1));
    }
    return n;
  };
  EXPECT_EQ(accepted_here(), per_state[m.state() - 1]) << "start";
  for (char c : std::string("abx")) {
    ASSERT_TRUE(m.AcceptString(std::string(1, c)));
    EXPECT_EQ(accepted_here(), per_state[m.state() - 1]) << "after " << c;
  }
  auto grammar = Compiler().CompileGrammar("root ::= \"a\" root | \"b\"");
  ASSERT_TRUE(grammar.ok());
  EXPECT_TRUE((*grammar)->AllowedTokensPerState().empty());
}

}  // namespace
}  // namespace lockstep
