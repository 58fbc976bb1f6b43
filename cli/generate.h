// `lockstep generate` and `lockstep train-ngram`: constrained generation with a sampler and a
// logits source, and the build-time training of the n-gram source.
#pragma once

namespace lockstep::cli {

int Generate(int argc, char** argv);
int TrainNgram(int argc, char** argv);

}  // namespace lockstep::cli
