// `lockstep bench`: a user's own schemas and instances, replayed the way bench/schema_bench.cc
// replays the JSONSchemaBench dev set (BM_SchemaFirstMask, BM_SchemaTraceMask,
// BM_SchemaBatchFill), with the same percentile definition (bench/bench_util.h), so that the
// figures can be compared.
#include "cli/bench.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/constraint.h"
#include "cli/report.h"
#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr const char* kBenchHelp =
    R"(usage: lockstep bench --maskbench DIR|FILE... [--traces FILE] [--tokenizer NAME|PATH] [--json]
                      [--interleave] [--threads N] [--batch N] [--check] [--lenient] [--compact]
                      [--no-share] [--precompute] [--no-background] [--step-us N] [--cpu-time]
                      [--timeout-ms N] [--per-schema FILE.jsonl] [--per-mask FILE.jsonl]
                      [--probe TEST:STEP|FILE.jsonl]

Replays MaskBench-style files ({"schema": ..., "tests": [{"valid": bool, "data": ...}]}) through
the JSON Schema compiler and the matcher, on one thread, and times every token mask.
Every file's schema is compiled from its text and its first mask filled (timed together: "time
to first mask"), in file order, and the grammar freed. Then every schema is compiled again
(untimed, all kept) and, file by file, every valid instance and then every invalid one is fed
token by token to a fresh Matcher of that file's grammar: fill the mask (timed), check the token
is in it, AcceptToken; the last step is EOS. Masks are computed lazily per grammar (but see
--precompute). This is the procedure of bench/schema_bench.cc (BM_SchemaFirstMask, then
BM_SchemaTraceMask).

  --maskbench DIR|FILE   a MaskBench file, or a directory (its *.json files, sorted by name);
                         repeatable; further DIR|FILE arguments may follow as positionals
  --traces FILE          JSON lines {"file": NAME, "test": INDEX, "ids": [...]}: the token ids of
                         test INDEX (0-based, counting invalid tests) of the MaskBench file NAME
                         (matched by file name), e.g. a model's real output. Instances without a
                         line use the canonical tokenisation; lines for other files are ignored
  --tokenizer NAME|PATH  vocabulary (default llama3)
  --logits-width V       the model's logits width when it exceeds the vocabulary
  --lenient, --compact, --openapi-formats, --any-order, --any-order-max-properties N,
  --schema-draft D, --max-oneof-overlaps N, --max-some-member-requirements N, --max-exprs N
                         schema compile options, as for `lockstep compile`
  --compile-timeout MS   each compile's wall-clock budget (default 10000; 0 = none), also for
                         rendering a file's instances under its schema; past it the file is a
                         failure naming the deadline and where it stopped
  --no-share             every grammar computes its own positions (CompileOptions::
                         share_positions = false). By default positions are shared through the
                         vocabulary's store (docs/grammars.md): a schema finds there what the
                         schemas before it (and its own first-mask compile) computed, as in a
                         server that has seen other tool schemas
  --precompute           compile with every position precomputed (CompileOptions::
                         precompute_masks, one thread), the serving configuration for a schema
                         used many times: "first mask" then includes the precompute, and the
                         replays run on the grammars compiled again, which take the positions
                         their first compile left (docs/grammars.md, "Program tables")
  --interleave           compile each schema once and replay its instances right after its first
                         mask, then free it: one grammar alive at a time (lower peak memory, about
                         half the compile work), but the grammar is still in the CPU caches, so
                         per-mask figures run lower than BM_SchemaTraceMask's (bench/RESULTS.md);
                         not for the batch path
  --threads N            N > 1: the batch path. All schemas are compiled first; then the valid
                         instances step together in batches of --batch sequences (default 64),
                         every step one BatchMaskFiller fill of the live rows on N threads, then
                         the invalid instances the same way
  --batch N              the batch size; also selects the batch path with one thread
  --check                batch path: after each timed batch fill, compare every row with a single
                         fill of the same matcher (untimed) and count mismatches (expected 0)
  --no-background        no background thread (CompileOptions::background_positions = false):
                         every position is walked by the fill that first needs it, on the
                         calling thread (the MaskBench protocol). By default, after a grammar's
                         first mask one background thread computes its other positions, the
                         grammar being replayed first (docs/grammars.md)
  --step-us N            after every fill of a replay the thread sleeps N µs, untimed: the time a
                         host spends on the model step the mask is for (a few ms on a GPU), in
                         which the background thread works. Default 0: fills back to back (the
                         MaskBench protocol)
  --cpu-time             times compiles and fills by the thread's CPU time instead of the wall
                         clock: for a diagnosis on a busy machine (leaves out time the thread
                         was descheduled); reported figures use the wall clock
  --timeout-ms N         a budget of N ms per schema for its compiles and replays together: a
                         compile that would run past it stops (CompileOptions' deadline) and a
                         replay past it stops before its next fill; either way the schema counts
                         as timed out, apart from the failures, and its remaining instances as
                         not replayed. Default: no budget of the bench's own (compiles still
                         stop at CompileOptions' default deadline, counted as timed out too)
  --per-schema FILE      writes one JSON line per schema: file, status (compiled, failed,
                         timeout), error, compile_us and first_mask_us, compile_phases_us
                         {source: the schema to a normalised grammar, lowering: its rules to
                         automata, tables: the runtime's tables}, mask_us {p50, max, n}
                         of its valid replays, the slowest fill (test index, token step, µs and
                         its trace: what the fill did, Matcher::LastFillTrace: positions walked,
                         through a string-body view or the parser, views built, positions from
                         the store, full trie walks, tail nodes checked, tail checks reused, restored), the grammar's
                         states, rules, positions, shared positions, cached masks and cache
                         bytes after its replays, and its verdicts
  --per-mask FILE        writes one JSON line per fill of a valid replay, in replay order:
                         file, test index, token step (the number of ids: EOS), µs and its
                         trace (as the slowest fill's in --per-schema), so that a tail can be
                         traced fill by fill, and "probe": true on the fills --probe named.
                         Single-thread replays only (not with --threads, --batch)
  --probe TEST:STEP      the fill at token step STEP of test TEST (as --per-mask numbers them) of
                         every file replayed runs inside a function of its own,
                         lockstep_bench_probe_fill, so that a profiler can look at that fill
                         alone, e.g. with one file: valgrind --tool=callgrind
                         --toggle-collect='*lockstep_bench_probe_fill*' lockstep bench
                         --maskbench FILE --traces T --no-background --probe 0:12
  --probe FILE.jsonl     the same for every fill a line of FILE names ({"file", "test", "step"},
                         as --per-mask writes them; other keys ignored): e.g. the fills over 50 µs
                         of an earlier run, profiled together (replays are deterministic, so the
                         same fills meet the same positions first, with --no-background)
  --json                 print one JSON object on stdout instead of the table

Instances are rendered compactly under the formatting policy (docs/json-schema-compiler.md):
declared property order, no whitespace; tokenised canonically (Vocabulary::Encode, no dummy
prefix). A valid instance is "rejected" when some token is not in its mask or EOS is refused at
the end; rejections whose text differs from the policy rendering (a trace that writes the keys in
another order than the schema declares) are counted apart. An invalid instance is "wrongly
accepted" when every token and the final EOS are allowed.

Figures (µs; p50/p90/p99 = the sorted sample at floor(q * n), as bench/bench_util.h):
  first mask     compile + first fill, once per schema, in file order, in this process: the
                 first schemas also pay one-off costs (e.g. building `format` automata), as the
                 first of BM_SchemaFirstMask's iterations does
  mask (valid)   the headline "time per mask": every fill while replaying valid instances, the
                 figure of BM_SchemaTraceMask (with --interleave, the first fill of a schema's
                 first replay, a cache hit after the first mask, counts the cold first fill
                 instead). Batch path: batch fill time / live rows, one sample per fill
  mask (all)     the same over valid and invalid replays
  batch fill     batch path: one sample per BatchMaskFiller::Fill of the valid batches. Lazy
                 positions are computed inside the batch fill that first reaches them;
                 BM_SchemaBatchFill times warm positions only, so its figures are lower
Positions reached first by an invalid replay are warm for later ones of the same schema.
Peak memory is getrusage's maxrss of the whole process: the vocabulary, and every compiled
grammar with the masks its replays computed (all alive at the end, except with --interleave).

A file that is not JSON or lacks "schema" / well-formed "tests" counts as a failed schema with
its reason, as does a schema that does not compile. Exit 0 when the run completes (whatever the
verdicts), 2 for a missing path, a bad flag, or a malformed --traces line (named FILE:LINE).
)";

// Latencies in ns. Percentiles as bench/bench_util.h's Latencies: the sorted sample at index
// floor(q * n), capped at n - 1.
class Samples {
 public:
  void Add(double ns) { ns_.push_back(ns); }
  void Add(Clock::duration d) { Add(std::chrono::duration<double, std::nano>(d).count()); }
  std::size_t size() const { return ns_.size(); }

  struct Summary {
    double p50 = 0, p90 = 0, p99 = 0, max = 0;  // µs
    std::size_t n = 0;
  };
  Summary Summarize() const {
    Summary s;
    s.n = ns_.size();
    if (ns_.empty()) return s;
    std::vector<double> v = ns_;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) {
      return v[std::min(v.size() - 1,
                        static_cast<std::size_t>(q * static_cast<double>(v.size())))] /
             1000.0;
    };
    s.p50 = at(0.50);
    s.p90 = at(0.90);
    s.p99 = at(0.99);
    s.max = v.back() / 1000.0;
    return s;
  }

 private:
  std::vector<double> ns_;
};

ojson SummaryJson(const Samples& s) {
  const Samples::Summary m = s.Summarize();
  if (m.n == 0)
    return ojson{{"p50", nullptr}, {"p90", nullptr}, {"p99", nullptr}, {"max", nullptr}, {"n", 0}};
  return ojson{{"p50", m.p50}, {"p90", m.p90}, {"p99", m.p99}, {"max", m.max}, {"n", m.n}};
}

struct Instance {
  bool valid = false;
  std::size_t test = 0;      // index in the file's "tests"
  std::string rendered;      // compact, declared property order (RenderInstance)
  std::vector<TokenId> ids;  // the trace's ids, or the canonical tokenisation of `rendered`
  bool from_trace = false;
};

struct SchemaFile {
  std::string path;
  std::string name;  // file name, what --traces lines refer to
  std::string schema_text;
  std::string error;  // unusable file (not JSON, no "schema", malformed "tests")
  std::vector<Instance> instances;
  std::size_t valid = 0, invalid = 0;
};

struct Trace {
  std::vector<TokenId> ids;
  std::size_t line = 0;
  bool used = false;
};
// The --traces lines by (MaskBench file name, test index).
using TraceMap = std::map<std::pair<std::string, std::size_t>, Trace>;

Result<std::vector<std::string>> CollectFiles(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (fs::is_directory(a, ec)) {
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(a, ec)) {
        if (e.path().extension() == ".json" && !fs::is_directory(e.path(), ec)) {
          files.push_back(e.path().string());
        }
      }
      if (ec) return Status(StatusCode::kIoError, "cannot list directory: " + ec.message(), a);
      std::sort(files.begin(), files.end());
      out.insert(out.end(), files.begin(), files.end());
    } else if (fs::exists(a, ec)) {
      out.push_back(a);
    } else {
      return Status(StatusCode::kIoError, "no such file or directory", a);
    }
  }
  if (out.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "no MaskBench files: give --maskbench DIR|FILE (a directory needs *.json files)",
                  "arguments");
  }
  return out;
}

