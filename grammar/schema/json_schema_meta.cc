// Built-in meta-schemas for drafts 2020-12, 2019-09, 07, 06 and 04, so that
// `{"$ref": "<meta-schema URI>"}` resolves without the network. Written for lockstep from the rules
// of the two specifications (JSON Schema Core and Validation, 2020-12 and draft-07): every
// keyword's value is checked as the spec says it must be (types, non-negative integers, arrays of
// schemas, unique string arrays, ...). They are one document each (the 2020-12 vocabularies are not
// split into meta/core, meta/applicator, ... documents) and check no `format`s, as the official
// ones do by default. 2019-09's is 2020-12's with `$recursiveRef` for `$dynamicRef` and the `items`
// array; draft-06's and draft-04's are draft-07's less the keywords those drafts do not have
// (draft-04: `id`, and boolean exclusiveMaximum / exclusiveMinimum).
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace lockstep::schema {
namespace {

constexpr std::string_view kDraft2020Meta = R"json({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "$id": "https://json-schema.org/draft/2020-12/schema",
  "$dynamicAnchor": "meta",
  "$comment": "lockstep's meta-schema for draft 2020-12 (core, applicator, unevaluated, validation, meta-data, format-annotation, content)",
  "type": ["object", "boolean"],
  "properties": {
    "$id": {"type": "string", "pattern": "^[^#]*#?$"},
    "$schema": {"type": "string"},
    "$ref": {"type": "string"},
    "$anchor": {"$ref": "#/$defs/anchorString"},
    "$dynamicRef": {"type": "string"},
    "$dynamicAnchor": {"$ref": "#/$defs/anchorString"},
    "$vocabulary": {"type": "object", "additionalProperties": {"type": "boolean"}},
    "$comment": {"type": "string"},
    "$defs": {"type": "object", "additionalProperties": {"$dynamicRef": "#meta"}},
    "definitions": {"type": "object", "additionalProperties": {"$dynamicRef": "#meta"}},
    "dependencies": {
      "type": "object",
      "additionalProperties": {"anyOf": [{"$dynamicRef": "#meta"}, {"$ref": "#/$defs/stringArray"}]}
    },

    "prefixItems": {"$ref": "#/$defs/schemaArray"},
    "items": {"$dynamicRef": "#meta"},
    "contains": {"$dynamicRef": "#meta"},
    "additionalProperties": {"$dynamicRef": "#meta"},
    "properties": {"type": "object", "additionalProperties": {"$dynamicRef": "#meta"}},
    "patternProperties": {"type": "object", "additionalProperties": {"$dynamicRef": "#meta"}},
    "dependentSchemas": {"type": "object", "additionalProperties": {"$dynamicRef": "#meta"}},
    "propertyNames": {"$dynamicRef": "#meta"},
    "if": {"$dynamicRef": "#meta"},
    "then": {"$dynamicRef": "#meta"},
    "else": {"$dynamicRef": "#meta"},
    "allOf": {"$ref": "#/$defs/schemaArray"},
    "anyOf": {"$ref": "#/$defs/schemaArray"},
    "oneOf": {"$ref": "#/$defs/schemaArray"},
    "not": {"$dynamicRef": "#meta"},
    "unevaluatedItems": {"$dynamicRef": "#meta"},
    "unevaluatedProperties": {"$dynamicRef": "#meta"},

    "type": {
      "anyOf": [
        {"$ref": "#/$defs/simpleTypes"},
        {"type": "array", "items": {"$ref": "#/$defs/simpleTypes"}, "minItems": 1, "uniqueItems": true}
      ]
    },
    "const": true,
    "enum": {"type": "array", "items": true},
    "multipleOf": {"type": "number", "exclusiveMinimum": 0},
    "maximum": {"type": "number"},
    "exclusiveMaximum": {"type": "number"},
    "minimum": {"type": "number"},
    "exclusiveMinimum": {"type": "number"},
    "maxLength": {"$ref": "#/$defs/nonNegativeInteger"},
    "minLength": {"$ref": "#/$defs/nonNegativeInteger"},
    "pattern": {"type": "string"},
    "maxItems": {"$ref": "#/$defs/nonNegativeInteger"},
    "minItems": {"$ref": "#/$defs/nonNegativeInteger"},
    "uniqueItems": {"type": "boolean"},
    "maxContains": {"$ref": "#/$defs/nonNegativeInteger"},
    "minContains": {"$ref": "#/$defs/nonNegativeInteger"},
    "maxProperties": {"$ref": "#/$defs/nonNegativeInteger"},
    "minProperties": {"$ref": "#/$defs/nonNegativeInteger"},
    "required": {"$ref": "#/$defs/stringArray"},
    "dependentRequired": {"type": "object", "additionalProperties": {"$ref": "#/$defs/stringArray"}},

    "title": {"type": "string"},
    "description": {"type": "string"},
    "default": true,
    "deprecated": {"type": "boolean"},
    "readOnly": {"type": "boolean"},
    "writeOnly": {"type": "boolean"},
    "examples": {"type": "array", "items": true},
    "format": {"type": "string"},
    "contentEncoding": {"type": "string"},
    "contentMediaType": {"type": "string"},
    "contentSchema": {"$dynamicRef": "#meta"}
  },
  "$defs": {
    "anchorString": {"type": "string", "pattern": "^[A-Za-z_][-A-Za-z0-9._]*$"},
    "schemaArray": {"type": "array", "minItems": 1, "items": {"$dynamicRef": "#meta"}},
    "nonNegativeInteger": {"type": "integer", "minimum": 0},
    "simpleTypes": {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]},
    "stringArray": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "default": []}
  }
})json";

