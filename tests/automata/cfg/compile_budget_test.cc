// Compiles that must end: schemas and grammars of the shapes that made analyses over
// the rule graph or the schema tree exponential (shared definitions walked as trees, nested
// combinators multiplied out), each checked by its result: it compiles and the grammar agrees
// with the validator on valid and invalid instances, or it is refused with kResourceLimit or
// kUnsupported and a location. Then the compile deadline and the cancellation flag
// (CompileOptions::compile_timeout_ms, CompileOptions::cancel). No timing assertions: a test
// that hangs fails by ctest's timeout.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "automata/regex/regex_compiler.h"
#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_program.h"
#include "automata/schema/schema_compile.h"
#include "grammar/base/deadline.h"
#include "grammar/ir/grammar_ir.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/structured.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
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

// "p7" (written out: g++ 12 warns falsely about "p" + std::to_string(i)).
std::string Numbered(const char* prefix, int i) {
  std::string s = prefix;
  s += std::to_string(i);
  return s;
}

// Whether the whole of `text` is a sentence of the grammar (bytes, then the end).
bool Accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g);
  return m.AcceptString(text) && m.CanEnd();
}

// `schema` compiled through the public entry point agrees with the validator on `instances`
// (rendered compact and indented): true when it compiled. A refusal must be kResourceLimit or
// kUnsupported with a location (a deadline may name the root, whose pointer is empty) unless
// `must_compile`.
bool CompilesExactly(const json& schema, const std::vector<json>& instances,
                     bool must_compile = true, const CompileOptions& options = {}) {
  const std::string text = schema.dump();
  auto g = Compiler().CompileSchema(text, options);
  if (!g.ok()) {
    EXPECT_FALSE(must_compile) << g.status().ToString();
    const StatusCode code = g.status().code();
    EXPECT_TRUE(code == StatusCode::kResourceLimit || code == StatusCode::kUnsupported)
        << g.status().ToString();
    // A location, or the root's JSON Pointer (empty) for a deadline that passed while the root
    // itself was being checked (it happens under load: the moment the clock is read decides).
    EXPECT_TRUE(!g.status().location().empty() ||
                g.status().message().find("deadline") != std::string::npos)
        << g.status().ToString();
    return false;
  }
  auto model = schema::Schema::Load(text);
  EXPECT_TRUE(model.ok());
  auto validator = schema::Validator::Create(*model);
  EXPECT_TRUE(validator.ok());
  schema::SchemaCompileOptions so;
  so.property_order = std::make_shared<const schema::PropertyOrder>(schema::PropertyOrderOf(text));
  so.deadline = CompileDeadline(options.compile_timeout_ms, nullptr);
  int valid = 0, invalid = 0;
  for (const json& inst : instances) {
    auto v = validator->Validate(inst);
    EXPECT_TRUE(v.ok());
    (*v ? valid : invalid) += 1;
    // (Indented by one: 30 levels keep within the 32 bytes of whitespace a gap may hold.)
    for (int indent : {-1, 1}) {
      auto rendered = schema::TryRenderInstance(**model, inst, indent, so);
      if (!rendered.ok()) {
        ADD_FAILURE() << rendered.status().ToString();
        continue;
      }
      EXPECT_EQ(Accepts(*g, *rendered), *v)
          << (*v ? "valid instance rejected: " : "invalid instance accepted: ") << *rendered;
    }
  }
  // The instances of each test are chosen to hold both kinds.
  EXPECT_GT(valid, 0);
  EXPECT_GT(invalid, 0);
  return true;
}

// ---- automaton size budgets: one per automaton, one for the program ------------------------

// 200 rules, each its own automaton (recursive, so never inlined) of about 60 states: about
// 12,000 states together, none more than a few dozen.
std::string ManyRuleGrammar() {
  std::string g = "root ::= r0";
  for (int i = 1; i < 200; ++i) g += " | " + Numbered("r", i);
  g += "\n";
  for (int i = 0; i < 200; ++i) {
    const std::string r = Numbered("r", i);
    g += r + " ::= \"(\" " + r + " \")\" | \"" + Numbered("k", i) +
         "_abcdefghijklmnopqrstuvwxyz_0123456789_ABCDEFGHIJKLMNOPQRSTUVWXYZ\"\n";
  }
  return g;
}

