// Terminal reports for the CLI: set bits of a mask and a text histogram of a distribution (the
// per-state token counts of `compile --stats`), so automata statistics can be looked at.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/compiler.h"

namespace lockstep::cli {

using Clock = std::chrono::steady_clock;
// Milliseconds from `t0` to now.
double MsSince(Clock::time_point t0);

std::int64_t CountBits(std::span<const std::uint32_t> words);
// Log-scale histogram of values on stdout, one bar per bucket.
void PrintHistogram(const std::vector<std::int64_t>& values);
// `j` as one line of JSON (--json output), invalid UTF-8 in its strings replaced by U+FFFD.
std::string JsonLine(const nlohmann::ordered_json& j);

}  // namespace lockstep::cli
