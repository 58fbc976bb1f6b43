// Layering probe: grammar/ may not include from automata/; this must not compile.
#include "automata/cfg/cfg_grammar.h"
