// The constraint flags shared by `generate`, `compile`, `explain` and `classify`: exactly one of
// --regex RE, --grammar FILE (GBNF or Lark-style EBNF, --grammar-syntax auto|gbnf|lark) or
// --schema FILE (a JSON Schema; --lenient relaxes what cannot be enforced exactly, with warnings
// on stderr; --compact allows no whitespace between tokens), or --artifact FILE.lsg (a compiled
// artifact written by `compile -o`, loaded instead of compiled), or --tools FILE with --format
// qwen|hermes|llama3|mistral|think-json|PATH (triggered tool calls, lockstep/structured.h), or
// --request FILE (generate: a chat-completions body, lockstep/request.h).
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cli/args.h"
#include "lockstep/compiler.h"
#include "lockstep/request.h"

// The help lines of the schema compile flags after --lenient (--compact to --max-exprs), shared
// by the help of compile, generate and explain: a string literal, spliced between raw ones.
#define LOCKSTEP_SCHEMA_FLAGS_HELP \
  "  --compact              schemas: no whitespace between JSON tokens\n" \
  "  --any-order            schemas: object members in any order, each property at most once\n" \
  "                         (exact; default: declared properties in" \
  " declared order, then the others)\n" \
  "  --any-order-max-properties N\n" \
  "                         with --any-order: the most declared" \
  " properties on one object (default\n" \
  "                         10; 2^N member sets, each property more doubles the compile)\n" \
  "  --openapi-formats      schemas: also enforce the OpenAPI formats" \
  " int32, int64 (integer ranges)\n" \
  "                         and byte (base64), as `lockstep validate" \
  " --openapi-formats` checks them;\n" \
  "                         any other unknown format is an annotation, with a warning\n" \
  "  --schema-draft D       schemas: the JSON Schema draft of a schema whose $schema names none\n" \
  "                         (4, 6, 7, 2019-09 or 2020-12; default" \
  " 2020-12); a known $schema wins\n" \
  "  --max-oneof-overlaps N schemas: the most oneOf branches one branch" \
  " may overlap (not provably\n" \
  "                         disjoint from it: each is negated into it; default 11)\n" \
  "  --max-some-member-requirements N\n" \
  "                         schemas: the most negated" \
  " additionalProperties / patternProperties /\n" \
  "                         propertyNames on one object (default 3, at" \
  " most 16; 2^N member chains)\n" \
  "  --max-exprs N          schemas: the budget of grammar expressions built from one schema\n" \
  "                         (default 2000000)\n"

namespace lockstep::cli {

// Adds "regex", "grammar", "grammar-syntax", "schema", "artifact", "tools", "format",
// "compile-timeout" and "schema-draft" to a subcommand's value flags.
void AddConstraintFlags(std::set<std::string>* value_flags);
// Adds the schema switches "lenient", "openapi-formats", "compact" and "any-order".
void AddConstraintSwitches(std::set<std::string>* switches);
// The flags of a command that samples under a constraint (generate, explain, classify): the
// constraint's flags and switches above and the sampler's (AddSamplerFlags, kInternal on a
// clash), added to the command's own.
Status AddConstrainedSamplingFlags(std::set<std::string>* value_flags,
                                   std::set<std::string>* switches);
bool HasConstraint(const Args& args);
// A short description for output: the regex, "grammar FILE" or "schema FILE".
std::string ConstraintLabel(const Args& args);
// The schema flags (--lenient, --compact, --openapi-formats, --any-order, --schema-draft D)
// applied to `options`; kInvalidArgument for an unknown draft.
[[nodiscard]] Status ApplySchemaFlags(const Args& args, CompileOptions* options);
// A draft name given to `flag` (--schema-draft, validate's --draft): ParseSchemaDraft's names;
// kInvalidArgument naming the flag for anything else.
Result<SchemaDraft> ParseDraftFlag(const std::string& value, const std::string& flag);
// --compile-timeout MS (a value flag AddConstraintFlags adds) as
// CompileOptions::compile_timeout_ms; kInvalidArgument for a bad value.
Status ApplyCompileTimeout(const Args& args, CompileOptions* options);
// Compiles the constraint the flags name; kInvalidArgument if none or several are given,
// kIoError for an unreadable file, grammar errors with FILE:line:column, schema errors with
// FILE#/json/pointer. Warnings go to stderr, "lockstep: warning: ..." each, and to `*warnings`
// when given: a lenient schema's relaxed keywords ("pointer: message") and a grammar's unused
// rules ("FILE:line:column: rule 'x' is never used ..."). With --request, `*request` (when given)
// receives what the request chose (CompileRequestFile).
Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(
    const Args& args, const GrammarCompiler& compiler, const CompileOptions& options = {},
    std::vector<std::string>* warnings = nullptr, CompiledRequest* request = nullptr);
// --request FILE ("-": standard input), a chat-completions body, with --format F (the chat
// format of its tools; default its "lockstep_format" or the vocabulary's family) and --compact:
// CompileRequest, errors located "FILE#/pointer", warnings on stderr ("lockstep: warning:
// FILE#POINTER: ...") and in `*warnings` when given.
Result<CompiledRequest> CompileRequestFile(const Args& args, const GrammarCompiler& compiler,
                                           const CompileOptions& options = {},
                                           std::vector<std::string>* warnings = nullptr);
// The vocabulary --tokenizer names and the constraint the flags name, compiled over it with the
// default options (generate, explain). Errors as LoadVocabulary's and CompileConstraint's.
struct LoadedConstraint {
  std::shared_ptr<const Vocabulary> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
  std::optional<CompiledRequest> request;  // --request: what the request chose
};
Result<LoadedConstraint> LoadConstraint(const Args& args);
// The canonical token ids of --prompt TEXT; none without --prompt.
Result<std::vector<TokenId>> EncodePrompt(const Args& args, const Vocabulary& vocab);
// `path#pointer` for a location in a schema file (a JSON Pointer, "" for the root), else
// `path: location` (a rule the compile stopped in, "rule 'name'").
std::string SchemaFileLocation(const std::string& path, const std::string& location);
// A schema compile warning ("POINTER: message") as stderr shows it:
// "lockstep: warning: FILE#POINTER: message".
std::string SchemaWarning(const std::string& path, const std::string& warning);
// Reads a whole file (kIoError naming it if it cannot be read).
Result<std::string> ReadConstraintFile(const std::string& path, const char* what);

}  // namespace lockstep::cli
