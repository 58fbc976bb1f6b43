# The grammar front ends: GBNF and Lark text -> Grammar IR (grammar/grammar_ir.h), the GBNF
# printer and the normalisation passes. grammar_parser_x3.cc is the only Boost.Spirit X3 unit.
set(LOCKSTEP_GRAMMAR_SOURCES grammar_parser_x3.cc grammar_printer.cc grammar_normalize.cc)
