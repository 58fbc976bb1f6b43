# The shipped grammars' independent oracles (hand-written recognisers) and the JSON acceptance
# corpora, as a library (lockstep_grammar_test_util) for the grammar runtime's tests. The oracles
# and their tests link nothing of lockstep, so they stay independent of the code they check.
add_library(lockstep_grammar_test_util STATIC util/grammar_checkers.cc util/json_suite.cc)
target_link_libraries(lockstep_grammar_test_util PUBLIC simdjson::simdjson)
target_include_directories(lockstep_grammar_test_util PUBLIC ${PROJECT_SOURCE_DIR}/tests)

# lockstep_add_oracle_test(name source...): like lockstep_add_test, without lockstep::lockstep.
function(lockstep_add_oracle_test name)
  add_executable(${name} ${ARGN})
  target_link_libraries(${name} PRIVATE lockstep_grammar_test_util GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    LOCKSTEP_SOURCE_DATA_DIR="${LOCKSTEP_SOURCE_DATA_DIR}"
    LOCKSTEP_SHARED_DATA_DIR="${LOCKSTEP_SHARED_DATA_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60)
endfunction()

lockstep_add_oracle_test(grammar_checkers_test util/grammar_checkers_test.cc)
lockstep_add_oracle_test(json_suite_test util/json_suite_test.cc)

# The shipped grammars parse with the GBNF front end (links lockstep_grammar only).
lockstep_add_oracle_test(shipped_grammars_parse_test util/shipped_grammars_parse_test.cc)
target_link_libraries(shipped_grammars_parse_test PRIVATE lockstep_grammar)
target_include_directories(shipped_grammars_parse_test PRIVATE ${PROJECT_SOURCE_DIR})
