// Grammar positions computed the fast way (the rule's automaton walked without a parser where it
// can, string bodies and other wide loops shared across grammars as trie regions of the
// vocabulary) against a mask computed with no position at all: one walk of the whole token trie
// by the full Earley parser (CfgGrammar::FullWalkMask). Replays the real Llama-3 traces of the
// JSONSchemaBench dev set, every schema compiled by one GrammarCompiler so that later schemas
// reuse the regions earlier ones built, and compares both masks before every token and at the end.
// Also checks the finished-mask cache: the same parser state filled again (now from the cache,
// in its compact form) gives the same mask.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "automata/cfg/cfg_grammar.h"
#include "automata/cfg/cfg_program.h"
#include "automata/cfg/earley.h"
#include "automata/token/token_automaton.h"
#include "lockstep/compiler.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

struct Trace {
  std::string schema;
  std::vector<TokenId> ids;
};

// One trace per schema, every `stride`-th dev-set schema that has one.
std::vector<Trace> LoadTraces(int stride) {
  const std::string root = testing::SharedDataDir();
  std::map<std::string, std::vector<TokenId>> first_trace;
  std::ifstream tin(root + "/traces/llama3-glaive-dev.jsonl");
  std::string line;
  while (std::getline(tin, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    first_trace.emplace(j.value("file", ""), j["ids"].get<std::vector<TokenId>>());
  }
  std::vector<Trace> out;
  int k = 0;
  for (const auto& [file, ids] : first_trace) {
    if (k++ % stride != 0) continue;
    std::ifstream in(root + "/jsonschemabench-dev/maskbench/" + file);
    json j = json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.contains("schema")) continue;
    out.push_back({j["schema"].dump(), ids});
  }
  return out;
}

// Replays `ids` on `cfg` from its start, comparing the fast mask with a full trie walk by the
// parser (no position at all) before every token and at the end, and with `check_cache` the
// mask filled again from the finished-mask cache. A token the mask refuses ends the replay (a
// trace that writes its keys in another order than declared) unless `must_allow`, where it is a
// failure. Adds the masks compared to `steps`.
void ReplayAgainstFullWalk(const CfgGrammar& cfg, const Vocabulary& vocab,
                           const std::vector<TokenId>& ids, const std::string& what,
                           bool check_cache, bool must_allow, long& steps) {
  EarleyParser parser(&cfg.program(), cfg.max_depth());
  parser.InitRoot();
  std::vector<std::int32_t> sigs;
  std::vector<std::uint32_t> fast(cfg.mask_words()), again(cfg.mask_words()),
      full(cfg.mask_words());
  for (std::size_t k = 0; k <= ids.size(); ++k) {
    cfg.FillMask(parser, sigs, fast);
    cfg.FullWalkMask(parser, full);
    ++steps;
    ASSERT_EQ(fast, full) << what.substr(0, 200) << "\nstep " << k;
    if (check_cache) {
      cfg.FillMask(parser, sigs, again);  // from the finished-mask cache now
      ASSERT_EQ(again, full) << "cached mask differs at step " << k;
    }
    if (k == ids.size()) break;
    const TokenId id = ids[k];
    const bool allowed = (fast[id >> 5] >> (id & 31)) & 1;
    ASSERT_TRUE(allowed || !must_allow) << what.substr(0, 200) << ": step " << k;
    if (!allowed) break;  // key order other than declared: stop
    bool ok = true;
    for (unsigned char c : vocab.TokenBytes(id)) ok = ok && parser.StepByte(c);
    ASSERT_TRUE(ok) << "token allowed by the mask but not accepted, step " << k;
  }
}

