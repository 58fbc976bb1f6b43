// What inference hosts do on many threads at once, on the real Llama-3 vocabulary and real tool
// schemas: batch fills of many grammars, compiling (lazily and with precompute_masks) while other
// threads fill, two precomputes of a grammar in use, forks and rollbacks of matchers sharing one
// grammar. The stores shared by the grammars of one vocabulary (positions, keyers, program
// tables, region views and folds attached to its token trie) and the caches inside one grammar
// (signatures, finished masks) are filled by whichever thread comes first; every mask filled here
// must equal the mask a single thread fills on a grammar compiled apart (another GrammarCompiler,
// so another store, with share_positions off), every trace token must be accepted, and EOS at the
// end. scripts/run-tests.sh also runs these tests in a ThreadSanitizer build (LOCKSTEP_TSAN),
// which reports any data race among them.
//
// Each test runs on two sets of cases: DevSet, the JSONSchemaBench dev set's Llama-3 traces
// (../shared/data; skipped when absent) whose text is the schema's policy rendering (other key
// orders are refused, as schema_devset_test counts), 40 of them times LOCKSTEP_TEST_SCALE; and
// Bundled, the bundled tool schemas, GBNF grammars and a regex with instances written here, so
// the tests do something without the shared data.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <latch>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_grammar_peer.h"
#include "automata/cfg/position_worker.h"
#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

using json = nlohmann::json;
using Mask = std::vector<std::uint32_t>;

enum class Kind { kSchema, kGbnf, kRegex };

struct Case {
  std::string name;
  Kind kind = Kind::kSchema;
  std::string text;          // the schema, grammar or pattern
  std::vector<TokenId> ids;  // the trace; EOS follows it
  std::vector<Mask> masks;   // single-threaded reference: masks[k] before ids[k], masks[n] at EOS
  std::vector<std::vector<TokenId>> forced;  // and ForcedTokens() there
};

const std::shared_ptr<const Vocabulary>& Llama3() {
  static const std::shared_ptr<const Vocabulary> vocab = [] {
    auto v = Vocabulary::Load("llama3");
    if (!v.ok()) std::fprintf(stderr, "llama3: %s\n", v.status().ToString().c_str());
    return v.ok() ? *v : nullptr;
  }();
  return vocab;
}

std::size_t Words() { return BitmaskWords(Llama3()->logits_width()); }

Result<std::shared_ptr<const CompiledGrammar>> Compile(const GrammarCompiler& compiler,
                                                       const Case& c,
                                                       const CompileOptions& options) {
  switch (c.kind) {
    case Kind::kSchema:
      return compiler.CompileSchema(c.text, options);
    case Kind::kGbnf:
      return compiler.CompileGrammar(c.text, options);
    case Kind::kRegex:
      return compiler.CompileRegex(c.text, options);
  }
  return Status(StatusCode::kInternal, "unknown case kind");
}

bool Allowed(std::span<const std::uint32_t> mask, TokenId id) {
  return (mask[static_cast<std::size_t>(id) >> 5] >> (id & 31)) & 1;
}

// "" when equal, else how they differ (a user compares masks; the first differing id helps).
std::string Diff(std::span<const std::uint32_t> got, const Mask& want) {
  std::int64_t extra = 0, missing = 0, first = -1;
  for (std::size_t w = 0; w < want.size(); ++w) {
    const std::uint32_t x = got[w] ^ want[w];
    if (x == 0) continue;
    if (first < 0) first = static_cast<std::int64_t>(w * 32 + __builtin_ctz(x));
    extra += __builtin_popcount(x & got[w]);
    missing += __builtin_popcount(x & want[w]);
  }
  if (extra == 0 && missing == 0) return "";
  return std::to_string(extra) + " tokens allowed too many, " + std::to_string(missing) +
         " missing (first differing id " + std::to_string(first) + ")";
}

// Failures seen on worker threads, reported by the test's thread (assertions stay out of the
// threads, so a failure never leaves a thread or a latch waiting).
class Failures {
 public:
  void Add(std::string what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (++count_ <= kShown) shown_.push_back(std::move(what));
  }
  void Report() {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& s : shown_) ADD_FAILURE() << s;
    if (count_ > kShown) ADD_FAILURE() << (count_ - kShown) << " more failures";
  }

 private:
  static constexpr int kShown = 20;
  std::mutex mu_;
  int count_ = 0;
  std::vector<std::string> shown_;
};