// max_dfa_states bounds each automaton, not their sum: a grammar (or a schema: Kubernetes' full
// API definitions take 118,000 states) whose rules are each small compiles however many they
// are, up to max_program_states. Each budget, when it runs out, names itself, how to raise it
// and the rule.
TEST(CompileBudget, StateBudgetsAreOnePerAutomatonAndOneForTheProgram) {
  const std::string text = ManyRuleGrammar();
  CompileOptions o;
  o.max_dfa_states = 1000;
  auto g = Compiler().CompileGrammar(text, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const std::string tail = "_abcdefghijklmnopqrstuvwxyz_0123456789_ABCDEFGHIJKLMNOPQRSTUVWXYZ";
  EXPECT_TRUE(Accepts(*g, "((k150" + tail + "))"));
  EXPECT_TRUE(Accepts(*g, "k0" + tail));
  EXPECT_FALSE(Accepts(*g, "((k150" + tail + ")"));
  EXPECT_FALSE(Accepts(*g, "k200" + tail));

  CompileOptions program = o;
  program.max_program_states = 3000;
  auto over = Compiler().CompileGrammar(text, program);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceLimit);
  const std::string& m = over.status().message();
  EXPECT_NE(m.find("max_program_states (3000 states"), std::string::npos) << m;
  EXPECT_NE(m.find("raise CompileOptions::max_program_states"), std::string::npos) << m;
  EXPECT_NE(m.find("in rule 'r"), std::string::npos) << m;

  CompileOptions rule = o;
  rule.max_dfa_states = 20;
  auto big = Compiler().CompileGrammar(text, rule);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), StatusCode::kResourceLimit);
  const std::string& mr = big.status().message();
  EXPECT_NE(mr.find("max_dfa_states (20 states"), std::string::npos) << mr;
  EXPECT_NE(mr.find("raise CompileOptions::max_dfa_states"), std::string::npos) << mr;
  EXPECT_EQ(mr.rfind("rule '", 0), 0u) << mr;
}

// The real schema that needs it: Kubernetes' full API definitions (940 KB, 600 definitions;
// JSONSchemaBench's Kubernetes kb_1161), over 100,000 states for all rules together (the old
// budget, which counted the sum against max_dfa_states). It compiles under the defaults; the
// program budget set below its size names itself.
TEST(CompileBudget, KubernetesFullApiDefinitionsCompile) {
  const std::string path =
      testing::SharedDataDir() +
      "/jsonschemabench-wild/maskbench/Kubernetes---kb_1161_Normalized.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "needs ../shared/data: " << path;
  std::ifstream in(path);
  const std::string text = json::parse(in)["schema"].dump();
  auto g = Compiler().CompileSchema(text);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  // Every one of the 600 definitions is a required member of the root object.
  EXPECT_FALSE(Accepts(*g, "{}"));
  EXPECT_FALSE(Accepts(*g, R"({"io_k8s_api_admissionregistration_v1_MutatingWebhook": {}})"));
  Matcher m(*g);
  EXPECT_TRUE(m.AcceptString(R"({"io_k8s_api_admissionregistration_v1_MutatingWebhook":)"));
  EXPECT_FALSE(m.CanEnd());

  CompileOptions o;
  o.max_program_states = 100000;
  auto over = Compiler().CompileSchema(text, o);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kResourceLimit);
  EXPECT_NE(over.status().message().find("max_program_states (100000 states"), std::string::npos)
      << over.status().ToString();
}

// ---- the lowering's size estimate over shared pure-terminal rules -------------------------

