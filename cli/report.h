// Terminal reports for the CLI: per-state token counts of a compiled grammar and a text
// histogram of a distribution, so automata statistics can be looked at, not only read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/compiler.h"

namespace lockstep::cli {

// Allowed tokens in the mask of every live DFA state (index s-1 for state s).
std::vector<std::int64_t> CountAllowedPerState(const CompiledGrammar& grammar);
std::int64_t CountBits(std::span<const std::uint32_t> words);
// Log-scale histogram of values on stdout, one bar per bucket.
void PrintHistogram(const std::vector<std::int64_t>& values);

}  // namespace lockstep::cli