std::string ParseErrorText(const std::exception& e) {
  std::string s = e.what();
  // nlohmann's "[json.exception.parse_error.101] parse error at ..." without the bracket tag.
  if (!s.empty() && s[0] == '[') {
    if (auto p = s.find("] "); p != std::string::npos) s = s.substr(p + 2);
  }
  return s;
}

// Reads --traces: one JSON object per non-empty line. Errors name FILE:LINE.
Result<TraceMap> ReadTraces(const std::string& path, const Vocabulary& vocab) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot read traces file", path);
  TraceMap out;
  std::string line;
  std::size_t n = 0;
  auto bad = [&](const std::string& msg) {
    return Status(StatusCode::kInvalidArgument, msg, path + ":" + std::to_string(n));
  };
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) return bad("not a JSON object");
    if (!j.is_object()) return bad("not a JSON object");
    auto f = j.find("file");
    auto t = j.find("test");
    auto ids = j.find("ids");
    if (f == j.end() || !f->is_string()) return bad("needs \"file\" (a MaskBench file name)");
    if (t == j.end() ||
        !(t->is_number_unsigned() || (t->is_number_integer() && t->get<std::int64_t>() >= 0))) {
      return bad("needs \"test\" (the 0-based index into the file's tests)");
    }
    if (ids == j.end() || !ids->is_array()) return bad("needs \"ids\" (an array of token ids)");
    Trace tr;
    tr.line = n;
    tr.ids.reserve(ids->size());
    for (std::size_t k = 0; k < ids->size(); ++k) {
      const json& v = (*ids)[k];
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 ||
          v.get<std::int64_t>() >= vocab.size()) {
        return bad("ids[" + std::to_string(k) + "] = " + v.dump() + " is not a token id of " +
                   vocab.name() + " (0.." + std::to_string(vocab.size() - 1) + ")");
      }
      tr.ids.push_back(static_cast<TokenId>(v.get<std::int64_t>()));
    }
    auto key = std::make_pair(f->get<std::string>(), t->get<std::size_t>());
    if (auto it = out.find(key); it != out.end()) {
      return bad("second trace for " + key.first + " test " + std::to_string(key.second) +
                 " (first at line " + std::to_string(it->second.line) + ")");
    }
    out.emplace(std::move(key), std::move(tr));
  }
  return out;
}

// A MaskBench file's JSON document; on failure the reason, which makes it a failed schema.
std::optional<std::string> ReadMaskBenchDoc(const std::string& path, ojson* doc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "cannot read file";
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    *doc = ojson::parse(ss.str());
  } catch (const std::exception& e) {
    return "not JSON: " + ParseErrorText(e);
  }
  if (!doc->is_object() || !doc->contains("schema") ||
      !((*doc)["schema"].is_object() || (*doc)["schema"].is_boolean())) {
    return "not a MaskBench file: needs an object with \"schema\" (a JSON Schema)";
  }
  return std::nullopt;
}

// What turns a file's tests into instances: the schema's renderer (none when the schema has no
// model: plain compact JSON then), the vocabulary and the --traces lines.
struct InstanceMaker {
  SchemaInstanceRenderer* renderer;
  const Vocabulary& vocab;
  TraceMap* traces;
  EncodeOptions eo;
};

