// JSON Schema -> grammar IR. Structure (objects, arrays, combinators, $ref recursion) is compiled
// here; terminals come from schema_lexical.h. The model is grammar/schema/json_schema.h, the same one
// the validator uses.
//
// Exactness contract: for a schema that compiles in strict mode, a JSON text rendered under the
// formatting policy (RenderInstance) is accepted by the grammar iff the validator accepts the
// instance. What cannot be enforced exactly is an error naming the keyword's JSON Pointer
// (strict, the default); `lenient` relaxes it instead and reports every relaxed keyword.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "automata/schema/schema_lexical.h"
#include "grammar/ir/grammar_ir.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/status.h"

namespace lockstep::schema {

enum class Whitespace : std::uint8_t {
  kCompact,   // no whitespace at all between tokens
  kFlexible,  // any JSON whitespace between tokens, at most max_whitespace_run bytes per run
};

// The source order of every `properties` object of a schema text, by the JSON Pointer of that
// object ("/properties", "/$defs/a/properties", ...). The schema model (nlohmann::json) keeps
// object members sorted by key; with this the grammar expects properties in declared order.
using PropertyOrder = std::unordered_map<std::string, std::vector<std::string>>;
PropertyOrder PropertyOrderOf(std::string_view schema_json);

struct SchemaCompileOptions {
  bool lenient = false;
  Whitespace whitespace = Whitespace::kFlexible;
  std::int32_t max_whitespace_run = 32;
  // Compile budget: IR expressions created; past it, kResourceLimit.
  std::int64_t max_exprs = 2000000;
  // `format` as an assertion (the default: generated strings are valid dates, emails, ...; a
  // format without an exact automaton is an error, or relaxed when lenient). False treats
  // `format` as the annotation it is by default in draft 2020-12 (what the validator does
  // without ValidateOptions::format_assertion and what the test suite's required tests expect).
  bool format_assertion = true;
  // The OpenAPI formats asserted (CompileOptions::schema_openapi_formats).
  bool openapi_formats = false;
  // Object members in any order (CompileOptions::schema_member_order kAny): each declared
  // property at most once, in any order, among the other members; else declared order.
  bool any_member_order = false;
  // With any_member_order: the most declared properties on one object (one rule per subset of
  // them); past it, kResourceLimit (CompileOptions::schema_any_order_max_properties).
  std::int32_t any_order_max_properties = 10;
  // oneOf branches not provably disjoint: each branch is compiled with the negation of every
  // branch it may overlap, at most this many (CompileOptions::schema_max_oneof_overlaps); past
  // it, kResourceLimit.
  std::int32_t max_oneof_overlaps = 11;
  // "Some member breaks it" requirements on one object (negated additionalProperties /
  // patternProperties / propertyNames): the member chain carries the subset met so far, 2^n
  // states for n (CompileOptions::schema_max_some_member_requirements); past it, kResourceLimit.
  std::int32_t max_some_member_requirements = 3;
  // Nesting of subschemas compiled inside one another (not $ref recursion, which becomes grammar
  // rules); deeper is kResourceLimit, never a stack overflow.
  std::int32_t max_depth = 200;
  // Declared property order of the root document (PropertyOrderOf its text); without it,
  // properties are expected in key order.
  std::shared_ptr<const PropertyOrder> property_order;
  LexicalOptions lexical;
  // The compile's deadline and cancellation (CompileOptions::compile_timeout_ms / cancel):
  // past it, kResourceLimit at the JSON Pointer of the subschema being compiled, checked or
  // rendered. The lexical automata and the normalisation run under it too.
  CompileDeadline deadline;
};

struct RelaxedKeyword {
  std::string
      pointer;  // JSON Pointer of the keyword in the schema, e.g. "/properties/a/uniqueItems"
  std::string message;  // what was relaxed and how
};

struct SchemaGrammar {
  grammar::Grammar grammar;
  std::vector<RelaxedKeyword> relaxed;  // empty unless options.lenient
  // JSON Pointers of the keywords the grammar leaves to the parser's run-time checks (uniqueItems:
  // grammar::Rule::unique_item; a counted maxLength: max_chars; `format: regex`: ecma_pattern):
  // text grammars (GBNF) cannot express them.
  std::vector<std::string> checked_at_run_time;
};

Result<SchemaGrammar> CompileSchemaToGrammar(const Schema& schema,
                                             const SchemaCompileOptions& options = {});

// The options of compiling (or rendering instances of) the schema text `schema_json`: the schema
// fields of the public CompileOptions, the properties' declared order read from the text, and
// the deadline the caller started.
SchemaCompileOptions SchemaOptionsFrom(const CompileOptions& options, std::string_view schema_json,
                                       const CompileDeadline& deadline);

// The instance as the compiled grammar expects to see it: declared properties first, in the order
// the applicable subschema declares them, then the others in instance order; values rendered by
// RenderJsonString / RenderJsonNumber; `indent` < 0 compact, else pretty-printed with that indent.
// Checking which anyOf / oneOf branch an instance takes is bounded by options.deadline:
// TryRenderInstance returns its kResourceLimit (at the subschema being checked), RenderInstance
// falls back to the instance's own member order.
Result<std::string> TryRenderInstance(const Schema& schema, const nlohmann::json& instance,
                                      int indent = -1, const SchemaCompileOptions& options = {});

namespace internal {
class Model;
}

// TryRenderInstance for many instances of one schema, sharing the work that does not depend on
// the instance (expanded subschemas, string automata for patterns and formats) and one
// deadline (options.deadline, or the default compile deadline from construction): what a
// benchmark renders a file's instances with. Not thread-safe; `schema` must outlive it.
class InstanceRenderer {
 public:
  InstanceRenderer(const Schema& schema, const SchemaCompileOptions& options);
  ~InstanceRenderer();
  Result<std::string> Render(const nlohmann::json& instance, int indent = -1);

 private:
  const Schema& schema_;
  std::unique_ptr<internal::Model> model_;
};
std::string RenderInstance(const Schema& schema, const nlohmann::json& instance, int indent = -1,
                           const SchemaCompileOptions& options = {});

}  // namespace lockstep::schema
