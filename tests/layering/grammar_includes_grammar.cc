// Layering probe: grammar/ includes from itself and from the installed API.
#include "grammar/ir/grammar_ir.h"
#include "lockstep/status.h"
