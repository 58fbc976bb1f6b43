// `lockstep validate`: JSON Schema validation of instances given as files, NDJSON streams or
// stdin. Exit 0 when every instance is valid, 1 when some is invalid (or not JSON), 2 when the
// schema is unusable or the command line is wrong. Built on the public validator
// (lockstep/validator.h) alone; nlohmann/json only writes the --json lines.
#include "cli/validate.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/constraint.h"
#include "lockstep/status.h"
#include "lockstep/validator.h"

namespace lockstep::cli {
namespace {

using nlohmann::json;

constexpr const char* kValidateHelp =
    R"(usage: lockstep validate --schema S [INSTANCE...|-] [--json] [options]

Validates JSON instances against the JSON Schema in file S (draft 2020-12 by default; the draft
its $schema names, or --draft D's, otherwise). An INSTANCE file holding one JSON document is one instance; otherwise
(or with --ndjson, or for .ndjson/.jsonl files) each non-empty line is one instance. "-" or no
INSTANCE reads stdin the same way.
  --json                 one JSON object per instance: {"source", "line", "valid", "errors":
                         [{"instance", "schema", "message"}]} (pointers are JSON Pointers)
  --ndjson               always read instances one per line
  --draft D              the draft of a schema whose $schema names none: 4, 6, 7, 2019-09 or
                         2020-12 (also draft-04, draft-06, draft-07); a known $schema wins
  --formats              check `format` as an assertion (date, date-time, email, ipv4, ...)
  --openapi-formats      check the OpenAPI formats: int32, int64 (integer ranges), byte (base64);
                         float, double, binary, password are known and check nothing
  --remote URI=DIR       serve $ref targets under URI from the files of DIR (repeatable; the
                         network is never used): DIR/a.json is URI/a.json, with or without a
                         trailing / on URI
  --quiet                print nothing, only the exit code
exit: 0 all valid, 1 some instance invalid or not JSON, 2 unusable schema or usage error
)";

int Usage(const Status& st) {
  std::cerr << "lockstep: " << st.ToString() << "\n";
  return 2;
}

std::string ReadAll(std::istream& in) {
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct InstanceText {
  std::string text;
  int line = 0;  // 0: the whole source is one document
  std::optional<JsonInstance> parsed;
};

std::vector<InstanceText> SplitInstances(const std::string& text, bool ndjson) {
  if (!ndjson) {
    Result<JsonInstance> whole = JsonInstance::Parse(text);
    if (whole.ok()) {
      std::vector<InstanceText> one(1);
      one[0].parsed = std::move(*whole);
      return one;
    }
  }
  std::vector<InstanceText> out;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    out.push_back({line, n, std::nullopt});
  }
  return out;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int Validate(int argc, char** argv) {
  Args args({"schema", "remote", "draft"},
            {"json", "ndjson", "formats", "openapi-formats", "quiet", "help"}, {{"-h", "help"}});
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return Usage(st);
  if (args.Has("help")) return std::cout << kValidateHelp, 0;
  if (!args.Has("schema")) {
    return Usage(Status(StatusCode::kInvalidArgument, "--schema is required (see --help)",
                        "argument --schema"));
  }
  std::string schema_path = args.Get("schema");
  std::ifstream schema_in(schema_path, std::ios::binary);
  if (!schema_in) return Usage(Status(StatusCode::kIoError, "cannot read the schema", schema_path));
  SchemaValidatorOptions options;
  for (const std::string& r : args.GetAll("remote")) {
    std::size_t eq = r.find('=');
    if (eq == std::string::npos) {
      return Usage(Status(StatusCode::kInvalidArgument, "--remote takes URI=DIR", "--remote " + r));
    }
    if (Status st = options.AddRemoteDirectory(r.substr(0, eq), r.substr(eq + 1)); !st.ok()) {
      return Usage(st);
    }
  }
  if (args.Has("draft")) {
    auto draft = ParseDraftFlag(args.Get("draft"), "--draft");
    if (!draft.ok()) return Usage(draft.status());
    options.default_draft = *draft;
  }
  options.format_assertion = args.Has("formats");
  options.openapi_formats = args.Has("openapi-formats");
  auto validator = SchemaValidator::Create(ReadAll(schema_in), options);
  if (!validator.ok()) {
    std::cerr << "lockstep: " << schema_path << ": " << validator.status().ToString() << "\n";
    return 2;
  }

  std::vector<std::string> sources = args.positional();
  if (sources.empty()) sources.push_back("-");
  bool as_json = args.Has("json"), quiet = args.Has("quiet");
  bool all_valid = true;
  for (const std::string& src : sources) {
    std::string text;
    if (src == "-") {
      text = ReadAll(std::cin);
    } else {
      std::ifstream in(src, std::ios::binary);
      if (!in) return Usage(Status(StatusCode::kIoError, "cannot read the instance file", src));
      text = ReadAll(in);
    }
    bool ndjson = args.Has("ndjson") || EndsWith(src, ".ndjson") || EndsWith(src, ".jsonl");
    for (InstanceText& inst : SplitInstances(text, ndjson)) {
      Result<JsonInstance> parsed = inst.parsed ? Result<JsonInstance>(std::move(*inst.parsed))
                                                : JsonInstance::Parse(inst.text);
      // On a resource limit `result` keeps the errors found before it, printed after the failure.
      ValidationResult result;
      std::string failure;  // not JSON, or a resource limit
      if (!parsed.ok()) {
        failure = parsed.status().ToString();
      } else if (Status st = validator->ValidateInto(*parsed, &result); !st.ok()) {
        failure = st.ToString();
      }
      const bool valid = failure.empty() && result.valid;
      const std::vector<ValidationError>& errors = result.errors;
      all_valid &= valid;
      if (quiet) continue;
      std::string where = src == "-" ? "<stdin>" : src;
      if (as_json) {
        json out = {{"source", where}, {"line", inst.line}, {"valid", valid}};
        json errs = json::array();
        if (!failure.empty())
          errs.push_back({{"instance", ""}, {"schema", ""}, {"message", failure}});
        for (const auto& e : errors) {
          errs.push_back({{"instance", e.instance_pointer},
                          {"schema", e.schema_pointer},
                          {"message", e.message}});
        }
        out["errors"] = std::move(errs);
        std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
      } else {
        std::string loc = inst.line > 0 ? where + ":" + std::to_string(inst.line) : where;
        std::cout << loc << ": " << (valid ? "valid" : "invalid") << "\n";
        if (!failure.empty()) std::cout << "  " << failure << "\n";
        for (const auto& e : errors) {
          std::cout << "  at " << (e.instance_pointer.empty() ? "(root)" : e.instance_pointer)
                    << ": " << e.message << " (schema " << e.schema_pointer << ")\n";
        }
      }
    }
  }
  return all_valid ? 0 : 1;
}

}  // namespace lockstep::cli
