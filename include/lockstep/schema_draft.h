// SchemaDraft: the JSON Schema drafts that the validator (lockstep/validator.h) and the schema
// compiler (lockstep/compiler.h, CompileOptions::schema_default_draft) implement, shared by both;
// SchemaMemberOrder: the compiler's object member order (CompileOptions::schema_member_order).
#pragma once

namespace lockstep {

// The values are the C ABI's lockstep_schema_draft: 0 and 1 came first and keep their numbers.
// A schema's `$schema` naming one of them always wins; the options' default applies otherwise.
// docs/json-schema.md says what each draft changes.
enum class SchemaDraft {
  k2020_12 = 0,  // https://json-schema.org/draft/2020-12/schema
  k7 = 1,        // http://json-schema.org/draft-07/schema#
  k4 = 2,        // http://json-schema.org/draft-04/schema#
  k6 = 3,        // http://json-schema.org/draft-06/schema#
  k2019_09 = 4,  // https://json-schema.org/draft/2019-09/schema
};

// The order in which a schema grammar takes an object's members (CompileOptions).
enum class SchemaMemberOrder {
  kDeclared = 0,  // declared properties in declared order, then the others
  kAny = 1,       // any order, each property at most once
};

}  // namespace lockstep
