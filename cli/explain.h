// `lockstep explain`: the sampler's distribution after every stage, on given logits or along a
// real constrained generation (see explain.cc).
#pragma once

namespace lockstep::cli {

int Explain(int argc, char** argv);

}  // namespace lockstep::cli
