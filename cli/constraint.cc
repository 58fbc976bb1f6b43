#include "cli/constraint.h"

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "cli/sampler_flags.h"
#include "lockstep/artifact.h"
#include "lockstep/structured.h"
#include "lockstep/validator.h"

namespace lockstep::cli {

void AddConstraintFlags(std::set<std::string>* value_flags) {
  value_flags->insert("regex");
  value_flags->insert("grammar");
  value_flags->insert("grammar-syntax");
  value_flags->insert("schema");
  value_flags->insert("artifact");
  value_flags->insert("tools");
  value_flags->insert("format");
  value_flags->insert("compile-timeout");
  value_flags->insert("schema-draft");
  value_flags->insert("any-order-max-properties");
  value_flags->insert("max-oneof-overlaps");
  value_flags->insert("max-some-member-requirements");
  value_flags->insert("max-exprs");
}

void AddConstraintSwitches(std::set<std::string>* switches) {
  switches->insert("lenient");
  switches->insert("openapi-formats");
  switches->insert("compact");
  switches->insert("any-order");
}

Status AddConstrainedSamplingFlags(std::set<std::string>* value_flags,
                                   std::set<std::string>* switches) {
  AddConstraintFlags(value_flags);
  AddConstraintSwitches(switches);
  return AddSamplerFlags(value_flags, *switches);
}

bool HasConstraint(const Args& args) {
  return args.Has("regex") || args.Has("grammar") || args.Has("schema") || args.Has("artifact") ||
         args.Has("tools") || args.Has("format") || args.Has("request");
}

std::string ConstraintLabel(const Args& args) {
  if (args.Has("request")) return "request " + args.Get("request");
  if (args.Has("artifact")) return "artifact " + args.Get("artifact");
  if (args.Has("format")) return "format " + args.Get("format") + " tools " + args.Get("tools");
  if (args.Has("schema")) return "schema " + args.Get("schema");
  return args.Has("grammar") ? "grammar " + args.Get("grammar") : args.Get("regex");
}

Status ApplySchemaFlags(const Args& args, CompileOptions* options) {
  options->schema_lenient = args.Has("lenient");
  options->schema_openapi_formats = args.Has("openapi-formats");
  options->schema_whitespace_compact = args.Has("compact");
  options->schema_member_order =
      args.Has("any-order") ? SchemaMemberOrder::kAny : SchemaMemberOrder::kDeclared;
  // A budget flag: an integer in lo..hi.
  auto budget = [&](const char* flag, long lo, long hi, std::int32_t* out) -> Status {
    if (!args.Has(flag)) return Status::Ok();
    const std::string v = args.Get(flag);
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < lo || n > hi) {
      return Status(StatusCode::kInvalidArgument,
                    std::string("--") + flag + " takes an integer in " + std::to_string(lo) +
                        ".." + std::to_string(hi) + ", not '" + v + "'",
                    std::string("--") + flag + " " + v);
    }
    *out = static_cast<std::int32_t>(n);
    return Status::Ok();
  };
  LOCKSTEP_RETURN_IF_ERROR(
      budget("any-order-max-properties", 0, 63, &options->schema_any_order_max_properties));
  LOCKSTEP_RETURN_IF_ERROR(
      budget("max-oneof-overlaps", 0, 1000, &options->schema_max_oneof_overlaps));
  LOCKSTEP_RETURN_IF_ERROR(budget("max-some-member-requirements", 0, 16,
                                  &options->schema_max_some_member_requirements));
  if (args.Has("max-exprs")) {
    const std::string v = args.Get("max-exprs");
    char* end = nullptr;
    const long long n = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n <= 0) {
      return Status(StatusCode::kInvalidArgument,
                    "--max-exprs takes a positive integer, not '" + v + "'", "--max-exprs " + v);
    }
    options->schema_max_exprs = n;
  }
  if (args.Has("schema-draft")) {
    LOCKSTEP_ASSIGN_OR_RETURN(options->schema_default_draft,
                              ParseDraftFlag(args.Get("schema-draft"), "--schema-draft"));
  }
  return Status::Ok();
}

