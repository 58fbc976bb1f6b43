// `lockstep classify`: the exact label distribution of a finite constraint (choices or a small
// regex) under the model, for one prompt or a JSONL batch (soft labels).
#pragma once

namespace lockstep::cli {

int Classify(int argc, char** argv);

}  // namespace lockstep::cli
