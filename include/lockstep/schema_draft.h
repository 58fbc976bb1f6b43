// SchemaDraft: the JSON Schema drafts that the validator (lockstep/validator.h) and the schema
// compiler (lockstep/compiler.h, CompileOptions::schema_default_draft) implement, shared by both.
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

}  // namespace lockstep
