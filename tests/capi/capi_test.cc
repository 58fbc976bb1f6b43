// The C ABI (include/lockstep/lockstep_c.h) against the C++ API: the same tokens for the same seed
// and logits (step by step and with lockstep_generate), generated text that validates against
// the schema, every argument check (an error status and a message, never a crash), NULL frees,
// batch fills equal to single fills, in-memory vocabularies, and the matcher's other calls.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "capi/capi_test_support.h"
#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "lockstep/lockstep_c.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

std::string SchemaText() {
  return testing::ReadFile(testing::SourceDataDir() + "/tools/book_flight.json");
}

// True if the last error message contains `part`.
// A fresh matcher of `g` takes all of `text` and may end there (false too when no matcher can be
// created, which the EXPECT reports).
bool AcceptsWhole(lockstep_grammar* g, const char* text) {
  lockstep_matcher* m = nullptr;
  EXPECT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
  if (m == nullptr) return false;
  const bool accepted = lockstep_matcher_accept_string(m, text, std::strlen(text)) == LOCKSTEP_OK &&
                        lockstep_matcher_can_end(m) == 1;
  lockstep_matcher_free(m);
  return accepted;
}

bool LastErrorHas(const std::string& part) {
  return std::string(lockstep_last_error()).find(part) != std::string::npos;
}

// One vocabulary, grammar and model for the whole suite (the Llama-3 load and compile are the
// slow part).
class CapiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(lockstep_vocab_load("llama3", &vocab_), LOCKSTEP_OK) << lockstep_last_error();
    const std::string schema = SchemaText();
    ASSERT_FALSE(schema.empty());
    ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), nullptr, &grammar_),
              LOCKSTEP_OK)
        << lockstep_last_error();
    model_ = new capi_test_model;
    ASSERT_EQ(capi_test_model_init(model_, vocab_, CAPI_TEST_MODEL_SEED), LOCKSTEP_OK);
    lockstep_sampler_config config;
    capi_test_sampler_config(&config);
    ASSERT_EQ(lockstep_sampler_create(&config, 0, &sampler_), LOCKSTEP_OK);
  }
  static void TearDownTestSuite() {
    lockstep_sampler_free(sampler_);
    if (model_ != nullptr) capi_test_model_free(model_);
    delete model_;
    lockstep_grammar_free(grammar_);
    lockstep_vocab_free(vocab_);
    sampler_ = nullptr;
    model_ = nullptr;
    grammar_ = nullptr;
    vocab_ = nullptr;
  }

  // The step-by-step generation through the C ABI (the C loop shared with the C program).
  static std::vector<std::int32_t> CSteps(bool* eos) {
    std::vector<std::int32_t> ids(CAPI_TEST_MAX_TOKENS);
    std::size_t n = 0;
    int e = 0;
    EXPECT_EQ(capi_test_generate_steps(grammar_, sampler_, model_, CAPI_TEST_MAX_TOKENS, ids.data(),
                                       &n, &e),
              LOCKSTEP_OK)
        << lockstep_last_error();
    ids.resize(n);
    *eos = e != 0;
    return ids;
  }

  static std::vector<std::int32_t> CGenerate(int jump_forward, lockstep_finish_reason* finish) {
    std::vector<std::int32_t> ids(CAPI_TEST_MAX_TOKENS);
    std::size_t n = ids.size();
    lockstep_generate_options options;
    lockstep_generate_options_init(&options);
    options.jump_forward = jump_forward;
    EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, CAPI_TEST_MAX_TOKENS,
                                ids.data(), &n, &options, finish),
              LOCKSTEP_OK)
        << lockstep_last_error();
    ids.resize(n);
    return ids;
  }

  static std::string Text(const std::vector<std::int32_t>& ids) {
    std::string out;
    for (std::int32_t id : ids) {
      const char* b = nullptr;
      std::size_t len = 0;
      EXPECT_EQ(lockstep_vocab_token_bytes(vocab_, id, &b, &len), LOCKSTEP_OK);
      out.append(b, len);
    }
    return out;
  }

  static lockstep_vocab* vocab_;
  static lockstep_grammar* grammar_;
  static lockstep_sampler* sampler_;
  static capi_test_model* model_;
};

lockstep_vocab* CapiTest::vocab_ = nullptr;
lockstep_grammar* CapiTest::grammar_ = nullptr;
lockstep_sampler* CapiTest::sampler_ = nullptr;
capi_test_model* CapiTest::model_ = nullptr;

// The C++ API on the same vocabulary, schema, sampler settings and logits function.
struct CppSide {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
  SamplerConfig config;

  CppSide() {
    auto v = Vocabulary::Load("llama3");
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    vocab = *v;
    GrammarCompiler compiler(vocab);
    auto g = compiler.CompileSchema(SchemaText());
    EXPECT_TRUE(g.ok()) << g.status().ToString();
    grammar = *g;
    config.temperature = CAPI_TEST_TEMPERATURE;
    config.top_p = CAPI_TEST_TOP_P;
    config.seed = CAPI_TEST_SAMPLER_SEED;
  }
};

CppSide& Cpp() {
  static CppSide* side = new CppSide();
  return *side;
}

TEST_F(CapiTest, StepByStepGivesTheSameTokensAsTheCppApi) {
  bool eos = false;
  const std::vector<std::int32_t> c_ids = CSteps(&eos);
  ASSERT_TRUE(eos) << "no EOS in " << c_ids.size() << " tokens";

  // The same loop written against the C++ API.
  CppSide& cpp = Cpp();
  Matcher matcher(cpp.grammar);
  Sampler sampler(cpp.config);
  const std::int32_t width = cpp.grammar->logits_width();
  std::vector<std::uint32_t> mask(BitmaskWords(width));
  std::vector<float> logits(width);
  std::vector<TokenId> ids;
  bool cpp_eos = false;
  for (std::uint64_t step = 0; !matcher.IsTerminated() && ids.size() < CAPI_TEST_MAX_TOKENS;
       ++step) {
    matcher.FillNextTokenBitmask(mask);
    capi_test_logits(model_, ids.data(), ids.size(), logits.data(), width);
    const TokenId t = sampler.Sample(logits, mask.data(), ids, 0, step);
    ASSERT_TRUE(matcher.AcceptToken(t));
    if (matcher.IsTerminated()) {
      cpp_eos = true;
      break;
    }
    ids.push_back(t);
  }
  EXPECT_TRUE(cpp_eos);
  EXPECT_EQ(c_ids, ids);
}

TEST_F(CapiTest, GenerateGivesTheSameTokensAsTheStepsAndAsCppGenerate) {
  bool eos = false;
  const std::vector<std::int32_t> steps = CSteps(&eos);
  lockstep_finish_reason finish = LOCKSTEP_FINISH_LENGTH;
  EXPECT_EQ(CGenerate(0, &finish), steps);
  EXPECT_EQ(finish, LOCKSTEP_FINISH_EOS);

  // And with jump-forward, lockstep::Generate on a CallbackSource of the same function.
  const std::vector<std::int32_t> jumped = CGenerate(1, &finish);
  EXPECT_EQ(finish, LOCKSTEP_FINISH_EOS);
  CppSide& cpp = Cpp();
  for (bool jump : {false, true}) {
    CallbackSource source(capi_test_logits, model_, cpp.grammar->logits_width());
    Matcher matcher(cpp.grammar);
    GenerateOptions options;
    options.sampler = cpp.config;
    options.max_tokens = CAPI_TEST_MAX_TOKENS;
    options.jump_forward = jump;
    auto r = Generate(source, matcher, {}, options);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->finish, FinishReason::kEos);
    EXPECT_EQ(r->tokens, jump ? jumped : steps) << "jump_forward " << jump;
  }
}

