# The byte automata: RegexAst -> byte NFA -> subset DFA -> minimal ByteDfa (automata/byte_dfa.h).
set(LOCKSTEP_DFA_SOURCES byte_nfa.cc dfa_builder.cc dfa_minimize.cc regex_compiler.cc)