// Test `i` of file `name` as an Instance: rendered, then its --traces line's ids or the
// rendering's canonical tokenisation. On failure the reason, which makes the file a failure.
std::optional<std::string> MakeInstance(const ojson& t, std::size_t i, const std::string& name,
                                        InstanceMaker& maker, Instance* inst) {
  const std::string at = "tests[" + std::to_string(i) + "]";
  if (!t.is_object() || !t.contains("valid") || !t["valid"].is_boolean() || !t.contains("data")) {
    return at + " needs \"valid\" (a boolean) and \"data\"";
  }
  inst->valid = t["valid"].get<bool>();
  inst->test = i;
  const json data = json::parse(t["data"].dump());
  // Without a renderer (a schema the compiler will refuse anyway) plain compact JSON.
  inst->rendered = data.dump();
  if (maker.renderer != nullptr) {
    auto rendered = maker.renderer->Render(inst->rendered, -1);
    if (!rendered.ok()) {
      return at + ": cannot render the instance: " + rendered.status().ToString();
    }
    inst->rendered = std::move(*rendered);
  }
  if (maker.traces != nullptr) {
    if (auto it = maker.traces->find({name, i}); it != maker.traces->end()) {
      inst->ids = it->second.ids;
      inst->from_trace = true;
      it->second.used = true;
    }
  }
  if (!inst->from_trace) {
    auto ids = maker.vocab.Encode(inst->rendered, maker.eo);
    if (!ids.ok()) return at + ": cannot tokenise the instance: " + ids.status().ToString();
    inst->ids = std::move(*ids);
  }
  return std::nullopt;
}

// Reads one MaskBench file; an unusable file gets `error` set (counted as a failed schema).
// Instances are rendered and tokenised here, before anything is timed.
SchemaFile LoadSchemaFile(const std::string& path, const Vocabulary& vocab,
                          const CompileOptions& options, TraceMap* traces) {
  SchemaFile f;
  f.path = path;
  f.name = fs::path(path).filename().string();
  ojson doc;
  if (auto error = ReadMaskBenchDoc(path, &doc)) {
    f.error = *error;
    return f;
  }
  // ordered_json keeps the schema's properties in their declared order.
  f.schema_text = doc["schema"].dump();
  const ojson tests = doc.contains("tests") ? doc["tests"] : ojson::array();
  if (!tests.is_array()) {
    f.error = "\"tests\" is not an array";
    return f;
  }
  // The file's instances are rendered under one compile deadline, sharing the schema's
  // expansions and string automata (a file whose instances cannot be rendered in time is a
  // failure with the reason). Without a renderer (a schema that does not load, which the
  // compiler refuses anyway) they are plain compact JSON.
  std::unique_ptr<SchemaInstanceRenderer> renderer;
  if (auto r = SchemaInstanceRenderer::Create(f.schema_text, options); r.ok()) {
    renderer = std::move(*r);
  }
  InstanceMaker maker{renderer.get(), vocab, traces, {}};
  maker.eo.add_dummy_prefix = false;  // the instance continues a prompt, as the matcher assumes
  for (std::size_t i = 0; i < tests.size(); ++i) {
    Instance inst;
    if (auto error = MakeInstance(tests[i], i, f.name, maker, &inst)) {
      f.error = *error;
      f.instances.clear();
      return f;
    }
    (inst.valid ? f.valid : f.invalid) += 1;
    f.instances.push_back(std::move(inst));
  }
  return f;
}

// The clock of the timed spans: wall time, or with --cpu-time the calling thread's CPU time (a
// diagnosis on a busy machine: time the thread was descheduled is left out).
bool g_cpu_time = false;
double NowNs() {
  if (g_cpu_time) {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
  }
  return std::chrono::duration<double, std::nano>(Clock::now().time_since_epoch()).count();
}

bool Allowed(std::span<const std::uint32_t> mask, TokenId tok) {
  return (mask[static_cast<std::size_t>(tok) >> 5] >> (tok & 31)) & 1;
}

struct Counts {
  std::size_t schemas_total = 0, schemas_compiled = 0;
  ojson failures = ojson::array();
  std::size_t valid_total = 0, valid_accepted = 0, valid_rejected = 0, valid_rejected_other = 0;
  std::size_t valid_from_traces = 0, valid_skipped = 0;
  std::size_t invalid_total = 0, invalid_rejected = 0, invalid_accepted = 0, invalid_skipped = 0;
  std::size_t mismatched_masks = 0;
  ojson timeouts = ojson::array();  // schemas stopped by the compile deadline or --timeout-ms
  std::size_t replay_timeouts = 0, not_replayed = 0;
  double live_rows = 0;  // batch path: live rows summed over the valid batch fills
};

// A valid instance's verdict, and whether a rejected one was written otherwise than the policy
// renders it (decoded text != rendering: key order, number spelling).
void CountVerdict(const Instance& inst, bool accepted, const Vocabulary& vocab, Counts* c) {
  if (inst.valid) {
    if (accepted) {
      ++c->valid_accepted;
    } else {
      ++c->valid_rejected;
      if (inst.from_trace) {
        auto text = vocab.Decode(inst.ids);
        if (!text.ok() || *text != inst.rendered) ++c->valid_rejected_other;
      }
    }
  } else {
    (accepted ? c->invalid_accepted : c->invalid_rejected) += 1;
  }
}

// One fill of a valid replay and what it did (Matcher::LastFillTrace): a schema's slowest
// (ns -1: none yet), and every one for --per-mask.
struct FillRecord {
  double ns = -1;
  std::size_t test = 0;  // the instance's index in the file's "tests"
  std::size_t step = 0;  // the token index the mask was for (ids.size(): EOS)
  FillTrace trace;
  bool probed = false;  // run by lockstep_bench_probe_fill (--probe)
};

// The fill --probe names, in a function of its own for a profiler's toggle (not inlined, not
// folded into another).
[[gnu::noinline]] void lockstep_bench_probe_fill(Matcher& m, std::vector<std::uint32_t>& mask) {
  m.FillNextTokenBitmask(mask);
  asm volatile("" ::: "memory");
}

// One sequence through a fresh matcher: fill (timed), check the token, accept; EOS last.
// `cold_first_fill` >= 0 replaces the time of the first fill (see the help text). Stops early,
// returning nullopt, once `deadline` has passed.
// `step_us` > 0: after each fill the thread sleeps that long (untimed), as a host does while the
// model computes the logits the mask is applied to. `fills`, if given (--per-mask), receives
// every fill of a valid instance.
std::optional<bool> Replay(const std::shared_ptr<const CompiledGrammar>& g, const Instance& inst,
                           TokenId eos, std::vector<std::uint32_t>& mask, double cold_first_fill,
                           Clock::time_point deadline, std::int64_t step_us, Samples* valid,
                           Samples* schema_valid, Samples* all, FillRecord* slowest,
                           std::vector<FillRecord>* fills, std::int64_t probe_step,
                           const std::set<std::pair<std::int64_t, std::int64_t>>* probes) {
  Matcher m(g);
  const std::vector<TokenId>& ids = inst.ids;
  const auto test = static_cast<std::int64_t>(inst.test);
  for (std::size_t k = 0; k <= ids.size(); ++k) {
    if (Clock::now() > deadline) return std::nullopt;
    const double t0 = NowNs();
    const auto step = static_cast<std::int64_t>(k);
    const bool probed =
        step == probe_step || (probes != nullptr && probes->count({test, step}) != 0);
    if (probed) {
      lockstep_bench_probe_fill(m, mask);
    } else {
      m.FillNextTokenBitmask(mask);
    }
    double ns = NowNs() - t0;
    if (k == 0 && cold_first_fill >= 0) ns = cold_first_fill;
    if (valid != nullptr) {
      valid->Add(ns);
      schema_valid->Add(ns);
      if (ns > slowest->ns || fills != nullptr) {
        const FillRecord f{ns, inst.test, k, Matcher::LastFillTrace(), probed};
        if (ns > slowest->ns) *slowest = f;
        if (fills != nullptr) fills->push_back(f);
      }
    }
    all->Add(ns);
    if (step_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(step_us));
    const TokenId tok = k < ids.size() ? ids[k] : eos;
    if (!Allowed(mask, tok) || !m.AcceptToken(tok)) return false;
  }
  return m.IsTerminated();
}

