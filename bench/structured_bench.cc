// Triggered constraints (lockstep/structured.h) on the Llama-3 vocabulary: the cost of a mask
// while the text is free.
//   - BM_StructuredFreeTextMask/<format>: time per mask (FillNextTokenBitmask) at every step of
//     free prose (the canonical tokens of kProse below, repeated, with "<" and "[" in it) under the
//     llama3 format (special-token trigger) and the hermes format (the text trigger <tool_call>,
//     tracked byte by byte); p50/p90/p99/max over the steps of the timed passes, after one
//     untimed pass (the masks of the few free-text states are then cached).
//   - BM_StructuredSwitchMask/<format>: the first mask after the trigger (the body's first mask),
//     on a fresh grammar each iteration.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/structured.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

const char kProse[] =
    "Let me think about this. The user wants the weather in Paris and a flight from JFK to "
    "LHR; if x < y then we need both calls [in order]. A tag like <b> or <tool is just text "
    "here, and so is [TOOL_CALLS without its bracket. I will check the forecast for three days, "
    "then book the cheapest economy seat under 500 dollars for two passengers next Monday.\n";

struct Setup {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::vector<ToolSpec> tools;
  std::vector<TokenId> prose;
};

const Setup& Data() {
  static Setup* s = [] {
    auto* s = new Setup;
    s->vocab = *Vocabulary::Load("llama3");
    s->compiler = std::make_unique<GrammarCompiler>(s->vocab);
    s->tools = {{"get_weather",
                 R"({"type":"object","properties":{"location":{"type":"string"},)"
                 R"("days":{"type":"integer","minimum":1,"maximum":14}},"required":["location"]})",
                 "", ""},
                {"book_flight",
                 R"({"type":"object","properties":{"origin":{"type":"string","pattern":"^[A-Z]{3}$"},)"
                 R"("destination":{"type":"string","pattern":"^[A-Z]{3}$"}},)"
                 R"("required":["origin","destination"]})",
                 "", ""}};
    std::string text;
    for (int i = 0; i < 8; ++i) text += kProse;
    s->prose = *s->vocab->Encode(text);
    return s;
  }();
  return *s;
}

std::shared_ptr<const CompiledGrammar> Compile(const char* format) {
  const Setup& d = Data();
  auto f = LoadFormat(format);
  if (!f.ok()) return nullptr;
  auto g = CompileStructured(*d.compiler, *f, d.tools);
  return g.ok() ? *g : nullptr;
}

void FreeTextMask(benchmark::State& state, const char* format) {
  const Setup& d = Data();
  auto g = Compile(format);
  if (!g) {
    state.SkipWithError("compile failed");
    return;
  }
  std::vector<std::uint32_t> words(BitmaskWords(d.vocab->logits_width()));
  Latencies lat;
  bool warm = false;
  for (auto _ : state) {
    Matcher m(g);
    for (TokenId t : d.prose) {
      auto t0 = Clock::now();
      m.FillNextTokenBitmask(words);
      auto t1 = Clock::now();
      if (warm) lat.Add(t1 - t0);
      if (!m.AcceptToken(t)) {
        state.SkipWithError("prose rejected");
        return;
      }
    }
    benchmark::DoNotOptimize(words.data());
    warm = true;
  }
  lat.Report(state);
}

void SwitchMask(benchmark::State& state, const char* format, TokenId trigger_or_none,
                const char* trigger_text) {
  const Setup& d = Data();
  std::vector<std::uint32_t> words(BitmaskWords(d.vocab->logits_width()));
  Latencies lat;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = Compile(format);
    Matcher m(g);
    m.AcceptString("Sure. ");
    m.FillNextTokenBitmask(words);
    bool ok = trigger_or_none != kNoToken ? m.AcceptToken(trigger_or_none)
                                          : m.AcceptString(trigger_text);
    state.ResumeTiming();
    if (!ok) {
      state.SkipWithError("trigger rejected");
      return;
    }
    auto t0 = Clock::now();
    m.FillNextTokenBitmask(words);
    lat.Add(Clock::now() - t0);
  }
  lat.Report(state);
}

void BM_StructuredFreeTextMask_llama3(benchmark::State& s) { FreeTextMask(s, "llama3"); }
void BM_StructuredFreeTextMask_hermes(benchmark::State& s) { FreeTextMask(s, "hermes"); }
void BM_StructuredSwitchMask_llama3(benchmark::State& s) {
  SwitchMask(s, "llama3", Data().vocab->FindToken("<|reserved_special_token_5|>"), "");
}
void BM_StructuredSwitchMask_hermes(benchmark::State& s) {
  SwitchMask(s, "hermes", kNoToken, "<tool_call>");
}
BENCHMARK(BM_StructuredFreeTextMask_llama3)->Iterations(6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StructuredFreeTextMask_hermes)->Iterations(6)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_StructuredSwitchMask_llama3)->Iterations(10)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StructuredSwitchMask_hermes)->Iterations(10)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace lockstep::bench
