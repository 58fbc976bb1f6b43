// Decoder kernels and sampling on a 128k-wide logits vector: mask application (scalar and
// AVX2), one draw per configuration under a dense and a sparse mask, and the n-gram source.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench/bench_util.h"
#include "decoder/mask_kernels.h"
#include "lockstep/ngram_model.h"
#include "lockstep/sampler.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

constexpr std::int32_t kWidth = 128256;

std::vector<float> RandomLogits(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> v(kWidth);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<std::uint32_t> Mask(int allowed) {
  std::vector<std::uint32_t> m(BitmaskWords(kWidth), 0);
  std::mt19937_64 rng(7);
  if (allowed >= kWidth) {
    for (TokenId i = 0; i < kWidth; ++i) m[i >> 5] |= 1u << (i & 31);
  } else {
    for (int k = 0; k < allowed; ++k) {
      TokenId i = static_cast<TokenId>(rng() % kWidth);
      m[i >> 5] |= 1u << (i & 31);
    }
  }
  return m;
}

void BM_ApplyMask(benchmark::State& state) {
  auto isa = state.range(0) ? kernels::Isa::kAvx2 : kernels::Isa::kScalar;
  if (!kernels::ForceIsa(isa)) return state.SkipWithError("CPU lacks this ISA");
  state.SetLabel(kernels::IsaName(isa));
  auto logits = RandomLogits(1);
  auto mask = Mask(kWidth / 2);
  for (auto _ : state) {
    kernels::ApplyMask(logits.data(), mask.data(), kWidth);
    benchmark::ClobberMemory();
  }
  kernels::ForceIsa(kernels::Isa::kAuto);
}
BENCHMARK(BM_ApplyMask)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// range(0): 0 greedy, 1 T=1, 2 top-k 40, 3 top-p 0.9; range(1): allowed tokens.
void BM_Sample(benchmark::State& state) {
  SamplerConfig c;
  const char* names[] = {"greedy", "T=1", "top-k 40", "top-p 0.9"};
  switch (state.range(0)) {
    case 0: c.temperature = 0; break;
    case 1: break;
    case 2: c.top_k = 40; break;
    case 3: c.top_p = 0.9f; break;
  }
  state.SetLabel(std::string(names[state.range(0)]) + ", " + std::to_string(state.range(1)) +
                 " allowed");
  Sampler sampler(c, kWidth);
  auto base = RandomLogits(2);
  auto mask = Mask(static_cast<int>(state.range(1)));
  std::vector<float> logits(kWidth);
  std::uint64_t step = 0;
  Latencies lat;
  for (auto _ : state) {
    state.PauseTiming();
    logits = base;
    state.ResumeTiming();
    auto t0 = Clock::now();
    benchmark::DoNotOptimize(sampler.Sample(logits, mask.data(), 0, step++));
    lat.Add(Clock::now() - t0);
  }
  lat.Report(state);
}
BENCHMARK(BM_Sample)->ArgsProduct({{0, 1, 2, 3}, {kWidth, 10}})->Unit(benchmark::kMicrosecond);

void BM_NgramLogits(benchmark::State& state) {
  auto vocab = *Vocabulary::Load("llama3");
  static auto* model = new NgramModel(std::move(NgramModel::TrainFromCorpus(
      *vocab, DefaultNgramCorpus(LOCKSTEP_SOURCE_DATA_DIR), 4)).value());
  std::vector<TokenId> ctx = *vocab->Encode("{\"name\": \"get_weather\", \"arguments\": {\"");
  std::vector<float> out(model->width());
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    model->Logits(ctx, out);
    lat.Add(Clock::now() - t0);
    benchmark::DoNotOptimize(out.data());
  }
  lat.Report(state);
}
BENCHMARK(BM_NgramLogits)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lockstep::bench
