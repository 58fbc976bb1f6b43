# Context-free grammars: IR -> CfgProgram (rule DFAs, counters) -> Earley runtime with the
# adaptive token-mask cache (automata/cfg_grammar.h).
set(LOCKSTEP_CFG_SOURCES cfg_program.cc earley.cc cfg_grammar.cc cfg_compile.cc position_key.cc position_worker.cc
  state_fold.cc)
