# Tests owned by the regex work: parser (tests/grammar), byte automata (tests/automata) and the
# regex sampler, which is also a library (lockstep_test_util) for the token-level tests.
add_library(lockstep_test_util STATIC util/regex_sampler.cc)
target_link_libraries(lockstep_test_util PUBLIC lockstep::lockstep)
target_include_directories(lockstep_test_util PUBLIC ${PROJECT_SOURCE_DIR}
                                                     ${PROJECT_SOURCE_DIR}/tests)

lockstep_add_test(regex_parser_test grammar/regex_parser_test.cc)
lockstep_add_test(byte_dfa_test automata/byte_dfa_test.cc LIBS lockstep_test_util PkgConfig::RE2)
lockstep_add_test(regex_sampler_test util/regex_sampler_test.cc
  LIBS lockstep_test_util PkgConfig::RE2)
