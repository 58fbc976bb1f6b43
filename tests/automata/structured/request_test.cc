// Chat-completions request bodies (lockstep/request.h): what each response_format and
// tool_choice lets through, checked by feeding text to a Matcher; the format each vocabulary
// family gets; and the JSON Pointer of each malformed part.
#include "lockstep/request.h"

#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "lockstep/matcher.h"
#include "test_data.h"

namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;

const GrammarCompiler& CompilerFor(const std::string& name) {
  static std::map<std::string, std::unique_ptr<GrammarCompiler>> cache;
  auto& c = cache[name];
  if (!c) {
    auto v = Vocabulary::Load(name);
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    c = std::make_unique<GrammarCompiler>(*v);
  }
  return *c;
}

ojson Tools() {
  return ojson::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"],
      "additionalProperties": false}}},
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
      "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
      "required": ["a", "b"], "additionalProperties": false}}}])");
}

// A chat body with the usual keys a request carries beside the ones that matter.
ojson Body(ojson extra) {
  ojson b = {{"model", "m"},
             {"messages", ojson::array({{{"role", "user"}, {"content", "hi"}}})},
             {"temperature", 0.2}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

CompiledRequest Compile(const ojson& body, const std::string& vocab = "qwen2.5") {
  auto r = CompileRequest(CompilerFor(vocab), body.dump());
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : CompiledRequest{};
}

// Whether the whole text is a complete output (accepted byte by byte, then able to end).
bool Complete(const CompiledRequest& r, std::string_view text) {
  Matcher m(r.grammar);
  return m.AcceptString(text) && m.CanEnd();
}

// Whether the text is accepted as a prefix.
bool Prefix(const CompiledRequest& r, std::string_view text) {
  Matcher m(r.grammar);
  return m.AcceptString(text);
}

constexpr const char* kWeather =
    R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>)";
constexpr const char* kAdd =
    R"(<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>)";

TEST(Request, TextIsAnyText) {
  for (const ojson& body :
       {Body(ojson::object()), Body({{"response_format", {{"type", "text"}}}})}) {
    CompiledRequest r = Compile(body);
    EXPECT_EQ(r.kind, RequestKind::kText);
    EXPECT_TRUE(Complete(r, ""));
    EXPECT_TRUE(Complete(r, "Hello, {world}! <tool_call> ünïcode\n"));
  }
}

TEST(Request, JsonObjectIsAnyObject) {
  CompiledRequest r = Compile(Body({{"response_format", {{"type", "json_object"}}}}));
  EXPECT_EQ(r.kind, RequestKind::kJson);
  EXPECT_TRUE(Complete(r, R"({"a": [1, {"b": null}]})"));
  EXPECT_TRUE(Complete(r, "{}"));
  EXPECT_FALSE(Prefix(r, "[1]"));
  EXPECT_FALSE(Prefix(r, "\"x\""));
  EXPECT_FALSE(Prefix(r, "Sure"));
}

ojson JsonSchemaFormat(ojson schema, std::optional<bool> strict) {
  ojson js = {{"name", "answer"}, {"schema", schema}};
  if (strict) js["strict"] = *strict;
  return {{"type", "json_schema"}, {"json_schema", js}};
}

TEST(Request, JsonSchemaIsTheSchema) {
  const ojson schema = {{"type", "object"},
                        {"properties", {{"n", {{"type", "integer"}}}}},
                        {"required", {"n"}},
                        {"additionalProperties", false}};
  for (std::optional<bool> strict :
       {std::optional<bool>(true), std::optional<bool>(false), std::optional<bool>()}) {
    CompiledRequest r = Compile(Body({{"response_format", JsonSchemaFormat(schema, strict)}}));
    EXPECT_EQ(r.kind, RequestKind::kJson);
    EXPECT_TRUE(Complete(r, R"({"n": 3})"));
    EXPECT_FALSE(Complete(r, R"({"n": "3"})"));
    EXPECT_FALSE(Complete(r, R"({})"));
    EXPECT_FALSE(Complete(r, R"({"n": 3, "m": 4})"));
  }
}

TEST(Request, JsonSchemaStrictnessIsTheCompilersMode) {
  // uniqueItems over numbers with a maximum (`10.` can only go on as 10.0, 10.00, ...: one
  // value) is not enforced: strict refuses it at the keyword's pointer inside the request,
  // non-strict (and absent) relaxes it with a warning there.
  const ojson schema = {{"type", "array"},
                        {"items", {{"type", "number"}, {"maximum", 10}}},
                        {"uniqueItems", true}};
  auto strict = CompileRequest(CompilerFor("qwen2.5"),
                               Body({{"response_format", JsonSchemaFormat(schema, true)}}).dump());
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().location(), "/response_format/json_schema/schema/uniqueItems");
  for (std::optional<bool> s : {std::optional<bool>(false), std::optional<bool>()}) {
    CompiledRequest r = Compile(Body({{"response_format", JsonSchemaFormat(schema, s)}}));
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_EQ(r.warnings[0].rfind("/response_format/json_schema/schema/uniqueItems: ", 0), 0u)
        << r.warnings[0];
    EXPECT_TRUE(Complete(r, R"([1, 2.5])"));
  }
}