struct Progress {
  bool on = isatty(STDERR_FILENO) != 0;
  Clock::time_point last = Clock::now();
  void Show(const char* what, std::size_t done, std::size_t total) {
    if (!on || Clock::now() - last < std::chrono::milliseconds(200)) return;
    last = Clock::now();
    std::fprintf(stderr, "\rlockstep bench: %s %zu/%zu   ", what, done, total);
    std::fflush(stderr);
  }
  void Clear() {
    if (on) std::fprintf(stderr, "\r%60s\r", "");
  }
};

struct BatchSeq {
  std::shared_ptr<const CompiledGrammar> g;
  const Instance* inst;
};

// The batch path: sequences step together `batch` at a time; every step one timed
// BatchMaskFiller fill of the live rows.
void RunBatches(const std::vector<BatchSeq>& seqs, std::size_t batch, BatchMaskFiller& filler,
                std::int32_t width, TokenId eos, bool check, bool valid_phase,
                const Vocabulary& vocab, Samples* batch_fill, Samples* per_mask_valid,
                Samples* per_mask_all, Counts* c, Progress* progress) {
  const std::size_t stride = PaddedBitmaskWords(width);
  const std::size_t words = BitmaskWords(width);
  std::vector<std::uint32_t> out(batch * stride), single(stride);
  for (std::size_t start = 0; start < seqs.size(); start += batch) {
    progress->Show(valid_phase ? "valid batches, sequence" : "invalid batches, sequence", start,
                   seqs.size());
    const std::size_t n = std::min(batch, seqs.size() - start);
    std::vector<Matcher> ms;
    ms.reserve(n);
    for (std::size_t i = 0; i < n; ++i) ms.emplace_back(seqs[start + i].g);
    std::vector<std::size_t> pos(n, 0);
    std::vector<char> done(n, 0);
    std::vector<Matcher*> live(n, nullptr);
    for (;;) {
      std::size_t nlive = 0;
      for (std::size_t i = 0; i < n; ++i) {
        live[i] = done[i] ? nullptr : &ms[i];
        nlive += done[i] ? 0 : 1;
      }
      if (nlive == 0) break;
      const auto t0 = Clock::now();
      filler.Fill(std::span<Matcher* const>(live.data(), n),
                  std::span<std::uint32_t>(out.data(), n * stride), stride);
      const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      if (valid_phase) {
        batch_fill->Add(ns);
        per_mask_valid->Add(ns / static_cast<double>(nlive));
        c->live_rows += static_cast<double>(nlive);
      }
      per_mask_all->Add(ns / static_cast<double>(nlive));
      for (std::size_t i = 0; i < n; ++i) {
        if (done[i]) continue;
        std::span<const std::uint32_t> row(out.data() + i * stride, words);
        if (check) {
          ms[i].FillNextTokenBitmask(single);
          if (std::memcmp(single.data(), row.data(), words * sizeof(std::uint32_t)) != 0) {
            ++c->mismatched_masks;
          }
        }
        const Instance& inst = *seqs[start + i].inst;
        const TokenId tok = pos[i] < inst.ids.size() ? inst.ids[pos[i]] : eos;
        if (!Allowed(row, tok) || !ms[i].AcceptToken(tok)) {
          done[i] = 1;
          CountVerdict(inst, false, vocab, c);
        } else if (pos[i] == inst.ids.size()) {
          done[i] = 1;
          CountVerdict(inst, ms[i].IsTerminated(), vocab, c);
        } else {
          ++pos[i];
        }
      }
    }
  }
}

void PrintRow(const char* label, const Samples& s) {
  const Samples::Summary m = s.Summarize();
  if (m.n == 0) {
    std::printf("  %-22s %10s %10s %10s %10s %9d\n", label, "-", "-", "-", "-", 0);
    return;
  }
  std::printf("  %-22s %10.1f %10.1f %10.1f %10.1f %9zu\n", label, m.p50, m.p90, m.p99, m.max, m.n);
}

}  // namespace

