// Chat-completions request bodies (lockstep/request.h): response_format, tools, tool_choice and
// parallel_tool_calls read into one constraint, a regex, a JSON Schema or a structured format.
// This file's external interface is CompileRequest; nlohmann exceptions stay inside it.
#include "lockstep/request.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

namespace lockstep {
namespace {

using ojson = nlohmann::ordered_json;

constexpr const char* kSchemaPointer = "/response_format/json_schema/schema";

Status RequestError(const std::string& pointer, const std::string& message) {
  return Status(StatusCode::kInvalidArgument, "request: " + message, pointer);
}

// `st` located under `prefix`: a JSON Pointer location ("" for the root) is appended to it.
Status UnderPointer(const Status& st, const std::string& prefix) {
  const std::string& loc = st.location();
  if (loc.empty() || loc[0] == '/') return Status(st.code(), st.message(), prefix + loc);
  return Status(st.code(), st.message() + " (at " + loc + ")", prefix);
}

struct ResponseFormat {
  RequestKind kind = RequestKind::kText;
  std::string schema_json;  // kJson
  bool strict = false;      // json_schema.strict (OpenAI's default: false)
};

Result<ResponseFormat> ParseJsonSchemaFormat(const ojson& rf) {
  ResponseFormat out;
  out.kind = RequestKind::kJson;
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object())
    return RequestError("/response_format/json_schema", "json_schema must be an object");
  const ojson& js = rf["json_schema"];
  if (js.contains("name") && !js["name"].is_string())
    return RequestError("/response_format/json_schema/name", "name must be a string");
  if (js.contains("strict") && !js["strict"].is_boolean() && !js["strict"].is_null())
    return RequestError("/response_format/json_schema/strict", "strict must be true or false");
  out.strict = js.contains("strict") && js["strict"].is_boolean() && js["strict"].get<bool>();
  if (!js.contains("schema") || !js["schema"].is_object())
    return RequestError(kSchemaPointer, "schema must be a JSON Schema object");
  out.schema_json = js["schema"].dump();
  return out;
}

Result<ResponseFormat> ParseResponseFormat(const ojson& body) {
  if (!body.contains("response_format") || body["response_format"].is_null())
    return ResponseFormat{};
  const ojson& rf = body["response_format"];
  if (!rf.is_object()) return RequestError("/response_format", "response_format must be an object");
  if (!rf.contains("type") || !rf["type"].is_string())
    return RequestError("/response_format/type", "type must be a string");
  const std::string type = rf["type"].get<std::string>();
  if (type == "text") return ResponseFormat{};
  if (type == "json_object") return ResponseFormat{RequestKind::kJson, R"({"type":"object"})"};
  if (type == "json_schema") return ParseJsonSchemaFormat(rf);
  return RequestError("/response_format/type", "unknown response_format type '" + type +
                                                   "' (known: text, json_object, json_schema)");
}

struct ToolChoice {
  std::string mode;  // "none", "auto", "required" or "function"
  std::string name;  // "function": the function's name
};

Result<ToolChoice> ParseToolChoice(const ojson& body, bool has_tools) {
  ToolChoice out{has_tools ? "auto" : "none", ""};
  if (body.contains("tool_choice") && !body["tool_choice"].is_null()) {
    const ojson& tc = body["tool_choice"];
    if (tc.is_string()) {
      out.mode = tc.get<std::string>();
      if (out.mode != "none" && out.mode != "auto" && out.mode != "required")
        return RequestError("/tool_choice", "unknown tool_choice '" + out.mode +
                                                "' (known: none, auto, required, or an object "
                                                "naming a function)");
    } else if (tc.is_object()) {
      if (!tc.contains("type") || tc["type"] != "function")
        return RequestError("/tool_choice/type", "type must be \"function\"");
      if (!tc.contains("function") || !tc["function"].is_object())
        return RequestError("/tool_choice/function", "function must be an object");
      const ojson& fn = tc["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || fn["name"].get<std::string>().empty())
        return RequestError("/tool_choice/function/name", "name must be a non-empty string");
      out = {"function", fn["name"].get<std::string>()};
    } else {
      return RequestError("/tool_choice", "tool_choice must be a string or an object");
    }
  }
  if (!has_tools && out.mode != "none")
    return RequestError("/tool_choice", "tool_choice '" + out.mode + "' needs tools");
  return out;
}

// The bundled format of the vocabulary's family, told by its special tokens or its name.
Result<std::string> FamilyFormat(const Vocabulary& vocab) {
  auto has_special = [&](std::string_view text) {
    const TokenId id = vocab.FindToken(text);
    return id != kNoToken && vocab.IsSpecial(id);
  };
  std::string name = vocab.name();
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (has_special("<|eot_id|>") || name.rfind("llama3", 0) == 0 || name.rfind("llama-3", 0) == 0)
    return std::string("llama3");
  if (has_special("<|im_end|>") || name.rfind("qwen", 0) == 0) return std::string("qwen");
  if (has_special("[TOOL_CALLS]") || name.rfind("mistral", 0) == 0 || name.rfind("mixtral", 0) == 0)
    return std::string("mistral");
  return RequestError("/lockstep_format",
                      "the request has tools and the chat format of vocabulary '" + vocab.name() +
                          "' cannot be told: name it (\"lockstep_format\" in the request, "
                          "RequestOptions::format, --format)");
}

Result<StructuredFormat> ChooseFormat(const ojson& body, const RequestOptions& options,
                                      const Vocabulary& vocab) {
  std::string name = options.format;
  std::string pointer = "format";
  if (name.empty() && body.contains("lockstep_format")) {
    // Only a bundled name: a body comes from clients, and a path would read the server's files.
    pointer = "/lockstep_format";
    const std::vector<std::string> bundled = BundledFormatNames();
    const ojson& f = body["lockstep_format"];
    if (!f.is_string() ||
        std::find(bundled.begin(), bundled.end(), f.get<std::string>()) == bundled.end()) {
      std::string known;
      for (const std::string& b : bundled) known += (known.empty() ? "" : ", ") + b;
      return RequestError(pointer, "lockstep_format must name a bundled format (" + known +
                                       "); a format file is the host's option, not the body's");
    }
    name = f.get<std::string>();
  }
  if (name.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(name, FamilyFormat(vocab));
  }
  auto format = LoadFormat(name);
  if (!format.ok() && format.status().code() == StatusCode::kInvalidArgument)
    return Status(format.status().code(), format.status().message(), pointer);
  return format;
}

Result<std::vector<ToolSpec>> ParseRequestTools(const ojson& body) {
  if (!body["tools"].is_array()) return RequestError("/tools", "tools must be an array");
  auto tools = ParseTools(body["tools"].dump());
  if (!tools.ok()) {
    const std::string& loc = tools.status().location();
    return Status(tools.status().code(), tools.status().message(),
                  "/tools" + (loc == "/" ? std::string() : loc));
  }
  for (ToolSpec& t : *tools) {
    if (!t.origin.empty()) t.origin = "/tools" + t.origin;
  }
  return tools;
}

// tool_choice and parallel_tool_calls applied to the format (docs/requests.md).
Status ApplyToolChoice(const ToolChoice& choice, const std::vector<ToolSpec>& tools, bool parallel,
                       StructuredFormat* f) {
  if (choice.mode == "none") {
    f->free_text = true;
    f->min_calls = 0;
    f->max_calls = 0;
    return Status::Ok();
  }
  if (choice.mode == "function") {
    if (std::none_of(tools.begin(), tools.end(),
                     [&](const ToolSpec& t) { return t.name == choice.name; }))
      return RequestError("/tool_choice/function/name",
                          "no tool named '" + choice.name + "' in the request's tools");
    f->tools = {choice.name};
  }
  if (choice.mode != "auto") {  // required or a named function: calls only, at least one
    f->free_text = false;
    f->min_calls = std::max(f->min_calls, 1);
  } else if (f->free_text) {  // auto: the model may answer in free text alone
    f->min_calls = 0;
  }
  if (!parallel) f->max_calls = 1;
  f->min_calls = std::min(f->min_calls, f->max_calls);
  return Status::Ok();
}

// Every tool's schema is compiled strictly only when every tool says function.strict: true.
bool ToolsStrict(const ojson& tools) {
  if (!tools.is_array()) return false;
  return std::all_of(tools.begin(), tools.end(), [](const ojson& t) {
    const ojson& fn = t.contains("function") ? t["function"] : t;
    return fn.is_object() && fn.contains("strict") && fn["strict"] == true;
  });
}

Result<CompiledRequest> CompileAnswer(const GrammarCompiler& compiler, const ResponseFormat& rf,
                                      const CompileOptions& defaults, CompiledRequest out) {
  out.kind = rf.kind;
  if (rf.kind == RequestKind::kText) {
    // Any text (valid UTF-8), EOS anywhere.
    LOCKSTEP_ASSIGN_OR_RETURN(out.grammar, compiler.CompileRegex("[^]*", defaults));
    return out;
  }
  CompileOptions o = defaults;
  o.schema_lenient = !rf.strict;
  std::vector<std::string> warnings;
  auto g = compiler.CompileSchema(rf.schema_json, o, &warnings);
  if (!g.ok()) return UnderPointer(g.status(), kSchemaPointer);
  for (const std::string& w : warnings) {
    const bool root = w.rfind("(root)", 0) == 0;
    out.warnings.push_back(kSchemaPointer + (root ? w.substr(6) : w));
  }
  out.grammar = std::move(*g);
  return out;
}

Result<CompiledRequest> CompileRequestJson(const GrammarCompiler& compiler, const ojson& body,
                                           const RequestOptions& options) {
  if (!body.is_object()) return RequestError("/", "a request body is a JSON object");
  LOCKSTEP_ASSIGN_OR_RETURN(ResponseFormat rf, ParseResponseFormat(body));
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  LOCKSTEP_ASSIGN_OR_RETURN(ToolChoice choice, ParseToolChoice(body, has_tools));
  bool parallel = true;
  if (body.contains("parallel_tool_calls") && !body["parallel_tool_calls"].is_null()) {
    if (!body["parallel_tool_calls"].is_boolean())
      return RequestError("/parallel_tool_calls", "parallel_tool_calls must be true or false");
    parallel = body["parallel_tool_calls"].get<bool>();
  }
  CompiledRequest out;
  if (!has_tools) return CompileAnswer(compiler, rf, options.compile, std::move(out));
  out.tool_choice = choice.mode;
  LOCKSTEP_ASSIGN_OR_RETURN(out.tools, ParseRequestTools(body));
  LOCKSTEP_ASSIGN_OR_RETURN(out.format, ChooseFormat(body, options, compiler.vocabulary()));
  if (rf.kind != RequestKind::kText && choice.mode != "none")
    return RequestError("/response_format",
                        "a response_format other than text is not supported together with tool "
                        "calls (tool_choice '" +
                            choice.mode + "'); use tool_choice \"none\"");
  LOCKSTEP_RETURN_IF_ERROR(ApplyToolChoice(choice, out.tools, parallel, &out.format));
  if (rf.kind != RequestKind::kText) {  // tool_choice none: the answer alone, no calls
    return CompileAnswer(compiler, rf, options.compile, std::move(out));
  }
  CompileOptions o = options.compile;
  o.schema_lenient = !ToolsStrict(body["tools"]);
  LOCKSTEP_ASSIGN_OR_RETURN(out.grammar,
                            CompileStructured(compiler, out.format, out.tools, o, &out.warnings));
  out.kind = choice.mode == "none" ? RequestKind::kText : RequestKind::kTools;
  return out;
}

}  // namespace

const char* RequestKindName(RequestKind kind) {
  switch (kind) {
    case RequestKind::kText:
      return "text";
    case RequestKind::kJson:
      return "json";
    case RequestKind::kTools:
      return "tools";
  }
  return "text";
}

Result<CompiledRequest> CompileRequest(const GrammarCompiler& compiler,
                                       std::string_view request_json,
                                       const RequestOptions& options) {
  try {
    ojson body = ojson::parse(request_json.begin(), request_json.end(), nullptr, false);
    if (body.is_discarded()) return RequestError("/", "the request body is not valid JSON");
    return CompileRequestJson(compiler, body, options);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory compiling the request");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("request: ") + e.what());
  }
}

}  // namespace lockstep