Result<SchemaDraft> ParseDraftFlag(const std::string& value, const std::string& flag) {
  std::optional<SchemaDraft> d = ParseSchemaDraft(value);
  if (!d) {
    return Status(StatusCode::kInvalidArgument,
                  "unknown JSON Schema draft '" + value +
                      "' (expected 4, 6, 7, 2019-09 or 2020-12, or draft-04, draft-06, draft-07)",
                  flag + " " + value);
  }
  return *d;
}

std::string SchemaWarning(const std::string& path, const std::string& warning) {
  // "POINTER: message" (or "(root): message") from CompileSchema.
  if (!warning.empty() && warning[0] == '/') return "lockstep: warning: " + path + "#" + warning;
  return "lockstep: warning: " + path + ": " + warning;
}

std::string SchemaFileLocation(const std::string& path, const std::string& location) {
  if (location.empty() || location[0] == '/') return path + "#" + location;
  // line:column of a file that is not JSON
  if (location.find_first_not_of("0123456789:") == std::string::npos) return path + ":" + location;
  return path + ": " + location;
}

Status ApplyCompileTimeout(const Args& args, CompileOptions* options) {
  if (!args.Has("compile-timeout")) return Status::Ok();
  auto ms = args.GetInt("compile-timeout", options->compile_timeout_ms, 0, std::int64_t{1} << 40);
  if (!ms.ok()) return ms.status();
  options->compile_timeout_ms = *ms;
  return Status::Ok();
}

Result<std::string> ReadConstraintFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, std::string("cannot read ") + what + " file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Result<CompiledRequest> CompileRequestFile(const Args& args, const GrammarCompiler& compiler,
                                           const CompileOptions& defaults,
                                           std::vector<std::string>* out) {
  const std::string path = args.Get("request");
  const bool from_stdin = path == "-";
  const std::string name = from_stdin ? "<stdin>" : path;
  std::string text;
  if (from_stdin) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    LOCKSTEP_ASSIGN_OR_RETURN(text, ReadConstraintFile(path, "request"));
  }
  RequestOptions options;
  options.format = args.Get("format");
  options.compile = defaults;
  LOCKSTEP_RETURN_IF_ERROR(ApplyCompileTimeout(args, &options.compile));
  LOCKSTEP_RETURN_IF_ERROR(ApplySchemaFlags(args, &options.compile));
  auto r = CompileRequest(compiler, text, options);
  if (!r.ok()) {
    const Status& st = r.status();
    if (st.location() == "format") return Status(st.code(), st.message(), "--format");
    return Status(st.code(), st.message(), SchemaFileLocation(name, st.location()));
  }
  for (const std::string& w : r->warnings) std::cerr << SchemaWarning(name, w) << "\n";
  if (out != nullptr) out->insert(out->end(), r->warnings.begin(), r->warnings.end());
  return r;
}

