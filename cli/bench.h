// `lockstep bench`: replays MaskBench-style files ({"schema", "tests": [{"valid", "data"}]})
// through the JSON Schema compiler and the matcher, timing the first mask of every schema and
// every mask of every instance.
#pragma once

namespace lockstep::cli {

int Bench(int argc, char** argv);

}  // namespace lockstep::cli
