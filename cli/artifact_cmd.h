// `lockstep compile ... -o FILE.lsg` (one constraint to a compiled artifact) and
// `lockstep compile --batch DIR -o OUTDIR` (every schema / grammar in DIR, with a progress bar
// on a terminal and a summary table). Artifacts: include/lockstep/artifact.h, docs/artifacts.md.
#pragma once

#include "cli/args.h"
#include "lockstep/compiler.h"

namespace lockstep::cli {

// compile (--regex RE | --grammar FILE | --schema FILE) -o FILE [--lazy] [--json]
int CompileToArtifact(const Args& args, const CompileOptions& options);
// compile --batch DIR -o OUTDIR [--lazy] [--json]
int CompileBatch(const Args& args, const CompileOptions& options);

}  // namespace lockstep::cli