// r_i ::= r_{i+1} | "x" r_{i+1}: every rule refers twice to the next, so walking the
// references as a tree visits 2^30 leaves; the estimate is memoised per expression.
TEST(CompileBudget, SharedPureTerminalRulesThirtyDeep) {
  constexpr int kDepth = 30;
  std::string gbnf = "root ::= r0\n";
  for (int i = 0; i < kDepth; ++i) {
    gbnf += Numbered("r", i) + " ::= " + Numbered("r", i + 1) + " | \"x\" " + Numbered("r", i + 1) +
            "\n";
  }
  gbnf += Numbered("r", kDepth) + " ::= \"y\"\n";
  auto g = Compiler().CompileGrammar(gbnf);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, "y"));
  EXPECT_TRUE(Accepts(*g, "xxxy"));
  EXPECT_TRUE(Accepts(*g, std::string(kDepth, 'x') + "y"));
  EXPECT_FALSE(Accepts(*g, std::string(kDepth + 1, 'x') + "y"));
  EXPECT_FALSE(Accepts(*g, "xx"));
}

// r_i ::= "(" r_i ")" r_{i+1} | r_{i+1}, r_N ::= "": each rule is recursive (so it stays a rule,
// not inlined) and nullable only through the next. Nullability reaches r_0 through the whole
// chain, which the lowering's worklist finds in one visit per rule edge (a fixpoint that
// rescanned every state took one pass per rule). (Parsing parentheses over so deep a chain of
// open nullable rules is another matter: past about 35 rules one byte is over the Earley budget,
// reported as such; "x" needs no such byte.)
TEST(CompileBudget, AThousandNullableRulesInAChain) {
  constexpr int kDepth = 1000;
  // Declared callee first and caller first: the analysis must not depend on the order.
  for (const bool callee_first : {false, true}) {
    std::vector<std::string> lines;
    for (int i = 0; i < kDepth; ++i) {
      lines.push_back(Numbered("r", i) + " ::= \"(\" " + Numbered("r", i) + " \")\" " +
                      Numbered("r", i + 1) + " | " + Numbered("r", i + 1) + "\n");
    }
    lines.push_back(Numbered("r", kDepth) + " ::= \"\"\n");
    if (callee_first) std::reverse(lines.begin(), lines.end());
    std::string gbnf = "root ::= r0 \"x\"\n";
    for (const std::string& l : lines) gbnf += l;
    auto g = Compiler().CompileGrammar(gbnf);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    const CfgProgram& p = CfgOf(**g)->program();
    std::int32_t nullable = 0, named = 0;
    for (std::int32_t r = 0; r < p.NumRules(); ++r) {
      if (p.rules[r].name.size() < 2 || p.rules[r].name[0] != 'r' ||
          p.rules[r].name.find_first_not_of("0123456789", 1) != std::string::npos) {
        continue;
      }
      ++named;
      nullable += p.rules[r].nullable;
    }
    EXPECT_EQ(named, kDepth + 1) << callee_first;
    EXPECT_EQ(nullable, kDepth + 1) << callee_first;
    EXPECT_FALSE(p.rules[p.root].nullable) << callee_first;
    EXPECT_TRUE(Accepts(*g, "x")) << callee_first;
    EXPECT_FALSE(Accepts(*g, "")) << callee_first;
    EXPECT_FALSE(Accepts(*g, ")x")) << callee_first;
  }
}

// Reduced from a JSONSchemaBench schema that never finished compiling (Github_hard o18948):
// many optional properties with additionalProperties false lower to a chain of pure-terminal
// rules, each choosing "member, then the next rule" or "the next rule".
TEST(CompileBudget, ManyOptionalMembersOfOneClosedObject) {
  json props = json::object();
  for (int i = 0; i < 60; ++i) {
    props[Numbered("p", i)] = {{"type", "array"}, {"items", {{"type", "string"}}}};
  }
  json schema = {{"type", "object"}, {"properties", props}, {"additionalProperties", false}};
  EXPECT_TRUE(CompilesExactly(schema, {json::object(),
                                       {{"p0", json::array({"a"})}},
                                       {{"p3", json::array()}, {"p59", json::array({"b", "c"})}},
                                       {{"p1", "a"}},
                                       {{"q", json::array()}},
                                       {{"p2", json::array({1})}}}));
}

// ---- schema shapes: shared definitions, nested combinators ---------------------------------

constexpr int kDepth = 20;

json Ref(int i) { return {{"$ref", "#/$defs/" + Numbered("d", i)}}; }

