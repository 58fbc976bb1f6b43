// libFuzzer target for the JSON Schema model and validator: the input is schema bytes, a NUL,
// then instance bytes. Any input must load (or fail with a clean kInvalidSchema / kUnsupported
// / kResourceLimit status carrying a location) and validate to a result or a clean status,
// never crash or hang; validity must not depend on whether errors are collected.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "grammar/schema/json_schema.h"

namespace ls = lockstep::schema;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 8192) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view schema_text = all.substr(0, nul);
  const std::string_view instance_text = nul == all.npos ? "null" : all.substr(nul + 1);
  ls::LoadOptions load;
  load.remotes["http://localhost:1234/tree.json"] =
      R"({"$id": "http://localhost:1234/tree.json", "$dynamicAnchor": "node",
          "type": "object", "properties": {"kids": {"items": {"$dynamicRef": "#node"}}}})";
  auto schema = ls::Schema::Load(schema_text, load);
  if (!schema.ok()) {
    auto code = schema.status().code();
    if (code != lockstep::StatusCode::kInvalidSchema &&
        code != lockstep::StatusCode::kResourceLimit) {
      std::abort();
    }
    if (schema.status().location().empty()) std::abort();
    return 0;
  }
  ls::ValidateOptions options;
  options.format_assertion = size > 0 && (data[0] & 1);
  options.max_depth = 200;
  auto validator = ls::Validator::Create(*schema, options);
  if (!validator.ok()) {
    auto code = validator.status().code();
    if (code != lockstep::StatusCode::kUnsupported &&
        code != lockstep::StatusCode::kInvalidSchema) {
      std::abort();
    }
    return 0;
  }
  std::vector<ls::ValidationError> errors;
  auto with_errors = validator->ValidateText(instance_text, &errors);
  auto without = validator->ValidateText(instance_text);
  if (with_errors.ok() != without.ok()) std::abort();
  if (!with_errors.ok()) {
    auto code = with_errors.status().code();
    if (code != lockstep::StatusCode::kInvalidArgument &&
        code != lockstep::StatusCode::kResourceLimit) {
      std::abort();
    }
    return 0;
  }
  if (*with_errors != *without) std::abort();
  if (!*with_errors && errors.empty()) std::abort();  // an invalid instance says why
  return 0;
}