// Steps a fresh matcher m through c and EOS, checking each mask against the reference and that
// each token is accepted. `who` names the walk in failures.
void CheckedWalk(Matcher& m, const Case& c, const std::string& who, Failures& failures) {
  const TokenId eos = Llama3()->eos();
  Mask mask(Words());
  for (std::size_t k = 0; k <= c.ids.size(); ++k) {
    m.FillNextTokenBitmask(mask);
    if (std::string d = Diff(mask, c.masks[k]); !d.empty()) {
      failures.Add(who + ", " + c.name + ", step " + std::to_string(k) + ": " + d);
      return;
    }
    const TokenId tok = k < c.ids.size() ? c.ids[k] : eos;
    if (!m.AcceptToken(tok)) {
      failures.Add(who + ", " + c.name + ", step " + std::to_string(k) + ": token " +
                   std::to_string(tok) + " refused");
      return;
    }
  }
  if (!m.IsTerminated()) failures.Add(who + ", " + c.name + ": not terminated after EOS");
}

// Compiles c and walks a fresh matcher through it, as CheckedWalk.
void CompileAndWalk(const GrammarCompiler& compiler, const Case& c, const CompileOptions& options,
                    const std::string& who, Failures& failures,
                    std::shared_ptr<const CompiledGrammar>* out = nullptr) {
  auto g = Compile(compiler, c, options);
  if (!g.ok()) {
    failures.Add(who + ", " + c.name + ": " + g.status().ToString());
    return;
  }
  Matcher m(*g);
  CheckedWalk(m, c, who, failures);
  if (out != nullptr) *out = *g;
}

// The reference masks of c, from one matcher on one thread of a grammar compiled by `compiler`
// (share_positions off); false if the grammar does not compile or refuses the trace.
bool ComputeReference(const GrammarCompiler& compiler, Case& c, std::string* why) {
  CompileOptions options;
  options.share_positions = false;
  auto g = Compile(compiler, c, options);
  if (!g.ok()) {
    *why = g.status().ToString();
    return false;
  }
  Matcher m(*g);
  c.masks.assign(c.ids.size() + 1, Mask(Words()));
  c.forced.assign(c.ids.size() + 1, {});
  for (std::size_t k = 0; k <= c.ids.size(); ++k) {
    m.FillNextTokenBitmask(c.masks[k]);
    c.forced[k] = m.ForcedTokens();
    const TokenId tok = k < c.ids.size() ? c.ids[k] : Llama3()->eos();
    if (!Allowed(c.masks[k], tok) || !m.AcceptToken(tok)) {
      *why = "token " + std::to_string(k) + " refused";
      return false;
    }
  }
  return m.IsTerminated();
}

std::vector<TokenId> Encode(const std::string& text) {
  EncodeOptions eo;
  eo.add_dummy_prefix = false;
  auto ids = Llama3()->Encode(text, eo);
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

// Bundled constraints with instances in the policy's rendering (compact, declared order).
std::vector<Case> BundledCases() {
  const std::string dir = testing::SourceDataDir();
  auto make = [](std::string name, Kind kind, std::string text, const std::string& instance) {
    Case c;
    c.name = std::move(name);
    c.kind = kind;
    c.text = std::move(text);
    c.ids = Encode(instance);
    return c;
  };
  return {
      make("tools/get_weather.json", Kind::kSchema,
           testing::ReadFile(dir + "/tools/get_weather.json"),
           R"({"name":"get_weather","arguments":{"location":"Reykjavik",)"
           R"("unit":"celsius","days":3}})"),
      make("tools/book_flight.json", Kind::kSchema,
           testing::ReadFile(dir + "/tools/book_flight.json"),
           R"({"name":"book_flight","arguments":{"origin":"CDG","destination":"NRT",)"
           R"("departure_date":"2025-02-28","passengers":2,"cabin":"business",)"
           R"("max_price":1249.5}})"),
      make("grammars/json.gbnf", Kind::kGbnf, testing::ReadFile(dir + "/grammars/json.gbnf"),
           R"({"id": 7, "tags": ["a", "b\n"], "ok": true, "ratio": -0.25e3, "next": null})"),
      make("grammars/tool_calls.gbnf", Kind::kGbnf,
           testing::ReadFile(dir + "/grammars/tool_calls.gbnf"),
           R"([{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2, 3]}}])"),
      make("regex date-time", Kind::kRegex,
           R"(\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\dZ)",
           "2024-02-29T23:59:07Z"),
  };
}

// Dev-set cases: the first trace of every `stride`-th schema that has one, kept when the trace
// is the policy's rendering (the reference accepts it).
std::vector<Case> DevSetCases(std::size_t wanted) {
  const std::string root = testing::SharedDataDir();
  std::map<std::string, std::vector<TokenId>> first_trace;
  for (const std::string& line : testing::ReadLines(root + "/traces/llama3-glaive-dev.jsonl")) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("ids")) continue;
    first_trace.emplace(j.value("file", ""), j["ids"].get<std::vector<TokenId>>());
  }
  // Twice the cases wanted are tried: about half the traces write keys in another order.
  const std::size_t stride = std::max<std::size_t>(1, first_trace.size() / (2 * wanted + 1));
  std::vector<Case> out;
  std::size_t k = 0;
  for (const auto& [file, ids] : first_trace) {
    if (k++ % stride != 0) continue;
    json j = json::parse(testing::ReadFile(root + "/jsonschemabench-dev/maskbench/" + file),
                         nullptr, false);
    if (j.is_discarded() || !j.contains("schema")) continue;
    Case c;
    c.name = file;
    c.text = j["schema"].dump();
    c.ids = ids;
    out.push_back(std::move(c));
  }
  return out;
}

