// Decoder kernels and sampling on a 128k-wide logits vector: mask application (scalar and
// AVX2), one draw per configuration under a dense and a sparse mask, the full sampling pipeline
// on realistic peaked logits next to a plain sort-the-vocabulary reference, and the n-gram
// source.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_util.h"
#include "decoder/sampling/mask_kernels.h"
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

// Peaked logits shaped like a language model's: a background of N(0, 2) over the vocabulary plus
// a head of 8 tokens (random ids) at 14, 13.5, 13, 12, 11, 10, 9, 8. At T 0.7 the head holds about
// 99% of the mass and top-p 0.9 keeps 3 tokens; the background still has to be exponentiated and
// summed. `flat` drops the head (the worst case for top-p: it keeps tens of thousands).
std::vector<float> PeakedLogits(std::uint64_t seed, bool flat) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 2);
  std::vector<float> v(kWidth);
  for (auto& x : v) x = d(rng);
  if (flat) return v;
  const float head[] = {14, 13.5f, 13, 12, 11, 10, 9, 8};
  for (float h : head) {
    TokenId id;
    do {
      id = static_cast<TokenId>(rng() % kWidth);
    } while (id % 97 == 0);  // keep the head allowed by NearlyAllMask
    v[id] = h;
  }
  return v;
}

// Every token but one in 97 (a grammar state that forbids a few tokens): the dense-mask path.
std::vector<std::uint32_t> NearlyAllMask() {
  std::vector<std::uint32_t> m(BitmaskWords(kWidth), 0);
  for (TokenId i = 0; i < kWidth; ++i) {
    if (i % 97 != 0) m[i >> 5] |= 1u << (i & 31);
  }
  return m;
}

// The textbook sampler the pipeline replaces: mask, softmax over the whole vocabulary in float
// with std::exp, std::sort all (probability, id) pairs, cumulate to top-p, draw. Buffers are
// allocated once, outside the timed region, like the Sampler's.
class SortReference {
 public:
  explicit SortReference(std::int32_t width) : pairs_(width) {}
  TokenId Sample(std::vector<float>& x, const std::uint32_t* mask, float temperature, float top_p,
                 double u) {
    const std::int32_t n = static_cast<std::int32_t>(x.size());
    float max = -std::numeric_limits<float>::infinity();
    for (std::int32_t i = 0; i < n; ++i) {
      if (!(mask[i >> 5] >> (i & 31) & 1)) x[i] = -std::numeric_limits<float>::infinity();
      max = std::max(max, x[i]);
    }
    double total = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      x[i] = std::exp((x[i] - max) / temperature);
      total += x[i];
    }
    for (std::int32_t i = 0; i < n; ++i) pairs_[i] = {static_cast<float>(x[i] / total), i};
    std::sort(pairs_.begin(), pairs_.end(), [](const auto& a, const auto& b) {
      return a.first > b.first || (a.first == b.first && a.second < b.second);
    });
    double cum = 0;
    std::int32_t kept = 0;
    while (kept < n && cum < top_p) cum += pairs_[kept++].first;
    const double target = u * cum;
    double run = 0;
    for (std::int32_t j = 0; j < kept; ++j) {
      run += pairs_[j].first;
      if (run > target) return pairs_[j].second;
    }
    return pairs_[kept - 1].second;
  }

 private:
  std::vector<std::pair<float, TokenId>> pairs_;
};

// range(0): 0 full pipeline (mask, T 0.7, top-p 0.9), 1 greedy with mask, 2 full pipeline plus
// bias, penalties over a 64-token history and min-p 0.05, 3 the sort reference (mask, T 0.7,
// top-p 0.9). range(1): 0 peaked logits, 1 flat.
void BM_Pipeline(benchmark::State& state) {
  const char* names[] = {"mask+T0.7+top-p0.9", "greedy+mask", "all stages", "sort reference"};
  const bool flat = state.range(1) != 0;
  state.SetLabel(std::string(names[state.range(0)]) + (flat ? ", flat" : ", peaked"));
  SamplerConfig c{.temperature = 0.7f, .top_p = 0.9f};
  if (state.range(0) == 1) c.temperature = 0;
  if (state.range(0) == 2) {
    c.min_p = 0.05f;
    c.logit_bias = {{13, -100.0f}, {1000, 2.0f}};
    c.repetition_penalty = 1.1f;
    c.repetition_window = 64;
    c.frequency_penalty = 0.1f;
    c.presence_penalty = 0.1f;
  }
  Sampler sampler(c, kWidth);
  SortReference reference(kWidth);
  const auto base = PeakedLogits(3, flat);
  const auto mask = NearlyAllMask();
  std::vector<TokenId> history(256);
  std::mt19937_64 rng(5);
  for (auto& t : history) t = static_cast<TokenId>(rng() % kWidth);
  std::vector<float> logits(kWidth);
  std::uint64_t step = 0;
  Latencies lat;
  for (auto _ : state) {
    state.PauseTiming();
    logits = base;
    state.ResumeTiming();
    const auto t0 = Clock::now();
    if (state.range(0) == 3) {
      benchmark::DoNotOptimize(
          reference.Sample(logits, mask.data(), 0.7f, 0.9f, CounterUniform(0, 0, step++)));
    } else {
      benchmark::DoNotOptimize(sampler.Sample(logits, mask.data(), history, 0, step++));
    }
    lat.Add(Clock::now() - t0);
  }
  lat.Report(state);
}
BENCHMARK(BM_Pipeline)->ArgsProduct({{0, 1, 2, 3}, {0, 1}})->Unit(benchmark::kMicrosecond);

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
