// Grammar (context-free) constraints on the Llama-3 vocabulary, replaying the token sequences of
// ../shared/data/traces/llama3-glaive-dev.jsonl (real JSON outputs) through the shipped JSON
// grammar (schemas/grammars/json.gbnf):
//   - BM_GrammarTraceMask: time per mask (FillNextTokenBitmask) at every step of every trace,
//     p50/p90/p99/max, with the positions precomputed at compile time (precompute_masks) — the
//     serving configuration; BM_GrammarTraceMaskLazy: the same from a lazily filled grammar
//     (first visits compute their positions);
//   - BM_GrammarFirstMask: compile (parse + lower) plus the first mask, lazy positions;
//   - BM_GrammarPrecompute: compile with every position precomputed (2 threads);
//   - BM_GrammarBatchFill/threads: 64 matchers at 64 different trace positions filled into one
//     [64 x words] buffer by BatchMaskFiller with 1 and 2 threads;
//   - BM_GrammarTraceAccept: time per AcceptToken along the same traces (the Earley parser's
//     steps, no masks).
// Skips (with a message) when ../shared/data is not there.
// And, with no shared data needed:
//   - BM_PathologicalRepeat/<grammar>: the counted repetitions of ambiguous or nullable bodies of
//     schemas/grammars/pathological: AcceptString of 10 KB that belongs to the
//     language, then one mask fill, in µs per byte (LOCKSTEP_REPEAT_BENCH_BYTES sets the length,
//     to measure builds where 10 KB would take minutes).
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Traces {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::string grammar_text;
  std::vector<std::vector<TokenId>> traces;
  std::string error;
};

const Traces& Data() {
  static Traces* t = [] {
    auto* t = new Traces;
    t->vocab = *Vocabulary::Load("llama3");
    t->compiler = std::make_unique<GrammarCompiler>(t->vocab);
    t->grammar_text = ReadFile(std::string(LOCKSTEP_SOURCE_DATA_DIR) + "/grammars/json.gbnf");
    std::ifstream in(std::string(LOCKSTEP_SHARED_DATA_DIR) + "/traces/llama3-glaive-dev.jsonl");
    if (!in) {
      t->error = "../shared/data/traces/llama3-glaive-dev.jsonl not found";
      return t;
    }
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.contains("ids")) continue;
      t->traces.push_back(j["ids"].get<std::vector<TokenId>>());
    }
    return t;
  }();
  return *t;
}

std::shared_ptr<const CompiledGrammar> Compile(bool precompute) {
  CompileOptions o;
  o.precompute_masks = precompute;
  return *Data().compiler->CompileGrammar(Data().grammar_text, o);
}

// Replays every trace: fill, then accept the recorded token (and EOS at the end); every fill
// timed. Counts tokens the grammar rejected (must be 0: the traces are valid JSON).
// Thread CPU time: a fill's own cost, without the time the thread spent preempted.
Clock::duration ThreadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

void Replay(const std::shared_ptr<const CompiledGrammar>& g, Latencies* fills, long* rejected,
            Latencies* cpu = nullptr) {
  const Traces& d = Data();
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(d.vocab->logits_width()));
  for (const auto& ids : d.traces) {
    Matcher m(g);
    for (std::size_t i = 0; i <= ids.size(); ++i) {
      Clock::duration c0 = cpu ? ThreadCpu() : Clock::duration{};
      auto t0 = Clock::now();
      m.FillNextTokenBitmask(mask);
      auto t1 = Clock::now();
      fills->Add(t1 - t0);
      if (cpu) cpu->Add(ThreadCpu() - c0);
      benchmark::DoNotOptimize(mask.data());
      TokenId tok = i < ids.size() ? ids[i] : d.vocab->eos();
      if (!((mask[tok >> 5] >> (tok & 31)) & 1) || !m.AcceptToken(tok)) {
        ++*rejected;
        break;
      }
    }
  }
}

void BM_GrammarTraceMask(benchmark::State& state) {
  if (!Data().error.empty()) return state.SkipWithError(Data().error.c_str());
  auto g = Compile(true);
  Latencies fills;
  long rejected = 0;
  for (auto _ : state) Replay(g, &fills, &rejected);
  fills.Report(state);
  fills.ReportOver(state, "over_30us", 30);
  fills.ReportOver(state, "over_500us", 500);
  state.counters["rejected"] = static_cast<double>(rejected);
  state.counters["traces"] = static_cast<double>(Data().traces.size());
  auto st = g->Stats();
  state.counters["positions"] = st.positions;
  state.counters["signatures"] = st.signatures;
  state.counters["cache_MiB"] = st.mask_cache_bytes / 1048576.0;
}
BENCHMARK(BM_GrammarTraceMask)->Iterations(3)->Unit(benchmark::kMillisecond);

