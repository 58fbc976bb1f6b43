// JSON Schema on the JSONSchemaBench dev set (../shared/data/jsonschemabench-dev/maskbench, the
// Glaiveai2K tool-call schemas) and the Llama-3 traces of its valid instances
// (../shared/data/traces/llama3-glaive-dev.jsonl), one thread:
//   - BM_SchemaValidate: validator throughput (simdjson parse + validate) over every test instance
//     of the dev set, in MB/s of instance text; counters check the verdicts against the labels;
//   - BM_SchemaFirstMask: time to first mask = compile the schema from its text + fill the first
//     mask (lazy positions), p50/p99/max over the dev-set schemas. /0: positions not shared
//     between grammars (every schema walks its own: a cold process; three passes give the same
//     work); /1: shared through the vocabulary's store, one pass, so each schema finds only what
//     the schemas compiled before it left there (a server that has seen other tool schemas);
//   - BM_SchemaTraceMask: time per mask while replaying every valid instance's trace through its
//     own schema's grammar (compiled once per schema, lazy: first visits of a grammar position
//     compute it), p50/p99/max, plus fills over 20 and 250 µs and traces rejected (traces whose key
//     order differs from the schema's declared order are rejected by the formatting policy);
//     /0 without, /1 with positions shared between grammars (one pass over the schemas in order);
//   - BM_SchemaFirstMaskPrecomputed: time to first mask with every position computed at compile
//     time (precompute_masks, one thread): compile + precompute + first fill, one pass over the
//     dev-set schemas in order, by a GrammarCompiler of its own (an empty position store, as in a
//     fresh process; the process-wide lowered format automata are built by the benchmarks before);
//   - BM_SchemaTraceMaskPrecomputed: the replay with every position computed at compile time
//     (precompute_masks, one thread), the serving configuration for a schema used many times.
//     Three passes over the same grammars: the second and third restore the finished masks the
//     first one cached, so the first pass alone is reported too (pass1_*), the figure for a
//     schema's first requests;
//   - BM_SchemaPrecomputedWarm: the precomputed configuration end to end in a process that has
//     met the same programs before: time to first mask (first_*) and time per mask of the new
//     grammar's first replay.
// Skips (with a message) when ../shared/data is not there.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_grammar_peer.h"
#include "bench/bench_util.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/artifact.h"
#include "lockstep/batch.h"
#include "lockstep/bitmask.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep::bench {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct DevSet {
  struct Entry {
    std::string file;
    std::string schema_text;
    std::vector<std::pair<std::string, bool>> instances;  // compact text, valid
    std::vector<std::vector<TokenId>> traces;            // valid instances, Llama-3 ids
  };
  std::vector<Entry> entries;
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::string error;
};

const DevSet& Data() {
  static DevSet* d = [] {
    auto* d = new DevSet;
    const std::string root = LOCKSTEP_SHARED_DATA_DIR;
    const fs::path dir = root + "/jsonschemabench-dev/maskbench";
    if (!fs::is_directory(dir)) {
      d->error = "../shared/data/jsonschemabench-dev/maskbench not found";
      return d;
    }
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::map<std::string, std::size_t> by_name;
    for (const fs::path& p : files) {
      std::ifstream in(p, std::ios::binary);
      json j = json::parse(in, nullptr, false);
      if (j.is_discarded() || !j.contains("schema")) continue;
      DevSet::Entry e;
      e.file = p.filename().string();
      e.schema_text = j["schema"].dump();
      for (const json& t : j.value("tests", json::array())) {
        e.instances.emplace_back(t["data"].dump(), t.value("valid", false));
      }
      by_name[e.file] = d->entries.size();
      d->entries.push_back(std::move(e));
    }
    std::ifstream tin(root + "/traces/llama3-glaive-dev.jsonl");
    std::string line;
    while (std::getline(tin, line)) {
      json j = json::parse(line, nullptr, false);
      if (j.is_discarded()) continue;
      auto it = by_name.find(j.value("file", ""));
      if (it == by_name.end()) continue;
      d->entries[it->second].traces.push_back(j["ids"].get<std::vector<TokenId>>());
    }
    d->vocab = *Vocabulary::Load("llama3");
    d->compiler = std::make_unique<GrammarCompiler>(d->vocab);
    return d;
  }();
  return *d;
}