// $defs d0 .. d{n-1} made by level(i) (which refers to d{i+1} with Ref(i + 1)), d{n} = `leaf`;
// the root is a reference to d0.
json DefsChain(int n, const std::function<json(int)>& level, const json& leaf) {
  json defs = json::object();
  for (int i = 0; i < n; ++i) defs[Numbered("d", i)] = level(i);
  defs[Numbered("d", n)] = leaf;
  return {{"$schema", "https://json-schema.org/draft/2020-12/schema"},
          {"$ref", "#/$defs/d0"},
          {"$defs", defs}};
}

// {"a": {"a": ... x}} n deep.
json Nested(int n, const json& x, const char* key = "a") {
  json v = x;
  for (int i = 0; i < n; ++i) v = json{{key, v}};
  return v;
}

const json kNonNegative = {{"type", "integer"}, {"minimum", 0}};

// Two properties refer to the same definition at every level: the definitions form a DAG with
// 2^20 paths.
TEST(CompileBudget, SharedDefinitionsReferencedTwiceAtEveryLevel) {
  json schema = DefsChain(
      kDepth,
      [](int i) {
        return json{{"type", "object"},
                    {"properties", {{"a", Ref(i + 1)}, {"b", Ref(i + 1)}}},
                    {"required", {"a"}}};
      },
      kNonNegative);
  json deep = Nested(kDepth, 7);
  json with_b = deep;
  with_b["b"] = Nested(kDepth - 1, 3);
  json bad_b = deep;
  bad_b["b"] = Nested(kDepth - 1, -3);
  EXPECT_TRUE(CompilesExactly(
      schema, {deep, with_b, Nested(kDepth, -1), bad_b, Nested(kDepth - 1, 7), json::object()}));
}

// In place: every level is allOf of the next definition twice.
TEST(CompileBudget, AllOfTheSameDefinitionTwiceTwentyDeep) {
  json schema = DefsChain(
      kDepth,
      [](int i) {
        return json{{"allOf", {Ref(i + 1), Ref(i + 1)}}};
      },
      kNonNegative);
  EXPECT_TRUE(CompilesExactly(schema, {0, 5, -1, "x", 2.5}));
}

// oneOf whose branches share the next definition (one with an extra bound): not provably
// disjoint, so branch i is compiled with the negation of the other, which reaches the same
// definition again; each level multiplied the alternatives (about 10x per level).
TEST(CompileBudget, OneOfSharingTheNextDefinitionTwentyDeep) {
  json schema = DefsChain(
      kDepth,
      [](int i) {
        return json{{"oneOf", {Ref(i + 1), {{"allOf", {Ref(i + 1)}}, {"maximum", 1000 - i}}}}};
      },
      kNonNegative);
  // Exactly one branch: the values above every bound (x > 1000 - i fails the second branch).
  EXPECT_TRUE(CompilesExactly(schema, {2000, 1001, 5, 990, -1, "x"}));
}

// if/then/else chains: if d{i+1} then d{i+1} else (d{i+1} and a bound).
TEST(CompileBudget, IfThenElseSharingTheNextDefinitionTwentyDeep) {
  json schema = DefsChain(
      kDepth,
      [](int i) {
        return json{{"if", Ref(i + 1)},
                    {"then", Ref(i + 1)},
                    {"else", {{"allOf", {Ref(i + 1)}}, {"maximum", 1000 - i}}}};
      },
      kNonNegative);
  EXPECT_TRUE(CompilesExactly(schema, {0, 7, 5000, -1, "x", json(nullptr)}));
}

// The same through `not`: double negations and negated unions of the next definition.
TEST(CompileBudget, NegationsOfTheNextDefinitionTwentyDeep) {
  json twice = DefsChain(
      kDepth,
      [](int i) {
        return json{{"not", {{"not", {{"allOf", {Ref(i + 1), Ref(i + 1)}}}}}}};
      },
      kNonNegative);
  EXPECT_TRUE(CompilesExactly(twice, {0, 9, -1, "x"}));
  json of_union = DefsChain(
      kDepth,
      [](int i) {
        json other = Ref(i + 1);
        other["maximum"] = 1000 - i;
        return json{{"not", {{"anyOf", {{{"not", Ref(i + 1)}}, {{"not", other}}}}}}};
      },
      kNonNegative);
  EXPECT_TRUE(CompilesExactly(of_union, {0, 980, 981, 5000, -1, "x"}));
}

