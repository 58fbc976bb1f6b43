# JSON Schema -> grammar: lexical automata (numbers, strings, formats) and the compiler.
lockstep_add_test(schema_lexical_test automata/schema_lexical_test.cc
  LIBS PkgConfig::RE2 nlohmann_json::nlohmann_json Boost::headers)
# The structure compiler: unit tests per keyword (oracle: the validator, through a real Matcher)
# and the JSON-Schema-Test-Suite through compiled grammars (acceptance 2).
find_package(Boost REQUIRED)  # Boost::headers is a directory-scoped imported target
lockstep_add_test(schema_compile_test automata/schema_compile_test.cc
  LIBS nlohmann_json::nlohmann_json lockstep_grammar_walk)
lockstep_add_test(schema_compile_suite_test grammar/schema_compile_suite_test.cc
  LIBS nlohmann_json::nlohmann_json)
if(LOCKSTEP_BUILD_CLI)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME schema_cli_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli/schema_cli_test.py $<TARGET_FILE:lockstep_cli>)
  set_tests_properties(schema_cli_test PROPERTIES ENVIRONMENT
    "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}" TIMEOUT 600)
  # Compiled artifacts: compile -o, generate --artifact, bad files, compile --batch.
  add_test(NAME artifact_cli_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli/artifact_cli_test.py $<TARGET_FILE:lockstep_cli>)
  set_tests_properties(artifact_cli_test PROPERTIES ENVIRONMENT
    "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}" TIMEOUT 600)
endif()
# Compiles that must end: pathological schemas and grammars (shared definitions, nested
# combinators) compile exactly or are refused with a location; the compile deadline and
# cancellation from another thread.
lockstep_add_test(compile_budget_test automata/compile_budget_test.cc
  LIBS nlohmann_json::nlohmann_json)
