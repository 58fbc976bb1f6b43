// 64-bit mixing functions, shared by the hashes and the counter-based random streams of every
// layer: position keys and program fingerprints (automata/cfg/position_key.cc), the sampler's
// draws (decoder/sampling/sampler.cc) and UniformSource's logits (decoder/sources). Header-only
// and constexpr, so a call is the same few instructions as a local copy.
#pragma once

#include <cstdint>

namespace lockstep {

// SplitMix64's finaliser (Stafford's "Mix13"): a bijection on 64 bits in which every input bit
// affects every output bit.
constexpr std::uint64_t MixBits64(std::uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// SplitMix64 (Steele, Lea and Flood): the golden-ratio increment, then MixBits64. Its output for
// consecutive inputs is a good 64-bit random stream, so a draw can be a pure function of a
// counter (seed, sequence, step) instead of a generator's state.
constexpr std::uint64_t SplitMix64(std::uint64_t z) {
  return MixBits64(z + 0x9E3779B97F4A7C15ull);
}

}  // namespace lockstep