// Compiled artifacts through the C ABI: a grammar saved (after precomputing) and loaded back,
// from the file and from its bytes, generates exactly the tokens of the compiled one; bad
// files and bad arguments are error statuses.
TEST_F(CapiTest, ArtifactRoundTripGeneratesTheSameTokens) {
  bool eos = false;
  const std::vector<std::int32_t> steps = CSteps(&eos);
  const std::string path = ::testing::TempDir() + "/capi_test.lsg";
  ASSERT_EQ(lockstep_grammar_precompute(grammar_), LOCKSTEP_OK) << lockstep_last_error();
  ASSERT_EQ(lockstep_grammar_save(grammar_, path.c_str()), LOCKSTEP_OK) << lockstep_last_error();
  const std::string bytes = testing::ReadFile(path);
  ASSERT_GT(bytes.size(), 64u);
  for (int from_bytes = 0; from_bytes < 2; ++from_bytes) {
    lockstep_grammar* loaded = nullptr;
    const lockstep_status st =
        from_bytes ? lockstep_grammar_load_bytes(vocab_, bytes.data(), bytes.size(), &loaded)
                   : lockstep_grammar_load(vocab_, path.c_str(), &loaded);
    ASSERT_EQ(st, LOCKSTEP_OK) << lockstep_last_error();
    std::vector<std::int32_t> ids(CAPI_TEST_MAX_TOKENS);
    std::size_t n = 0;
    int e = 0;
    ASSERT_EQ(capi_test_generate_steps(loaded, sampler_, model_, CAPI_TEST_MAX_TOKENS, ids.data(),
                                       &n, &e),
              LOCKSTEP_OK)
        << lockstep_last_error();
    ids.resize(n);
    EXPECT_EQ(ids, steps) << "from_bytes " << from_bytes;
    lockstep_grammar_free(loaded);
  }
  lockstep_grammar* g = nullptr;
  EXPECT_EQ(lockstep_grammar_load_bytes(vocab_, bytes.data(), bytes.size() / 2, &g),
            LOCKSTEP_INVALID_ARTIFACT);
  EXPECT_TRUE(LastErrorHas("truncated")) << lockstep_last_error();
  EXPECT_TRUE(LastErrorHas("byte ")) << lockstep_last_error();
  EXPECT_EQ(g, nullptr);
  EXPECT_STREQ(lockstep_status_name(LOCKSTEP_INVALID_ARTIFACT), "invalid artifact");
  EXPECT_EQ(lockstep_grammar_load_bytes(vocab_, "{}", 2, &g), LOCKSTEP_INVALID_ARTIFACT);
  EXPECT_EQ(lockstep_grammar_load(vocab_, "/nonexistent/x.lsg", &g), LOCKSTEP_IO_ERROR);
  EXPECT_EQ(lockstep_grammar_load(nullptr, path.c_str(), &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_load(vocab_, nullptr, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_load(vocab_, path.c_str(), nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_load_bytes(vocab_, nullptr, 5, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_save(nullptr, path.c_str()), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_save(grammar_, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_grammar_save(grammar_, "/nonexistent/dir/x.lsg"), LOCKSTEP_IO_ERROR);
  EXPECT_EQ(lockstep_grammar_precompute(nullptr), LOCKSTEP_INVALID_ARGUMENT);
  // Another vocabulary refuses it.
  lockstep_vocab* gpt2 = nullptr;
  ASSERT_EQ(lockstep_vocab_load("gpt2", &gpt2), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_grammar_load(gpt2, path.c_str(), &g), LOCKSTEP_INVALID_ARTIFACT);
  EXPECT_TRUE(LastErrorHas("another vocabulary")) << lockstep_last_error();
  lockstep_vocab_free(gpt2);
  std::remove(path.c_str());
}

TEST_F(CapiTest, GeneratedTextValidatesAgainstTheSchema) {
  // The C ABI's own validator, as a C host would check what it generated.
  lockstep_validator_options vo;
  lockstep_validator_options_init(&vo);
  vo.format_assertion = 1;  // the compiler enforces `format: date`
  const std::string schema = SchemaText();
  lockstep_validator* validator = nullptr;
  ASSERT_EQ(lockstep_validator_create(schema.data(), schema.size(), &vo, &validator), LOCKSTEP_OK)
      << lockstep_last_error();
  bool eos = false;
  lockstep_finish_reason finish = LOCKSTEP_FINISH_LENGTH;
  for (const std::vector<std::int32_t>& ids : {CSteps(&eos), CGenerate(1, &finish)}) {
    const std::string text = Text(ids);
    lockstep_validation* verdict = nullptr;
    ASSERT_EQ(lockstep_validate(validator, text.data(), text.size(), &verdict), LOCKSTEP_OK)
        << lockstep_last_error() << "\n" << text;
    std::string why;
    if (lockstep_validation_num_errors(verdict) > 0) {
      const char* at = nullptr;
      const char* keyword = nullptr;
      const char* message = nullptr;
      ASSERT_EQ(lockstep_validation_error(verdict, 0, &at, &keyword, &message), LOCKSTEP_OK);
      why = std::string(keyword) + ": " + message;
    }
    EXPECT_EQ(lockstep_validation_is_valid(verdict), 1) << text << "\n" << why;
    lockstep_validation_free(verdict);
  }
  lockstep_validator_free(validator);
  EXPECT_TRUE(eos);
  EXPECT_EQ(finish, LOCKSTEP_FINISH_EOS);
}

// schema_openapi_formats and the validator's openapi_formats: int32 is enforced by both, the same
// way; without them it is an unknown format (an annotation).
TEST_F(CapiTest, OpenApiFormatsInTheCompilerAndTheValidator) {
  const std::string schema = R"({"type": "integer", "format": "int32"})";
  lockstep_compile_options co;
  lockstep_compile_options_init(&co);
  EXPECT_EQ(co.schema_openapi_formats, 0);
  lockstep_validator_options vo;
  lockstep_validator_options_init(&vo);
  EXPECT_EQ(vo.openapi_formats, 0);
  for (int32_t openapi : {0, 1}) {
    co.schema_openapi_formats = openapi;
    vo.openapi_formats = openapi;
    lockstep_grammar* g = nullptr;
    ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g), LOCKSTEP_OK)
        << lockstep_last_error();
    lockstep_validator* validator = nullptr;
    ASSERT_EQ(lockstep_validator_create(schema.data(), schema.size(), &vo, &validator),
              LOCKSTEP_OK);
    for (const char* text : {"2147483647", "2147483648", "-2147483649"}) {
      const bool in_range = std::string(text) == "2147483647";
      const bool accepted = AcceptsWhole(g, text);
      lockstep_validation* verdict = nullptr;
      ASSERT_EQ(lockstep_validate(validator, text, std::strlen(text), &verdict), LOCKSTEP_OK);
      const bool valid = lockstep_validation_is_valid(verdict) == 1;
      lockstep_validation_free(verdict);
      EXPECT_EQ(accepted, openapi == 0 || in_range) << text << " openapi " << openapi;
      EXPECT_EQ(valid, openapi == 0 || in_range) << text << " openapi " << openapi;
    }
    lockstep_validator_free(validator);
    lockstep_grammar_free(g);
  }
}

// schema_max_oneof_overlaps and schema_max_some_member_requirements (appended last): the
// defaults, RESOURCE_LIMIT naming the field past them, a raised budget compiles, a caller built
// before the fields gets the defaults, and values out of range are refused.
TEST_F(CapiTest, SchemaCombinatorBudgets) {
  // Three branches "contains a / b / c", not provably disjoint: each overlaps two others.
  const std::string one_of = R"({"oneOf": [{"type": "string", "pattern": "a"},
      {"type": "string", "pattern": "b"}, {"type": "string", "pattern": "c"}]})";
  // Two negated patternProperties on one object.
  const std::string some = R"({"type": "object", "allOf": [
      {"not": {"patternProperties": {"^a": {"type": "integer"}}}},
      {"not": {"patternProperties": {"^b": {"type": "integer"}}}}]})";
  lockstep_compile_options co;
  lockstep_compile_options_init(&co);
  EXPECT_EQ(co.schema_max_oneof_overlaps, 11);
  EXPECT_EQ(co.schema_max_some_member_requirements, 3);
  lockstep_grammar* g = nullptr;
  co.schema_max_oneof_overlaps = 1;
  co.schema_max_some_member_requirements = 1;
  EXPECT_EQ(lockstep_compile_schema(vocab_, one_of.data(), one_of.size(), &co, &g),
            LOCKSTEP_RESOURCE_LIMIT);
  EXPECT_NE(std::string(lockstep_last_error()).find("max_oneof_overlaps"), std::string::npos)
      << lockstep_last_error();
  EXPECT_EQ(lockstep_compile_schema(vocab_, some.data(), some.size(), &co, &g),
            LOCKSTEP_RESOURCE_LIMIT);
  EXPECT_NE(std::string(lockstep_last_error()).find("max_some_member_requirements"),
            std::string::npos)
      << lockstep_last_error();
  co.schema_max_oneof_overlaps = 2;
  co.schema_max_some_member_requirements = 2;
  ASSERT_EQ(lockstep_compile_schema(vocab_, one_of.data(), one_of.size(), &co, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_TRUE(AcceptsWhole(g, R"("aa")"));
  EXPECT_FALSE(AcceptsWhole(g, R"("ab")"));
  lockstep_grammar_free(g);
  g = nullptr;
  ASSERT_EQ(lockstep_compile_schema(vocab_, some.data(), some.size(), &co, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_TRUE(AcceptsWhole(g, R"({"a":"x","b":"y"})"));
  EXPECT_FALSE(AcceptsWhole(g, R"({"a":"x","b":1})"));
  lockstep_grammar_free(g);
  g = nullptr;
  // A caller built before the fields: the defaults, whatever the fields hold.
  co.schema_max_oneof_overlaps = 0;
  co.schema_max_some_member_requirements = 0;
  co.struct_size = offsetof(lockstep_compile_options, schema_max_oneof_overlaps);
  ASSERT_EQ(lockstep_compile_schema(vocab_, one_of.data(), one_of.size(), &co, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_grammar_free(g);
  g = nullptr;
  lockstep_compile_options_init(&co);
  for (auto [overlaps, some_members] : {std::pair{-1, 3}, std::pair{11, -1}, std::pair{11, 17}}) {
    co.schema_max_oneof_overlaps = overlaps;
    co.schema_max_some_member_requirements = some_members;
    EXPECT_EQ(lockstep_compile_schema(vocab_, one_of.data(), one_of.size(), &co, &g),
              LOCKSTEP_INVALID_ARGUMENT);
  }
}

// max_unique_search_bytes (appended last): the searches for a new item of a uniqueItems list of
// closed objects stop past it. With 3 bytes, the comma that asks for a fourth item of
// {"k": x|y, "f"?: boolean} (two of its six values left) is refused with RESOURCE_LIMIT naming
// the field; with the default it is taken; a caller built before the field gets the default; a
// negative budget is refused.
TEST_F(CapiTest, UniqueSearchBudget) {
  const std::string schema = R"({"type": "array", "uniqueItems": true, "items": {"type": "object",
      "additionalProperties": false, "required": ["k"],
      "properties": {"k": {"enum": ["x", "y"]}, "f": {"type": "boolean"}}}})";
  const char* prefix = R"([{"k":"y"},{"k":"x","f":true},{"k":"x","f":false})";
  lockstep_compile_options co;
  lockstep_compile_options_init(&co);
  EXPECT_EQ(co.max_unique_search_bytes, 65536);
  const auto comma_after_prefix = [&](const lockstep_compile_options& options) {
    lockstep_grammar* g = nullptr;
    EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &options, &g),
              LOCKSTEP_OK)
        << lockstep_last_error();
    lockstep_matcher* m = nullptr;
    EXPECT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
    EXPECT_EQ(lockstep_matcher_accept_string(m, prefix, std::strlen(prefix)), LOCKSTEP_OK)
        << lockstep_last_error();
    const lockstep_status st = lockstep_matcher_accept_string(m, ",", 1);
    const std::string error = st == LOCKSTEP_OK ? "" : lockstep_last_error();
    lockstep_matcher_free(m);
    lockstep_grammar_free(g);
    return std::pair{st, error};
  };
  EXPECT_EQ(comma_after_prefix(co).first, LOCKSTEP_OK);
  co.max_unique_search_bytes = 3;
  const auto [status, error] = comma_after_prefix(co);
  EXPECT_EQ(status, LOCKSTEP_RESOURCE_LIMIT) << error;
  EXPECT_NE(error.find("max_unique_search_bytes"), std::string::npos) << error;
  co.struct_size = offsetof(lockstep_compile_options, max_unique_search_bytes);
  EXPECT_EQ(comma_after_prefix(co).first, LOCKSTEP_OK);
  lockstep_compile_options_init(&co);
  co.max_unique_search_bytes = -1;
  lockstep_grammar* g = nullptr;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_ARGUMENT);
}