TEST(Request, ToolSchemasAreLenientUnlessEveryToolIsStrict) {
  ojson tools = Tools();
  tools[1]["function"]["parameters"]["properties"]["tags"] = {
      {"type", "array"}, {"items", {{"type", "number"}, {"maximum", 10}}}, {"uniqueItems", true}};
  const std::string at = "/tools/1/function/parameters/properties/tags/uniqueItems";
  CompiledRequest r = Compile(Body({{"tools", tools}}));
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0].rfind(at + ": ", 0), 0u) << r.warnings[0];
  for (auto& t : tools) t["function"]["strict"] = true;
  auto strict = CompileRequest(CompilerFor("qwen2.5"), Body({{"tools", tools}}).dump());
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().location(), at);
  EXPECT_NE(strict.status().message().find("tool 'add'"), std::string::npos);
}

// A tool schema's counts past max_repeat (maxLength 200,000) are counters, as in a schema alone.
TEST(Request, ToolSchemaCountsAreNotRepeatBudgets) {
  ojson tools = Tools();
  tools[0]["function"]["parameters"]["properties"]["city"]["maxLength"] = 200000;
  CompiledRequest r = Compile(Body({{"tools", tools}, {"tool_choice", "required"}}));
  EXPECT_TRUE(Complete(r, kWeather));
  EXPECT_FALSE(Prefix(r, R"(<tool_call>{"name": "get_weather", "arguments": {"city": 1)"));
}

TEST(Request, AutoIsFreeTextAndOptionalCalls) {
  for (const ojson& body :
       {Body({{"tools", Tools()}}), Body({{"tools", Tools()}, {"tool_choice", "auto"}})}) {
    CompiledRequest r = Compile(body);
    EXPECT_EQ(r.kind, RequestKind::kTools);
    EXPECT_EQ(r.format.name, "qwen");
    EXPECT_TRUE(Complete(r, "It is sunny."));
    EXPECT_TRUE(Complete(r, std::string("Let me check.\n") + kWeather));
    EXPECT_TRUE(Complete(r, std::string(kWeather) + kAdd));
    EXPECT_FALSE(Prefix(r, R"(<tool_call>{"name": "add", "arguments": {"a": "x")"));
  }
}

TEST(Request, RequiredIsCallsOnly) {
  CompiledRequest r = Compile(Body({{"tools", Tools()}, {"tool_choice", "required"}}));
  EXPECT_EQ(r.kind, RequestKind::kTools);
  EXPECT_FALSE(Complete(r, ""));    // at least one call
  EXPECT_FALSE(Prefix(r, "Sure"));  // no free text before the first call
  EXPECT_TRUE(Complete(r, kWeather));
  EXPECT_TRUE(Complete(r, std::string(kWeather) + kAdd));  // parallel calls allowed
}

