// Per-state mask sizes and text histograms for `lockstep compile --stats`.
#include "cli/report.h"

#include <algorithm>
#include <cstdio>

namespace lockstep::cli {

std::int64_t CountBits(std::span<const std::uint32_t> words) {
  std::int64_t n = 0;
  for (std::uint32_t w : words) n += __builtin_popcount(w);
  return n;
}

void PrintHistogram(const std::vector<std::int64_t>& values) {
  if (values.empty()) return;
  // Buckets: 0, 1, 2-3, 4-7, ... (powers of two).
  std::vector<std::int64_t> buckets(40, 0);
  for (std::int64_t v : values) {
    int b = v <= 0 ? 0 : 1 + (63 - __builtin_clzll(static_cast<unsigned long long>(v)));
    ++buckets[b];
  }
  int last = 0;
  for (int b = 0; b < 40; ++b) if (buckets[b]) last = b;
  std::int64_t top = *std::max_element(buckets.begin(), buckets.end());
  std::printf("allowed tokens per state (states per bucket):\n");
  for (int b = 0; b <= last; ++b) {
    long long lo = b == 0 ? 0 : (1LL << (b - 1));
    long long hi = b == 0 ? 0 : (1LL << b) - 1;
    int width = static_cast<int>(40 * buckets[b] / top);
    if (buckets[b] && !width) width = 1;
    std::printf("  %7lld-%-7lld |%s %lld\n", lo, hi, std::string(width, '#').c_str(),
                static_cast<long long>(buckets[b]));
  }
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string JsonLine(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lockstep::cli