// The same replay timed in thread CPU time (preemption by other processes excluded); adds the
// clock reads' own ~0.1 µs to every sample.
void BM_GrammarTraceMaskCpu(benchmark::State& state) {
  if (!Data().error.empty()) return state.SkipWithError(Data().error.c_str());
  auto g = Compile(true);
  Latencies fills, cpu;
  long rejected = 0;
  for (auto _ : state) Replay(g, &fills, &rejected, &cpu);
  cpu.Report(state);
  cpu.ReportOver(state, "over_30us", 30);
  cpu.ReportOver(state, "over_500us", 500);
  state.counters["rejected"] = static_cast<double>(rejected);
}
BENCHMARK(BM_GrammarTraceMaskCpu)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_GrammarTraceMaskLazy(benchmark::State& state) {
  if (!Data().error.empty()) return state.SkipWithError(Data().error.c_str());
  Latencies fills;
  long rejected = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = Compile(false);
    state.ResumeTiming();
    Replay(g, &fills, &rejected);
  }
  fills.Report(state);
  state.counters["rejected"] = static_cast<double>(rejected);
}
BENCHMARK(BM_GrammarTraceMaskLazy)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_GrammarFirstMask(benchmark::State& state) {
  const Traces& d = Data();
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(d.vocab->logits_width()));
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto g = Compile(false);
    Matcher m(g);
    m.FillNextTokenBitmask(mask);
    lat.Add(Clock::now() - t0);
    benchmark::DoNotOptimize(mask.data());
  }
  lat.Report(state);
}
BENCHMARK(BM_GrammarFirstMask)->Iterations(30)->Unit(benchmark::kMillisecond);

void BM_GrammarPrecompute(benchmark::State& state) {
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto g = Compile(true);
    lat.Add(Clock::now() - t0);
    state.counters["positions"] = g->Stats().positions;
  }
  lat.Report(state);
}
BENCHMARK(BM_GrammarPrecompute)->Iterations(3)->Unit(benchmark::kMillisecond);

void BM_GrammarBatchFill(benchmark::State& state) {
  if (!Data().error.empty()) return state.SkipWithError(Data().error.c_str());
  const Traces& d = Data();
  const int threads = static_cast<int>(state.range(0));
  static std::shared_ptr<const CompiledGrammar> g = Compile(true);
  // 64 matchers, each advanced to a different point of a different trace.
  std::vector<Matcher> matchers;
  for (int i = 0; i < 64; ++i) {
    const auto& ids = d.traces[(i * 37) % d.traces.size()];
    Matcher m(g);
    std::size_t upto = ids.empty() ? 0 : (i * 13) % ids.size();
    for (std::size_t k = 0; k < upto; ++k) m.AcceptToken(ids[k]);
    matchers.push_back(std::move(m));
  }
  std::vector<Matcher*> ptrs;
  for (auto& m : matchers) ptrs.push_back(&m);
  const std::size_t stride = PaddedBitmaskWords(d.vocab->logits_width());
  std::vector<std::uint32_t> out(64 * stride);
  BatchMaskFiller filler(threads);
  filler.Fill(ptrs, out, stride);  // warm the caches
  Latencies lat;
  for (auto _ : state) {
    auto t0 = Clock::now();
    filler.Fill(ptrs, out, stride);
    lat.Add(Clock::now() - t0);
    benchmark::DoNotOptimize(out.data());
  }
  lat.Report(state);
}
BENCHMARK(BM_GrammarBatchFill)->Arg(1)->Arg(2)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GrammarTraceAccept(benchmark::State& state) {
  if (!Data().error.empty()) return state.SkipWithError(Data().error.c_str());
  const Traces& d = Data();
  static std::shared_ptr<const CompiledGrammar> g = Compile(false);
  Latencies lat;
  long rejected = 0;
  for (auto _ : state) {
    for (const auto& ids : d.traces) {
      Matcher m(g);
      for (TokenId id : ids) {
        auto t0 = Clock::now();
        const bool ok = m.AcceptToken(id);
        lat.Add(Clock::now() - t0);
        if (!ok) {
          ++rejected;
          break;
        }
      }
    }
  }
  lat.Report(state);
  state.counters["rejected"] = static_cast<double>(rejected);
}
BENCHMARK(BM_GrammarTraceAccept)->Iterations(3)->Unit(benchmark::kMillisecond);