TEST(Request, NoneNeverCalls) {
  CompiledRequest r = Compile(Body({{"tools", Tools()}, {"tool_choice", "none"}}));
  EXPECT_EQ(r.kind, RequestKind::kText);
  EXPECT_EQ(r.tool_choice, "none");
  EXPECT_TRUE(Complete(r, "It is sunny in {Oslo}."));
  EXPECT_FALSE(Prefix(r, "Let me call <tool_call>"));
  // With a response format the tools are not callable and the answer is the JSON.
  CompiledRequest j = Compile(Body({{"tools", Tools()},
                                    {"tool_choice", "none"},
                                    {"response_format", {{"type", "json_object"}}}}));
  EXPECT_EQ(j.kind, RequestKind::kJson);
  EXPECT_TRUE(Complete(j, "{}"));
  EXPECT_FALSE(Prefix(j, "<tool_call>"));
  // A trigger's text inside a JSON string is no call.
  const std::string answer = std::string(R"({"note": ")") + "<tool_call>" + R"("})";
  EXPECT_TRUE(Complete(j, answer));
  const Vocabulary& vocab = CompilerFor("qwen2.5").vocabulary();
  auto calls = ParseToolCalls(j.format, vocab, *vocab.Encode(answer), j.tools);
  ASSERT_TRUE(calls.ok()) << calls.status().ToString();
  EXPECT_TRUE(calls->empty());
}

TEST(Request, NamedFunctionIsThatToolOnly) {
  const ojson choice = {{"type", "function"}, {"function", {{"name", "add"}}}};
  CompiledRequest r = Compile(Body({{"tools", Tools()}, {"tool_choice", choice}}));
  EXPECT_EQ(r.tool_choice, "function");
  EXPECT_EQ(r.format.tools, std::vector<std::string>{"add"});
  EXPECT_TRUE(Complete(r, kAdd));
  EXPECT_FALSE(Complete(r, kWeather));
  EXPECT_FALSE(Complete(r, ""));
  EXPECT_FALSE(Prefix(r, "Sure"));
}

TEST(Request, ParallelToolCallsFalseIsOneCall) {
  CompiledRequest r = Compile(
      Body({{"tools", Tools()}, {"tool_choice", "required"}, {"parallel_tool_calls", false}}));
  EXPECT_EQ(r.format.max_calls, 1);
  EXPECT_TRUE(Complete(r, kWeather));
  EXPECT_FALSE(Prefix(r, std::string(kWeather) + "<tool_call>"));
  CompiledRequest a = Compile(Body({{"tools", Tools()}, {"parallel_tool_calls", false}}));
  EXPECT_TRUE(Complete(a, std::string("Checking. ") + kWeather + " Done."));
  EXPECT_FALSE(Prefix(a, std::string(kWeather) + " and <tool_call>"));
}

TEST(Request, CallsReadBack) {
  CompiledRequest r = Compile(Body({{"tools", Tools()}}));
  const Vocabulary& vocab = CompilerFor("qwen2.5").vocabulary();
  auto ids = vocab.Encode(std::string("Checking.") + kAdd);
  ASSERT_TRUE(ids.ok());
  auto calls = ParseToolCalls(r.format, vocab, *ids, r.tools);
  ASSERT_TRUE(calls.ok()) << calls.status().ToString();
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0].name, "add");
  EXPECT_EQ(ojson::parse((*calls)[0].arguments_json), ojson::parse(R"({"a": 1, "b": 2})"));
}

