# The JSON Schema model (load, index, $ref resolution), the validator and its format checks.
set(LOCKSTEP_SCHEMA_SOURCES json_schema.cc json_schema_validate.cc json_schema_format.cc
  json_schema_meta.cc)