// anyOf of the next definition and the next definition with a bound: its disjunctive normal
// form keeps one alternative per subset of levels, so it may be refused; it must end either
// way (within the budget given here, or sooner).
TEST(CompileBudget, AnyOfSharingTheNextDefinitionTwentyDeepEnds) {
  json schema = DefsChain(
      kDepth,
      [](int i) {
        json bounded = Ref(i + 1);
        bounded["maximum"] = 1000 - i;
        return json{{"anyOf", {Ref(i + 1), bounded}}};
      },
      kNonNegative);
  CompileOptions o;
  o.compile_timeout_ms = 1000;
  CompilesExactly(schema, {0, 5000, -1, "x"}, /*must_compile=*/false, o);
}

// Instances nested 30 deep under an anyOf at every level whose first branch fails only after
// the value below was checked: without memoised checks, RenderInstance (and the enum and
// branch checks of the compiler) visited the bottom 2^30 times.
TEST(CompileBudget, InstanceChecksUnderAnAnyOfAtEveryLevel) {
  constexpr int kLevels = 30;
  json schema =
      DefsChain(kLevels,
                [](int i) {
                  return json{{"type", "object"},
                              {"anyOf",
                               {{{"properties", {{"x", Ref(i + 1)}, {"y", {{"type", "string"}}}}}},
                                {{"properties", {{"x", Ref(i + 1)}}}}}}};
                },
                {{"type", "integer"}});
  // y: 5 fails the first branch at every level, after x was checked.
  json valid = 1, invalid = "deep";
  for (int i = 0; i < kLevels; ++i) {
    valid = json{{"x", valid}, {"y", 5}};
    invalid = json{{"x", invalid}, {"y", 5}};
  }
  EXPECT_TRUE(CompilesExactly(schema, {valid, invalid}));
}

// Reduced from a JSONSchemaBench schema that never finished (Github_hard o64819): oneOf of
// object branches, two of them alike, so the branches are not provably disjoint and each is
// compiled with the negation of all the others; most of the alternatives of those negations
// contradict the branch (a required property declared absent).
TEST(CompileBudget, OneOfObjectBranchesNotProvablyDisjoint) {
  json branches = json::array();
  for (const char* kind : {"fail", "repaired", "repaired", "leak", "fill", "active"}) {
    branches.push_back({{"properties",
                         {{"type", {{"enum", {kind}}}},
                          {"id", {{"type", "string"}}},
                          {"when", {{"type", "string"}}}}},
                        {"required", {"type", "id", "when"}}});
  }
  json schema = {{"type", "object"}, {"oneOf", branches}};
  // Exactly one branch: "repaired" matches two, so it is invalid.
  EXPECT_TRUE(CompilesExactly(schema, {{{"type", "fail"}, {"id", "a"}, {"when", "b"}},
                                       {{"type", "leak"}, {"id", "a"}, {"when", "b"}},
                                       {{"type", "repaired"}, {"id", "a"}, {"when", "b"}},
                                       {{"type", "fail"}, {"id", 1}, {"when", "b"}},
                                       {{"type", "other"}, {"id", "a"}, {"when", "b"}}}));
}