void BM_SchemaValidate(benchmark::State& state) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  std::vector<std::unique_ptr<schema::Validator>> validators;
  for (const auto& e : d.entries) {
    auto s = schema::Schema::Load(e.schema_text);
    if (!s.ok()) {
      validators.push_back(nullptr);
      continue;
    }
    schema::ValidateOptions vo;
    vo.format_assertion = true;  // the dev set's labels treat formats as assertions
    auto v = schema::Validator::Create(*s, vo);
    validators.push_back(v.ok() ? std::make_unique<schema::Validator>(std::move(*v)) : nullptr);
  }
  double bytes = 0;
  long wrong = 0, instances = 0, unusable = 0;
  for (auto _ : state) {
    for (std::size_t i = 0; i < d.entries.size(); ++i) {
      if (!validators[i]) {
        ++unusable;
        continue;
      }
      for (const auto& [text, valid] : d.entries[i].instances) {
        Result<bool> r = validators[i]->ValidateText(text);
        bytes += static_cast<double>(text.size());
        ++instances;
        if (!r.ok() || *r != valid) ++wrong;
      }
    }
  }
  state.counters["MB_per_s"] = benchmark::Counter(bytes / 1e6, benchmark::Counter::kIsRate);
  state.counters["instances"] = static_cast<double>(instances) / state.iterations();
  state.counters["wrong_verdicts"] = static_cast<double>(wrong);
  state.counters["unusable_schemas"] = static_cast<double>(unusable) / state.iterations();
}
BENCHMARK(BM_SchemaValidate)->Iterations(5)->Unit(benchmark::kMillisecond)->UseRealTime();

// Compiles every dev-set schema and fills its first mask, timing both; `own_compiler`: by a
// GrammarCompiler of each iteration's own (its own trie, so an empty position store).
void FirstMask(benchmark::State& state, const CompileOptions& options, bool own_compiler) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(d.vocab->logits_width()));
  Latencies lat;
  long failed = 0;
  for (auto _ : state) {
    std::unique_ptr<GrammarCompiler> own;
    if (own_compiler) own = std::make_unique<GrammarCompiler>(d.vocab);
    const GrammarCompiler& compiler = own ? *own : *d.compiler;
    for (const auto& e : d.entries) {
      auto t0 = Clock::now();
      auto g = compiler.CompileSchema(e.schema_text, options);
      if (!g.ok()) {
        ++failed;
        continue;
      }
      Matcher m(*g);
      m.FillNextTokenBitmask(mask);
      lat.Add(Clock::now() - t0);
      benchmark::DoNotOptimize(mask.data());
    }
  }
  lat.Report(state);
  lat.ReportOver(state, "over_5ms", 5000);
  state.counters["schemas"] = static_cast<double>(lat.size()) / state.iterations();
  state.counters["failed"] = static_cast<double>(failed) / state.iterations();
}

void BM_SchemaFirstMask(benchmark::State& state) {
  CompileOptions options;
  options.share_positions = state.range(0) != 0;
  FirstMask(state, options, false);
}
BENCHMARK(BM_SchemaFirstMask)->Arg(0)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SchemaFirstMask)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_SchemaFirstMaskPrecomputed(benchmark::State& state) {
  CompileOptions options;
  options.precompute_masks = true;
  options.precompute_threads = 1;
  FirstMask(state, options, true);
}
BENCHMARK(BM_SchemaFirstMaskPrecomputed)->Iterations(1)->Unit(benchmark::kMillisecond);

// Feeds trace `ids` then EOS to a fresh Matcher of `g`, timing every fill into `fills` (and
// `also`); false when a token is not in its mask or not accepted (the trace is rejected).
bool ReplayTrace(const std::shared_ptr<const CompiledGrammar>& g, const std::vector<TokenId>& ids,
                 TokenId eos, std::vector<std::uint32_t>& mask, Latencies& fills,
                 Latencies* also = nullptr) {
  Matcher m(g);
  for (std::size_t k = 0; k <= ids.size(); ++k) {
    auto t0 = Clock::now();
    m.FillNextTokenBitmask(mask);
    const Clock::duration took = Clock::now() - t0;
    fills.Add(took);
    if (also != nullptr) also->Add(took);
    benchmark::DoNotOptimize(mask.data());
    const TokenId tok = k < ids.size() ? ids[k] : eos;
    if (!((mask[tok >> 5] >> (tok & 31)) & 1) || !m.AcceptToken(tok)) return false;
  }
  return true;
}

