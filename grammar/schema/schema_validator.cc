// The public JSON Schema validator (include/lockstep/validator.h) over this folder's schema model
// (json_schema.h) and validator (json_schema_validate.cc): options in, a schema::Validator kept
// behind a shared, immutable Impl, and the internal error records copied out into the public
// ones. The validation itself, and its thread safety, are the internal validator's: each
// Validate call builds its own Evaluator; the Schema and the compiled RE2 patterns are read only.
#include "lockstep/validator.h"

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "grammar/schema/json_schema.h"

namespace lockstep {

class JsonInstance::Impl {
 public:
  explicit Impl(nlohmann::json v) : value(std::move(v)) {}
  const nlohmann::json value;
};

class SchemaValidator::Impl {
 public:
  Impl(schema::Validator v, SchemaDraft d, bool keep_errors)
      : validator(std::move(v)), draft(d), keep_errors(keep_errors) {}
  const schema::Validator validator;
  const SchemaDraft draft;
  // max_errors 0: no error list at all, which lets the validator memoise subschema results.
  const bool keep_errors;
};

std::optional<SchemaDraft> ParseSchemaDraft(std::string_view name) {
  if (std::optional<SchemaDraft> d = schema::DraftOfMetaSchemaUri(name)) return d;
  std::string n(name);
  if (n.rfind("draft-", 0) == 0) {
    n.erase(0, 6);
  } else if (n.rfind("draft", 0) == 0) {
    n.erase(0, 5);
  }
  if (n == "4" || n == "04") return SchemaDraft::k4;
  if (n == "6" || n == "06") return SchemaDraft::k6;
  if (n == "7" || n == "07") return SchemaDraft::k7;
  if (n == "2019-09") return SchemaDraft::k2019_09;
  if (n == "2020-12") return SchemaDraft::k2020_12;
  return std::nullopt;
}

const char* SchemaDraftName(SchemaDraft draft) {
  switch (draft) {
    case SchemaDraft::k4:
      return "draft-04";
    case SchemaDraft::k6:
      return "draft-06";
    case SchemaDraft::k7:
      return "draft-07";
    case SchemaDraft::k2019_09:
      return "2019-09";
    case SchemaDraft::k2020_12:
      return "2020-12";
  }
  return "?";
}

Status SchemaValidatorOptions::AddRemoteDirectory(const std::string& base_uri,
                                                  const std::string& dir) {
  try {
    return schema::AddRemoteDirectory(base_uri, dir, &remotes);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory reading the remote documents", dir);
  } catch (const std::exception& e) {
    return Status(StatusCode::kIoError, e.what(), dir);
  }
}

JsonInstance::JsonInstance(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Result<JsonInstance> JsonInstance::Parse(std::string_view text) {
  try {
    Result<nlohmann::json> parsed = schema::ParseInstance(text);
    if (!parsed.ok()) return parsed.status();
    return JsonInstance(std::make_shared<const Impl>(std::move(parsed).value()));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory parsing the instance");
  }
}

SchemaValidator::SchemaValidator(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Result<SchemaValidator> SchemaValidator::Create(std::string_view schema_json,
                                                const SchemaValidatorOptions& options) {
  if (options.max_depth <= 0) {
    return Status(StatusCode::kInvalidArgument,
                  "max_depth is " + std::to_string(options.max_depth) + ", must be positive",
                  "max_depth");
  }
  try {
    schema::LoadOptions load;
    load.remotes = options.remotes;
    load.default_draft = options.default_draft;
    Result<std::shared_ptr<const schema::Schema>> loaded = schema::Schema::Load(schema_json, load);
    if (!loaded.ok()) return loaded.status();
    const SchemaDraft draft = (*loaded)->dialect();
    schema::ValidateOptions vo;
    vo.format_assertion = options.format_assertion;
    vo.openapi_formats = options.openapi_formats;
    vo.max_errors = options.max_errors;
    vo.max_depth = options.max_depth;
    Result<schema::Validator> v = schema::Validator::Create(std::move(loaded).value(), vo);
    if (!v.ok()) return v.status();
    return SchemaValidator(
        std::make_shared<const Impl>(std::move(v).value(), draft, options.max_errors > 0));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory loading the schema");
  }
}

SchemaDraft SchemaValidator::draft() const { return impl_->draft; }

Status SchemaValidator::ValidateInto(const JsonInstance& instance, ValidationResult* result) const {
  *result = ValidationResult();
  try {
    std::vector<schema::ValidationError> errors;
    Result<bool> r =
        impl_->validator.Validate(instance.impl_->value, impl_->keep_errors ? &errors : nullptr);
    result->errors.reserve(errors.size());
    for (schema::ValidationError& e : errors) {
      result->errors.push_back(
          {std::move(e.instance_pointer), std::move(e.schema_pointer), std::move(e.message)});
    }
    if (!r.ok()) return r.status();
    result->valid = *r;
    return Status::Ok();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory validating the instance");
  }
}

Result<ValidationResult> SchemaValidator::Validate(const JsonInstance& instance) const {
  ValidationResult result;
  LOCKSTEP_RETURN_IF_ERROR(ValidateInto(instance, &result));
  return result;
}

Result<ValidationResult> SchemaValidator::Validate(std::string_view instance_json) const {
  LOCKSTEP_ASSIGN_OR_RETURN(JsonInstance instance, JsonInstance::Parse(instance_json));
  return Validate(instance);
}

}  // namespace lockstep