// Two budgets of the schema compiler that real schemas reach (JSON Schema Store helm-testsuite:
// a oneOf branch overlapping 25 others; vega, Github o9917: more than 3 negated
// additionalProperties on one object) are resource limits naming their option, at the keyword,
// and raising the option compiles the schema exactly.
TEST(CompileBudget, OneOfOverlapsIsANamedBudget) {
  // Thirteen branches, each "contains this letter": no two provably disjoint ("ab" holds two),
  // so each branch is compiled with the negation of the twelve others.
  json branches = json::array();
  for (char c = 'a'; c <= 'm'; ++c)
    branches.push_back({{"type", "string"}, {"pattern", std::string(1, c)}});
  const json schema = {{"properties", {{"x", {{"oneOf", branches}}}}}};
  auto g = Compiler().CompileSchema(schema.dump());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit);
  EXPECT_EQ(g.status().location(), "/properties/x/oneOf");
  EXPECT_NE(g.status().message().find("may overlap 12 others"), std::string::npos)
      << g.status().message();
  EXPECT_NE(g.status().message().find("max_oneof_overlaps (11"), std::string::npos)
      << g.status().message();
  CompileOptions o;
  o.schema_max_oneof_overlaps = 12;
  // Exactly one of the letters (repeated or not) is valid; two, none or not a string is not.
  EXPECT_TRUE(CompilesExactly(schema,
                              {{{"x", "a"}}, {{"x", "mmm"}}, {{"x", "xax"}}, {{"x", "ab"}},
                               {{"x", "zz"}}, {{"x", ""}}, {{"x", 5}}, {{"x", "lm"}}, json::object()},
                              true, o));
  // Lenient mode still reads such a oneOf as anyOf, with a warning (on three of the branches:
  // the union of thirteen "contains" automata goes through 2^13 subsets of them).
  CompileOptions lenient;
  lenient.schema_lenient = true;
  lenient.schema_max_oneof_overlaps = 1;
  std::vector<std::string> warnings;
  const json three = {{"oneOf", {branches[0], branches[1], branches[2]}}};
  EXPECT_TRUE(Compiler().CompileSchema(three.dump(), lenient, &warnings).ok());
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("oneOf treated as anyOf"), std::string::npos) << warnings[0];
}

TEST(CompileBudget, SomeMemberRequirementsIsANamedBudget) {
  // Four negated patternProperties on one object: some key starting with a (b, c, d) whose value
  // is not an integer.
  json all = json::array();
  for (const char* p : {"^a", "^b", "^c", "^d"})
    all.push_back({{"not", {{"patternProperties", {{p, {{"type", "integer"}}}}}}}});
  const json schema = {{"properties", {{"o", {{"type", "object"}, {"allOf", all}}}}}};
  auto g = Compiler().CompileSchema(schema.dump());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit);
  EXPECT_EQ(g.status().location().rfind("/properties/o", 0), 0u) << g.status().location();
  EXPECT_NE(g.status().message().find("max_some_member_requirements (3"), std::string::npos)
      << g.status().message();
  CompileOptions o;
  o.schema_max_some_member_requirements = 4;
  std::vector<json> instances;
  for (const json& obj : {json{{"a", "x"}, {"b", "x"}, {"c", "x"}, {"d", "x"}},
                         json{{"d1", true}, {"c1", json::array()}, {"b1", "x"}, {"a1", 1.5}},
                         json{{"a", 1}, {"b", "x"}, {"c", "x"}, {"d", "x"}},
                         json{{"a", "x"}, {"b", "x"}, {"c", "x"}},
                         json{{"a", "x"}, {"ab", 1}, {"b", "x"}, {"c", "x"}, {"d", "x"}},
                         json::object(), json::array()}) {
    instances.push_back({{"o", obj}});
  }
  EXPECT_TRUE(CompilesExactly(schema, instances, true, o));
}

// allOf of if/then pairs on a discriminator (JSON Schema Store's minecraft-predicate shape, 17
// kinds, which never finished): 2^17 alternatives unless two `if`s taken with a negated one
// (which requires the discriminator) are seen to contradict.
TEST(CompileBudget, AllOfIfThenPairsOnADiscriminator) {
  json all = json::array();
  for (int i = 0; i < 17; ++i) {
    all.push_back({{"if", {{"properties", {{"kind", {{"const", Numbered("k", i)}}}}}}},
                   {"then", {{"properties", {{Numbered("v", i), {{"type", "integer"}}}}}}}});
  }
  json schema = {{"type", "object"}, {"allOf", all}};
  EXPECT_TRUE(CompilesExactly(schema, {{{"kind", "k3"}, {"v3", 1}},
                                       {{"kind", "k3"}, {"v3", "x"}},
                                       {{"kind", "k3"}, {"v4", "x"}},
                                       {{"kind", "other"}, {"v4", "x"}},
                                       json::object(),
                                       {{"v16", "x"}}}));
}

// ---- the compile deadline and cancellation --------------------------------------------------