// --- counted repetitions of ambiguous or nullable bodies --------------------------------------

// Whole copies of `unit` up to at least `bytes` bytes.
std::string Repeat(std::string_view unit, std::size_t bytes) {
  std::string s;
  while (s.size() < bytes) s += unit;
  return s;
}

struct Pathological {
  const char* name;                               // schemas/grammars/pathological/<name>.gbnf
  std::function<std::string(std::size_t)> input;  // a text of the language, about that long
};

const std::vector<Pathological>& PathologicalGrammars() {
  static const std::vector<Pathological> v = {
      {"plus_in_counter", [](std::size_t n) { return Repeat("lorem ipsum dolor sit amet, ", n); }},
      {"star_in_counter_2deep", [](std::size_t n) { return Repeat("lorem ipsum, ", n); }},
      {"star_in_counter_6deep", [](std::size_t n) { return Repeat("lorem ipsum, ", n); }},
      {"pieces_counted", [](std::size_t n) { return Repeat("ab", n); }},
      {"optional_counted", [](std::size_t n) { return Repeat("x", n); }},
      {"plus_of_choice_counted", [](std::size_t n) { return Repeat("a", n); }},
      {"large_min", [](std::size_t n) { return Repeat("lorem ipsum dolor sit amet, ", n); }},
      {"large_min_rule",
       [](std::size_t n) { return Repeat(Repeat("loremipsum", 90) + "((dolor))", n); }},
      {"rule_ambiguous_counted",
       [](std::size_t n) {
         return Repeat("(" + Repeat("ab(cd)", 198) + ")efgh" + Repeat("ij", 48), n);
       }},
      {"nested_mixed",
       [](std::size_t n) {
         return Repeat("abcdefghij1234567890123456789012345678901234567890", n);
       }},
      {"left_recursive_counted", [](std::size_t n) { return Repeat("abc,def,", n); }},
      {"nullable_rule_counted", [](std::size_t n) { return Repeat("((ab))cd", n); }},
  };
  return v;
}

std::size_t RepeatBenchBytes() {
  if (const char* s = std::getenv("LOCKSTEP_REPEAT_BENCH_BYTES"))
    return std::strtoul(s, nullptr, 10);
  return 10240;
}

// A fresh matcher per iteration (the grammar, with its mask caches, is shared): AcceptString of
// the whole text, then one mask fill, in thread CPU time (the machine's other processes left
// out). us_per_byte: both together over the text's length, median of the iterations.
void RunPathological(benchmark::State& state, const Pathological& p) {
  static const std::shared_ptr<const Vocabulary> vocab = *Vocabulary::Load("llama3");
  static const GrammarCompiler compiler(vocab);
  const std::string text = ReadFile(std::string(LOCKSTEP_SOURCE_DATA_DIR) +
                                    "/grammars/pathological/" + p.name + ".gbnf");
  auto g = compiler.CompileGrammar(text);
  if (!g.ok()) return state.SkipWithError(g.status().ToString().c_str());
  const std::string input = p.input(RepeatBenchBytes());
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(vocab->logits_width()));
  Latencies accept, fill;
  std::vector<double> per_byte;
  for (auto _ : state) {
    Matcher m(*g);
    const Clock::duration t0 = ThreadCpu();
    const bool ok = m.AcceptString(input);
    const Clock::duration t1 = ThreadCpu();
    m.FillNextTokenBitmask(mask);
    const Clock::duration t2 = ThreadCpu();
    benchmark::DoNotOptimize(mask.data());
    if (!ok) return state.SkipWithError(("refused: " + m.last_error().ToString()).c_str());
    accept.Add(t1 - t0);
    fill.Add(t2 - t1);
    per_byte.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count() /
                       static_cast<double>(input.size()));
  }
  accept.Report(state, "accept_");
  fill.Report(state, "fill_");
  std::sort(per_byte.begin(), per_byte.end());
  state.counters["bytes"] = static_cast<double>(input.size());
  state.counters["us_per_byte"] = per_byte.empty() ? 0 : per_byte[per_byte.size() / 2];
  state.counters["max_us_per_byte"] = per_byte.empty() ? 0 : per_byte.back();
}

const bool kPathologicalRegistered = [] {
  for (const Pathological& p : PathologicalGrammars()) {
    benchmark::RegisterBenchmark((std::string("BM_PathologicalRepeat/") + p.name).c_str(),
                                 [&p](benchmark::State& s) { RunPathological(s, p); })
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.5);
  }
  return true;
}();

}  // namespace
}  // namespace lockstep::bench