void TraceMask(benchmark::State& state, bool precompute, bool share) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  CompileOptions options;
  options.share_positions = share;
  options.precompute_masks = precompute;
  options.precompute_threads = 1;
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
  for (const auto& e : d.entries) {
    auto g = e.traces.empty() ? Result<std::shared_ptr<const CompiledGrammar>>(nullptr)
                              : d.compiler->CompileSchema(e.schema_text, options);
    grammars.push_back(g.ok() ? *g : nullptr);
  }
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(d.vocab->logits_width()));
  Latencies fills, first_pass;
  long rejected = 0, traces = 0, skipped = 0;
  bool first = true;
  for (auto _ : state) {
    for (std::size_t i = 0; i < d.entries.size(); ++i) {
      for (const auto& ids : d.entries[i].traces) {
        if (!grammars[i]) {
          ++skipped;
          continue;
        }
        ++traces;
        if (!ReplayTrace(grammars[i], ids, d.vocab->eos(), mask, fills,
                         first ? &first_pass : nullptr)) {
          ++rejected;
        }
      }
    }
    first = false;
  }
  fills.Report(state);
  fills.ReportOver(state, "over_20us", 20);
  fills.ReportOver(state, "over_250us", 250);
  if (state.iterations() > 1) {
    first_pass.Report(state, "pass1_");
    first_pass.ReportOver(state, "pass1_over_20us", 20);
  }
  state.counters["traces"] = static_cast<double>(traces) / state.iterations();
  state.counters["rejected"] = static_cast<double>(rejected) / state.iterations();
  state.counters["skipped_no_grammar"] = static_cast<double>(skipped) / state.iterations();
}

void BM_SchemaTraceMask(benchmark::State& state) { TraceMask(state, false, state.range(0) != 0); }
BENCHMARK(BM_SchemaTraceMask)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);
void BM_SchemaTraceMaskPrecomputed(benchmark::State& state) { TraceMask(state, true, true); }
BENCHMARK(BM_SchemaTraceMaskPrecomputed)->Iterations(3)->Unit(benchmark::kMillisecond);

// One configuration end to end, in a process that has met the dev set's programs before (a
// server whose tool schemas come again): every schema precomputed once by a GrammarCompiler of
// its own (untimed), then each compiled again with precompute_masks (time to first mask:
// compile + precompute + first fill, counters first_*) and its traces replayed through that new
// grammar (time per mask: p50_us ... max_us, every fill of the grammar's first replay).
void BM_SchemaPrecomputedWarm(benchmark::State& state) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  CompileOptions options;
  options.precompute_masks = true;
  options.precompute_threads = 1;
  std::vector<std::uint32_t> mask(PaddedBitmaskWords(d.vocab->logits_width()));
  Latencies first, fills;
  long rejected = 0, from_tables = 0;
  for (auto _ : state) {
    GrammarCompiler compiler(d.vocab);
    for (const auto& e : d.entries) (void)compiler.CompileSchema(e.schema_text, options);
    for (const auto& e : d.entries) {
      auto t0 = Clock::now();
      auto g = compiler.CompileSchema(e.schema_text, options);
      if (!g.ok()) continue;
      Matcher m(*g);
      m.FillNextTokenBitmask(mask);
      first.Add(Clock::now() - t0);
      from_tables += CfgGrammarPeer(*CfgOf(**g)).PositionsTakenFromProgram();
      for (const auto& ids : e.traces) {
        if (!ReplayTrace(*g, ids, d.vocab->eos(), mask, fills)) ++rejected;
      }
    }
  }
  first.Report(state, "first_");
  first.ReportOver(state, "first_over_5ms", 5000);
  fills.Report(state);
  fills.ReportOver(state, "over_20us", 20);
  fills.ReportOver(state, "over_250us", 250);
  state.counters["from_program_tables"] = static_cast<double>(from_tables) / state.iterations();
  state.counters["rejected"] = static_cast<double>(rejected) / state.iterations();
}
BENCHMARK(BM_SchemaPrecomputedWarm)->Iterations(1)->Unit(benchmark::kMillisecond);