// The two sets of cases: every test runs on each (the dev-set one skips without ../shared/data).
enum class Set { kBundled, kDevSet };

// The cases of `set` with their reference masks, computed once per process (one GrammarCompiler
// for the references, apart from the tests' own).
const std::vector<Case>& CasesOf(Set set) {
  static const auto make = [](Set which) {
    std::vector<Case> out;
    if (Llama3() == nullptr) return out;
    GrammarCompiler reference(Llama3());
    std::string why;
    if (which == Set::kBundled) {
      for (Case& c : BundledCases()) {
        if (ComputeReference(reference, c, &why)) {
          out.push_back(std::move(c));
        } else {
          ADD_FAILURE() << "bundled case " << c.name << " refused by its reference: " << why;
        }
      }
      return out;
    }
    const std::size_t wanted =
        std::max<std::size_t>(8, static_cast<std::size_t>(40 * testing::TestScale() + 0.5));
    for (Case& c : DevSetCases(wanted)) {
      if (out.size() == wanted) break;
      if (ComputeReference(reference, c, &why)) out.push_back(std::move(c));
    }
    std::printf("[ cases    ] %zu dev-set traces\n", out.size());
    return out;
  };
  static const std::vector<Case> bundled = make(Set::kBundled);
  if (set == Set::kBundled) return bundled;
  static const std::vector<Case> dev_set = make(Set::kDevSet);
  return dev_set;
}

Set SetOf(Set set) { return set; }
Set SetOf(const std::tuple<Set, bool>& param) { return std::get<0>(param); }

// The tests' fixture: skips the dev-set variant when the shared data is absent.
template <class Param>
class OnCaseSet : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (SetOf(this->GetParam()) == Set::kDevSet && !testing::HaveSharedData()) {
      GTEST_SKIP() << "../shared/data not found: the dev-set traces are needed (the Bundled "
                      "variant of this test runs without them)";
    }
  }
  const std::vector<Case>& cases() const { return CasesOf(SetOf(this->GetParam())); }
};

// --- batch fills ------------------------------------------------------------------------------

// Rows of one BatchMaskFiller on three threads: four matchers per case, of two grammars of the
// same constraint (compiled twice: the second reads the first one's keys and positions from the
// store when sharing), at different steps of the trace; a null row among them. Each step fills
// every row at once, compares it with the reference, and advances each matcher by its next
// token, until every matcher has accepted EOS. Parameters: the set of cases, and whether the
// grammars share positions.
class BatchFills : public OnCaseSet<std::tuple<Set, bool>> {};

