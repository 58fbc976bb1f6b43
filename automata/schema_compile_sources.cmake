# JSON Schema -> grammar IR: structure (schema_compile.cc) and lexical automata for numbers,
# strings, formats and property names (schema_lexical.cc).
set(LOCKSTEP_SCHEMA_COMPILE_SOURCES schema_compile.cc schema_lexical.cc)
list(APPEND LOCKSTEP_SCHEMA_COMPILE_SOURCES schema_compile_model.cc schema_compile_check.cc)