// A batch as a server runs it: 64 sequences, each under its own dev-set schema, stepping through
// its trace together; at every step BatchMaskFiller fills all live sequences' masks into one
// [64 x words] buffer (1 or 2 threads) and each must equal the single fill of the same state
// (`mismatched_masks`, expected 0). Positions are warm (one single-fill pass first), as after a
// server's first requests; the figure is the time of one batch fill.
void BM_SchemaBatchFill(benchmark::State& state) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  const int threads = static_cast<int>(state.range(0));
  struct Seq {
    std::shared_ptr<const CompiledGrammar> g;
    const std::vector<TokenId>* ids;
  };
  static std::vector<Seq> seqs = [&] {
    std::vector<Seq> out;
    for (const auto& e : d.entries) {
      if (out.size() == 64) break;
      if (e.traces.empty()) continue;
      auto g = d.compiler->CompileSchema(e.schema_text);
      if (g.ok()) out.push_back({*g, &e.traces[0]});
    }
    return out;
  }();
  const std::size_t words = PaddedBitmaskWords(d.vocab->logits_width());
  const std::size_t n = seqs.size();
  std::vector<std::uint32_t> out(n * words), single(words);
  BatchMaskFiller filler(threads);
  Latencies lat;
  long mismatched = 0, live_in_timed = 0;
  bool warm = false;
  for (auto _ : state) {
    std::vector<Matcher> ms;
    for (const Seq& q : seqs) ms.emplace_back(q.g);
    std::vector<std::size_t> pos(n, 0);
    for (;;) {
      std::vector<Matcher*> live(n, nullptr);
      bool any = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (pos[i] <= seqs[i].ids->size() && !ms[i].IsTerminated()) live[i] = &ms[i], any = true;
      }
      if (!any) break;
      if (!warm) {
        for (std::size_t i = 0; i < n; ++i) {
          if (live[i] != nullptr) live[i]->FillNextTokenBitmask(single);
        }
      }
      auto t0 = Clock::now();
      filler.Fill(live, out, words);
      if (warm) {
        lat.Add(Clock::now() - t0);
        for (Matcher* m : live) live_in_timed += m != nullptr;
      }
      benchmark::DoNotOptimize(out.data());
      for (std::size_t i = 0; i < n; ++i) {
        if (live[i] == nullptr) continue;
        live[i]->FillNextTokenBitmask(single);
        if (std::memcmp(single.data(), out.data() + i * words, words * 4) != 0) ++mismatched;
        const TokenId tok = pos[i] < seqs[i].ids->size() ? (*seqs[i].ids)[pos[i]] : d.vocab->eos();
        if (!live[i]->AcceptToken(tok)) {
          pos[i] = seqs[i].ids->size() + 1;  // rejected (a key order the schema does not declare)
          continue;
        }
        ++pos[i];
      }
    }
    warm = true;
  }
  lat.Report(state);
  state.counters["sequences"] = static_cast<double>(n);
  state.counters["live_per_step"] =
      lat.size() == 0 ? 0.0 : static_cast<double>(live_in_timed) / static_cast<double>(lat.size());
  state.counters["mismatched_masks"] = static_cast<double>(mismatched);
}
BENCHMARK(BM_SchemaBatchFill)->Arg(1)->Arg(2)->Iterations(4)->Unit(benchmark::kMillisecond)->UseRealTime();

// Compiled artifacts (lockstep/artifact.h) against compiling, per dev-set schema, from memory:
//   arg 0 (lazy): compile the schema from its text vs load its artifact written right after
//     compiling (the automaton only; masks are computed on first use either way);
//   arg 1 (precomputed): compile + compute every position (one thread) vs load the artifact of
//     that (the automaton and every position's token classes).
// Counters: p50/p90/p99/max of the load (µs), compile_p50_us / compile_p99_us, the ratio of the
// medians (`speedup_p50`) and of the sums (`speedup_total`), artifact bytes p50, and mismatched
// first masks between the loaded and the compiled grammar (expected 0).
void BM_ArtifactLoad(benchmark::State& state) {
  const DevSet& d = Data();
  if (!d.error.empty()) return state.SkipWithError(d.error.c_str());
  const bool precompute = state.range(0) != 0;
  CompileOptions options;
  options.precompute_masks = precompute;
  options.precompute_threads = 1;
  std::vector<double> compile_us, load_us, bytes;
  long mismatched = 0;
  Latencies loads;
  std::vector<std::uint32_t> a(PaddedBitmaskWords(d.vocab->logits_width())), b(a.size());
  for (auto _ : state) {
    for (const auto& e : d.entries) {
      auto t0 = Clock::now();
      auto g = d.compiler->CompileSchema(e.schema_text, options);
      const auto t1 = Clock::now();
      if (!g.ok()) continue;
      compile_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      const std::string file = SerializeArtifact(**g, "schema");
      bytes.push_back(static_cast<double>(file.size()));
      t0 = Clock::now();
      auto loaded = LoadArtifact(*d.compiler, file);
      const auto t2 = Clock::now();
      if (!loaded.ok()) return state.SkipWithError(loaded.status().ToString().c_str());
      loads.Add(t2 - t0);
      load_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
      Matcher ma(*g), mb(*loaded);
      ma.FillNextTokenBitmask(a);
      mb.FillNextTokenBitmask(b);
      mismatched += a != b;
    }
  }
  loads.Report(state);
  auto pct = [](std::vector<double> v, double p) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
  };
  double sum_c = 0, sum_l = 0;
  for (double x : compile_us) sum_c += x;
  for (double x : load_us) sum_l += x;
  state.counters["compile_p50_us"] = pct(compile_us, 0.5);
  state.counters["compile_p99_us"] = pct(compile_us, 0.99);
  state.counters["speedup_p50"] = pct(compile_us, 0.5) / std::max(pct(load_us, 0.5), 1e-9);
  state.counters["speedup_total"] = sum_c / std::max(sum_l, 1e-9);
  state.counters["bytes_p50"] = pct(bytes, 0.5);
  state.counters["schemas"] = static_cast<double>(load_us.size()) / state.iterations();
  state.counters["mismatched_first_masks"] = static_cast<double>(mismatched);
}
BENCHMARK(BM_ArtifactLoad)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lockstep::bench