TEST(SchemaPositions, FastPositionsEqualFullTrieWalkOnDevTraces) {
  if (!testing::HaveSharedData()) {
    GTEST_SKIP() << "../shared/data not found: the dev-set traces are needed";
  }
  const int schemas = std::max(4, static_cast<int>(80 * testing::TestScale()));
  std::vector<Trace> traces = LoadTraces(std::max(1, 1600 / schemas));
  ASSERT_GE(traces.size(), 4u);
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  long steps = 0, compared_schemas = 0;
  for (const Trace& t : traces) {
    auto g = compiler.CompileSchema(t.schema);
    if (!g.ok()) continue;  // the refused ones are listed by schema_devset_test
    ++compared_schemas;
    ReplayAgainstFullWalk(*CfgOf(**g), **vocab, t.ids, "schema " + t.schema,
                          /*check_cache=*/true, /*must_allow=*/false, steps);
    if (HasFatalFailure()) return;
  }
  std::printf("%ld schemas, %ld masks compared with the full trie walk (and again from cache)\n",
              compared_schemas, steps);
  EXPECT_GE(compared_schemas, 4);
  EXPECT_GE(steps, 40 * compared_schemas / 4);
}

// The two layouts of a program's transitions (automata/cfg/cfg_program.h): a program of fewer
// than 65,536 states (every dev-set schema's) keeps its targets in 2 bytes, a bigger one in 4.
// The same schemas' programs laid out in 4 bytes fill masks equal to the full trie walk too, and
// both layouts read back every entry.
TEST(SchemaPositions, WideTransitionTablesFillExactMasks) {
  if (!testing::HaveSharedData()) {
    GTEST_SKIP() << "../shared/data not found: the dev-set traces are needed";
  }
  const int schemas = std::max(4, static_cast<int>(20 * testing::TestScale()));
  std::vector<Trace> traces = LoadTraces(std::max(1, 1600 / schemas));
  ASSERT_GE(traces.size(), 4u);
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  CompileOptions own;  // no positions from the narrow grammars' store
  own.share_positions = false;
  own.background_positions = false;
  long steps = 0, compared_schemas = 0;
  for (const Trace& t : traces) {
    auto g = compiler.CompileSchema(t.schema);
    if (!g.ok()) continue;
    const CfgProgram& narrow = CfgOf(**g)->program();
    ASSERT_TRUE(narrow.next.narrow()) << narrow.num_states << " states";
    CfgProgram wide = narrow;
    wide.next.Assign(narrow.num_states, narrow.num_classes, /*wide=*/true);
    ASSERT_FALSE(wide.next.narrow());
    for (std::size_t i = 0; i < narrow.next.size(); ++i) wide.next.Set(i, narrow.next[i]);
    for (StateId s = 0; s < narrow.num_states; ++s) {
      const TransitionRow a = narrow.Row(s), b = wide.Row(s);
      for (std::int32_t c = 0; c < narrow.num_classes; ++c) ASSERT_EQ(a[c], b[c]);
    }
    ++compared_schemas;
    CfgGrammar cfg(*vocab, GrammarAccess::Trie(compiler), std::move(wide), own, 0.0);
    ReplayAgainstFullWalk(cfg, **vocab, t.ids, "schema " + t.schema, /*check_cache=*/false,
                          /*must_allow=*/false, steps);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(compared_schemas, 4);
  EXPECT_GE(steps, 40 * compared_schemas / 4);
}

// An object of many optional members in declared order calls a chain of rules ("the members
// after this one") before its first key, one call per member: the positions before a key of a
// 120-member object (Snowplow's event schemas have 130) are walked with the chain on the walk's
// own stack, and must give the masks of a full trie walk by the parser. Replays two instances,
// one that skips to late members and one that gives the first and last, plus an empty object.
TEST(SchemaPositions, ObjectsOfManyOptionalMembersEqualFullTrieWalk) {
  constexpr int kMembers = 120;
  std::string schema = R"({"type": "object", "additionalProperties": false, "properties": {)";
  for (int i = 0; i < kMembers; ++i) {
    const char* type = i % 3 == 0 ? R"({"type": ["string", "null"], "maxLength": 40})"
                       : i % 3 == 1 ? R"({"type": "boolean"})"
                                    : R"({"type": "integer"})";
    schema += (i ? ", " : "") + ("\"field_" + std::to_string(i) + "\": ") + type;
  }
  schema += "}}";
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  auto g = compiler.CompileSchema(schema);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  const CfgGrammar& cfg = *CfgOf(**g);
  long steps = 0;
  for (const std::string& instance :
       {std::string(R"({"field_100": true, "field_117": null, "field_119": 7})"),
        std::string(R"({"field_0": "a b", "field_1": false, "field_118": true})"),
        std::string("{}")}) {
    auto ids = (*vocab)->Encode(instance);
    ASSERT_TRUE(ids.ok());
    ReplayAgainstFullWalk(cfg, **vocab, *ids, instance, /*check_cache=*/false,
                          /*must_allow=*/true, steps);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(steps, 30);
}

// Each string schema as member "v" of an object beside a plain string "w", each value as v's
// (JSON text, escapes included), replayed against full trie walks (ReplayAgainstFullWalk).
void ReplayStringValues(const std::vector<const char*>& value_schemas,
                        const std::vector<const char*>& values, long& steps) {
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  for (const char* value : value_schemas) {
    const std::string schema = std::string(R"({"type": "object", "properties": {"v": )") + value +
                               R"(, "w": {"type": "string"}}, "required": ["v"]})";
    auto g = compiler.CompileSchema(schema);
    ASSERT_TRUE(g.ok()) << schema << ": " << g.status().ToString();
    const CfgGrammar& cfg = *CfgOf(**g);
    for (const char* v : values) {
      const std::string instance = std::string(R"({"v": ")") + v + R"(", "w": "z"})";
      auto ids = (*vocab)->Encode(instance);
      ASSERT_TRUE(ids.ok());
      ReplayAgainstFullWalk(cfg, **vocab, *ids, schema + " " + instance, /*check_cache=*/true,
                            /*must_allow=*/false, steps);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

// A string of minLength k beside a pattern counts its first k characters in states of their own
// before the pattern's loop: each such state's position comes from a region that starts at it
// and holds the chain (RegionBuilder::FindAnchor). Values that close early, run through the
// chain with escapes and multi-byte characters, and go on past it, against full trie walks.
TEST(SchemaPositions, ChainsBeforeAStringLoopEqualFullTrieWalk) {
  long steps = 0;
  ReplayStringValues(
      {R"({"type": "string", "minLength": 3, "maxLength": 64, "pattern": "[A-z]+"})",
       R"({"type": "string", "minLength": 5, "pattern": "^[a-z0-9_]+$"})",
       R"({"type": "string", "minLength": 2, "pattern": "x"})",
       R"({"type": "string", "minLength": 4, "maxLength": 6, "pattern": "\\w"})"},
      {"Asia", "abcde_fgh", "xx", R"(x\u00e9y)", R"(ab\"cd\\ex)", "éàü_xyz", "a1b2",
       "Hello world x", R"(\n\txyz)", "ab"},
      steps);
  if (HasFatalFailure()) return;
  EXPECT_GE(steps, 150);
}

// A string of maxLength under 64 counts its characters down in states of their own (the
// product of its automaton with the bound): a walk at such a state takes a trie subtree whole
// when every run of its bytes' class that deep stays alive (TrieWalker::ClassRun: the
// characters left), and steps it node by node otherwise. Values that stop short of the bound,
// reach it, would pass it, and carry escapes, spaces and multi-byte characters, against full
// trie walks.
TEST(SchemaPositions, StringsShortOfTheirMaxLengthEqualFullTrieWalk) {
  long steps = 0;
  ReplayStringValues(
      {R"({"type": "string", "maxLength": 32, "pattern": "^(\\d+\\.\\d+\\.\\d+.*)$"})",
       R"({"type": "string", "maxLength": 12})",
       R"({"type": "string", "minLength": 2, "maxLength": 20, "pattern": "^[a-z ]+$"})",
       R"({"type": "string", "maxLength": 40, "pattern": "^\\w+(-\\w+)*$"})"},
      {"1.2.3", "1.2.3-beta.1+build.20261206", "10.20.30 and then some words", "abc",
       "hello world here", "a-b-c_d-e", R"(x\u00e9y)", "éàü xyz", R"(1.2.3\"q\\z)",
       "abcdefghijklmnopqrstuvwxyz0123456789abcdef"},
      steps);
  if (HasFatalFailure()) return;
  EXPECT_GE(steps, 150);
}

// Where the 2-byte layout ends: 65,535 states (targets up to 65,534, kept as target + 1) fit;
// one more state does not.
// The rows' differences, eight bytes of entries at a time (EquivalentPlainStates compares rows
// this way), against a class-by-class comparison: narrow and wide tables, row widths that are
// and are not a multiple of a word's entries, rows equal but for a few classes, and a visitor
// that stops early.
TEST(TransitionTable, RowDifferencesAreTheClassesWhereRowsDiffer) {
  std::mt19937 rng(20261205);
  for (const bool wide : {false, true}) {
    for (const std::int32_t nc : {1, 3, 4, 7, 8, 9, 31, 88, 129}) {
      const std::int32_t n = 12;
      TransitionTable t;
      t.Assign(n, nc, wide);
      ASSERT_EQ(t.narrow(), !wide);
      // Row 0 random; every other row a copy with a few classes changed (to another state or dead).
      std::uniform_int_distribution<std::int32_t> state(-1, n - 1), cls(0, nc - 1), few(0, 3);
      for (std::int32_t c = 0; c < nc; ++c) t.Set(c, state(rng));
      for (StateId s = 1; s < n; ++s) {
        for (std::int32_t c = 0; c < nc; ++c) t.Set(static_cast<std::size_t>(s) * nc + c, t[c]);
        for (std::int32_t k = few(rng); k > 0; --k) {
          t.Set(static_cast<std::size_t>(s) * nc + cls(rng), state(rng));
        }
      }
      for (StateId a = 0; a < n; ++a) {
        for (StateId b = 0; b < n; ++b) {
          const TransitionRow ra = t.Row(a, nc), rb = t.Row(b, nc);
          std::vector<std::int32_t> expected, got;
          for (std::int32_t c = 0; c < nc; ++c) {
            if (ra[c] != rb[c]) expected.push_back(c);
          }
          EXPECT_TRUE(ra.ForEachDifference(rb, nc, [&](std::int32_t c) {
            got.push_back(c);
            return true;
          }));
          EXPECT_EQ(got, expected) << "rows " << a << ", " << b << ", " << nc << " classes";
          if (expected.empty()) continue;
          // Stopped at the first difference: false, and no class after it visited.
          std::vector<std::int32_t> first;
          EXPECT_FALSE(ra.ForEachDifference(rb, nc, [&](std::int32_t c) {
            first.push_back(c);
            return false;
          }));
          EXPECT_EQ(first, std::vector<std::int32_t>{expected[0]});
        }
      }
    }
  }
}

TEST(TransitionTable, NarrowUpTo65535States) {
  TransitionTable t;
  t.Assign(65535, 2);
  EXPECT_TRUE(t.narrow());
  t.Set(0, 65534);
  t.Set(1, 0);
  EXPECT_EQ(t[0], 65534);
  EXPECT_EQ(t[1], 0);
  EXPECT_EQ(t[2], CfgProgram::kDead);
  EXPECT_EQ(t.Row(32767, 2)[1], CfgProgram::kDead);
  EXPECT_EQ(t.ByteSize(), 65535u * 2 * 2);
  t.Assign(65536, 2);
  EXPECT_FALSE(t.narrow());
  t.Set(131071, 65535);
  EXPECT_EQ(t[131071], 65535);
  EXPECT_EQ(t.Row(65535, 2)[1], 65535);
  EXPECT_EQ(t.Row(65535, 2)[0], CfgProgram::kDead);
}

}  // namespace
}  // namespace lockstep
