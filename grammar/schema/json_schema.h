// The JSON Schema model shared by the validator (json_schema_validate.cc) and the schema ->
// grammar compiler (automata/schema): a loaded schema with every subschema indexed by its JSON
// Pointer, every `$ref` / `$dynamicRef` resolved at load time (local pointers, `$defs` /
// `definitions`, `$anchor`, `$id` resources, preloaded remote documents; never the network).
// Drafts 2020-12 and 07 are read as they are; 2019-09, 06 and 04 are rewritten at load time into
// the vocabulary of the nearer of the two (NormaliseNode in json_schema.cc). Internal header of
// lockstep_grammar: users of it also link nlohmann_json.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "lockstep/schema_draft.h"
#include "lockstep/status.h"

namespace lockstep::schema {

// The semantics the model, the validator and the compiler implement: draft-07 (`$ref` overrides
// its siblings, `items` arrays, `dependencies`) or 2020-12. A schema of draft-04 or -06 is loaded
// as k7 and one of 2019-09 as k2020_12, its keywords rewritten into theirs (Schema::dialect()
// keeps the draft it was written for).
enum class Draft { k7, k2020_12 };

// The semantics family of a dialect.
constexpr Draft FamilyOf(SchemaDraft d) {
  return d == SchemaDraft::k2020_12 || d == SchemaDraft::k2019_09 ? Draft::k2020_12 : Draft::k7;
}

// The draft a `$schema` URI names (with or without "#", http or https), or nullopt.
std::optional<SchemaDraft> DraftOfMetaSchemaUri(std::string_view uri);

struct LoadOptions {
  // Remote documents by absolute URI (no fragment): "http://localhost:1234/integer.json" -> text.
  // A `$ref` to any other remote URI is an error.
  std::map<std::string, std::string> remotes;
  // Draft used when the schema has no (known) `$schema`.
  SchemaDraft default_draft = SchemaDraft::k2020_12;
};

// LoadOptions with only the default draft set (CompileOptions::schema_default_draft).
inline LoadOptions WithDefaultDraft(SchemaDraft d) {
  LoadOptions o;
  o.default_draft = d;
  return o;
}

// lockstep's own meta-schemas for draft 2020-12 ("https://json-schema.org/draft/2020-12/schema")
// and draft-07 ("http://json-schema.org/draft-07/schema"), used when a `$ref` names them and
// `remotes` does not; empty for any other URI.
// Also draft-04, draft-06 and 2019-09.
std::string_view BuiltinMetaSchema(std::string_view uri);

// Adds every file under `dir` (recursively) to `remotes` as `base_uri` + its relative path
// (e.g. "http://localhost:1234/" + "draft2020-12/integer.json"). kIoError if `dir` is missing.
Status AddRemoteDirectory(const std::string& base_uri, const std::string& dir,
                          std::map<std::string, std::string>* remotes);

// Where one subschema sits: its document, its JSON Pointer in that document, the base URI in
// force there and the resource (root of that base) it belongs to.
struct NodeInfo {
  int doc = 0;                     // 0: the root schema; >0: a remote document
  std::string pointer;             // JSON Pointer within the document ("" for the root)
  std::string base_uri;            // absolute base URI (may be "" for the root without $id)
  const nlohmann::json* resource;  // the node that introduced base_uri
};

class Schema {
 public:
  // Parses and indexes `text`; kInvalidSchema (location = JSON Pointer) on malformed schemas
  // and unresolvable references.
  static Result<std::shared_ptr<const Schema>> Load(std::string_view text,
                                                    const LoadOptions& options = {});
  static Result<std::shared_ptr<const Schema>> FromJson(nlohmann::json root,
                                                        const LoadOptions& options = {});

  Draft draft() const { return FamilyOf(dialect_); }
  // The draft the schema is written in (its `$schema`, else LoadOptions::default_draft).
  SchemaDraft dialect() const { return dialect_; }
  // Whether a number with a zero fraction (1.0) is an integer: not in draft-04.
  bool float_integers() const { return dialect_ != SchemaDraft::k4; }
  const nlohmann::json& root() const { return *docs_[0].json; }
  // Index entry of a subschema node (nullptr if the node is not a schema of this model).
  const NodeInfo* Info(const nlohmann::json* node) const;
  // "/properties/a" for the root document, "URI#/pointer" for a remote one.
  std::string Location(const nlohmann::json* node) const;
  // The resolved target of the `$ref` (or `$dynamicRef`, static resolution) in `node`.
  const nlohmann::json* RefTarget(const nlohmann::json* node) const;
  const nlohmann::json* DynamicRefTarget(const nlohmann::json* node) const;
  // The `$dynamicAnchor` `name` declared in the resource with base URI `base` (nullptr if none).
  const nlohmann::json* DynamicAnchor(const std::string& base, const std::string& name) const;
  // False when the schema's meta-schema leaves out the validation vocabulary (2020-12).
  bool validation_vocabulary() const { return validation_vocab_; }
  // Every indexed subschema node (for passes over the whole model, e.g. compiling patterns).
  std::vector<const nlohmann::json*> Nodes() const {
    std::vector<const nlohmann::json*> out;
    for (const auto& [node, info] : info_) out.push_back(node);
    return out;
  }