// A schema whose compile takes many seconds: a oneOf of twelve object branches that are not
// provably disjoint, under a property (each branch is compiled with the negation of the eleven
// others, 3^11 alternatives each).
std::string SlowSchema() {
  json branches = json::array();
  for (int i = 0; i < 12; ++i) {
    json props = json::object();
    for (int j = 0; j < 3; ++j) props[Numbered("p", j)] = {{"type", "integer"}, {"minimum", i + j}};
    branches.push_back({{"properties", props}});
  }
  return json{{"type", "object"},
              {"properties", {{"slow", {{"type", "object"}, {"oneOf", branches}}}}}}
      .dump();
}

// A JSON Pointer into SlowSchema: the root, or inside /properties/slow (synthetic subschemas,
// such as a negation, are located at the keyword they come from plus a suffix).
bool PointsIntoSlowSchema(const std::string& location) {
  return location.empty() || location.rfind("/properties/slow", 0) == 0;
}

TEST(CompileDeadline, OneMillisecondOnABigSchemaNamesTheDeadlineAndAPointer) {
  CompileOptions o;
  o.compile_timeout_ms = 1;
  auto g = Compiler().CompileSchema(SlowSchema(), o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit) << g.status().ToString();
  EXPECT_EQ(g.status().message(), "compile deadline of 1 ms passed");
  EXPECT_TRUE(PointsIntoSlowSchema(g.status().location())) << g.status().ToString();
}

TEST(CompileDeadline, ACancelFlagSetFromAnotherThreadStopsACompile) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  CompileOptions o;
  o.compile_timeout_ms = 0;  // no deadline: only the flag stops it
  o.cancel = flag;
  std::thread canceller([&flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag->store(true);
  });
  auto g = Compiler().CompileSchema(SlowSchema(), o);
  canceller.join();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit) << g.status().ToString();
  EXPECT_EQ(g.status().message(), "compile cancelled");
  EXPECT_TRUE(PointsIntoSlowSchema(g.status().location())) << g.status().ToString();
}

// A regex whose determinisation takes seconds given room: the DFA of "an `a` 20 bytes before
// the end" has 2^21 states.
constexpr const char* kSlowRegex = "[ab]*a[ab]{20}";

TEST(CompileDeadline, ACancelFlagStopsARegexCompile) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  CompileOptions o;
  o.compile_timeout_ms = 0;
  o.cancel = flag;
  o.max_dfa_states = 100000000;
  std::thread canceller([&flag] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    flag->store(true);
  });
  auto g = Compiler().CompileRegex(kSlowRegex, o);
  canceller.join();
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit) << g.status().ToString();
  EXPECT_EQ(g.status().message(), "compile cancelled");
  EXPECT_EQ(g.status().location(), "offset 0");
}

// Every phase stops on a flag already set, with a location of its own: deterministic checks
// that each one polls it.
std::shared_ptr<std::atomic<bool>> SetFlag() { return std::make_shared<std::atomic<bool>>(true); }

