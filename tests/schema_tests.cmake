# JSON Schema: the validator on the official test suite (../shared/data), and `lockstep validate`.
lockstep_add_test(json_schema_suite_test grammar/json_schema_suite_test.cc
  LIBS nlohmann_json::nlohmann_json)
if(LOCKSTEP_BUILD_CLI)
  find_package(Python3 REQUIRED COMPONENTS Interpreter)
  add_test(NAME validate_cli_test
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/cli/validate_test.py $<TARGET_FILE:lockstep_cli>)
  set_tests_properties(validate_cli_test PROPERTIES ENVIRONMENT
    "LOCKSTEP_DATA_DIR=${LOCKSTEP_SOURCE_DATA_DIR}" TIMEOUT 300)
endif()
# The compiler on the JSONSchemaBench dev set (compile, exactness on valid/invalid instances and
# the Llama-3 traces) and generation under every dev-set schema, checked by the validator.
lockstep_add_test(schema_devset_test decoder/schema_devset_test.cc LIBS nlohmann_json::nlohmann_json)
lockstep_add_test(schema_generation_test decoder/schema_generation_test.cc
  LIBS nlohmann_json::nlohmann_json)
# Fast mask == brute force on random walks under schema grammars (Llama-3, Qwen2.5, Mistral).
lockstep_add_test(schema_exactness_test decoder/schema_exactness_test.cc LIBS lockstep_grammar_walk)
# Fast grammar positions (automaton walks, shared trie regions) == a full trie walk by the parser,
# on the dev-set traces.
lockstep_add_test(schema_positions_test decoder/schema_positions_test.cc
  LIBS nlohmann_json::nlohmann_json)