TEST_P(BatchFills, ManyGrammarsEqualSingleThreadedFills) {
  ASSERT_NE(Llama3(), nullptr);
  const std::vector<Case>& cases = this->cases();
  ASSERT_FALSE(cases.empty());
  GrammarCompiler compiler(Llama3());
  CompileOptions options;
  options.share_positions = std::get<1>(GetParam());
  struct Row {
    const Case* c;
    std::size_t lag;  // the row starts stepping at batch step `lag`
    std::unique_ptr<Matcher> m;
  };
  std::vector<std::array<std::shared_ptr<const CompiledGrammar>, 2>> grammars;
  for (const Case& c : cases) {
    auto g1 = Compile(compiler, c, options);
    auto g2 = Compile(compiler, c, options);
    ASSERT_TRUE(g1.ok() && g2.ok()) << c.name;
    grammars.push_back({*g1, *g2});
  }
  // Two rows of the first grammar in the same state (two sequences of one request), one of the
  // second a step behind, one of the first four steps behind. The rows of one grammar lie a
  // quarter of the batch apart, so the filler's threads (which take runs of neighbouring rows)
  // fill them at once, and the first two meet each new position and parser state together.
  std::vector<Row> rows;
  for (const auto& [lag, second] :
       {std::pair{0, 0}, std::pair{0, 0}, std::pair{1, 1}, std::pair{4, 0}}) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      rows.push_back({&cases[i], static_cast<std::size_t>(lag),
                      std::make_unique<Matcher>(grammars[i][second])});
    }
    if (lag == 1) rows.push_back({nullptr, 0, nullptr});  // a free slot of the batch
  }
  std::size_t steps = 0;
  for (const Row& r : rows) {
    if (r.c != nullptr) steps = std::max(steps, r.lag + r.c->ids.size() + 2);
  }
  std::vector<Matcher*> batch;
  for (Row& r : rows) batch.push_back(r.m.get());
  const std::size_t stride = PaddedBitmaskWords(Llama3()->logits_width());
  std::vector<std::uint32_t> out(rows.size() * stride);
  BatchMaskFiller filler(3);
  ASSERT_EQ(filler.num_threads(), 3);
  const Mask zero(Words(), 0);
  const TokenId eos = Llama3()->eos();
  std::int64_t compared = 0;
  int failures = 0;
  for (std::size_t t = 0; t < steps && failures < 20; ++t) {
    ASSERT_TRUE(filler.Fill(batch, out, stride));
    for (std::size_t i = 0; i < rows.size() && failures < 20; ++i) {
      const Row& r = rows[i];
      const std::span<const std::uint32_t> row(out.data() + i * stride, Words());
      if (r.c == nullptr) {
        EXPECT_EQ(Diff(row, zero), "") << "null row " << i << ", step " << t;
        continue;
      }
      const std::size_t n = r.c->ids.size();
      const std::size_t k = std::min(t < r.lag ? 0 : t - r.lag, n + 1);  // tokens accepted
      const std::string d = Diff(row, k <= n ? r.c->masks[k] : zero);
      ++compared;
      if (!d.empty()) {
        ADD_FAILURE() << r.c->name << ", row " << i << ", step " << k << ": " << d;
        ++failures;
        continue;
      }
      if (t < r.lag || k > n) continue;
      const TokenId tok = k < n ? r.c->ids[k] : eos;
      if (!r.m->AcceptToken(tok)) {
        ADD_FAILURE() << r.c->name << ", row " << i << ", step " << k << ": token refused";
        ++failures;
      }
      if (k == n) {
        EXPECT_TRUE(r.m->IsTerminated()) << r.c->name << ", row " << i;
      }
    }
  }
  for (const Row& r : rows) {
    if (r.m) {
      EXPECT_TRUE(r.m->IsTerminated()) << r.c->name << ": EOS not reached";
    }
  }
  std::printf("[ batch    ] %zu rows, %zu steps, %lld rows compared\n", rows.size(), steps,
              static_cast<long long>(compared));
}

std::string BatchFillsName(const ::testing::TestParamInfo<std::tuple<Set, bool>>& info) {
  return std::get<1>(info.param) ? "SharedPositions" : "OwnPositions";
}
INSTANTIATE_TEST_SUITE_P(Bundled, BatchFills,
                         ::testing::Combine(::testing::Values(Set::kBundled), ::testing::Bool()),
                         BatchFillsName);
INSTANTIATE_TEST_SUITE_P(DevSet, BatchFills,
                         ::testing::Combine(::testing::Values(Set::kDevSet), ::testing::Bool()),
                         BatchFillsName);

// --- compile while filling --------------------------------------------------------------------

// Half the cases are compiled first. Two threads walk fresh matchers of each of those grammars
// through their traces again and again, and walk each grammar the compile threads publish, while
// the first compile thread compiles every case three times: lazily (a constraint of the first
// half has the same program as a grammar being filled: its keys and positions come from the
// store), then with precompute_masks on two threads (its program's first precompute: it leaves
// the program's table while the other threads fill a grammar of that program), then so again
// (takes that table); then it precomputes the first-half grammar itself, which the other threads
// are filling, and reads its stats. The second compile thread compiles every case lazily in the
// reverse order (concurrent compiles share the process's lowering caches and the store).
class CompileWhileFilling : public OnCaseSet<Set> {};