TEST(Request, FormatFromTheVocabularyOrTheRequest) {
  EXPECT_EQ(Compile(Body({{"tools", Tools()}}), "llama3").format.name, "llama3");
  EXPECT_EQ(Compile(Body({{"tools", Tools()}}), "qwen2.5").format.name, "qwen");
  EXPECT_EQ(Compile(Body({{"tools", Tools()}}), "mistral").format.name, "mistral");
  EXPECT_EQ(
      Compile(Body({{"tools", Tools()}, {"lockstep_format", "hermes"}}), "qwen2.5").format.name,
      "hermes");
  RequestOptions o;
  o.format = "llama3-function";
  auto r = CompileRequest(CompilerFor("llama3"), Body({{"tools", Tools()}}).dump(), o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->format.name, "llama3-function");
  // GPT-2 is no chat family: the format must be named.
  auto g = CompileRequest(CompilerFor("gpt2"), Body({{"tools", Tools()}}).dump());
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().location(), "/lockstep_format");
  // Without tools no format is needed.
  EXPECT_EQ(Compile(Body(ojson::object()), "gpt2").kind, RequestKind::kText);
}

TEST(Request, MalformedPartsNameTheirPointer) {
  const ojson named_x = {{"type", "function"}, {"function", {{"name", "x"}}}};
  const std::vector<std::pair<ojson, std::string>> cases = {
      {ojson::array(), "/"},
      {Body({{"response_format", "json"}}), "/response_format"},
      {Body({{"response_format", {{"type", "yaml"}}}}), "/response_format/type"},
      {Body({{"response_format", {{"kind", "text"}}}}), "/response_format/type"},
      {Body({{"response_format", {{"type", "json_schema"}}}}), "/response_format/json_schema"},
      {Body({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "a"}}}}}}),
       "/response_format/json_schema/schema"},
      {Body({{"response_format",
              {{"type", "json_schema"}, {"json_schema", {{"schema", ojson::array()}}}}}}),
       "/response_format/json_schema/schema"},
      {Body({{"response_format",
              {{"type", "json_schema"},
               {"json_schema", {{"schema", {{"type", "object"}}}, {"strict", "yes"}}}}}}),
       "/response_format/json_schema/strict"},
      {Body({{"response_format", JsonSchemaFormat({{"type", "objekt"}}, true)}}),
       "/response_format/json_schema/schema/type"},
      {Body({{"tools", Tools()}, {"tool_choice", "sometimes"}}), "/tool_choice"},
      {Body({{"tools", Tools()}, {"tool_choice", 3}}), "/tool_choice"},
      {Body({{"tools", Tools()}, {"tool_choice", {{"type", "tool"}}}}), "/tool_choice/type"},
      {Body({{"tools", Tools()}, {"tool_choice", named_x}}), "/tool_choice/function/name"},
      {Body({{"tool_choice", "required"}}), "/tool_choice"},
      {Body({{"tools", Tools()}, {"parallel_tool_calls", "no"}}), "/parallel_tool_calls"},
      {Body({{"tools", {{"type", "function"}}}}), "/tools"},
      {Body({{"tools", ojson::array({{{"type", "function"},
                                      {"function", {{"parameters", ojson::object()}}}}})}}),
       "/tools/0/function/name"},
      {Body({{"tools", Tools()}, {"lockstep_format", "chatml"}}), "/lockstep_format"},
      {Body({{"tools", Tools()},
             {"lockstep_format", testing::SourceDataDir() + "/formats/qwen.json"}}),
       "/lockstep_format"},
      {Body({{"tools", Tools()}, {"lockstep_format", 1}}), "/lockstep_format"},
      {Body({{"tools", Tools()}, {"response_format", {{"type", "json_object"}}}}),
       "/response_format"},
  };
  for (const auto& [body, pointer] : cases) {
    auto r = CompileRequest(CompilerFor("qwen2.5"), body.dump());
    ASSERT_FALSE(r.ok()) << body.dump();
    EXPECT_EQ(r.status().location(), pointer) << body.dump() << "\n" << r.status().ToString();
  }
  auto r = CompileRequest(CompilerFor("qwen2.5"), "{\"tools\": [");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().location(), "/");
}

}  // namespace
}  // namespace lockstep