Result<std::shared_ptr<const CompiledGrammar>> CompileConstraint(const Args& args,
                                                                 const GrammarCompiler& compiler,
                                                                 const CompileOptions& defaults,
                                                                 std::vector<std::string>* out,
                                                                 CompiledRequest* request_out) {
  CompileOptions options = defaults;
  LOCKSTEP_RETURN_IF_ERROR(ApplyCompileTimeout(args, &options));
  const bool request = args.Has("request");  // --format then names the request's chat format
  int given = args.Has("regex") + args.Has("grammar") + args.Has("schema") + args.Has("artifact") +
              request + (args.Has("tools") || (args.Has("format") && !request));
  if (given > 1) {
    return Status(StatusCode::kInvalidArgument,
                  "give one of --regex, --grammar, --schema, --artifact, --request and "
                  "--tools/--format, not several",
                  "arguments");
  }
  if (request) {
    LOCKSTEP_ASSIGN_OR_RETURN(CompiledRequest r, CompileRequestFile(args, compiler, options, out));
    if (request_out != nullptr) *request_out = r;
    return r.grammar;
  }
  if (args.Has("tools") || args.Has("format")) {
    if (!args.Has("tools") || !args.Has("format"))
      return Status(StatusCode::kInvalidArgument, "--tools and --format go together", "arguments");
    auto format = LoadFormat(args.Get("format"));
    if (!format.ok()) return format.status();
    const std::string path = args.Get("tools");
    auto text = ReadConstraintFile(path, "tools");
    if (!text.ok()) return text.status();
    auto tools = ParseTools(*text);
    if (!tools.ok()) {
      return Status(tools.status().code(), tools.status().message(),
                    path + "#" + tools.status().location());
    }
    CompileOptions o = options;
    LOCKSTEP_RETURN_IF_ERROR(ApplySchemaFlags(args, &o));
    std::vector<std::string> warnings;
    auto g = CompileStructured(compiler, *format, *tools, o, &warnings);
    for (const std::string& w : warnings) std::cerr << SchemaWarning(path, w) << "\n";
    if (out != nullptr) out->insert(out->end(), warnings.begin(), warnings.end());
    if (!g.ok() && g.status().location().rfind('/', 0) == 0) {
      return Status(g.status().code(), g.status().message(), path + "#" + g.status().location());
    }
    return g;
  }
  // A compiled artifact (lockstep compile ... -o FILE.lsg): loaded, not compiled; it must have
  // been written for this vocabulary (the file names the mismatch otherwise).
  if (args.Has("artifact")) return ReadArtifactFile(compiler, args.Get("artifact"));
  if (args.Has("regex")) return compiler.CompileRegex(args.Get("regex"), options);
  if (args.Has("schema")) {
    const std::string path = args.Get("schema");
    auto text = ReadConstraintFile(path, "schema");
    if (!text.ok()) return text.status();
    CompileOptions o = options;
    LOCKSTEP_RETURN_IF_ERROR(ApplySchemaFlags(args, &o));
    std::vector<std::string> warnings;
    auto g = compiler.CompileSchema(*text, o, &warnings);
    for (const std::string& w : warnings) std::cerr << SchemaWarning(path, w) << "\n";
    if (out != nullptr) out->insert(out->end(), warnings.begin(), warnings.end());
    if (!g.ok()) {
      const Status& st = g.status();
      return Status(st.code(), st.message(), SchemaFileLocation(path, st.location()));
    }
    return g;
  }
  if (!args.Has("grammar")) {
    return Status(StatusCode::kInvalidArgument,
                  "a constraint is needed: --regex RE, --grammar FILE or --schema FILE",
                  "arguments");
  }
  const std::string path = args.Get("grammar");
  auto text = ReadConstraintFile(path, "grammar");
  if (!text.ok()) return text.status();
  std::vector<std::string> warnings;
  auto g = compiler.CompileGrammar(*text, options, args.Get("grammar-syntax", "auto"), &warnings);
  for (std::string& w : warnings) {
    w = path + ":" + w;  // "FILE:line:column: ..."
    std::cerr << "lockstep: warning: " << w << "\n";
    if (out != nullptr) out->push_back(w);
  }
  if (!g.ok()) {
    const Status& st = g.status();
    return Status(st.code(), st.message(),
                  st.location().empty() ? path : path + ":" + st.location());
  }
  return g;
}

Result<LoadedConstraint> LoadConstraint(const Args& args) {
  LoadedConstraint out;
  LOCKSTEP_ASSIGN_OR_RETURN(out.vocab, LoadVocabulary(args));
  GrammarCompiler compiler(out.vocab);  // the grammar keeps what it needs of it
  CompiledRequest request;
  LOCKSTEP_ASSIGN_OR_RETURN(out.grammar, CompileConstraint(args, compiler, {}, nullptr, &request));
  if (args.Has("request")) out.request = std::move(request);
  return out;
}

Result<std::vector<TokenId>> EncodePrompt(const Args& args, const Vocabulary& vocab) {
  if (!args.Has("prompt")) return std::vector<TokenId>{};
  return vocab.Encode(args.Get("prompt"));
}

}  // namespace lockstep::cli