namespace {

struct BenchFlags {
  std::vector<std::string> paths;
  std::int64_t threads = 1, batch = 64;
  bool batched = false, compile_first = true, check = false, json = false;
  std::int64_t timeout_ms = 0;  // 0: none
  std::int64_t step_us = 0;     // simulated model step after each fill (single-thread path)
  std::string per_schema;       // --per-schema FILE.jsonl, or empty
  std::string per_mask;         // --per-mask FILE.jsonl, or empty
  std::string traces;
  std::int64_t probe_test = -1, probe_step = -1;  // --probe TEST:STEP
  // --probe FILE.jsonl: per file name, the (test, step) pairs to probe.
  std::map<std::string, std::set<std::pair<std::int64_t, std::int64_t>>> probes;
};

// What one schema did: for --per-schema, the timeouts and the failures.
struct SchemaRecord {
  enum class Status { kSkipped, kCompiled, kFailed, kTimeout } status = Status::kSkipped;
  std::string error;
  double compile_us = -1, first_mask_us = -1;
  // The timed compile's phases (CompiledGrammarStats::source_ms, compile_ms, tables_ms), in µs:
  // not `stats`', which may be the replays' own compile.
  double source_us = -1, lowering_us = -1, tables_us = -1;
  double spent_ns = 0;  // compiles and replays, against --timeout-ms
  Samples mask_valid;
  FillRecord slowest;
  std::vector<FillRecord> fills;  // --per-mask
  CompiledGrammarStats stats;  // of the grammar the replays ran on, after them
  std::size_t valid_accepted = 0, valid_rejected = 0, invalid_rejected = 0, invalid_accepted = 0;
  std::size_t not_replayed = 0;  // instances left when the timeout passed
};

const char* StatusName(SchemaRecord::Status s) {
  switch (s) {
    case SchemaRecord::Status::kCompiled:
      return "compiled";
    case SchemaRecord::Status::kFailed:
      return "failed";
    case SchemaRecord::Status::kTimeout:
      return "timeout";
    default:
      return "skipped";
  }
}

ojson TraceJson(const FillTrace& t) {
  return ojson{{"kind", t.Kind()},
               {"positions_walked", t.positions_walked},
               {"region_walks", t.region_walks},
               {"parser_walks", t.parser_walks},
               {"regions_built", t.regions_built},
               {"positions_shared", t.positions_shared},
               {"full_walks", t.full_walks},
               {"tail_nodes", t.tail_nodes},
               {"tails_reused", t.tails_reused},
               {"unique_checks", t.unique_checks},
               {"unique_searches", t.unique_searches},
               {"unique_search_over", t.unique_search_over},
               {"length_checks", t.length_checks},
               {"key_states", t.key_states},
               {"restored", t.restored}};
}

ojson FillJson(const FillRecord& f) {
  ojson o{{"test", f.test}, {"step", f.step}, {"us", f.ns / 1000.0}, {"trace", TraceJson(f.trace)}};
  if (f.probed) o["probe"] = true;
  return o;
}

ojson RecordJson(const SchemaFile& f, const SchemaRecord& r) {
  ojson o{{"file", f.name}, {"status", StatusName(r.status)}};
  if (!r.error.empty()) o["error"] = r.error;
  auto us = [](double v) { return v < 0 ? ojson(nullptr) : ojson(v); };
  o["compile_us"] = us(r.compile_us);
  o["first_mask_us"] = us(r.first_mask_us);
  if (r.source_us >= 0) {
    // Where the timed compile went: the schema compiled to a normalised grammar, its rules
    // lowered into automata, the runtime's tables.
    o["compile_phases_us"] = {
        {"source", r.source_us}, {"lowering", r.lowering_us}, {"tables", r.tables_us}};
  }
  const Samples::Summary m = r.mask_valid.Summarize();
  o["mask_us"] = m.n == 0 ? ojson{{"p50", nullptr}, {"max", nullptr}, {"n", 0}}
                          : ojson{{"p50", m.p50}, {"max", m.max}, {"n", m.n}};
  if (r.slowest.ns >= 0) o["slowest"] = FillJson(r.slowest);
  if (r.status == SchemaRecord::Status::kCompiled || r.stats.positions > 0) {
    o["grammar"] = {{"states", r.stats.dfa_states},
                    {"rules", r.stats.rules},
                    {"positions", r.stats.positions},
                    {"shared_positions", r.stats.shared_positions},
                    {"cached_masks", r.stats.cached_masks},
                    {"bytes", r.stats.mask_cache_bytes}};
  }
  o["valid"] = {{"accepted", r.valid_accepted}, {"rejected", r.valid_rejected}};
  o["invalid"] = {{"rejected", r.invalid_rejected}, {"accepted", r.invalid_accepted}};
  if (r.not_replayed > 0) o["not_replayed"] = r.not_replayed;
  return o;
}

// The deadline of a schema that has spent `spent_ns` of its --timeout-ms.
Clock::time_point DeadlineFor(const BenchFlags& flags, const SchemaRecord& r) {
  if (flags.timeout_ms <= 0) return Clock::time_point::max();
  return Clock::now() + std::chrono::nanoseconds(static_cast<std::int64_t>(
                            static_cast<double>(flags.timeout_ms) * 1e6 - r.spent_ns));
}

// A compile within what is left of the schema's --timeout-ms (the compile deadline of
// CompileOptions, whichever comes first).
Result<std::shared_ptr<const CompiledGrammar>> CompileWithin(const GrammarCompiler& compiler,
                                                            const std::string& text,
                                                            CompileOptions options,
                                                            const BenchFlags& flags,
                                                            const SchemaRecord& r) {
  if (flags.timeout_ms > 0) {
    const auto left = std::max<std::int64_t>(
        1, static_cast<std::int64_t>(static_cast<double>(flags.timeout_ms) - r.spent_ns / 1e6));
    if (options.compile_timeout_ms <= 0 || left < options.compile_timeout_ms) {
      options.compile_timeout_ms = left;
    }
  }
  return compiler.CompileSchema(text, options);
}

Result<BenchFlags> ParseBenchFlags(const Args& args) {
  BenchFlags f;
  auto threads = args.GetInt("threads", 1, 1, 1024);
  if (!threads.ok()) return threads.status();
  auto batch = args.GetInt("batch", 64, 1, 1 << 20);
  if (!batch.ok()) return batch.status();
  auto timeout = args.GetInt("timeout-ms", 0, 0, std::int64_t{1} << 40);
  if (!timeout.ok()) return timeout.status();
  auto step = args.GetInt("step-us", 0, 0, 10000000);
  if (!step.ok()) return step.status();
  f.step_us = *step;
  f.threads = *threads;
  f.batch = *batch;
  f.timeout_ms = *timeout;
  f.paths = args.GetAll("maskbench");
  for (const std::string& p : args.positional()) f.paths.push_back(p);
  if (f.paths.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "bench needs --maskbench DIR|FILE (see lockstep bench --help)", "arguments");
  }
  f.batched = f.threads > 1 || args.Has("batch");
  f.compile_first = f.batched || !args.Has("interleave");
  f.check = args.Has("check");
  f.json = args.Has("json");
  if (args.Has("per-schema")) f.per_schema = args.Get("per-schema");
  if (args.Has("per-mask")) {
    f.per_mask = args.Get("per-mask");
    if (f.batched) {
      return Status(StatusCode::kInvalidArgument,
                    "--per-mask times the single-thread replays: not with --threads or --batch",
                    "--per-mask");
    }
  }
  if (args.Has("traces")) f.traces = args.Get("traces");
  if (args.Has("probe") && args.Get("probe").ends_with(".jsonl")) {
    const std::string path = args.Get("probe");
    std::ifstream in(path);
    if (!in) return Status(StatusCode::kIoError, "cannot read " + path, "--probe");
    std::string text;
    for (std::int64_t line_no = 1; std::getline(in, text); ++line_no) {
      if (text.empty()) continue;
      const ojson j = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
      const auto file = j.is_object() ? j.find("file") : j.end();
      const auto test = j.is_object() ? j.find("test") : j.end();
      const auto step = j.is_object() ? j.find("step") : j.end();
      if (file == j.end() || !file->is_string() || test == j.end() ||
          !test->is_number_unsigned() || step == j.end() || !step->is_number_unsigned()) {
        return Status(StatusCode::kInvalidArgument,
                      path + ":" + std::to_string(line_no) +
                          ": want a JSON object with \"file\" (a string), \"test\" and \"step\" "
                          "(non-negative integers)",
                      "--probe");
      }
      f.probes[file->get<std::string>()].insert(
          {test->get<std::int64_t>(), step->get<std::int64_t>()});
    }
    if (f.batched) {
      return Status(StatusCode::kInvalidArgument,
                    "--probe marks a single-thread replay's fill: not with --threads or --batch",
                    "--probe");
    }
  } else if (args.Has("probe")) {
    const std::string v = args.Get("probe");
    const std::size_t colon = v.find(':');
    char* end = nullptr;
    long long test = -1, step = -1;
    if (colon != std::string::npos) {
      test = std::strtoll(v.c_str(), &end, 10);
      if (end != v.c_str() + colon) test = -1;
      step = std::strtoll(v.c_str() + colon + 1, &end, 10);
      if (*end != '\0' || colon + 1 == v.size()) step = -1;
    }
    if (test < 0 || step < 0) {
      return Status(StatusCode::kInvalidArgument,
                    "--probe wants TEST:STEP, two non-negative integers, e.g. 0:12, got '" + v + "'",
                    "--probe");
    }
    if (f.batched) {
      return Status(StatusCode::kInvalidArgument,
                    "--probe marks a single-thread replay's fill: not with --threads or --batch",
                    "--probe");
    }
    f.probe_test = test;
    f.probe_step = step;
  }
  return f;
}

