// `lockstep validate`: JSON Schema validation of JSON / NDJSON instances (exit 0 / 1 / 2).
#pragma once

namespace lockstep::cli {

int Validate(int argc, char** argv);

}  // namespace lockstep::cli