// Draft-07 keeps one schema resource with `definitions`; it is written with `$ref` only so that it
// also reads correctly when the referring schema is evaluated under 2020-12 rules.
constexpr std::string_view kDraft7Meta = R"json({
  "$schema": "http://json-schema.org/draft-07/schema#",
  "$id": "http://json-schema.org/draft-07/schema#",
  "$comment": "lockstep's meta-schema for draft-07",
  "type": ["object", "boolean"],
  "properties": {
    "$id": {"type": "string"},
    "$schema": {"type": "string"},
    "$ref": {"type": "string"},
    "$comment": {"type": "string"},
    "title": {"type": "string"},
    "description": {"type": "string"},
    "default": true,
    "readOnly": {"type": "boolean"},
    "writeOnly": {"type": "boolean"},
    "examples": {"type": "array", "items": true},
    "multipleOf": {"type": "number", "exclusiveMinimum": 0},
    "maximum": {"type": "number"},
    "exclusiveMaximum": {"type": "number"},
    "minimum": {"type": "number"},
    "exclusiveMinimum": {"type": "number"},
    "maxLength": {"$ref": "#/definitions/nonNegativeInteger"},
    "minLength": {"$ref": "#/definitions/nonNegativeInteger"},
    "pattern": {"type": "string"},
    "additionalItems": {"$ref": "#"},
    "items": {"anyOf": [{"$ref": "#"}, {"$ref": "#/definitions/schemaArray"}]},
    "maxItems": {"$ref": "#/definitions/nonNegativeInteger"},
    "minItems": {"$ref": "#/definitions/nonNegativeInteger"},
    "uniqueItems": {"type": "boolean"},
    "contains": {"$ref": "#"},
    "maxProperties": {"$ref": "#/definitions/nonNegativeInteger"},
    "minProperties": {"$ref": "#/definitions/nonNegativeInteger"},
    "required": {"$ref": "#/definitions/stringArray"},
    "additionalProperties": {"$ref": "#"},
    "definitions": {"type": "object", "additionalProperties": {"$ref": "#"}},
    "properties": {"type": "object", "additionalProperties": {"$ref": "#"}},
    "patternProperties": {"type": "object", "additionalProperties": {"$ref": "#"}},
    "dependencies": {
      "type": "object",
      "additionalProperties": {"anyOf": [{"$ref": "#"}, {"$ref": "#/definitions/stringArray"}]}
    },
    "propertyNames": {"$ref": "#"},
    "const": true,
    "enum": {"type": "array", "items": true},
    "type": {
      "anyOf": [
        {"$ref": "#/definitions/simpleTypes"},
        {"type": "array", "items": {"$ref": "#/definitions/simpleTypes"}, "minItems": 1, "uniqueItems": true}
      ]
    },
    "format": {"type": "string"},
    "contentMediaType": {"type": "string"},
    "contentEncoding": {"type": "string"},
    "if": {"$ref": "#"},
    "then": {"$ref": "#"},
    "else": {"$ref": "#"},
    "allOf": {"$ref": "#/definitions/schemaArray"},
    "anyOf": {"$ref": "#/definitions/schemaArray"},
    "oneOf": {"$ref": "#/definitions/schemaArray"},
    "not": {"$ref": "#"}
  },
  "definitions": {
    "schemaArray": {"type": "array", "minItems": 1, "items": {"$ref": "#"}},
    "nonNegativeInteger": {"type": "integer", "minimum": 0},
    "simpleTypes": {"enum": ["array", "boolean", "integer", "null", "number", "object", "string"]},
    "stringArray": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
  }
})json";