TEST_P(CompileWhileFilling, MasksEqualSingleThreadedFills) {
  ASSERT_NE(Llama3(), nullptr);
  const std::vector<Case>& cases = this->cases();
  ASSERT_FALSE(cases.empty());
  GrammarCompiler compiler(Llama3());
  using Published = std::pair<const Case*, std::shared_ptr<const CompiledGrammar>>;
  std::vector<Published> first_half;
  for (std::size_t i = 0; i < cases.size(); i += 2) {
    auto g = Compile(compiler, cases[i], {});
    ASSERT_TRUE(g.ok()) << cases[i].name << ": " << g.status().ToString();
    first_half.emplace_back(&cases[i], *g);
  }
  Failures failures;
  constexpr int kFillers = 2;
  constexpr int kCompilers = 2;
  // Grammars the compile threads have compiled and walked, for the fillers; each publication lets
  // the fillers run one more pass, so their work follows the compile threads', not the clock.
  std::mutex published_mu;
  std::condition_variable published_cv;
  std::vector<Published> published;
  int compilers_done = 0;  // guarded by published_mu
  auto publish = [&](const Case& c, std::shared_ptr<const CompiledGrammar> g) {
    if (!g) return;
    std::lock_guard<std::mutex> lock(published_mu);
    published.emplace_back(&c, std::move(g));
    published_cv.notify_all();
  };
  std::atomic<std::int64_t> walks{0};
  std::latch start(kFillers + kCompilers);
  auto fill = [&](int id) {
    const std::string who = "filler " + std::to_string(id);
    start.arrive_and_wait();
    std::size_t taken = 0;
    while (true) {
      // Every filler walks every first-half grammar, each from another one first.
      for (std::size_t j = 0; j < first_half.size(); ++j) {
        const auto& [c, g] =
            first_half[(j + id * first_half.size() / kFillers) % first_half.size()];
        Matcher m(g);
        CheckedWalk(m, *c, who, failures);
        walks.fetch_add(1);
      }
      std::vector<Published> fresh;
      {
        std::unique_lock<std::mutex> lock(published_mu);
        published_cv.wait(lock,
                          [&] { return published.size() > taken || compilers_done == kCompilers; });
        fresh.assign(published.begin() + static_cast<std::ptrdiff_t>(taken), published.end());
        taken = published.size();
        if (fresh.empty()) break;  // every compile thread done, every grammar walked
      }
      for (const auto& [c, g] : fresh) {
        Matcher m(g);
        CheckedWalk(m, *c, who + " (published)", failures);
        walks.fetch_add(1);
      }
    }
  };
  int programs_taken = 0, keys_from_store = 0;
  auto compile = [&] {
    start.arrive_and_wait();
    CompileOptions precompute;
    precompute.precompute_masks = true;
    precompute.precompute_threads = 2;
    // The lazy compile keeps its positions on the filling thread: its fills hash its keys and
    // leave its keyer in the store for the compiles after it (with the background worker, which
    // the fillers' grammars run meanwhile, the worker would leave its whole program table and
    // the precomputed compiles would take that instead of keys).
    CompileOptions lazy;
    lazy.background_positions = false;
    for (std::size_t ci = 0; ci < cases.size(); ++ci) {
      const Case& c = cases[ci];
      std::shared_ptr<const CompiledGrammar> g;
      CompileAndWalk(compiler, c, lazy, "compile thread (lazy)", failures, &g);
      publish(c, g);
      for (int again = 0; again < 2; ++again) {
        CompileAndWalk(compiler, c, precompute,
                       again == 0 ? "compile thread (precomputed)" : "compile thread (again)",
                       failures, &g);
        if (!g || !g->is_grammar()) continue;
        keys_from_store += CfgGrammarPeer(*CfgOf(*g)).KeysTakenFromStore();
        programs_taken += CfgGrammarPeer(*CfgOf(*g)).PositionsTakenFromProgram();
      }
      if (ci % 2 == 0) {
        // A schema that recurs is precomputed where it is served (lockstep_grammar_precompute):
        // every position of the grammar the fillers are filling, on all cores meanwhile.
        const CompiledGrammar& served = *first_half[ci / 2].second;
        served.PrecomputeAllMasks();
        if (served.is_grammar() && served.Stats().positions == 0) {
          failures.Add(c.name + ": no positions after PrecomputeAllMasks");
        }
      }
    }
  };
  auto compile_reversed = [&] {
    start.arrive_and_wait();
    for (std::size_t ci = cases.size(); ci-- > 0;) {
      std::shared_ptr<const CompiledGrammar> g;
      CompileAndWalk(compiler, cases[ci], {}, "second compile thread", failures, &g);
      publish(cases[ci], g);
    }
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kFillers; ++i) threads.emplace_back(fill, i);
  threads.emplace_back([&] {
    compile();
    std::lock_guard<std::mutex> lock(published_mu);
    ++compilers_done;
    published_cv.notify_all();
  });
  threads.emplace_back([&] {
    compile_reversed();
    std::lock_guard<std::mutex> lock(published_mu);
    ++compilers_done;
    published_cv.notify_all();
  });
  for (std::thread& t : threads) t.join();
  failures.Report();
  std::printf(
      "[ compile  ] %zu cases compiled 4 times on 2 threads while %lld walks ran; %d "
      "grammars took their keys and %d their positions from the store\n",
      cases.size(), static_cast<long long>(walks.load()), keys_from_store, programs_taken);
  // What the test is about: the stores were read while others wrote them. Which store a
  // compile reads depends on the background worker's progress (a program whose grammar it
  // finished has its whole table there, and a compile takes that instead of keys).
  EXPECT_GT(keys_from_store + programs_taken, 0);
  EXPECT_GT(programs_taken, 0);
  // Every filler walked every first-half grammar at least once and every published grammar.
  EXPECT_GE(walks.load(),
            static_cast<std::int64_t>(kFillers * (first_half.size() + published.size())));
}