// The whole run: what Bench prints, and the state shared by its phases.
class BenchRun {
 public:
  BenchRun(const BenchFlags& flags, const Vocabulary& v, std::shared_ptr<const Vocabulary> vocab,
           const CompileOptions& options, std::vector<SchemaFile> schemas)
      : flags_(flags),
        v_(v),
        options_(options),
        schemas_(std::move(schemas)),
        records_(schemas_.size()),
        compiler_(std::move(vocab)),
        eos_(v.eos()),
        mask_(PaddedBitmaskWords(v.logits_width())),
        grammars_(schemas_.size()),
        cold_fill_(schemas_.size(), -1.0) {
    c_.schemas_total = schemas_.size();
  }

  void Run(Progress* progress) {
    const auto run_start = Clock::now();
    for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
      progress->Show("schema", fi, schemas_.size());
      FirstMask(fi);
    }
    if (flags_.compile_first) {
      // As BM_SchemaTraceMask: every schema compiled again (untimed), all grammars alive, then
      // the replays, each grammar's positions computed from scratch.
      for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
        progress->Show("compiling for the replays, schema", fi, schemas_.size());
        Recompile(fi);
      }
    }
    if (flags_.compile_first && !flags_.batched) {
      for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
        progress->Show("replaying schema", fi, schemas_.size());
        if (grammars_[fi]) ReplaySchema(fi, grammars_[fi]);
      }
    }
    if (flags_.batched) RunBatchPhases(progress);
    for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
      if (grammars_[fi]) records_[fi].stats = grammars_[fi]->Stats();
    }
    elapsed_s_ = std::chrono::duration<double>(Clock::now() - run_start).count();
  }

  Status WritePerSchema(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    if (!out) return Status(StatusCode::kIoError, "cannot write", path);
    for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
      out << RecordJson(schemas_[fi], records_[fi])
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
          << "\n";
    }
    if (!out) return Status(StatusCode::kIoError, "write failed", path);
    return Status::Ok();
  }

  Status WritePerMask(const std::string& path) const {
    std::ofstream out(path, std::ios::binary);
    if (!out) return Status(StatusCode::kIoError, "cannot write", path);
    for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
      for (const FillRecord& f : records_[fi].fills) {
        ojson line{{"file", schemas_[fi].name}};
        line.update(FillJson(f));
        out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      }
    }
    if (!out) return Status(StatusCode::kIoError, "write failed", path);
    return Status::Ok();
  }

  ojson Json(double prepare_s, const ojson& trace_lines) const;
  void PrintTable(double prepare_s, std::size_t traces_used, std::size_t traces_unused) const;

 private:
  // Compile and first fill, timed together, in file order; the grammar is kept only with
  // --interleave (then replayed at once).
  void FirstMask(std::size_t fi) {
    const SchemaFile& f = schemas_[fi];
    SchemaRecord& r = records_[fi];
    if (!f.error.empty()) {
      r.status = SchemaRecord::Status::kFailed;
      r.error = f.error;
      c_.failures.push_back({{"file", f.path}, {"error", f.error}});
      return;
    }
    c_.valid_total += f.valid;
    c_.invalid_total += f.invalid;
    const double t0 = NowNs();
    auto g = CompileWithin(compiler_, f.schema_text, options_, flags_, r);
    const double t1 = NowNs();
    r.spent_ns += t1 - t0;
    if (!g.ok()) {
      Refused(fi, g.status());
      return;
    }
    {
      Matcher first(*g);
      first.FillNextTokenBitmask(mask_);
    }
    const double t2 = NowNs();
    r.spent_ns += t2 - t1;
    r.compile_us = (t1 - t0) / 1000.0;
    r.first_mask_us = (t2 - t0) / 1000.0;
    if (const CompiledGrammarStats s = (*g)->Stats(); s.is_grammar) {
      r.source_us = s.source_ms * 1000;
      r.lowering_us = s.compile_ms * 1000;
      r.tables_us = s.tables_ms * 1000;
    }
    first_mask_.Add(t2 - t0);
    r.status = SchemaRecord::Status::kCompiled;
    ++c_.schemas_compiled;
    for (const Instance& inst : f.instances) c_.valid_from_traces += inst.valid && inst.from_trace;
    if (!flags_.compile_first) {
      // The first replay's first fill finds the start position cached by the fill just timed;
      // it is counted at that cold time instead, as a fresh grammar would pay it.
      cold_fill_[fi] = t2 - t1;
      grammars_[fi] = *g;
      ReplaySchema(fi, *g);
      records_[fi].stats = (*g)->Stats();
      grammars_[fi].reset();
    }
    // Otherwise the grammar is freed here, as BM_SchemaFirstMask frees it.
  }

  // A compile error: a failure with its reason, or a timeout (the compile deadline or
  // --timeout-ms passed).
  void Refused(std::size_t fi, const Status& st) {
    const SchemaFile& f = schemas_[fi];
    SchemaRecord& r = records_[fi];
    r.error = st.ToString();
    const bool timeout = st.code() == StatusCode::kResourceLimit &&
                         (st.message().find("deadline") != std::string::npos ||
                          st.message().find("cancelled") != std::string::npos);
    if (timeout) {
      r.status = SchemaRecord::Status::kTimeout;
      c_.timeouts.push_back({{"file", f.path}, {"error", r.error}});
    } else {
      r.status = SchemaRecord::Status::kFailed;
      c_.failures.push_back({{"file", f.path}, {"error", r.error}});
    }
    c_.valid_skipped += f.valid;
    c_.invalid_skipped += f.invalid;
    c_.valid_total -= f.valid;
    c_.invalid_total -= f.invalid;
    if (r.status == SchemaRecord::Status::kCompiled) --c_.schemas_compiled;
  }

  void Recompile(std::size_t fi) {
    SchemaRecord& r = records_[fi];
    if (r.status != SchemaRecord::Status::kCompiled) return;
    const auto t0 = Clock::now();
    auto g = CompileWithin(compiler_, schemas_[fi].schema_text, options_, flags_, r);
    r.spent_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (g.ok()) {
      grammars_[fi] = *g;
    } else {
      Refused(fi, g.status());
    }
  }

  // A schema's valid instances, then its invalid ones, each through a fresh Matcher, until the
  // schema's --timeout-ms passes. cold_fill_[fi] >= 0 (--interleave) replaces the time of the
  // first replay's first fill.
  void ReplaySchema(std::size_t fi, const std::shared_ptr<const CompiledGrammar>& g) {
    SchemaRecord& r = records_[fi];
    const auto probed = flags_.probes.find(schemas_[fi].name);
    const auto* probes = probed == flags_.probes.end() ? nullptr : &probed->second;
    double cold = cold_fill_[fi];
    const auto t0 = Clock::now();
    const Clock::time_point deadline = DeadlineFor(flags_, r);
    bool out_of_time = false;
    for (int phase = 0; phase < 2; ++phase) {
      const bool valid = phase == 0;
      for (const Instance& inst : schemas_[fi].instances) {
        if (inst.valid != valid) continue;
        if (out_of_time) {
          ++r.not_replayed;
          continue;
        }
        const std::optional<bool> ok =
            Replay(g, inst, eos_, mask_, valid ? cold : -1.0, deadline, flags_.step_us,
                   valid ? &mask_valid_ : nullptr, &r.mask_valid, &mask_all_, &r.slowest,
                   flags_.per_mask.empty() ? nullptr : &r.fills,
                   static_cast<std::int64_t>(inst.test) == flags_.probe_test ? flags_.probe_step : -1,
                   probes);
        if (valid) cold = -1.0;
        if (!ok) {
          out_of_time = true;
          ++r.not_replayed;
          continue;
        }
        CountVerdict(inst, *ok, v_, &c_);
        if (inst.valid) {
          (*ok ? r.valid_accepted : r.valid_rejected) += 1;
        } else {
          (*ok ? r.invalid_accepted : r.invalid_rejected) += 1;
        }
      }
    }
    // The schema's own samples, for --per-schema (the slowest fill is recorded by Replay).
    r.spent_ns += std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
    if (out_of_time) {
      r.status = SchemaRecord::Status::kTimeout;
      c_.timeouts.push_back({{"file", schemas_[fi].path},
                             {"error", "--timeout-ms " + std::to_string(flags_.timeout_ms) +
                                           " passed while replaying (" +
                                           std::to_string(r.not_replayed) +
                                           " instances not replayed)"}});
      c_.replay_timeouts += 1;
      c_.not_replayed += r.not_replayed;
    }
  }

  void RunBatchPhases(Progress* progress) {
    BatchMaskFiller filler(static_cast<int>(flags_.threads));
    for (int phase = 0; phase < 2; ++phase) {
      const bool valid = phase == 0;
      std::vector<BatchSeq> seqs;
      for (std::size_t fi = 0; fi < schemas_.size(); ++fi) {
        if (!grammars_[fi]) continue;
        for (const Instance& inst : schemas_[fi].instances) {
          if (inst.valid == valid) seqs.push_back({grammars_[fi], &inst});
        }
      }
      RunBatches(seqs, static_cast<std::size_t>(flags_.batch), filler, v_.logits_width(), eos_,
                 flags_.check, valid, v_, &batch_fill_, &mask_valid_, &mask_all_, &c_, progress);
    }
  }

 public:
  const Counts& counts() const { return c_; }
  double peak_rss_mb() const {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
  }

 private:
  const BenchFlags& flags_;
  const Vocabulary& v_;
  CompileOptions options_;
  std::vector<SchemaFile> schemas_;
  std::vector<SchemaRecord> records_;
  GrammarCompiler compiler_;
  TokenId eos_;
  std::vector<std::uint32_t> mask_;
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars_;
  std::vector<double> cold_fill_;
  Samples first_mask_, mask_valid_, mask_all_, batch_fill_;
  Counts c_;
  double elapsed_s_ = 0;
};