std::string Draft2019Meta() {
  nlohmann::json m = nlohmann::json::parse(kDraft2020Meta);
  const nlohmann::json dyn = {{"$dynamicRef", "#meta"}}, rec = {{"$recursiveRef", "#"}};
  std::function<void(nlohmann::json&)> swap = [&](nlohmann::json& j) {
    if (j == dyn) {
      j = rec;
      return;
    }
    if (j.is_object() || j.is_array()) {
      for (auto& sub : j) swap(sub);
    }
  };
  swap(m);
  m["$schema"] = m["$id"] = "https://json-schema.org/draft/2019-09/schema";
  m.erase("$dynamicAnchor");
  m["$recursiveAnchor"] = true;
  m["$comment"] = "lockstep's meta-schema for draft 2019-09";
  nlohmann::json& p = m["properties"];
  p.erase("prefixItems");
  p.erase("$dynamicRef");
  p.erase("$dynamicAnchor");
  p["$recursiveRef"] = {{"type", "string"}};
  p["$recursiveAnchor"] = {{"type", "boolean"}};
  p["items"] = {{"anyOf", {rec, {{"$ref", "#/$defs/schemaArray"}}}}};
  p["additionalItems"] = rec;
  return m.dump();
}

// Draft-06 (version 6) or draft-04 (version 4) from draft-07's.
std::string OlderDraftMeta(int version) {
  nlohmann::json m = nlohmann::json::parse(kDraft7Meta);
  const std::string uri =
      std::string("http://json-schema.org/draft-0") + std::to_string(version) + "/schema#";
  m["$schema"] = uri;
  m["$comment"] = "lockstep's meta-schema for draft-0" + std::to_string(version);
  nlohmann::json& p = m["properties"];
  for (const char* k : {"if", "then", "else", "readOnly", "writeOnly", "contentMediaType",
                        "contentEncoding", "$comment"}) {
    p.erase(k);
  }
  if (version == 4) {
    m.erase("$id");
    m["id"] = uri;
    for (const char* k : {"$id", "const", "contains", "propertyNames", "examples"}) p.erase(k);
    p["id"] = {{"type", "string"}};
    p["exclusiveMaximum"] = p["exclusiveMinimum"] = {{"type", "boolean"}};
  } else {
    m["$id"] = uri;
  }
  return m.dump();
}

}  // namespace

// The built-in meta-schema with this URI (no fragment; "http://json-schema.org/draft-07/schema"
// with or without a trailing '#'), or an empty view.
std::string_view BuiltinMetaSchema(std::string_view uri) {
  if (uri == "https://json-schema.org/draft/2020-12/schema") return kDraft2020Meta;
  if (uri == "https://json-schema.org/draft/2019-09/schema") {
    static const std::string* const k2019 = new std::string(Draft2019Meta());
    return *k2019;
  }
  if (!uri.empty() && uri.back() == '#') uri.remove_suffix(1);
  if (uri == "http://json-schema.org/draft-07/schema") return kDraft7Meta;
  if (uri == "http://json-schema.org/draft-06/schema") {
    static const std::string* const k6 = new std::string(OlderDraftMeta(6));
    return *k6;
  }
  if (uri == "http://json-schema.org/draft-04/schema") {
    static const std::string* const k4 = new std::string(OlderDraftMeta(4));
    return *k4;
  }
  return {};
}

}  // namespace lockstep::schema