// --- precomputing a grammar in use ---------------------------------------------------------

// A schema that recurs on two requests at once is precomputed by both where it is served: two
// threads call PrecomputeAllMasks on one lazily compiled grammar at once (its program's table is
// in the store: both take it) while a third walks a matcher of it.
class PrecomputeWhileFilling : public OnCaseSet<Set> {};

TEST_P(PrecomputeWhileFilling, TwoPrecomputesAndAWalkOfOneGrammar) {
  ASSERT_NE(Llama3(), nullptr);
  const std::vector<Case>& cases = this->cases();
  ASSERT_FALSE(cases.empty());
  GrammarCompiler compiler(Llama3());
  CompileOptions precompute;
  precompute.precompute_masks = true;
  precompute.precompute_threads = 2;
  Failures failures;
  const std::size_t n = std::min<std::size_t>(cases.size(), 12);
  for (std::size_t ci = 0; ci < n; ++ci) {
    const Case& c = cases[ci];
    ASSERT_TRUE(Compile(compiler, c, precompute).ok()) << c.name;  // leaves the program's table
    auto g = Compile(compiler, c, {});
    ASSERT_TRUE(g.ok()) << c.name;
    std::latch start(3);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&] {
        start.arrive_and_wait();
        (*g)->PrecomputeAllMasks();
      });
    }
    threads.emplace_back([&] {
      start.arrive_and_wait();
      Matcher m(*g);
      CheckedWalk(m, c, "walk while precomputing", failures);
    });
    for (std::thread& th : threads) th.join();
    Matcher after(*g);
    CheckedWalk(after, c, "walk after precomputing", failures);
  }
  failures.Report();
}

// --- forks and rollbacks ----------------------------------------------------------------------

