// Triggered constraints: free text, then tool calls switched on by a trigger (a string
// or a special token) and off by an end marker, per a chat model's format. For hosts that
// constrain chat models' tool calls without forcing their prose, and for the CLI's
// `generate --tools --format`. The formats are data (schemas/formats/*.json, docs/structured.md).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/status.h"
#include "lockstep/types.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

// Where a section starts or ends: nothing, a string (matched byte-wise, across token boundaries)
// or a special token of the vocabulary (matched by id; the first of `special` names the
// vocabulary has, so a format can name a token's chat-model name and its base-model alias).
struct StructuredMarker {
  // kTemplate (triggers only): one text trigger per tool, `text` with "{name}" replaced by the
  // tool's name, so the trigger chooses the tool (Llama-3.1's <function=NAME>).
  enum class Kind : std::uint8_t { kNone, kText, kSpecial, kTemplate };
  Kind kind = Kind::kNone;
  std::string text;                  // kText; kTemplate: the template, holding "{name}" once
  std::vector<std::string> special;  // kSpecial: alternative names, first present wins
  bool none() const { return kind == Kind::kNone; }
};

enum class StructuredBody : std::uint8_t {
  kNameField,  // one JSON object per call: {"name": <tool>, "<arguments_key>": <its arguments>}
  kArray,      // one JSON array of such objects per trigger (Mistral's [TOOL_CALLS] [...])
  kArguments,  // the arguments alone; the tool is the one the (kTemplate) trigger named
};

struct StructuredFormat {
  std::string name;    // "qwen", "llama3", ...
  std::string source;  // which chat template the format follows (documentation)
  // Optional reasoning section first (<think>...</think>); its text is never constrained beyond
  // not containing a text end marker. `reasoning_start` kNone: reasoning starts at once (the
  // prompt opened it).
  bool reasoning = false;
  bool reasoning_required = false;
  StructuredMarker reasoning_start;
  StructuredMarker reasoning_end;
  // Free text before, between and after calls (a text trigger never occurs inside it). False:
  // only whitespace outside the calls.
  bool free_text = true;
  // Each free-text segment (before, between, after calls; matched separately) at most this many
  // bytes (-1: unbounded) and fully matching this regex (empty: any).
  std::int32_t free_text_max_bytes = -1;
  std::string free_text_regex;
  StructuredMarker trigger;  // kNone only without free text: the body comes at once
  StructuredMarker end;      // kNone: the call is the last thing before EOS
  StructuredBody body = StructuredBody::kNameField;
  std::string arguments_key = "arguments";
  std::int32_t min_calls = 0;
  // 0 (not in format files; a request's tool_choice "none"): no calls, the free text alone,
  // which never contains a text trigger.
  std::int32_t max_calls = 1;
  // The tools this format allows, by name (empty: all the tools given); a name the tools do not
  // define is an error of CompileStructured.
  std::vector<std::string> tools;
  // Where the format came from (its file), for error locations.
  std::string origin;
};

struct ToolSpec {
  std::string name;
  std::string schema_json;  // JSON Schema of the arguments
  // Instead of a schema: the body as a grammar (GBNF or Lark-style EBNF), e.g. code after a
  // python tag. Only with per-tool triggers (body "arguments") and an end marker; the call's
  // arguments read back are the body's text (ParsedCall::arguments_json holds it as a JSON string).
  std::string grammar;
  // Where the schema sits, a JSON Pointer (ParseTools: "/N/parameters", "/N/function/parameters",
  // ...); empty: nowhere known. CompileStructured locates errors and warnings inside the schema
  // under it.
  std::string origin;
};

struct ParsedCall {
  std::string name;
  std::string arguments_json;  // the arguments as generated (one JSON value)
};

// Bundled format names, for messages and the CLI.
std::vector<std::string> BundledFormatNames();

// A bundled format by name (qwen, hermes, llama3, llama3-function, mistral, think-json) from
// DataDirectory()/formats/, or a path to a format file. Errors: kInvalidArgument for an unknown
// name (listing the known ones), kIoError for an unreadable file, kInvalidGrammar with
// "file:line:col" or "file#/pointer" for a malformed one.
Result<StructuredFormat> LoadFormat(std::string_view name_or_path);
// A format from JSON text; `origin` names it in error locations.
Result<StructuredFormat> ParseFormat(std::string_view json_text, std::string_view origin = "");

// A tools file: a JSON array of {"name", "parameters" | "schema" | "arguments"} or OpenAI-style
// {"type": "function", "function": {"name", "parameters"}}. Errors (kInvalidArgument, location
// "/N" JSON Pointer): not JSON, a missing, empty or duplicate name, a schema that is not an object.
Result<std::vector<ToolSpec>> ParseTools(std::string_view json_text);

// The structured-section grammar over the compiler's vocabulary:
//   root ::= reasoning? free (call free){min_calls, max_calls}      (free_text)
//   call ::= trigger body end
//   call ::= trigger_1 body_1 end | trigger_2 body_2 end | ...            (kTemplate trigger)
// Errors: a marker naming a special token the vocabulary lacks; a text trigger that can never
// appear (a byte no token emits); no tools, a duplicate tool name; a tool whose schema does not
// compile (message names the tool, location its JSON Pointer in the tool's schema, under the
// tool's origin); a name in
// format.tools the tools do not define (kInvalidArgument, location "ORIGIN#/tools/N"); per-tool
// triggers one of which contains another; a free-text regex that does not compile
// (kInvalidRegex, location "ORIGIN#/free_text/regex") or that no text without a trigger (and
// within the bound) matches (kInvalidArgument); a bounded free-text automaton over max_dfa_states
// (kResourceLimit). With options.schema_lenient, `warnings` (when given) receives one
// "ORIGIN/POINTER: message" per relaxed keyword of a tool's schema ("tool 'X': POINTER: message"
// for a tool without an origin).
Result<std::shared_ptr<const CompiledGrammar>> CompileStructured(
    const GrammarCompiler& compiler, const StructuredFormat& format,
    std::span<const ToolSpec> tools, const CompileOptions& options = {},
    std::vector<std::string>* warnings = nullptr);

// An independent parser (no automaton) of generated tokens: the calls in order, each with its
// name and arguments. Special tokens match markers by id; bodies are found by scanning JSON
// extents and parsed as JSON. kInvalidArgument (location "byte N") when the output is not
// well-formed under the format. Per-tool (template) triggers are searched for the names of
// format.tools, else of `tools`; with neither, "{name}" matches up to the first occurrence of
// the template's text after it (or a run of [A-Za-z0-9_.-] when nothing follows it). A format
// with max_calls 0 has no calls to read: always empty.
Result<std::vector<ParsedCall>> ParseToolCalls(const StructuredFormat& format,
                                               const Vocabulary& vocab,
                                               std::span<const TokenId> tokens,
                                               std::span<const ToolSpec> tools = {});

// The calls as a JSON array text, [{"name": ..., "arguments": ...}, ...], each arguments value
// as generated (parsed JSON; a grammar tool's text as a JSON string).
std::string ToolCallsJson(std::span<const ParsedCall> calls);

}  // namespace lockstep
