// SchemaValidator: JSON Schema validation of JSON instances (drafts 2020-12, 2019-09, 07, 06 and
// 04, every required test of the official JSON-Schema-Test-Suite), the validator behind `lockstep
// validate`. A schema is loaded once: every `$ref` resolved (never over the network), every
// keyword checked, every pattern compiled; then any number of instances are validated against
// it, each verdict exact, with the errors located by JSON Pointers in the instance and in the
// schema. docs/json-schema.md has the semantics (draft selection, formats, patterns).
//
// Thread safety: a SchemaValidator is immutable once created. Validate may run on any number of
// threads at once on one validator: each call keeps its evaluation state to itself, and the
// compiled patterns (RE2) are safe to share. Copies are cheap and share the loaded schema; so
// are JsonInstance copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/schema_draft.h"
#include "lockstep/status.h"

namespace lockstep {

// SchemaDraft (lockstep/schema_draft.h) by name: "4", "draft-04", "draft4", "6", "draft-06", "7",
// "draft-07", "2019-09", "draft2019-09", "2020-12", ... or a `$schema` URI naming one
// ("http://json-schema.org/draft-04/schema#"); nullopt for anything else.
std::optional<SchemaDraft> ParseSchemaDraft(std::string_view name);
// "draft-04", "draft-06", "draft-07", "2019-09", "2020-12".
const char* SchemaDraftName(SchemaDraft draft);

struct SchemaValidatorOptions {
  // The draft of a schema whose `$schema` names none of the five drafts (or is absent); a known
  // `$schema` always wins. One draft applies to the whole schema, referenced documents included.
  SchemaDraft default_draft = SchemaDraft::k2020_12;
  // `format` checked as an assertion (date, date-time, email, ipv4, uuid, ...: `lockstep
  // validate --formats`) instead of being an annotation. Unknown formats pass.
  bool format_assertion = false;
  // The OpenAPI formats checked (`lockstep validate --openapi-formats`): int32 and int64 (an
  // integer in the signed 32- / 64-bit range), byte (base64); float, double, binary and
  // password assert nothing. As CompileOptions::schema_openapi_formats, so that the compiler
  // and the validator agree.
  bool openapi_formats = false;
  // Documents a `$ref` may name, by absolute URI without fragment
  // ("http://example.com/int.json" -> its JSON text). The network is never used: a `$ref` to any
  // other remote URI makes Create fail with kInvalidSchema at that `$ref`'s pointer. The five
  // drafts' meta-schemas are built in (an entry here replaces them).
  std::map<std::string, std::string> remotes;
  // Errors kept per instance; the verdict is exact whatever this is. 0 keeps none and is the
  // fastest: a subschema is then evaluated once per instance value however many paths reach it
  // (unless the schema has a `$dynamicRef`, whose result depends on the path).
  std::size_t max_errors = 100;
  // Nested schema evaluations before Validate fails with kResourceLimit (a recursive `$ref` that
  // makes no progress, `{"$ref": "#"}`). Must be positive.
  std::int32_t max_depth = 400;

  // Adds every file under `dir` (recursively) to `remotes` as `base_uri` + its path relative to
  // `dir` (`lockstep validate --remote URI=DIR`): base "http://localhost:1234/" and the file
  // DIR/draft7/integer.json give "http://localhost:1234/draft7/integer.json"; a base without its
  // trailing '/' names the same directory ("http://localhost:1234" gives the same URI). The
  // files are read now. kIoError (location: `dir`) when `dir` is not a directory.
  Status AddRemoteDirectory(const std::string& base_uri, const std::string& dir);
};

// One failed assertion.
struct ValidationError {
  // JSON Pointer of the failing value in the instance ("" for the root, "/items/3/name").
  std::string instance_pointer;
  // JSON Pointer of the failing keyword in the schema ("/properties/a/items/minimum"), or
  // "URI#/pointer" inside a remote document.
  std::string schema_pointer;
  std::string message;  // "3 is less than the minimum 5", ...
};

struct ValidationResult {
  bool valid = false;
  // Why the instance is invalid: empty when it is valid, at most max_errors entries. Errors of
  // the failing branches of anyOf / oneOf / not / if / contains that did not decide the verdict
  // are left out.
  std::vector<ValidationError> errors;
};

// A JSON document parsed once: it can be validated against several validators without being
// parsed again. Parsing is simdjson's; integers keep 64-bit precision, integers past 64 bits are
// read as doubles.
class JsonInstance {
 public:
  // kInvalidArgument at "byte N" when `text` is not exactly one JSON document (surrounding
  // whitespace allowed); kResourceLimit when it nests deeper than 1024 levels.
  static Result<JsonInstance> Parse(std::string_view text);

 private:
  class Impl;
  friend class SchemaValidator;
  explicit JsonInstance(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

class SchemaValidator {
 public:
  // Loads `schema_json` (JSON text: an object or a boolean). Errors: kInvalidSchema with a JSON
  // Pointer location for text that is not JSON, a malformed keyword (`"minLength": -1`,
  // `"type": "int"`), an unresolvable or unknown remote `$ref`; kUnsupported for a `pattern` RE2
  // cannot run (lookaround, backreferences), naming its pointer: never a silent pass;
  // kInvalidArgument for a max_depth that is not positive.
  static Result<SchemaValidator> Create(std::string_view schema_json,
                                        const SchemaValidatorOptions& options = {});

  // Validates one JSON text: the verdict and its errors. The call fails, rather than returning
  // a verdict, when `instance_json` is not JSON (kInvalidArgument at "byte N") or nests deeper
  // than 1024 levels, and when the evaluation nests deeper than max_depth (kResourceLimit).
  Result<ValidationResult> Validate(std::string_view instance_json) const;
  Result<ValidationResult> Validate(const JsonInstance& instance) const;
  // As Validate(instance), writing into `*result`, which is reset first. When the evaluation
  // fails (kResourceLimit past max_depth), `result->errors` keeps the errors found before it
  // (`lockstep validate` prints them with the failure) and `result->valid` is false.
  Status ValidateInto(const JsonInstance& instance, ValidationResult* result) const;

  // The draft in force: the schema's `$schema`, else options.default_draft.
  SchemaDraft draft() const;

 private:
  class Impl;
  explicit SchemaValidator(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace lockstep