// Three threads walk matchers of one freshly compiled grammar at once (so they race to compute
// its positions, signatures and finished masks): one from the start, two from forks (taken at
// once) of a matcher halfway through the trace. At each step a thread checks the mask, then at
// random forks and walks ahead before rolling the fork back, or walks ahead and rolls back
// itself, or offers a token the mask refuses, or asks the forced tokens (equal to the
// reference's) and validates the rest of the trace as a draft; the matcher's own mask must not
// change. At the end it rolls back over EOS and accepts it again.
void ForkAndRollbackWalk(const Case& c, Matcher m, std::size_t from, std::uint32_t seed,
                         const std::string& who, Failures& failures) {
  std::mt19937 rng(seed);
  const std::size_t n = c.ids.size();
  const TokenId eos = Llama3()->eos();
  Mask mask(Words());
  auto check = [&](const Matcher& x, std::size_t k, const char* what) {
    x.FillNextTokenBitmask(mask);
    std::string d = Diff(mask, c.masks[k]);
    if (!d.empty()) {
      failures.Add(who + ", " + c.name + ", step " + std::to_string(k) + " " + what + ": " + d);
    }
    return d.empty();
  };
  auto advance = [&](Matcher& x, std::size_t k, std::size_t d) {
    for (std::size_t i = 0; i < d; ++i) {
      if (!x.AcceptToken(c.ids[k + i])) return false;
    }
    return true;
  };
  for (std::size_t k = from; k < n; ++k) {
    if (!check(m, k, "")) return;
    const std::size_t ahead = std::min<std::size_t>(1 + rng() % 6, n - k);
    switch (rng() % 5) {
      case 0: {  // a fork walks ahead and back; the matcher it came from is unchanged
        Matcher f = m.Fork();
        if (!advance(f, k, ahead) || !check(f, k + ahead, "(fork ahead)")) return;
        const std::size_t back = 1 + rng() % ahead;
        if (!f.Rollback(static_cast<std::int32_t>(back)) ||
            !check(f, k + ahead - back, "(fork rolled back)") || !check(m, k, "(after fork)")) {
          return;
        }
        break;
      }
      case 1:  // walk ahead, roll back
        if (!advance(m, k, ahead) || !check(m, k + ahead, "(ahead)") ||
            !m.Rollback(static_cast<std::int32_t>(ahead)) || !check(m, k, "(rolled back)")) {
          return;
        }
        break;
      case 2: {  // a refused token leaves the state as it was
        TokenId refused = -1;
        for (TokenId id = static_cast<TokenId>(rng() % 1000); id < Llama3()->size(); ++id) {
          if (!Allowed(c.masks[k], id) && !Llama3()->TokenBytes(id).empty()) {
            refused = id;
            break;
          }
        }
        if (refused >= 0 && m.AcceptToken(refused)) {
          failures.Add(who + ", " + c.name + ": refused token " + std::to_string(refused) +
                       " accepted at step " + std::to_string(k));
          return;
        }
        if (!check(m, k, "(after a refused token)")) return;
        break;
      }
      case 3: {  // jump-forward and a draft, as a speculative host asks them
        if (m.ForcedTokens() != c.forced[k]) {
          failures.Add(who + ", " + c.name + ": other forced tokens at step " + std::to_string(k));
          return;
        }
        const std::int32_t valid = m.ValidateDraft({c.ids.data() + k, n - k});
        if (valid != static_cast<std::int32_t>(n - k) || !check(m, k, "(after a draft)")) {
          failures.Add(who + ", " + c.name + ": draft of the trace's rest cut at " +
                       std::to_string(valid) + " at step " + std::to_string(k));
          return;
        }
        break;
      }
      default:
        break;
    }
    if (!m.AcceptToken(c.ids[k])) {
      failures.Add(who + ", " + c.name + ": token refused at step " + std::to_string(k));
      return;
    }
  }
  if (!check(m, n, "") || !m.AcceptToken(eos) || !m.IsTerminated() || !m.Rollback(1) ||
      m.IsTerminated() || !check(m, n, "(EOS rolled back)") || !m.AcceptToken(eos) ||
      !m.IsTerminated()) {
    failures.Add(who + ", " + c.name + ": EOS, its rollback or EOS again failed");
  }
}

class ForksAndRollbacks : public OnCaseSet<Set> {};

TEST_P(ForksAndRollbacks, OnThreadsSharingOneGrammar) {
  ASSERT_NE(Llama3(), nullptr);
  const std::vector<Case>& cases = this->cases();
  ASSERT_FALSE(cases.empty());
  GrammarCompiler compiler(Llama3());
  Failures failures;
  constexpr int kThreads = 3;
  int walked = 0;
  for (std::size_t ci = 0; ci < cases.size(); ++ci) {
    const Case& c = cases[ci];
    auto g = Compile(compiler, c, {});
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    // A matcher halfway through the trace, forked by threads 1 and 2 at once.
    const std::size_t half = c.ids.size() / 2;
    Matcher shared(*g);
    for (std::size_t k = 0; k < half; ++k) ASSERT_TRUE(shared.AcceptToken(c.ids[k])) << c.name;
    std::latch start(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        const bool forked = t != 0;
        ForkAndRollbackWalk(c, forked ? shared.Fork() : Matcher(*g), forked ? half : 0,
                            static_cast<std::uint32_t>(ci * 131 + t), "thread " + std::to_string(t),
                            failures);
      });
    }
    for (std::thread& th : threads) th.join();
    ++walked;
  }
  failures.Report();
  std::printf("[ forks    ] %d grammars, each walked by %d threads at once\n", walked, kThreads);
}