TEST(CompileDeadline, EveryPhaseStopsOnAFlagAlreadySet) {
  const CompileDeadline cancelled(0, SetFlag());
  const std::string gbnf = "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\"\n";
  // Normalisation: the rule being rewritten.
  auto ir = grammar::ParseGrammar(gbnf);
  ASSERT_TRUE(ir.ok()) << ir.status().ToString();
  grammar::Grammar copy = *ir;
  grammar::NormalizeOptions no;
  no.deadline = cancelled;
  Status st = grammar::Normalize(copy, no);
  EXPECT_EQ(st.code(), StatusCode::kResourceLimit);
  EXPECT_EQ(st.message(), "compile cancelled");
  EXPECT_EQ(st.location().rfind("rule '", 0), 0u) << st.ToString();
  // Lowering: the rule being lowered.
  CfgCompileOptions co;
  co.deadline = cancelled;
  auto program = CompileCfg(*ir, Compiler().vocabulary(), co);
  ASSERT_FALSE(program.ok());
  EXPECT_EQ(program.status().message(), "compile cancelled");
  EXPECT_EQ(program.status().location(), "rule 'root'");
  // A regex's subset construction (its caller locates it).
  RegexCompileOptions ro;
  ro.deadline = cancelled;
  auto dfa = CompileRegexToDfa("[a-z]+@[a-z]+", ro);
  ASSERT_FALSE(dfa.ok());
  EXPECT_EQ(dfa.status().message(), "compile cancelled");
  // A schema: the subschema being compiled; its lexical automata.
  auto model = schema::Schema::Load(R"({"properties": {"a": {"pattern": "^[a-z]+@x$"}}})");
  ASSERT_TRUE(model.ok());
  schema::SchemaCompileOptions so;
  so.deadline = cancelled;
  auto sg = schema::CompileSchemaToGrammar(**model, so);
  ASSERT_FALSE(sg.ok());
  EXPECT_EQ(sg.status().message(), "compile cancelled");
  EXPECT_EQ(sg.status().location(), "");  // the root, where it starts
  // RenderInstance's branch checks: an anyOf whose branches it must check.
  auto any = schema::Schema::Load(
      R"({"anyOf": [{"properties": {"a": {"type": "string"}}}, {"properties": {"b": {}}}]})");
  ASSERT_TRUE(any.ok());
  auto rendered = schema::TryRenderInstance(**any, json{{"a", 1}, {"b", 2}}, -1, so);
  ASSERT_FALSE(rendered.ok());
  EXPECT_EQ(rendered.status().message(), "compile cancelled");
  EXPECT_EQ(rendered.status().location(), "");  // the root, where it starts
  // Mask precomputation: the rule of a position left uncomputed.
  CompileOptions plain;
  plain.share_positions = false;  // (a program met before would take its positions at once)
  auto g = Compiler().CompileGrammar(gbnf, plain);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  st = CfgOf(**g)->PrecomputePositions(1, &cancelled);
  EXPECT_EQ(st.message(), "compile cancelled");
  EXPECT_NE(st.location().find("(precomputing its masks)"), std::string::npos) << st.ToString();
  // The public entry points, each with the flag.
  CompileOptions o;
  o.cancel = SetFlag();
  for (const auto& r : {Compiler().CompileRegex("[a-z]+", o), Compiler().CompileGrammar(gbnf, o),
                        Compiler().CompileSchema(R"({"type": "string"})", o)}) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kResourceLimit);
    EXPECT_EQ(r.status().message(), "compile cancelled");
  }
}

// Tool calls (CompileStructured) run their schemas, free text and lowering under one deadline.
TEST(CompileDeadline, StructuredToolCallsStopOnTheFlag) {
  auto format = LoadFormat("qwen");
  ASSERT_TRUE(format.ok()) << format.status().ToString();
  ToolSpec tool;
  tool.name = "slow";
  tool.schema_json = SlowSchema();
  CompileOptions o;
  o.cancel = SetFlag();
  auto g = CompileStructured(Compiler(), *format, std::vector<ToolSpec>{tool}, o);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), StatusCode::kResourceLimit) << g.status().ToString();
  // (The message names the tool first.)
  EXPECT_NE(g.status().message().find("compile cancelled"), std::string::npos);
  o.cancel = nullptr;
  o.compile_timeout_ms = 1;
  g = CompileStructured(Compiler(), *format, std::vector<ToolSpec>{tool}, o);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("compile deadline of 1 ms passed"), std::string::npos)
      << g.status().ToString();
}

// A deadline far in the future (the CLI accepts up to 2^40 ms) is no deadline in effect, not
// one whose end overflowed into the past.
TEST(CompileDeadline, AHugeTimeoutDoesNotOverflow) {
  CompileOptions o;
  o.compile_timeout_ms = std::int64_t{1} << 62;
  auto g = Compiler().CompileRegex("[a-z]{2,5}", o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, "abc"));
}

// Without the flag or the deadline, the same compiles succeed: the polls cost nothing else.
TEST(CompileDeadline, AFlagNotSetChangesNothing) {
  CompileOptions o;
  o.cancel = std::make_shared<std::atomic<bool>>(false);
  o.precompute_masks = true;
  auto g = Compiler().CompileSchema(
      R"({"type": "object", "properties": {"a": {"type": "integer"}}})", o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_TRUE(Accepts(*g, "{\"a\": 12}"));
  EXPECT_FALSE(Accepts(*g, "{\"a\": \"x\"}"));
}

}  // namespace
}  // namespace lockstep