 private:
  struct Doc {
    std::unique_ptr<nlohmann::json> json;
    std::string uri;
  };
  friend class SchemaLoader;

  SchemaDraft dialect_ = SchemaDraft::k2020_12;
  bool validation_vocab_ = true;
  std::vector<Doc> docs_;
  std::unordered_map<const nlohmann::json*, NodeInfo> info_;
  std::unordered_map<std::string, const nlohmann::json*> resources_;  // URI (+ "#anchor")
  std::map<std::pair<std::string, std::string>, const nlohmann::json*> dynamic_anchors_;
  std::unordered_map<const nlohmann::json*, const nlohmann::json*> refs_;
  std::unordered_map<const nlohmann::json*, const nlohmann::json*> dynamic_refs_;
};

// ---- JSON value helpers (json_schema_validate.cc), shared by the validator and the compiler ----

// -1, 0, 1: exact when both are integers (int64/uint64), else compared as long double.
int CompareNumbers(const nlohmann::json& a, const nlohmann::json& b);
// JSON equality: 1 == 1.0, objects unordered, false != 0.
bool JsonEqual(const nlohmann::json& a, const nlohmann::json& b);
// `value` is an integer multiple of `divisor`, decided exactly on their shortest decimal texts.
bool IsMultipleOf(const nlohmann::json& value, const nlohmann::json& divisor);
// A JSON number's magnitude as mantissa * 10^exponent, the mantissa free of trailing zeros, read
// from its shortest round-trip decimal text, so that multipleOf (and the compiler's least common
// multiple of two) is decided exactly on decimal values; ok is false past 36 significant digits.
struct ExactDecimal {
  unsigned __int128 mantissa = 0;
  int exponent = 0;
  bool ok = true;
};
ExactDecimal ExactDecimalOf(const nlohmann::json& j);
// Unicode code points of UTF-8 text (what minLength / maxLength count).
std::size_t CodePoints(const std::string& s);

// ---- Formats (json_schema_format.cc) ----

// The formats ValidateOptions::format_assertion checks (date, time, date-time, email, ...).
// Others are unknown: annotations, as draft 2020-12 says.
bool FormatKnown(std::string_view format);
// The OpenAPI formats (ValidateOptions::openapi_formats, CompileOptions::schema_openapi_formats):
// int32 and int64 (a number that is an integer in the signed 32- or 64-bit range), byte (base64,
// RFC 4648 with padding); float, double, binary and password assert nothing.
bool IsOpenApiFormat(std::string_view format);
// Whether `instance` satisfies OpenAPI format `format` (instances of other types pass).
bool CheckOpenApiFormat(std::string_view format, const nlohmann::json& instance);
// The inclusive range of int32 / int64 as JSON numbers; false for other formats.
bool OpenApiIntegerRange(std::string_view format, nlohmann::json* lo, nlohmann::json* hi);
// `byte`: base64 with padding, in the syntax both RE2 and the schema compiler's pattern dialect
// read, matched against the whole string.
inline constexpr char kBase64Pattern[] =
    "(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?";

// ---- Validation (json_schema_validate.cc) ----

struct ValidateOptions {
  bool format_assertion = false;  // check `format` (date, email, ipv4, ...) instead of ignoring
  bool openapi_formats = false;   // check the OpenAPI formats (IsOpenApiFormat)
  std::size_t max_errors = 100;   // errors kept per instance (validity is always exact)
  int max_depth = 400;            // nested schema evaluations before kResourceLimit
};

struct ValidationError {
  std::string instance_pointer;  // "/items/3/name"
  std::string schema_pointer;    // "/properties/items/items/properties/name/type"
  std::string message;
};

// Parses one JSON instance with simdjson (DOM) into the model the validator walks. Integers past
// 64 bits fall back to nlohmann (as doubles). kInvalidArgument with location "byte N" when the
// text is not JSON; kResourceLimit past 1024 levels of nesting.
Result<nlohmann::json> ParseInstance(std::string_view text);

class Validator {
 public:
  // Compiles every `pattern`/`patternProperties` regex with RE2: a pattern RE2 cannot run
  // (lookaround, backreferences) is a kUnsupported error naming its pointer, never a silent pass.
  static Result<Validator> Create(std::shared_ptr<const Schema> schema,
                                  const ValidateOptions& options = {});
  // Valid or not (errors appended when `errors` is given); kResourceLimit on runaway recursion.
  Result<bool> Validate(const nlohmann::json& instance,
                        std::vector<ValidationError>* errors = nullptr) const;
  // Parses `text` as one JSON document first (kInvalidArgument if it is not JSON).
  Result<bool> ValidateText(std::string_view text,
                            std::vector<ValidationError>* errors = nullptr) const;

  struct Regexes;

 private:
  static Result<Validator> CreateImpl(std::shared_ptr<const Schema> schema,
                                      const ValidateOptions& options);
  std::shared_ptr<const Schema> schema_;
  ValidateOptions options_;
  std::shared_ptr<const Regexes> regexes_;
  bool dynamic_refs_ = false;  // some subschema has $dynamicRef (results depend on the scope)
};

}  // namespace lockstep::schema
