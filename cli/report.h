// Terminal reports for the CLI: set bits of a mask and a text histogram of a distribution (the
// per-state token counts of `compile --stats`), so automata statistics can be looked at.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "lockstep/compiler.h"

namespace lockstep::cli {

std::int64_t CountBits(std::span<const std::uint32_t> words);
// Log-scale histogram of values on stdout, one bar per bucket.
void PrintHistogram(const std::vector<std::int64_t>& values);

}  // namespace lockstep::cli
