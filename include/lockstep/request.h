// Requests as engines receive them: one constraint from an OpenAI-style chat-completions body
// (`response_format`, `tools`, `tool_choice`, `parallel_tool_calls`), for servers that take such
// bodies and for the CLI's `generate --request`. The mapping is docs/requests.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/status.h"
#include "lockstep/structured.h"

namespace lockstep {

// What the output is: free text, one JSON value, or a structured format's free text and calls.
enum class RequestKind : std::uint8_t { kText, kJson, kTools };

struct RequestOptions {
  // The chat format of tool calls (a bundled name or a format file, as LoadFormat takes). Empty:
  // the request's "lockstep_format" key (a bundled name only: a body never names a file), else
  // the vocabulary's family (Llama-3: llama3, Qwen2.5: qwen, Mistral: mistral); used only when
  // the request has tools.
  std::string format;
  // Budgets and the formatting policy. schema_lenient is set by the request (json_schema.strict;
  // the tools' function.strict), not taken from here.
  CompileOptions compile;
};

struct CompiledRequest {
  std::shared_ptr<const CompiledGrammar> grammar;
  RequestKind kind = RequestKind::kText;
  // "none", "auto", "required" or "function" (a named function); "" without tools.
  std::string tool_choice;
  // With tools: the format as compiled (tools, free_text, min_calls and max_calls set by
  // tool_choice and parallel_tool_calls) and the request's tools, for ParseToolCalls(format,
  // vocab, tokens, tools). Under tool_choice "none" they say which text never appears.
  StructuredFormat format;
  std::vector<ToolSpec> tools;
  // "POINTER: message" per relaxed keyword of a lenient json_schema or tool schema, the pointer
  // into the request ("/response_format/json_schema/schema/...",
  // "/tools/N/function/parameters/...").
  std::vector<std::string> warnings;
};

// The constraint a chat-completions body asks for. Keys other than response_format, tools,
// tool_choice, parallel_tool_calls and lockstep_format are ignored (messages, model, ...).
// Errors carry a JSON Pointer into the request as their location: kInvalidArgument for a body
// that is not a JSON object ("/"), a key of the wrong type, an unknown response_format type
// ("/response_format/type") or tool_choice ("/tool_choice"), a named function the tools lack
// ("/tool_choice/function/name"), tool_choice other than "none" without tools, a
// response_format other than text together with tools that may be called ("/response_format");
// ParseTools' errors under "/tools"; a json_schema that does not compile, with its keyword's
// pointer under "/response_format/json_schema/schema" (a tool's schema: under
// "/tools/N/function/parameters"); kInvalidArgument at "/lockstep_format"
// (or "format" for RequestOptions::format) for an unknown format, or when the format is needed
// and the vocabulary's family cannot be told. CompileStructured's errors otherwise.
Result<CompiledRequest> CompileRequest(const GrammarCompiler& compiler,
                                       std::string_view request_json,
                                       const RequestOptions& options = {});

// "text", "json" or "tools".
const char* RequestKindName(RequestKind kind);

}  // namespace lockstep
