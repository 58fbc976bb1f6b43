// Latency counters and corpus readers for the benchmarks.
#include "bench/bench_util.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

namespace lockstep::bench {

void Latencies::Report(benchmark::State& state, const std::string& prefix) const {
  if (ns_.empty()) return;
  std::vector<double> v = ns_;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<std::size_t>(q * v.size()))] / 1000.0; };
  state.counters[prefix + "p50_us"] = at(0.50);
  state.counters[prefix + "p90_us"] = at(0.90);
  state.counters[prefix + "p99_us"] = at(0.99);
  state.counters[prefix + "max_us"] = v.back() / 1000.0;
  state.counters[prefix + "samples"] = static_cast<double>(v.size());
}

void Latencies::ReportOver(benchmark::State& state, const char* name, double us) const {
  std::size_t n = 0;
  for (double x : ns_) n += x > us * 1000.0;
  state.counters[name] = static_cast<double>(n);
}

std::vector<std::string> RegexCorpus() {
  std::vector<std::string> out;
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DATA_DIR) + "/regex/corpus.txt");
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') out.push_back(line);
  }
  return out;
}

std::vector<std::string> JsonTexts() {
  std::vector<std::string> out;
  std::ifstream in(std::string(LOCKSTEP_SOURCE_DATA_DIR) + "/corpus/json.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("text")) out.push_back(j["text"].get<std::string>());
  }
  return out;
}

}  // namespace lockstep::bench