// schema_member_order and schema_any_order_max_properties (appended last): declared order by
// default; LOCKSTEP_MEMBER_ORDER_ANY takes the members in any order, each at most once, up to
// the property limit (past it, RESOURCE_LIMIT naming it); a caller built before the fields gets
// declared order; values out of range are refused.
TEST_F(CapiTest, SchemaMemberOrder) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}}, "required": ["a"], "additionalProperties": false})";
  lockstep_compile_options co;
  lockstep_compile_options_init(&co);
  EXPECT_EQ(co.schema_member_order, LOCKSTEP_MEMBER_ORDER_DECLARED);
  for (int32_t order : {LOCKSTEP_MEMBER_ORDER_DECLARED, LOCKSTEP_MEMBER_ORDER_ANY}) {
    co.schema_member_order = order;
    lockstep_grammar* g = nullptr;
    ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g), LOCKSTEP_OK)
        << lockstep_last_error();
    EXPECT_TRUE(AcceptsWhole(g, R"({"a":1,"b":2})"));
    EXPECT_EQ(AcceptsWhole(g, R"({"b":2,"a":1})"), order == LOCKSTEP_MEMBER_ORDER_ANY);
    EXPECT_FALSE(AcceptsWhole(g, R"({"b":2,"a":1,"b":3})"));
    EXPECT_FALSE(AcceptsWhole(g, R"({"b":2})"));
    lockstep_grammar_free(g);
  }
  EXPECT_EQ(co.schema_any_order_max_properties, 10);
  co.schema_any_order_max_properties = 1;  // (two declared properties: past it)
  lockstep_grammar* g = nullptr;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_RESOURCE_LIMIT);
  EXPECT_NE(std::string(lockstep_last_error()).find("any_order_max_properties"),
            std::string::npos)
      << lockstep_last_error();
  co.schema_any_order_max_properties = 64;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_ARGUMENT);
  co.schema_any_order_max_properties = 10;
  // A caller built before the fields: declared order, whatever the fields hold.
  co.schema_member_order = LOCKSTEP_MEMBER_ORDER_ANY;
  co.struct_size = offsetof(lockstep_compile_options, schema_member_order);
  ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_FALSE(AcceptsWhole(g, R"({"b":2,"a":1})"));
  lockstep_grammar_free(g);
  g = nullptr;
  lockstep_compile_options_init(&co);
  co.schema_member_order = 2;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_NE(std::string(lockstep_last_error()).find("schema_member_order"), std::string::npos);
}

// schema_default_draft (appended last): draft-04's boolean exclusiveMaximum compiles under it
// and is a malformed keyword under the default 2020-12; an older struct_size that ends before the
// field gets the default; a value that is no lockstep_schema_draft is refused.
TEST_F(CapiTest, SchemaDefaultDraft) {
  const std::string schema = R"({"type": "integer", "maximum": 5, "exclusiveMaximum": true})";
  lockstep_compile_options co;
  lockstep_compile_options_init(&co);
  EXPECT_EQ(co.schema_default_draft, LOCKSTEP_SCHEMA_DRAFT_2020_12);
  lockstep_grammar* g = nullptr;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_SCHEMA);
  co.schema_default_draft = LOCKSTEP_SCHEMA_DRAFT_4;
  ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  for (const char* text : {"4", "5", "4.0"}) {
    const bool accepted = AcceptsWhole(g, text);
    EXPECT_EQ(accepted, std::string(text) == "4") << text;
  }
  lockstep_grammar_free(g);
  co.struct_size = offsetof(lockstep_compile_options, schema_default_draft);
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_SCHEMA);
  lockstep_compile_options_init(&co);
  co.schema_default_draft = 5;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &co, &g),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("schema_default_draft")) << lockstep_last_error();
}

