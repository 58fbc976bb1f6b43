// Mask latency on the Llama-3 vocabulary over the shipped regex corpus: time per mask along
// generation walks (cold: a fresh grammar, so first visits compute their masks; warm: cached),
// and time to first mask (compile + first fill), each as p50/p90/p99/max.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <vector>

#include "automata/token/token_dfa.h"
#include "bench/bench_util.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

struct Setup {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::vector<std::string> regexes;
};

const Setup& Llama3() {
  static Setup* s = [] {
    auto* s = new Setup;
    s->vocab = *Vocabulary::Load("llama3");
    s->compiler = std::make_unique<GrammarCompiler>(s->vocab);
    s->regexes = RegexCorpus();
    return s;
  }();
  return *s;
}

// One generation-like walk: fill, pick an allowed token (EOS when the match may end, after a
// few steps), accept; every fill timed.
void Walk(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng,
          std::vector<std::uint32_t>& mask, Latencies* fills) {
  Matcher m(g);
  std::vector<TokenId> allowed;
  TokenId eos = g->vocabulary().eos();
  for (int step = 0; step < 48 && !m.IsTerminated(); ++step) {
    auto t0 = Clock::now();
    m.FillNextTokenBitmask(mask);
    auto t1 = Clock::now();
    if (fills) fills->Add(t1 - t0);
    benchmark::DoNotOptimize(mask.data());
    if (m.CanEnd() && step >= 6) {
      m.AcceptToken(eos);
      break;
    }
    allowed.clear();
    for (std::size_t w = 0; w < mask.size(); ++w) {
      for (std::uint32_t b = mask[w]; b; b &= b - 1) allowed.push_back(w * 32 + __builtin_ctz(b));
    }
    if (allowed.empty()) break;
    m.AcceptToken(allowed[rng() % allowed.size()]);
  }
}

void BM_MaskFillRegexWarm(benchmark::State& state) {
  const Setup& s = Llama3();
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  for (const auto& re : s.regexes) grammars.push_back(*s.compiler->CompileRegex(re));
  std::vector<std::uint32_t> mask(BitmaskWords(s.vocab->logits_width()));
  {  // warm the caches with the same walks
    std::mt19937_64 rng(1);
    for (auto& g : grammars) Walk(g, rng, mask, nullptr);
  }
  Latencies lat;
  for (auto _ : state) {
    std::mt19937_64 rng(1);
    for (auto& g : grammars) Walk(g, rng, mask, &lat);
  }
  lat.Report(state);
}
BENCHMARK(BM_MaskFillRegexWarm)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_MaskFillRegexCold(benchmark::State& state) {
  const Setup& s = Llama3();
  std::vector<std::uint32_t> mask(BitmaskWords(s.vocab->logits_width()));
  Latencies lat;
  for (auto _ : state) {
    std::mt19937_64 rng(1);
    for (const auto& re : s.regexes) {
      state.PauseTiming();
      auto g = *s.compiler->CompileRegex(re);
      state.ResumeTiming();
      Walk(g, rng, mask, &lat);
    }
  }
  lat.Report(state);
}
BENCHMARK(BM_MaskFillRegexCold)->Unit(benchmark::kMillisecond)->Iterations(3);

void BM_TimeToFirstMask(benchmark::State& state) {
  const Setup& s = Llama3();
  std::vector<std::uint32_t> mask(BitmaskWords(s.vocab->logits_width()));
  Latencies lat;
  for (auto _ : state) {
    for (const auto& re : s.regexes) {
      auto t0 = Clock::now();
      auto g = s.compiler->CompileRegex(re);
      Matcher m(*g);
      m.FillNextTokenBitmask(mask);
      lat.Add(Clock::now() - t0);
      benchmark::DoNotOptimize(mask.data());
    }
  }
  lat.Report(state);
}
BENCHMARK(BM_TimeToFirstMask)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_AcceptToken(benchmark::State& state) {
  const Setup& s = Llama3();
  auto g = *s.compiler->CompileRegex(R"([a-z]{2,12}@[a-z]{2,10}\.(com|org|net))");
  auto ids = *s.vocab->Encode("someone@example.org", EncodeOptions{false});
  Latencies lat;
  for (auto _ : state) {
    Matcher m(g);
    for (TokenId id : ids) {
      auto t0 = Clock::now();
      bool ok = m.AcceptToken(id);
      lat.Add(Clock::now() - t0);
      benchmark::DoNotOptimize(ok);
    }
  }
  lat.Report(state);
}
BENCHMARK(BM_AcceptToken)->Iterations(20000);

}  // namespace
}  // namespace lockstep::bench
