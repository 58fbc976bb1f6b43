# The grammar runtime (Earley parser, adaptive mask cache, Matcher over grammars): unit tests on
# IR-built grammars and exactness against brute force on real vocabularies.
add_library(lockstep_grammar_walk STATIC util/grammar_walk.cc)
target_link_libraries(lockstep_grammar_walk PUBLIC lockstep::lockstep)
target_include_directories(lockstep_grammar_walk PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/tests)
lockstep_add_test(earley_test automata/earley_test.cc LIBS lockstep_grammar_walk)
lockstep_add_test(grammar_exactness_test decoder/grammar_exactness_test.cc LIBS lockstep_grammar_walk)
lockstep_add_test(grammar_json_test decoder/grammar_json_test.cc LIBS lockstep_grammar_test_util)
lockstep_add_test(grammar_generation_test decoder/grammar_generation_test.cc
  LIBS lockstep_grammar_test_util simdjson::simdjson)
lockstep_add_test(grammar_matcher_test decoder/grammar_matcher_test.cc)
# Fills within their limits: many rules, the nesting limit, bounded position keys.
lockstep_add_test(fill_limits_test decoder/fill_limits_test.cc)
# Triggered constraints (issue 7): formats on their families' vocabularies, exactness across
# triggers and end markers, generation checked by an independent parse and the validator, errors.
lockstep_add_test(structured_test decoder/structured_test.cc LIBS lockstep_grammar_walk)
# Counted repetitions of ambiguous or nullable bodies (schemas/grammars/pathological): results,
# masks against brute force, counters against automata, the per-byte item budget.
lockstep_add_test(earley_repeat_test automata/earley_repeat_test.cc LIBS lockstep_grammar_walk)
# Counted views: counter positions from one run of their unit over the vocabulary, against
# whole-trie walks and brute force.
lockstep_add_test(counted_view_test automata/counted_view_test.cc LIBS lockstep_grammar_walk)