TEST_F(CapiTest, ThreadsShareVocabularyGrammarAndGenerateSampler) {
  bool eos = false;
  const std::vector<std::int32_t> expected = CSteps(&eos);
  lockstep_vocab_load("no-such-vocabulary", nullptr);  // this thread's last error
  const std::string mine = lockstep_last_error();
  constexpr int kThreads = 4;
  std::vector<std::vector<std::int32_t>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &got, &errors] {
      errors[t] = lockstep_last_error();  // "" on a fresh thread
      // Compiling on the shared vocabulary, and generating with the shared grammar and sampler.
      lockstep_grammar* g = nullptr;
      EXPECT_EQ(lockstep_compile_regex(vocab_, "[0-9]{3}", 8, nullptr, &g), LOCKSTEP_OK);
      lockstep_grammar_free(g);
      std::vector<std::int32_t> ids(CAPI_TEST_MAX_TOKENS);
      std::size_t n = ids.size();
      lockstep_generate_options options;
      lockstep_generate_options_init(&options);
      options.jump_forward = 0;
      EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_,
                                  CAPI_TEST_MAX_TOKENS, ids.data(), &n, &options, nullptr),
                LOCKSTEP_OK);
      ids.resize(n);
      got[t] = ids;
      lockstep_matcher_rollback(nullptr, 1);  // fails on this thread only
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(got[t], expected) << "thread " << t;
    EXPECT_EQ(errors[t], "");
  }
  EXPECT_EQ(lockstep_last_error(), mine);
}

TEST_F(CapiTest, FreeingNullIsANoOp) {
  lockstep_vocab_free(nullptr);
  lockstep_grammar_free(nullptr);
  lockstep_matcher_free(nullptr);
  lockstep_sampler_free(nullptr);
  lockstep_compile_options_init(nullptr);
  lockstep_sampler_config_init(nullptr);
  lockstep_generate_options_init(nullptr);
}

TEST_F(CapiTest, GettersOnNull) {
  EXPECT_EQ(lockstep_vocab_size(nullptr), 0);
  EXPECT_EQ(lockstep_vocab_logits_width(nullptr), 0);
  EXPECT_EQ(lockstep_vocab_bitmask_words(nullptr), 0u);
  EXPECT_EQ(lockstep_vocab_num_eos(nullptr), 0u);
  EXPECT_EQ(lockstep_vocab_eos_id(nullptr, 0), -1);
  EXPECT_EQ(lockstep_vocab_eos_id(vocab_, 1000), -1);
  EXPECT_EQ(lockstep_vocab_token_type(nullptr, 0), LOCKSTEP_TOKEN_UNUSED);
  EXPECT_EQ(lockstep_vocab_token_type(vocab_, -5), LOCKSTEP_TOKEN_UNUSED);
  EXPECT_EQ(lockstep_grammar_logits_width(nullptr), 0);
  EXPECT_EQ(lockstep_grammar_bitmask_words(nullptr), 0u);
  EXPECT_EQ(lockstep_grammar_num_warnings(nullptr), 0u);
  EXPECT_EQ(lockstep_grammar_warning(nullptr, 0), nullptr);
  EXPECT_EQ(lockstep_grammar_warning(grammar_, 0), nullptr);
  EXPECT_EQ(lockstep_matcher_num_steps(nullptr), 0);
  EXPECT_EQ(lockstep_matcher_is_terminated(nullptr), 0);
  EXPECT_EQ(lockstep_matcher_can_end(nullptr), 0);
  EXPECT_STREQ(lockstep_status_name(LOCKSTEP_OK), "ok");
  EXPECT_STREQ(lockstep_status_name(LOCKSTEP_REJECTED), "rejected");
  EXPECT_STREQ(lockstep_status_name(LOCKSTEP_INVALID_SCHEMA), "invalid schema");
  // lockstep_status_name of a value outside the enum is checked from C (capi_generation_test.c):
  // in C++ such a value is not representable.
}

