# Token trie, token-level DFA and Matcher: unit tests and the exactness/soundness/completeness
# checks against brute force and RE2 on real vocabularies.
lockstep_add_test(token_trie_test automata/token_trie_test.cc)
lockstep_add_test(matcher_test decoder/matcher_test.cc)
lockstep_add_test(regex_exactness_test decoder/regex_exactness_test.cc
  LIBS lockstep_test_util PkgConfig::RE2)
# Compiled artifacts: round trips equal fresh compiles on random walks; bad files are errors.
lockstep_add_test(artifact_test automata/artifact_test.cc LIBS ZLIB::ZLIB nlohmann_json::nlohmann_json)
