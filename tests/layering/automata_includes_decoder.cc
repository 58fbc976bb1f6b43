// Layering probe: automata/ may not include from decoder/; this must not compile.
#include "decoder/sampling/mask_kernels.h"