TEST_F(CapiTest, VocabularyAndCompileErrors) {
  lockstep_vocab* v = reinterpret_cast<lockstep_vocab*>(0x1);  // must stay untouched on error
  EXPECT_EQ(lockstep_vocab_load("no-such-vocabulary", &v), LOCKSTEP_IO_ERROR);
  EXPECT_TRUE(LastErrorHas("no-such-vocabulary")) << lockstep_last_error();
  EXPECT_EQ(v, reinterpret_cast<lockstep_vocab*>(0x1));
  EXPECT_EQ(lockstep_vocab_load(nullptr, &v), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("lockstep_vocab_load")) << lockstep_last_error();
  EXPECT_EQ(lockstep_vocab_load("llama3", nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_load_with_width("llama3", 100, &v), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("logits_width")) << lockstep_last_error();
  EXPECT_EQ(lockstep_vocab_load_with_width("llama3", -1, &v), LOCKSTEP_INVALID_ARGUMENT);

  const char* bytes = nullptr;
  std::size_t len = 0;
  EXPECT_EQ(lockstep_vocab_token_bytes(vocab_, 128256, &bytes, &len), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_token_bytes(vocab_, -1, &bytes, &len), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_token_bytes(vocab_, 0, nullptr, &len), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_token_bytes(nullptr, 0, &bytes, &len), LOCKSTEP_INVALID_ARGUMENT);

  lockstep_grammar* g = nullptr;
  // Invalid schema text: the JSON Pointer of the bad keyword in the message.
  const std::string bad_schema = R"({"type": "object", "properties": {"a": {"type": 5}}})";
  lockstep_status st =
      lockstep_compile_schema(vocab_, bad_schema.data(), bad_schema.size(), nullptr, &g);
  EXPECT_EQ(st, LOCKSTEP_INVALID_SCHEMA) << lockstep_status_name(st);
  EXPECT_TRUE(LastErrorHas("/properties/a/type")) << lockstep_last_error();
  EXPECT_EQ(g, nullptr);
  const std::string not_json = "{\"type\": ";
  EXPECT_EQ(lockstep_compile_schema(vocab_, not_json.data(), not_json.size(), nullptr, &g),
            LOCKSTEP_INVALID_SCHEMA);
  EXPECT_STRNE(lockstep_last_error(), "");
  // A regex error names its byte offset; a grammar error its line:column.
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a(b", 3, nullptr, &g), LOCKSTEP_INVALID_REGEX);
  EXPECT_TRUE(LastErrorHas("offset")) << lockstep_last_error();
  const std::string gbnf = "root ::= \"a\" |\n  (";
  EXPECT_EQ(lockstep_compile_grammar(vocab_, gbnf.data(), gbnf.size(), "gbnf", nullptr, &g),
            LOCKSTEP_INVALID_GRAMMAR);
  EXPECT_TRUE(LastErrorHas("2:")) << lockstep_last_error();
  EXPECT_EQ(lockstep_compile_grammar(vocab_, gbnf.data(), gbnf.size(), "yacc", nullptr, &g),
            LOCKSTEP_INVALID_ARGUMENT);
  // Unsupported (strict) keyword, then the same in lenient mode with a warning.
  const std::string unique =
      R"({"type": "array", "items": {"type": "number", "maximum": 10}, "uniqueItems": true})";
  EXPECT_EQ(lockstep_compile_schema(vocab_, unique.data(), unique.size(), nullptr, &g),
            LOCKSTEP_UNSUPPORTED);
  EXPECT_TRUE(LastErrorHas("/uniqueItems")) << lockstep_last_error();
  lockstep_compile_options options;
  lockstep_compile_options_init(&options);
  options.schema_lenient = 1;
  ASSERT_EQ(lockstep_compile_schema(vocab_, unique.data(), unique.size(), &options, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  ASSERT_EQ(lockstep_grammar_num_warnings(g), 1u);
  EXPECT_NE(std::string(lockstep_grammar_warning(g, 0)).find("/uniqueItems"), std::string::npos)
      << lockstep_grammar_warning(g, 0);
  EXPECT_EQ(lockstep_grammar_warning(g, 1), nullptr);
  lockstep_grammar_free(g);
  g = nullptr;
  // A grammar rule the root never reaches: compiled, with a warning at its line:column.
  const std::string spare = "root ::= \"a\"\n\nspare ::= \"b\"\n";
  ASSERT_EQ(lockstep_compile_grammar(vocab_, spare.data(), spare.size(), "gbnf", nullptr, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  ASSERT_EQ(lockstep_grammar_num_warnings(g), 1u);
  EXPECT_STREQ(lockstep_grammar_warning(g, 0),
               "3:1: rule 'spare' is never used (unreachable from 'root')");
  lockstep_grammar_free(g);
  g = nullptr;
  // Unsatisfiable.
  const std::string never = R"({"not": {}})";
  EXPECT_EQ(lockstep_compile_schema(vocab_, never.data(), never.size(), nullptr, &g),
            LOCKSTEP_UNSATISFIABLE);
  // Resource limit: a budget too small for the pattern.
  options.schema_lenient = 0;
  options.max_dfa_states = 3;
  EXPECT_EQ(lockstep_compile_regex(vocab_, "[a-z]{20}", 9, &options, &g), LOCKSTEP_RESOURCE_LIMIT)
      << lockstep_last_error();
  // Wrong struct_size, NULL arguments, out-of-range budgets.
  lockstep_compile_options_init(&options);
  options.struct_size = 8;
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a", 1, &options, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("struct_size")) << lockstep_last_error();
  options.struct_size = sizeof(options) + 8;
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a", 1, &options, &g), LOCKSTEP_INVALID_ARGUMENT);
  lockstep_compile_options_init(&options);
  options.max_nesting_depth = 0;
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a", 1, &options, &g), LOCKSTEP_INVALID_ARGUMENT);
  lockstep_compile_options_init(&options);
  options.max_earley_items_per_byte = 0;
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a", 1, &options, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);
  EXPECT_EQ(lockstep_compile_regex(nullptr, "a", 1, nullptr, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_compile_regex(vocab_, nullptr, 1, nullptr, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_compile_regex(vocab_, "a", 1, nullptr, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_compile_schema(vocab_, nullptr, 4, nullptr, &g), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(g, nullptr);
}

// max_earley_items_per_byte came after the first published layout of the options: a caller
// built with that layout (struct_size ending before it) gets its default; a budget too small
// for a byte's parse is LOCKSTEP_RESOURCE_LIMIT naming it, with the matcher unchanged.
TEST_F(CapiTest, EarleyItemBudget) {
  const std::string grammar = "root ::= list\nlist ::= list \",\" [a-z] | [a-z]";
  lockstep_compile_options options;
  lockstep_compile_options_init(&options);
  options.max_earley_items_per_byte = 12345;
  options.struct_size = offsetof(lockstep_compile_options, max_earley_items_per_byte);
  lockstep_grammar* g = nullptr;
  ASSERT_EQ(lockstep_compile_grammar(vocab_, grammar.data(), grammar.size(), nullptr, &options, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_matcher* m = nullptr;
  ASSERT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_accept_string(m, "a,b,c", 5), LOCKSTEP_OK);
  lockstep_matcher_free(m);
  lockstep_grammar_free(g);
  lockstep_compile_options_init(&options);
  options.max_earley_items_per_byte = 3;
  ASSERT_EQ(lockstep_compile_grammar(vocab_, grammar.data(), grammar.size(), nullptr, &options, &g),
            LOCKSTEP_OK);
  ASSERT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_accept_string(m, "a,b", 3), LOCKSTEP_RESOURCE_LIMIT);
  EXPECT_TRUE(LastErrorHas("max_earley_items_per_byte")) << lockstep_last_error();
  EXPECT_EQ(lockstep_matcher_num_steps(m), 0);
  lockstep_matcher_free(m);
  lockstep_grammar_free(g);
}

// max_program_states, appended last: its default, the error naming it, a caller built before it
// (struct_size ending before the field) getting the default whatever the field holds, and a
// non-positive value refused. 40 recursive rules (never inlined) of about 60 states each.
TEST_F(CapiTest, ProgramStateBudget) {
  std::string grammar = "root ::= r0";
  for (int i = 1; i < 40; ++i) grammar.append(" | r").append(std::to_string(i));
  grammar += "\n";
  for (int i = 0; i < 40; ++i) {
    const std::string n = std::to_string(i);
    grammar.append("r").append(n).append(" ::= \"(\" r").append(n).append(" \")\" | \"k");
    grammar.append(n).append("_abcdefghijklmnopqrstuvwxyz_0123456789_ABCDEFGHIJKLMNOPQRSTUVWXYZ\"\n");
  }
  lockstep_compile_options options;
  lockstep_compile_options_init(&options);
  EXPECT_EQ(options.max_program_states, 500000);
  options.max_program_states = 500;
  lockstep_grammar* g = nullptr;
  EXPECT_EQ(lockstep_compile_grammar(vocab_, grammar.data(), grammar.size(), nullptr, &options, &g),
            LOCKSTEP_RESOURCE_LIMIT);
  EXPECT_TRUE(LastErrorHas("max_program_states (500 states")) << lockstep_last_error();
  EXPECT_EQ(g, nullptr);
  options.struct_size = offsetof(lockstep_compile_options, max_program_states);
  ASSERT_EQ(lockstep_compile_grammar(vocab_, grammar.data(), grammar.size(), nullptr, &options, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_grammar_free(g);
  g = nullptr;
  lockstep_compile_options_init(&options);
  options.max_program_states = 0;
  EXPECT_EQ(lockstep_compile_grammar(vocab_, grammar.data(), grammar.size(), nullptr, &options, &g),
            LOCKSTEP_INVALID_ARGUMENT);
}

// The compile budgets through the ABI: the deadline field and its default, the previous layout
// of the options (before compile_timeout_ms) still accepted with the default deadline, a
// negative deadline refused, the cancel token's functions (NULL included) and a token cancelled
// before a compile stops it.
TEST_F(CapiTest, CompileDeadlineAndCancelToken) {
  lockstep_compile_options options;
  lockstep_compile_options_init(&options);
  EXPECT_EQ(options.compile_timeout_ms, 10000);
  EXPECT_EQ(options.cancel, nullptr);
  EXPECT_EQ(options.background_positions, 1);
  lockstep_grammar* g = nullptr;
  const std::string schema = R"({"type": "array", "items": {"type": "integer"}})";
  options.struct_size = offsetof(lockstep_compile_options, compile_timeout_ms);
  ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &options, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_grammar_free(g);
  g = nullptr;
  lockstep_compile_options_init(&options);
  options.compile_timeout_ms = -1;
  EXPECT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &options, &g),
            LOCKSTEP_INVALID_ARGUMENT);

  lockstep_cancel_token* token = nullptr;
  EXPECT_EQ(lockstep_cancel_token_create(nullptr), LOCKSTEP_INVALID_ARGUMENT);
  ASSERT_EQ(lockstep_cancel_token_create(&token), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_cancel_token_is_cancelled(token), 0);
  lockstep_cancel_token_cancel(token);
  EXPECT_EQ(lockstep_cancel_token_is_cancelled(token), 1);
  lockstep_compile_options_init(&options);
  options.cancel = token;
  for (const auto& [kind, text] :
       {std::pair<int, std::string>{0, "[a-z]+"}, {1, "root ::= \"a\"+"}, {2, schema}}) {
    const lockstep_status st =
        kind == 0 ? lockstep_compile_regex(vocab_, text.data(), text.size(), &options, &g)
        : kind == 1
            ? lockstep_compile_grammar(vocab_, text.data(), text.size(), nullptr, &options, &g)
            : lockstep_compile_schema(vocab_, text.data(), text.size(), &options, &g);
    EXPECT_EQ(st, LOCKSTEP_RESOURCE_LIMIT) << text;
    EXPECT_TRUE(LastErrorHas("compile cancelled")) << lockstep_last_error();
    EXPECT_EQ(g, nullptr);
  }
  lockstep_cancel_token_reset(token);
  EXPECT_EQ(lockstep_cancel_token_is_cancelled(token), 0);
  ASSERT_EQ(lockstep_compile_schema(vocab_, schema.data(), schema.size(), &options, &g),
            LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_grammar_free(g);
  lockstep_cancel_token_free(token);
  lockstep_cancel_token_cancel(nullptr);
  lockstep_cancel_token_reset(nullptr);
  EXPECT_EQ(lockstep_cancel_token_is_cancelled(nullptr), 0);
  lockstep_cancel_token_free(nullptr);
}

TEST_F(CapiTest, MatcherErrors) {
  lockstep_matcher* m = nullptr;
  EXPECT_EQ(lockstep_matcher_create(nullptr, &m), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_create(grammar_, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  ASSERT_EQ(lockstep_matcher_create(grammar_, &m), LOCKSTEP_OK);
  const std::size_t words = lockstep_grammar_bitmask_words(grammar_);
  ASSERT_EQ(words, 4008u);
  // Exactly sized heap buffers, so ASan sees any write past them.
  auto buf = std::make_unique<std::uint32_t[]>(words);
  EXPECT_EQ(lockstep_matcher_fill_bitmask(m, buf.get(), words - 1), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("4008")) << lockstep_last_error();
  EXPECT_EQ(lockstep_matcher_fill_bitmask(m, buf.get(), 0), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_fill_bitmask(m, nullptr, words), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_fill_bitmask(nullptr, buf.get(), words), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_fill_bitmask(m, buf.get(), words), LOCKSTEP_OK);

  EXPECT_EQ(lockstep_matcher_accept_token(m, 128256), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("128256")) << lockstep_last_error();
  EXPECT_EQ(lockstep_matcher_accept_token(m, -1), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_accept_token(nullptr, 0), LOCKSTEP_INVALID_ARGUMENT);
  // In range but not allowed: "a" cannot start the object.
  EXPECT_EQ(lockstep_matcher_accept_token(m, 64), LOCKSTEP_REJECTED);
  EXPECT_TRUE(LastErrorHas("not allowed")) << lockstep_last_error();
  EXPECT_EQ(lockstep_matcher_accept_token(m, lockstep_vocab_eos_id(vocab_, 0)), LOCKSTEP_REJECTED);
  EXPECT_EQ(lockstep_matcher_accept_string(m, "x", 1), LOCKSTEP_REJECTED);
  EXPECT_EQ(lockstep_matcher_accept_string(m, nullptr, 3), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_num_steps(m), 0);

  EXPECT_EQ(lockstep_matcher_rollback(m, 1), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("roll back")) << lockstep_last_error();
  EXPECT_EQ(lockstep_matcher_rollback(m, -1), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_rollback(nullptr, 0), LOCKSTEP_INVALID_ARGUMENT);
  ASSERT_EQ(lockstep_matcher_accept_string(m, "{", 1), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_rollback(m, 2), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_num_steps(m), 1);
  EXPECT_EQ(lockstep_matcher_rollback(m, 1), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_reset(nullptr), LOCKSTEP_INVALID_ARGUMENT);

  char bytes[4];
  std::size_t len = sizeof(bytes);
  EXPECT_EQ(lockstep_matcher_forced_bytes(m, bytes, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_forced_bytes(m, nullptr, &len), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_forced_bytes(nullptr, bytes, &len), LOCKSTEP_INVALID_ARGUMENT);
  std::int32_t toks[2];
  std::size_t count = 2;
  EXPECT_EQ(lockstep_matcher_forced_tokens(m, toks, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_forced_tokens(m, nullptr, &count), LOCKSTEP_INVALID_ARGUMENT);
  std::size_t accepted = 99;
  EXPECT_EQ(lockstep_matcher_validate_draft(m, nullptr, 2, &accepted), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_validate_draft(m, toks, 2, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_validate_draft(m, nullptr, 0, &accepted), LOCKSTEP_OK);
  EXPECT_EQ(accepted, 0u);
  lockstep_matcher* f = nullptr;
  EXPECT_EQ(lockstep_matcher_fork(nullptr, &f), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_matcher_fork(m, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  lockstep_matcher_free(m);
}

TEST_F(CapiTest, SamplerAndGenerateErrors) {
  lockstep_sampler* s = nullptr;
  lockstep_sampler_config config;
  lockstep_sampler_config_init(&config);
  config.struct_size = 0;
  EXPECT_EQ(lockstep_sampler_create(&config, 0, &s), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("struct_size")) << lockstep_last_error();
  lockstep_sampler_config_init(&config);
  config.temperature = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(lockstep_sampler_create(&config, 0, &s), LOCKSTEP_INVALID_ARGUMENT);
  lockstep_sampler_config_init(&config);
  config.top_k = -1;
  EXPECT_EQ(lockstep_sampler_create(&config, 0, &s), LOCKSTEP_INVALID_ARGUMENT);
  lockstep_sampler_config_init(&config);
  config.num_logit_bias = 2;
  EXPECT_EQ(lockstep_sampler_create(&config, 0, &s), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_sampler_create(nullptr, 0, nullptr), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_sampler_create(nullptr, -1, &s), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(s, nullptr);
  ASSERT_EQ(lockstep_sampler_create(nullptr, 0, &s), LOCKSTEP_OK);

  std::vector<float> logits(70, 0.0f);
  std::uint32_t mask[3] = {0, 0, 0};
  std::int32_t token = -7;
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, mask, 2, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);  // 70 logits need 3 words
  EXPECT_TRUE(LastErrorHas("n_mask_words")) << lockstep_last_error();
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, mask, 3, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);  // allows nothing
  EXPECT_TRUE(LastErrorHas("allows no token")) << lockstep_last_error();
  EXPECT_EQ(logits[0], 0.0f);  // refused before the sampler touched them
  mask[2] = 1u << 10;          // id 74: past the 70 logits, so still nothing allowed
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, mask, 3, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);
  mask[2] = 0;
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 0, nullptr, 0, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_sampler_sample(s, nullptr, 70, nullptr, 0, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, nullptr, 0, nullptr, 3, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);  // history NULL with a count
  EXPECT_EQ(
      lockstep_sampler_sample(nullptr, logits.data(), 70, nullptr, 0, nullptr, 0, 0, 0, &token),
      LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, nullptr, 0, nullptr, 0, 0, 0, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  logits[13] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, nullptr, 0, nullptr, 0, 0, 0, &token),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("logits[13]")) << lockstep_last_error();
  EXPECT_EQ(token, -7);
  logits[13] = -std::numeric_limits<float>::infinity();  // fine
  logits[5] = 3.0f;
  mask[0] = (1u << 5) | (1u << 13);
  const std::int32_t history[2] = {5, 5};
  EXPECT_EQ(lockstep_sampler_sample(s, logits.data(), 70, mask, 3, history, 2, 0, 0, &token),
            LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_EQ(token, 5);  // the only finite allowed logit
  lockstep_sampler_free(s);

  // lockstep_generate: capacity below max_tokens, NULLs, a NaN-writing model.
  std::vector<std::int32_t> ids(8);
  std::size_t n = 4;
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, 8, ids.data(), &n,
                              nullptr, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("max_tokens")) << lockstep_last_error();
  n = 8;
  EXPECT_EQ(
      lockstep_generate(grammar_, sampler_, nullptr, model_, 8, ids.data(), &n, nullptr, nullptr),
      LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_generate(nullptr, sampler_, capi_test_logits, model_, 8, ids.data(), &n,
                              nullptr, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_generate(grammar_, nullptr, capi_test_logits, model_, 8, ids.data(), &n,
                              nullptr, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, 8, nullptr, &n, nullptr,
                              nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  lockstep_generate_options options;
  lockstep_generate_options_init(&options);
  options.struct_size = 1;
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, 8, ids.data(), &n,
                              &options, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  lockstep_generate_options_init(&options);
  options.prompt_len = 3;
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, 8, ids.data(), &n,
                              &options, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  lockstep_logits_fn nan_model = [](void*, const int32_t*, size_t n_ctx, float* out,
                                    int32_t width) {
    for (int32_t i = 0; i < width; ++i) out[i] = 0.0f;
    if (n_ctx >= 2) out[width / 2] = std::numeric_limits<float>::quiet_NaN();
  };
  lockstep_finish_reason finish = LOCKSTEP_FINISH_EOS;
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, nan_model, nullptr, 8, ids.data(), &n, nullptr,
                              &finish),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("NaN")) << lockstep_last_error();
  EXPECT_EQ(n, 8u);
  EXPECT_EQ(finish, LOCKSTEP_FINISH_EOS);
  // max_tokens reached: finish by length, exactly max_tokens ids.
  EXPECT_EQ(lockstep_generate(grammar_, sampler_, capi_test_logits, model_, 5, ids.data(), &n,
                              nullptr, &finish),
            LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_EQ(finish, LOCKSTEP_FINISH_LENGTH);
  EXPECT_EQ(n, 5u);
}

TEST_F(CapiTest, BatchFillEqualsSingleFills) {
  bool eos = false;
  const std::vector<std::int32_t> ids = CSteps(&eos);
  ASSERT_GE(ids.size(), 16u);
  // A second grammar over the same vocabulary, so rows differ in kind too.
  lockstep_grammar* regex = nullptr;
  const std::string pattern = R"(\{"a": [0-9]{1,5}\})";
  ASSERT_EQ(lockstep_compile_regex(vocab_, pattern.data(), pattern.size(), nullptr, &regex),
            LOCKSTEP_OK);
  constexpr int kMatchers = 8;
  std::vector<lockstep_matcher*> ms(kMatchers, nullptr);
  for (int i = 0; i < kMatchers; ++i) {
    ASSERT_EQ(lockstep_matcher_create(i == 7 ? regex : grammar_, &ms[i]), LOCKSTEP_OK);
    // Matcher i is i * (len / 8) tokens into the generated sequence (the regex one: "{\"a\": 1").
    if (i == 7) {
      ASSERT_EQ(lockstep_matcher_accept_string(ms[i], "{\"a\": 1", 7), LOCKSTEP_OK);
      continue;
    }
    const std::size_t k = static_cast<std::size_t>(i) * (ids.size() / kMatchers);
    for (std::size_t j = 0; j < k; ++j) {
      ASSERT_EQ(lockstep_matcher_accept_token(ms[i], ids[j]), LOCKSTEP_OK);
    }
  }
  const std::size_t words = lockstep_grammar_bitmask_words(grammar_);
  const std::size_t stride = words + 5;  // wider rows: the tail words stay untouched
  std::vector<std::uint32_t> single(kMatchers * words);
  for (int i = 0; i < kMatchers; ++i) {
    ASSERT_EQ(lockstep_matcher_fill_bitmask(ms[i], single.data() + i * words, words), LOCKSTEP_OK);
  }
  for (int threads : {1, 2, 3, 0}) {
    std::vector<std::uint32_t> out(kMatchers * stride, 0xDEADBEEFu);
    ASSERT_EQ(lockstep_batch_fill(ms.data(), kMatchers, out.data(), stride, threads), LOCKSTEP_OK)
        << lockstep_last_error();
    for (int i = 0; i < kMatchers; ++i) {
      for (std::size_t w = 0; w < words; ++w) {
        ASSERT_EQ(out[i * stride + w], single[i * words + w])
            << "threads " << threads << " row " << i << " word " << w;
      }
      for (std::size_t w = words; w < stride; ++w) ASSERT_EQ(out[i * stride + w], 0xDEADBEEFu);
    }
  }
  // A NULL entry gets a zero row.
  std::vector<lockstep_matcher*> with_null(ms);
  with_null[3] = nullptr;
  std::vector<std::uint32_t> out(kMatchers * words, 0xFFFFFFFFu);
  ASSERT_EQ(lockstep_batch_fill(with_null.data(), kMatchers, out.data(), words, 2), LOCKSTEP_OK);
  for (std::size_t w = 0; w < words; ++w) ASSERT_EQ(out[3 * words + w], 0u);
  for (std::size_t w = 0; w < words; ++w) ASSERT_EQ(out[4 * words + w], single[4 * words + w]);
  // Errors: short stride, a duplicate, NULL buffers, bad thread counts.
  EXPECT_EQ(lockstep_batch_fill(ms.data(), kMatchers, out.data(), words - 1, 2),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("stride_words")) << lockstep_last_error();
  std::vector<lockstep_matcher*> dup(ms);
  dup[5] = dup[2];
  EXPECT_EQ(lockstep_batch_fill(dup.data(), kMatchers, out.data(), words, 2),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("twice")) << lockstep_last_error();
  EXPECT_EQ(lockstep_batch_fill(nullptr, kMatchers, out.data(), words, 2),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_batch_fill(ms.data(), kMatchers, nullptr, words, 2),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_batch_fill(ms.data(), kMatchers, out.data(), words, -1),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_batch_fill(ms.data(), kMatchers, out.data(), 0, 2), LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_batch_fill(nullptr, 0, nullptr, 0, 2), LOCKSTEP_OK);
  for (lockstep_matcher* m : ms) lockstep_matcher_free(m);
  lockstep_grammar_free(regex);
}

TEST_F(CapiTest, MatcherLifecycleOnARegex) {
  lockstep_grammar* g = nullptr;
  const std::string pattern = R"(\{"date": "20[0-9]{2}-0[1-9]"\})";
  ASSERT_EQ(lockstep_compile_regex(vocab_, pattern.data(), pattern.size(), nullptr, &g),
            LOCKSTEP_OK);
  lockstep_matcher* m = nullptr;
  ASSERT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
  lockstep_grammar_free(g);  // the matcher keeps the grammar alive

  // Jump-forward at the start: the forced prefix, capped by the capacity.
  char bytes[64];
  std::size_t len = sizeof(bytes);
  ASSERT_EQ(lockstep_matcher_forced_bytes(m, bytes, &len), LOCKSTEP_OK);
  EXPECT_EQ(std::string(bytes, len), "{\"date\": \"20");
  len = 3;
  ASSERT_EQ(lockstep_matcher_forced_bytes(m, bytes, &len), LOCKSTEP_OK);
  EXPECT_EQ(std::string(bytes, len), "{\"d");
  len = 0;
  ASSERT_EQ(lockstep_matcher_forced_bytes(m, nullptr, &len), LOCKSTEP_OK);
  EXPECT_EQ(len, 0u);
  std::int32_t toks[16];
  std::size_t count = 16;
  ASSERT_EQ(lockstep_matcher_forced_tokens(m, toks, &count), LOCKSTEP_OK);
  ASSERT_GT(count, 0u);
  std::string forced;
  for (std::size_t i = 0; i < count; ++i) {
    const char* b;
    std::size_t l;
    ASSERT_EQ(lockstep_vocab_token_bytes(vocab_, toks[i], &b, &l), LOCKSTEP_OK);
    forced.append(b, l);
  }
  EXPECT_EQ(std::string("{\"date\": \"20").rfind(forced, 0), 0u) << forced;
  std::size_t accepted = 0;
  ASSERT_EQ(lockstep_matcher_validate_draft(m, toks, count, &accepted), LOCKSTEP_OK);
  EXPECT_EQ(accepted, count);
  EXPECT_EQ(lockstep_matcher_num_steps(m), 0);  // validate_draft leaves the state alone
  std::size_t one = 1;
  ASSERT_EQ(lockstep_matcher_forced_tokens(m, toks, &one), LOCKSTEP_OK);
  EXPECT_EQ(one, 1u);

  // Accept, fork, diverge, roll back, reset.
  ASSERT_EQ(lockstep_matcher_accept_string(m, "{\"date\": \"2024-0", 16), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_can_end(m), 0);
  lockstep_matcher* f = nullptr;
  ASSERT_EQ(lockstep_matcher_fork(m, &f), LOCKSTEP_OK);
  ASSERT_EQ(lockstep_matcher_accept_string(f, "7\"}", 3), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_can_end(f), 1);
  EXPECT_EQ(lockstep_matcher_can_end(m), 0);
  EXPECT_EQ(lockstep_matcher_accept_string(m, "0", 1), LOCKSTEP_REJECTED);  // month 00
  const std::int32_t eos = lockstep_vocab_eos_id(vocab_, 0);
  ASSERT_EQ(lockstep_matcher_accept_token(f, eos), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_is_terminated(f), 1);
  EXPECT_EQ(lockstep_matcher_accept_token(f, eos), LOCKSTEP_REJECTED);
  EXPECT_TRUE(LastErrorHas("terminated")) << lockstep_last_error();
  const std::size_t words = lockstep_vocab_bitmask_words(vocab_);
  std::vector<std::uint32_t> mask(words, 0xFFFFFFFFu);
  ASSERT_EQ(lockstep_matcher_fill_bitmask(f, mask.data(), words), LOCKSTEP_OK);
  for (std::uint32_t w : mask) ASSERT_EQ(w, 0u);
  ASSERT_EQ(lockstep_matcher_rollback(f, 1), LOCKSTEP_OK);  // undoes the EOS
  EXPECT_EQ(lockstep_matcher_is_terminated(f), 0);
  EXPECT_EQ(lockstep_matcher_can_end(f), 1);
  ASSERT_EQ(lockstep_matcher_reset(f), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_num_steps(f), 0);
  len = sizeof(bytes);
  ASSERT_EQ(lockstep_matcher_forced_bytes(f, bytes, &len), LOCKSTEP_OK);
  EXPECT_EQ(std::string(bytes, len), "{\"date\": \"20");
  lockstep_matcher_free(f);
  lockstep_matcher_free(m);
}

TEST(CapiVocabFromTokensTest, HostTokenTable) {
  // ids: 0 "a", 1 "b", 2 "c", 3 "ab", 4 "abc", 5 <eos>, 6 <0x0A> (byte), 7 unused, 8 "\n" dup.
  const char* bytes[] = {"a", "b", "c", "ab", "abc", "</s>", "<0x0A>", nullptr, "\n"};
  const std::size_t lengths[] = {1, 1, 1, 2, 3, 4, 6, 0, 1};
  const std::int32_t types[] = {
      LOCKSTEP_TOKEN_NORMAL, LOCKSTEP_TOKEN_NORMAL, LOCKSTEP_TOKEN_NORMAL,
      LOCKSTEP_TOKEN_NORMAL, LOCKSTEP_TOKEN_NORMAL, LOCKSTEP_TOKEN_SPECIAL,
      LOCKSTEP_TOKEN_BYTE,   LOCKSTEP_TOKEN_UNUSED, LOCKSTEP_TOKEN_NORMAL};
  const std::int32_t eos[] = {5};
  lockstep_vocab* v = nullptr;
  ASSERT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 9, eos, 1, 40, &v), LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_EQ(lockstep_vocab_size(v), 9);
  EXPECT_EQ(lockstep_vocab_logits_width(v), 40);
  EXPECT_EQ(lockstep_vocab_bitmask_words(v), 2u);
  ASSERT_EQ(lockstep_vocab_num_eos(v), 1u);
  EXPECT_EQ(lockstep_vocab_eos_id(v, 0), 5);
  EXPECT_EQ(lockstep_vocab_token_type(v, 6), LOCKSTEP_TOKEN_BYTE);
  const char* b = nullptr;
  std::size_t len = 9;
  ASSERT_EQ(lockstep_vocab_token_bytes(v, 6, &b, &len), LOCKSTEP_OK);
  EXPECT_EQ(std::string(b, len), "\n");
  ASSERT_EQ(lockstep_vocab_token_bytes(v, 5, &b, &len), LOCKSTEP_OK);
  EXPECT_EQ(len, 0u);  // special tokens emit nothing

  // Same eos found by name when none is given.
  lockstep_vocab* by_name = nullptr;
  ASSERT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 9, nullptr, 0, 0, &by_name),
            LOCKSTEP_OK);
  EXPECT_EQ(lockstep_vocab_eos_id(by_name, 0), 5);
  EXPECT_EQ(lockstep_vocab_logits_width(by_name), 9);
  lockstep_vocab_free(by_name);

  lockstep_grammar* g = nullptr;
  ASSERT_EQ(lockstep_compile_regex(v, "(abc)+\n", 7, nullptr, &g), LOCKSTEP_OK)
      << lockstep_last_error();
  lockstep_vocab_free(v);  // the grammar keeps the vocabulary alive
  lockstep_matcher* m = nullptr;
  ASSERT_EQ(lockstep_matcher_create(g, &m), LOCKSTEP_OK);
  std::uint32_t mask[2];
  ASSERT_EQ(lockstep_matcher_fill_bitmask(m, mask, 2), LOCKSTEP_OK);
  // "a", "ab", "abc" may start; padding ids 9..39 and the others never.
  EXPECT_EQ(mask[0], (1u << 0) | (1u << 3) | (1u << 4));
  EXPECT_EQ(mask[1], 0u);
  // Forced "abc": the canonical tokens of the tiktoken-rule encoder, the last kept back.
  char forced[8];
  std::size_t flen = sizeof(forced);
  ASSERT_EQ(lockstep_matcher_forced_bytes(m, forced, &flen), LOCKSTEP_OK);
  EXPECT_EQ(std::string(forced, flen), "abc");
  ASSERT_EQ(lockstep_matcher_accept_token(m, 4), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_accept_token(m, 5), LOCKSTEP_REJECTED);   // not at the end yet
  EXPECT_EQ(lockstep_matcher_accept_token(m, 7), LOCKSTEP_REJECTED);   // unused
  EXPECT_EQ(lockstep_matcher_accept_token(m, 20), LOCKSTEP_REJECTED);  // padding
  EXPECT_EQ(lockstep_matcher_accept_token(m, 40), LOCKSTEP_INVALID_ARGUMENT);
  ASSERT_EQ(lockstep_matcher_accept_token(m, 6), LOCKSTEP_OK);  // the byte token "\n"
  ASSERT_EQ(lockstep_matcher_fill_bitmask(m, mask, 2), LOCKSTEP_OK);
  EXPECT_EQ(mask[0], (1u << 5));  // only EOS
  ASSERT_EQ(lockstep_matcher_accept_token(m, 5), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_matcher_is_terminated(m), 1);
  lockstep_matcher_free(m);
  lockstep_grammar_free(g);

  // Whole generation on the small vocabulary with a flat model.
  lockstep_vocab* v2 = nullptr;
  ASSERT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 9, eos, 1, 0, &v2), LOCKSTEP_OK);
  ASSERT_EQ(lockstep_compile_regex(v2, "(abc){2}", 8, nullptr, &g), LOCKSTEP_OK);
  lockstep_sampler* s = nullptr;
  ASSERT_EQ(lockstep_sampler_create(nullptr, 0, &s), LOCKSTEP_OK);
  lockstep_logits_fn flat = [](void*, const int32_t*, size_t, float* out, int32_t width) {
    for (int32_t i = 0; i < width; ++i) out[i] = 0.0f;
  };
  std::int32_t ids[8];
  std::size_t n = 8;
  lockstep_finish_reason finish = LOCKSTEP_FINISH_LENGTH;
  ASSERT_EQ(lockstep_generate(g, s, flat, nullptr, 8, ids, &n, nullptr, &finish), LOCKSTEP_OK)
      << lockstep_last_error();
  EXPECT_EQ(finish, LOCKSTEP_FINISH_EOS);
  std::string text;
  for (std::size_t i = 0; i < n; ++i) {
    ASSERT_EQ(lockstep_vocab_token_bytes(v2, ids[i], &b, &len), LOCKSTEP_OK);
    text.append(b, len);
  }
  EXPECT_EQ(text, "abcabc");
  lockstep_sampler_free(s);
  lockstep_grammar_free(g);
  lockstep_vocab_free(v2);
}

TEST(CapiVocabFromTokensTest, Errors) {
  const char* bytes[] = {"a", "b", "<eos>"};
  const std::size_t lengths[] = {1, 1, 5};
  const std::int32_t types[] = {0, 0, 2};
  const std::int32_t eos_normal[] = {1};
  const std::int32_t eos_out[] = {3};
  lockstep_vocab* v = nullptr;
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 3, eos_normal, 1, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("eos_ids[0]")) << lockstep_last_error();
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 3, eos_out, 1, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 3, nullptr, 1, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 3, nullptr, 0, 2, &v),
            LOCKSTEP_INVALID_ARGUMENT);  // logits width below the size
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 0, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_from_tokens(nullptr, lengths, types, 3, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, nullptr, types, 3, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, types, 3, nullptr, 0, 0, nullptr),
            LOCKSTEP_INVALID_ARGUMENT);
  const std::int32_t bad_types[] = {0, 9, 2};
  EXPECT_EQ(lockstep_vocab_from_tokens(bytes, lengths, bad_types, 3, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_TRUE(LastErrorHas("token_types[1]")) << lockstep_last_error();
  const std::int32_t byte_types[] = {0, 1, 2};
  const char* bad_byte[] = {"a", "bb", "<eos>"};
  const std::size_t bad_byte_len[] = {1, 2, 5};
  EXPECT_EQ(lockstep_vocab_from_tokens(bad_byte, bad_byte_len, byte_types, 3, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_VOCABULARY);
  EXPECT_TRUE(LastErrorHas("token 1")) << lockstep_last_error();
  const char* null_bytes[] = {"a", nullptr, "<eos>"};
  EXPECT_EQ(lockstep_vocab_from_tokens(null_bytes, lengths, types, 3, nullptr, 0, 0, &v),
            LOCKSTEP_INVALID_ARGUMENT);
  EXPECT_EQ(v, nullptr);
  // All types NULL = all normal: fine, no EOS (a constraint then can never end by EOS).
  ASSERT_EQ(lockstep_vocab_from_tokens(bytes, lengths, nullptr, 3, nullptr, 0, 0, &v), LOCKSTEP_OK);
  EXPECT_EQ(lockstep_vocab_num_eos(v), 0u);
  lockstep_vocab_free(v);
}

}  // namespace
}  // namespace lockstep