// Failures (or timeouts) grouped by reason: the message without the file-specific location.
void PrintByReason(const ojson& list) {
  std::map<std::string, std::pair<std::size_t, std::string>> by_reason;
  for (const auto& fl : list) {
    const std::string err = fl["error"].get<std::string>();
    auto colon = err.find(": ");
    const std::string reason = colon == std::string::npos ? err : err.substr(colon + 2);
    auto& e = by_reason[reason];
    if (e.first++ == 0)
      e.second = fs::path(fl["file"].get<std::string>()).filename().string() + ": " + err;
  }
  for (const auto& [reason, e] : by_reason) {
    std::printf("  %5zu x %s\n", e.first,
                e.first == 1 ? e.second.c_str() : (reason + " (e.g. " + e.second + ")").c_str());
  }
}

ojson BenchRun::Json(double prepare_s, const ojson& trace_lines) const {
  const Counts& c = c_;
  ojson out;
  out["tokenizer"] = v_.name();
  out["files"] = schemas_.size();
  out["traces"] = flags_.traces.empty() ? ojson(nullptr) : ojson(flags_.traces);
  if (!flags_.traces.empty()) out["trace_lines"] = trace_lines;
  out["threads"] = flags_.threads;
  out["interleave"] = !flags_.compile_first && !flags_.batched;
  out["share_positions"] = options_.share_positions;
  out["precompute"] = options_.precompute_masks;
  out["background_positions"] = options_.background_positions && !options_.precompute_masks;
  out["clock"] = g_cpu_time ? "thread cpu" : "wall";
  out["step_us"] = flags_.step_us;
  out["timeout_ms"] = flags_.timeout_ms > 0 ? ojson(flags_.timeout_ms) : ojson(nullptr);
  out["schemas"] = {{"total", c.schemas_total},
                    {"compiled", c.schemas_compiled},
                    {"failed", c.failures.size()},
                    {"timeouts", c.timeouts.size()},
                    {"failures", c.failures},
                    {"timed_out", c.timeouts}};
  out["first_mask_us"] = SummaryJson(first_mask_);
  out["mask_us"] = SummaryJson(mask_valid_);
  out["mask_all_us"] = SummaryJson(mask_all_);
  if (flags_.batched) {
    out["batch"] = {
        {"size", flags_.batch},
        {"fill_us", SummaryJson(batch_fill_)},
        {"live_rows_per_fill",
         batch_fill_.size() == 0 ? 0.0 : c.live_rows / static_cast<double>(batch_fill_.size())},
        {"mismatched_masks", flags_.check ? ojson(c.mismatched_masks) : ojson(nullptr)}};
  }
  out["valid"] = {{"total", c.valid_total},
                  {"accepted", c.valid_accepted},
                  {"rejected", c.valid_rejected},
                  {"rejected_other_rendering", c.valid_rejected_other},
                  {"from_traces", c.valid_from_traces},
                  {"skipped", c.valid_skipped}};
  out["invalid"] = {{"total", c.invalid_total},
                    {"rejected", c.invalid_rejected},
                    {"accepted", c.invalid_accepted},
                    {"skipped", c.invalid_skipped}};
  out["not_replayed"] = c.not_replayed;
  out["peak_rss_mb"] = peak_rss_mb();
  out["prepare_s"] = prepare_s;
  out["elapsed_s"] = elapsed_s_;
  return out;
}

