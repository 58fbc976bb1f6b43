// Shared pieces of the benchmarks: latency recording with p50/p99/max counters, and the
// corpora (regexes, JSON texts) read from the bundled data.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>
#include <vector>

namespace lockstep::bench {

using Clock = std::chrono::steady_clock;

// Collects one latency per operation and reports p50/p90/p99/max (µs) as benchmark counters.
class Latencies {
 public:
  void Add(Clock::duration d) { ns_.push_back(std::chrono::duration<double, std::nano>(d).count()); }
  // Counters p50_us, p90_us, p99_us, max_us and samples, each name after `prefix`.
  void Report(benchmark::State& state, const std::string& prefix = "") const;
  // Also reports how many samples exceeded `us` microseconds, as counter `name`.
  void ReportOver(benchmark::State& state, const char* name, double us) const;
  std::size_t size() const { return ns_.size(); }

 private:
  std::vector<double> ns_;
};

std::vector<std::string> RegexCorpus();         // schemas/regex/corpus.txt
std::vector<std::string> JsonTexts();           // schemas/corpus/json.jsonl "text" fields

}  // namespace lockstep::bench
