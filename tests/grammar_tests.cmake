# Tests owned by the grammar front ends (tests/grammar): GBNF and Lark parsers, the GBNF printer
# and round trip, nullable analysis and normalisation (checked by an independent matcher).
lockstep_add_test(grammar_parser_test grammar/grammar_parser_test.cc)
lockstep_add_test(grammar_printer_test grammar/grammar_printer_test.cc)
lockstep_add_test(grammar_normalize_test grammar/grammar_normalize_test.cc)