void BenchRun::PrintTable(double prepare_s, std::size_t traces_used,
                          std::size_t traces_unused) const {
  const Counts& c = c_;
  std::string mode = flags_.batched ? "batch path, " + std::to_string(flags_.threads) +
                                          " threads, batches of " + std::to_string(flags_.batch)
                                    : (flags_.compile_first ? "1 thread" : "1 thread, interleaved");
  if (options_.precompute_masks) {
    mode += ", positions precomputed";
  } else if (options_.background_positions) {
    mode += " (+ the background position thread)";
  } else {
    mode += ", no background thread";
  }
  if (g_cpu_time) mode += ", thread CPU time";
  if (flags_.step_us > 0) mode += ", " + std::to_string(flags_.step_us) + " µs model step";
  std::printf("lockstep bench: %zu files, tokenizer %s, %s\n", schemas_.size(), v_.name().c_str(),
              mode.c_str());
  if (!flags_.traces.empty()) {
    std::printf("traces           %s: %zu lines used, %zu unused (other files)\n",
                flags_.traces.c_str(), traces_used, traces_unused);
  } else {
    std::printf("traces           none (canonical tokenisation of the policy rendering)\n");
  }
  std::printf("schemas          %zu: %zu compiled, %zu failed, %zu timed out\n", c.schemas_total,
              c.schemas_compiled, c.failures.size(), c.timeouts.size());
  PrintByReason(c.failures);
  if (!c.timeouts.empty()) {
    std::printf("timed out:\n");
    PrintByReason(c.timeouts);
  }
  std::printf("\n  %-22s %10s %10s %10s %10s %9s\n", "times in µs", "p50", "p90", "p99", "max",
              "n");
  PrintRow("first mask", first_mask_);
  PrintRow(flags_.batched ? "mask, valid (batch/row)" : "mask, valid instances", mask_valid_);
  PrintRow(flags_.batched ? "mask, all (batch/row)" : "mask, all instances", mask_all_);
  if (flags_.batched) PrintRow("batch fill", batch_fill_);
  std::printf("\n");
  std::printf("valid instances  %zu: %zu accepted, %zu rejected", c.valid_total, c.valid_accepted,
              c.valid_rejected);
  if (c.valid_rejected_other > 0) {
    std::printf(" (%zu of them written otherwise than the policy renders: key order)",
                c.valid_rejected_other);
  }
  std::printf("\n");
  if (!flags_.traces.empty()) {
    std::printf("                 %zu replayed from traces, %zu tokenised canonically\n",
                c.valid_from_traces, c.valid_total - c.valid_from_traces);
  }
  std::printf("invalid instances %zu: %zu rejected, %zu wrongly accepted\n", c.invalid_total,
              c.invalid_rejected, c.invalid_accepted);
  if (c.valid_skipped + c.invalid_skipped > 0) {
    std::printf("not replayed     %zu valid, %zu invalid (their schema failed or timed out)\n",
                c.valid_skipped, c.invalid_skipped);
  }
  if (c.not_replayed > 0) {
    std::printf("                 %zu more left unreplayed when --timeout-ms passed\n",
                c.not_replayed);
  }
  if (flags_.batched) {
    std::printf(
        "batch fills      %zu, %.1f live rows per fill on average", batch_fill_.size(),
        batch_fill_.size() == 0 ? 0.0 : c.live_rows / static_cast<double>(batch_fill_.size()));
    if (flags_.check) std::printf(", %zu mismatched masks", c.mismatched_masks);
    std::printf("\n");
  }
  std::printf("peak memory      %.1f MB (maxrss)\n", peak_rss_mb());
  std::printf("elapsed          %.2f s (+ %.2f s reading, rendering, tokenising)\n", elapsed_s_,
              prepare_s);
}

// The run's compile options: the schema flags, --compile-timeout, --no-share, --no-background
// and --precompute.
Result<CompileOptions> BenchCompileOptions(const Args& args) {
  CompileOptions options;
  LOCKSTEP_RETURN_IF_ERROR(ApplySchemaFlags(args, &options));
  LOCKSTEP_RETURN_IF_ERROR(ApplyCompileTimeout(args, &options));
  options.share_positions = !args.Has("no-share");
  options.background_positions = !args.Has("no-background");
  if (args.Has("precompute")) {
    options.precompute_masks = true;
    options.precompute_threads = 1;
  }
  return options;
}

// Every file read, rendered and tokenised (LoadSchemaFile), with a progress line.
std::vector<SchemaFile> LoadSchemaFiles(const std::vector<std::string>& files,
                                        const Vocabulary& vocab, const CompileOptions& options,
                                        TraceMap* traces, Progress* progress) {
  std::vector<SchemaFile> schemas;
  schemas.reserve(files.size());
  for (std::size_t i = 0; i < files.size(); ++i) {
    progress->Show("reading file", i, files.size());
    schemas.push_back(LoadSchemaFile(files[i], vocab, options, traces));
  }
  return schemas;
}

// The --traces lines the run used, and those for files it does not have.
struct TraceLines {
  std::size_t used = 0, unmatched = 0;
};

// Counts the --traces lines (read from `path`); a line for a file of this run must name one of
// its tests (kInvalidArgument at PATH:LINE).
Result<TraceLines> CountTraceLines(const TraceMap& traces, const std::vector<SchemaFile>& schemas,
                                   const std::string& path) {
  TraceLines lines;
  std::map<std::string, const SchemaFile*> by_name;
  for (const SchemaFile& f : schemas) by_name.emplace(f.name, &f);
  for (const auto& [key, tr] : traces) {
    auto it = by_name.find(key.first);
    if (tr.used) {
      ++lines.used;
    } else if (it != by_name.end() && it->second->error.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    "test " + std::to_string(key.second) + " is out of range: " + key.first +
                        " has " + std::to_string(it->second->instances.size()) + " tests",
                    path + ":" + std::to_string(tr.line));
    } else {
      ++lines.unmatched;
    }
  }
  return lines;
}

// The run's results: --per-schema's and --per-mask's lines, then the JSON object (--json) or
// the table.
int Report(const BenchRun& run, const BenchFlags& flags, double prepare_s,
           const TraceLines& lines) {
  if (!flags.per_schema.empty()) {
    if (Status st = run.WritePerSchema(flags.per_schema); !st.ok()) return Fail(st);
  }
  if (!flags.per_mask.empty()) {
    if (Status st = run.WritePerMask(flags.per_mask); !st.ok()) return Fail(st);
  }
  if (flags.json) {
    const ojson trace_lines = {{"used", lines.used}, {"unused", lines.unmatched}};
    std::cout << run.Json(prepare_s, trace_lines)
                     .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
    return 0;
  }
  run.PrintTable(prepare_s, lines.used, lines.unmatched);
  return 0;
}

}  // namespace

int Bench(int argc, char** argv) {
  Args args({"maskbench", "traces", "tokenizer", "logits-width", "threads", "batch", "timeout-ms",
             "per-schema", "per-mask", "step-us", "compile-timeout", "schema-draft",
             "any-order-max-properties", "max-oneof-overlaps", "max-some-member-requirements",
             "max-exprs", "probe"},
            {"json", "check", "help", "lenient", "openapi-formats", "compact", "any-order",
             "interleave", "no-share", "precompute", "no-background", "cpu-time"},
            {{"-h", "help"}});
  if (auto done = ParseCommand(args, argc, argv, kBenchHelp)) return *done;
  auto flags = ParseBenchFlags(args);
  if (!flags.ok()) return Fail(flags.status());
  const auto start = Clock::now();
  auto files = CollectFiles(flags->paths);
  if (!files.ok()) return Fail(files.status());
  auto vocab = LoadVocabulary(args);
  if (!vocab.ok()) return Fail(vocab.status());
  const Vocabulary& v = **vocab;
  if (v.eos() == kNoToken) {
    return Fail(
        Status(StatusCode::kInvalidArgument, "the vocabulary has no EOS token", "--tokenizer"));
  }
  auto options = BenchCompileOptions(args);
  if (!options.ok()) return Fail(options.status());
  g_cpu_time = args.Has("cpu-time");

  std::optional<TraceMap> traces;
  if (!flags->traces.empty()) {
    auto t = ReadTraces(flags->traces, v);
    if (!t.ok()) return Fail(t.status());
    traces = std::move(*t);
  }
  Progress progress;
  std::vector<SchemaFile> schemas =
      LoadSchemaFiles(*files, v, *options, traces ? &*traces : nullptr, &progress);
  TraceLines lines;
  if (traces) {
    auto counted = CountTraceLines(*traces, schemas, flags->traces);
    if (!counted.ok()) {
      progress.Clear();
      return Fail(counted.status());
    }
    lines = *counted;
  }
  const double prepare_s = std::chrono::duration<double>(Clock::now() - start).count();

  BenchRun run(*flags, v, *vocab, *options, std::move(schemas));
  run.Run(&progress);
  progress.Clear();
  return Report(run, *flags, prepare_s, lines);
}

}  // namespace lockstep::cli
