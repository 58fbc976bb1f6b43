// Layering probe: automata/ includes from itself, from grammar/ and from the installed API.
#include "automata/cfg/cfg_grammar.h"
#include "grammar/ir/grammar_ir.h"
#include "lockstep/compiler.h"
