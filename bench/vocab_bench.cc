// Vocabulary load time, token-trie build time and canonical BPE encoding throughput on JSON
// text (the shipped corpus of real tool-call arguments).
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "automata/token/token_trie.h"
#include "bench/bench_util.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

const char* kNames[] = {"llama3", "gpt2", "qwen2.5", "mistral"};

void BM_VocabLoad(benchmark::State& state) {
  const char* name = kNames[state.range(0)];
  state.SetLabel(name);
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto v = Vocabulary::Load(name);
    lat.Add(Clock::now() - t0);
    if (!v.ok()) state.SkipWithError(v.status().ToString().c_str());
    benchmark::DoNotOptimize(v);
  }
  lat.Report(state);
}
BENCHMARK(BM_VocabLoad)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_TokenTrieBuild(benchmark::State& state) {
  auto v = *Vocabulary::Load("llama3");
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    TokenTrie trie(*v);
    lat.Add(Clock::now() - t0);
    benchmark::DoNotOptimize(trie.num_nodes());
    state.counters["nodes"] = static_cast<double>(trie.num_nodes());
  }
  lat.Report(state);
}
BENCHMARK(BM_TokenTrieBuild)->Unit(benchmark::kMillisecond)->Iterations(10);

// Encoding the JSON corpus; range(0) = 1 loads a fresh vocabulary before each pass (untimed), so
// every pass starts with a cold piece cache.
void BM_EncodeJson(benchmark::State& state) {
  const bool cold = state.range(0) == 1;
  std::vector<std::string> texts = JsonTexts();
  std::size_t bytes = 0;
  for (const auto& t : texts) bytes += t.size();
  auto v = *Vocabulary::Load("llama3");
  for (auto _ : state) {
    if (cold) {
      state.PauseTiming();
      v = *Vocabulary::Load("llama3");
      state.ResumeTiming();
    }
    for (const auto& t : texts) benchmark::DoNotOptimize(v->Encode(t));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes * state.iterations()));
  state.SetLabel(cold ? "llama3, cold cache" : "llama3, warm cache");
}
BENCHMARK(BM_EncodeJson)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(5);

}  // namespace
}  // namespace lockstep::bench