std::string SetParamName(const ::testing::TestParamInfo<Set>&) { return "Llama3"; }
INSTANTIATE_TEST_SUITE_P(Bundled, CompileWhileFilling, ::testing::Values(Set::kBundled),
                         SetParamName);
INSTANTIATE_TEST_SUITE_P(DevSet, CompileWhileFilling, ::testing::Values(Set::kDevSet),
                         SetParamName);
INSTANTIATE_TEST_SUITE_P(Bundled, PrecomputeWhileFilling, ::testing::Values(Set::kBundled),
                         SetParamName);
INSTANTIATE_TEST_SUITE_P(DevSet, PrecomputeWhileFilling, ::testing::Values(Set::kDevSet),
                         SetParamName);
INSTANTIATE_TEST_SUITE_P(Bundled, ForksAndRollbacks, ::testing::Values(Set::kBundled),
                         SetParamName);
INSTANTIATE_TEST_SUITE_P(DevSet, ForksAndRollbacks, ::testing::Values(Set::kDevSet), SetParamName);

// The background worker (CompileOptions::background_positions) takes the time between fills, not
// the fills' own: while a fill runs anywhere in the process it computes nothing, and it goes on
// once none runs. The fill here is one the test holds open (PositionWorker::FillScope, what
// CfgSequence::Fill holds), from before the grammar's first fill, which queues the grammar.
TEST(BackgroundWorker, ComputesNothingWhileAFillRuns) {
  ASSERT_NE(Llama3(), nullptr);
  GrammarCompiler compiler(Llama3());
  CompileOptions options;
  options.share_positions = false;  // (its positions its own: none found in the store)
  auto g = compiler.CompileSchema(
      R"({"type": "object", "properties": {"city": {"type": "string"},
          "days": {"type": "integer", "minimum": 1}, "units": {"enum": ["c", "f"]},
          "hourly": {"type": "boolean"}}, "required": ["city", "days"]})",
      options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  Mask mask(Words());
  std::int32_t during = 0;
  {
    PositionWorker::FillScope filling;
    m.FillNextTokenBitmask(mask);
    during = (*g)->Stats().positions;
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      EXPECT_EQ((*g)->Stats().positions, during) << "a position computed during a fill";
    }
  }
  CfgOf(**g)->WaitForBackground();
  EXPECT_GT((*g)->Stats().positions, during) << "the worker did not go on after the fill";
}

// A fill that walks a counter's position (a string of maxLength: a position per count) leaves a
// hint, and the worker computes that counter's next counts, also once it has done every state.
TEST(BackgroundWorker, ComputesTheNextCountsOfACounterAFillWalked) {
  ASSERT_NE(Llama3(), nullptr);
  GrammarCompiler compiler(Llama3());
  CompileOptions options;
  options.share_positions = false;
  auto g = compiler.CompileSchema(
      R"({"type": "object", "properties": {"note": {"type": "string", "maxLength": 60}},
          "required": ["note"], "additionalProperties": false})",
      options);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  Matcher m(*g);
  Mask mask(Words());
  m.FillNextTokenBitmask(mask);
  ASSERT_TRUE(m.AcceptString(R"({"note": ")"));
  m.FillNextTokenBitmask(mask);  // walks count 0; the worker goes on to 16
  CfgOf(**g)->WaitForBackground();  // and every state's position
  ASSERT_TRUE(m.AcceptString("abcdefghijklmnopqrstu"));
  const std::int32_t before_fill = (*g)->Stats().positions;
  m.FillNextTokenBitmask(mask);  // walks count 21
  const std::int32_t after_fill = (*g)->Stats().positions;
  EXPECT_EQ(after_fill, before_fill + 1) << "count 21 was not left for the fill to walk";
  CfgOf(**g)->WaitForBackground();
  // Counts 22 to 37: a position each (each has its own room left, so its own mask), and no
  // more than those 16.
  EXPECT_GE((*g)->Stats().positions - after_fill, 12)
      << "the worker did not compute the counter's next counts";
  EXPECT_LE((*g)->Stats().positions - after_fill, 16) << "the worker went past its window";
  // A fill at count 26 walks nothing.
  ASSERT_TRUE(m.AcceptString("vwxyz"));
  const std::int32_t done = (*g)->Stats().positions;
  m.FillNextTokenBitmask(mask);
  EXPECT_EQ((*g)->Stats().positions, done);
}

}  // namespace
}  // namespace lockstep
