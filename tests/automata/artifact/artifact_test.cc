// Compiled artifacts (.lsg) on the real Llama-3 vocabulary: a loaded artifact gives the same
// masks as a fresh compile at every step of random walks (regex, GBNF grammar, bundled and
// dev-set JSON Schemas, with the caches empty, warmed, or fully precomputed), and every kind of
// bad file (foreign, truncated, corrupted, another vocabulary, another format version) is an
// kInvalidArtifact error naming a byte offset, never a crash.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lockstep/artifact.h"
#include "lockstep/bitmask.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"
#include "test_data.h"

namespace lockstep {
namespace {

using testing::ReadFile;
using testing::SharedDataDir;
using testing::SourceDataDir;
using testing::TestScale;

struct Env {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
};

const Env& Llama3() {
  static Env* env = [] {
    auto* e = new Env;
    auto v = Vocabulary::Load("llama3");
    EXPECT_TRUE(v.ok()) << v.status().ToString();
    e->vocab = *v;
    e->compiler = std::make_unique<GrammarCompiler>(e->vocab);
    return e;
  }();
  return *env;
}

std::vector<std::uint32_t> Mask(const Matcher& m) {
  std::vector<std::uint32_t> w(BitmaskWords(m.grammar().logits_width()));
  m.FillNextTokenBitmask(w);
  return w;
}

// Random walks through `fresh` and `loaded` side by side: the same mask at every step, the same
// verdict on a random token, then a random allowed token (EOS only at the end of a walk).
// Returns the number of masks compared.
long CompareWalks(const std::shared_ptr<const CompiledGrammar>& fresh,
                  const std::shared_ptr<const CompiledGrammar>& loaded, int walks, int max_steps,
                  std::uint32_t seed, const std::string& what) {
  std::mt19937 rng(seed);
  long compared = 0;
  const TokenId width = fresh->logits_width();
  for (int w = 0; w < walks; ++w) {
    Matcher a(fresh), b(loaded);
    for (int step = 0; step < max_steps && !a.IsTerminated(); ++step) {
      const auto ma = Mask(a), mb = Mask(b);
      ++compared;
      if (ma != mb) {
        ADD_FAILURE() << what << ": walk " << w << " step " << step << ": masks differ";
        return compared;
      }
      std::vector<TokenId> allowed;
      for (TokenId id = 0; id < width; ++id) {
        if ((ma[id >> 5] >> (id & 31)) & 1) allowed.push_back(id);
      }
      if (allowed.empty()) break;
      const TokenId probe = static_cast<TokenId>(rng() % width);
      Matcher pa = a.Fork(), pb = b.Fork();
      EXPECT_EQ(pa.AcceptToken(probe), pb.AcceptToken(probe)) << what << ": token " << probe;
      // Prefer text tokens so walks go deep; EOS ends the walk when it is the only way on.
      std::vector<TokenId> text;
      for (TokenId id : allowed) {
        if (id != fresh->vocabulary().eos()) text.push_back(id);
      }
      const std::vector<TokenId>& pool = text.empty() ? allowed : text;
      const TokenId tok = pool[rng() % pool.size()];
      if (!a.AcceptToken(tok) || !b.AcceptToken(tok)) {
        ADD_FAILURE() << what << ": an allowed token " << tok << " was not accepted";
        return compared;
      }
    }
  }
  return compared;
}

std::shared_ptr<const CompiledGrammar> RoundTrip(const std::shared_ptr<const CompiledGrammar>& g,
                                                 const char* kind = "test") {
  const std::string bytes = SerializeArtifact(*g, kind, "source text");
  auto loaded = LoadArtifact(*Llama3().compiler, bytes);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return nullptr;
  // What was cached travels with it.
  const CompiledGrammarStats s0 = g->Stats(), s1 = (*loaded)->Stats();
  EXPECT_EQ(s0.is_grammar, s1.is_grammar);
  EXPECT_EQ(s0.dfa_states, s1.dfa_states);
  EXPECT_EQ(s0.cached_masks, s1.cached_masks);
  EXPECT_EQ(s0.positions, s1.positions);
  EXPECT_EQ(s0.signatures, s1.signatures);
  return *loaded;
}

TEST(ArtifactTest, RegexRoundTripEqualsFreshCompile) {
  const Env& env = Llama3();
  const char* pattern = R"((\+\d{1,3} )?\(\d{3}\) \d{3}-\d{4}|[a-z][a-z0-9._]{0,20}@[a-z]+\.(com|org|net))";
  auto fresh = env.compiler->CompileRegex(pattern);
  ASSERT_TRUE(fresh.ok()) << fresh.status().ToString();
  // Lazy (nothing cached), then with every state's mask cached.
  auto lazy = env.compiler->CompileRegex(pattern);
  auto loaded = RoundTrip(*lazy);
  ASSERT_NE(loaded, nullptr);
  EXPECT_GT(CompareWalks(*fresh, loaded, 12, 40, 1, "regex lazy"), 100);
  CompileOptions pre;
  pre.precompute_masks = true;
  auto full = env.compiler->CompileRegex(pattern, pre);
  ASSERT_TRUE(full.ok());
  EXPECT_GT((*full)->Stats().cached_masks, 10);
  loaded = RoundTrip(*full);
  ASSERT_NE(loaded, nullptr);
  EXPECT_GT(CompareWalks(*fresh, loaded, 12, 40, 2, "regex precomputed"), 100);
}

TEST(ArtifactTest, GrammarRoundTripEqualsFreshCompile) {
  const Env& env = Llama3();
  std::int64_t cached_masks = 0;
  for (const char* name : {"json", "tool_calls", "arithmetic_leftrec", "sql_select"}) {
    const std::string text = ReadFile(SourceDataDir() + "/grammars/" + name + ".gbnf");
    ASSERT_FALSE(text.empty()) << name;
    auto fresh = env.compiler->CompileGrammar(text);
    ASSERT_TRUE(fresh.ok()) << name << ": " << fresh.status().ToString();
    // Warmed by walks (positions, signatures and finished masks cached), then saved. (No
    // background positions: what is cached must not change between the save and RoundTrip's
    // comparison of the counts.)
    CompileOptions quiet;
    quiet.background_positions = false;
    auto warm = env.compiler->CompileGrammar(text, quiet);
    ASSERT_TRUE(warm.ok());
    CompareWalks(*fresh, *warm, 3, 30, 7, name);
    ASSERT_GT((*warm)->Stats().positions, 0) << name;
    // Finished masks are cached only for states with several kernel positions or tails to
    // check; the walks of some grammars reach none, but the four together must carry some.
    cached_masks += (*warm)->Stats().cached_masks;
    auto loaded = RoundTrip(*warm, "grammar");
    ASSERT_NE(loaded, nullptr);
    const int walks = std::max(2, static_cast<int>(8 * TestScale()));
    EXPECT_GT(CompareWalks(*fresh, loaded, walks, 40, 11, name), 20) << name;
  }
  EXPECT_GT(cached_masks, 0);
}

TEST(ArtifactTest, SchemaRoundTripEqualsFreshCompile) {
  const Env& env = Llama3();
  std::vector<std::pair<std::string, std::string>> schemas;
  for (const char* name : {"book_flight", "get_weather"}) {
    schemas.emplace_back(name, ReadFile(SourceDataDir() + "/tools/" + name + ".json"));
  }
  const std::filesystem::path dev = SharedDataDir() + "/jsonschemabench-dev/maskbench";
  if (std::filesystem::is_directory(dev)) {
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dev)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    const std::size_t want = std::max<std::size_t>(3, static_cast<std::size_t>(24 * TestScale()));
    for (std::size_t i = 0; i < files.size() && schemas.size() < want + 2; i += 7) {
      auto j = nlohmann::json::parse(ReadFile(files[i].string()), nullptr, false);
      if (j.is_discarded() || !j.contains("schema")) continue;
      schemas.emplace_back(files[i].filename().string(), j["schema"].dump());
    }
  } else {
    std::printf("note: %s absent; the dev-set schemas are skipped (bundled ones only)\n",
                dev.string().c_str());
  }
  int compiled = 0;
  CompileOptions quiet;  // (saved lazily below: its cached counts must hold still, see above)
  quiet.background_positions = false;
  for (const auto& [name, text] : schemas) {
    auto fresh = env.compiler->CompileSchema(text, quiet);
    if (!fresh.ok()) continue;  // schemas the compiler refuses are covered elsewhere
    ++compiled;
    CompileOptions pre;
    pre.precompute_masks = true;
    auto full = env.compiler->CompileSchema(text, pre);
    ASSERT_TRUE(full.ok()) << name;
    auto loaded = RoundTrip(*full, "schema");
    ASSERT_NE(loaded, nullptr) << name;
    EXPECT_GT(CompareWalks(*fresh, loaded, 3, 60, 5, name), 10) << name;
    // A lazy artifact (program only) loads and fills the same masks too.
    auto lazy = RoundTrip(*fresh, "schema");
    ASSERT_NE(lazy, nullptr) << name;
    CompareWalks(*fresh, lazy, 1, 60, 9, name + " lazy");
  }
  EXPECT_GE(compiled, 2);
}

std::uint32_t Crc(const std::string& s, std::size_t from, std::size_t n) {
  return static_cast<std::uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(s.data() + from), static_cast<uInt>(n)));
}
// Recomputes both checksums after an edit (what a malicious file could do).
void FixChecksums(std::string& s) {
  if (s.size() < 64) return;
  const std::uint64_t pc = ArtifactPayloadHash(std::string_view(s).substr(64));
  std::memcpy(&s[48], &pc, 8);
  const std::uint32_t hc = Crc(s, 0, 56);
  std::memcpy(&s[56], &hc, 4);
}

std::string SchemaArtifact() {
  const Env& env = Llama3();
  CompileOptions pre;
  pre.precompute_masks = true;
  auto g = env.compiler->CompileSchema(ReadFile(SourceDataDir() + "/tools/get_weather.json"), pre);
  EXPECT_TRUE(g.ok());
  return SerializeArtifact(**g, "schema", "get_weather.json");
}

void ExpectInvalid(const std::string& bytes, const std::string& needle, const char* what) {
  auto r = LoadArtifact(*Llama3().compiler, bytes);
  ASSERT_FALSE(r.ok()) << what;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArtifact) << what << ": " << r.status().ToString();
  EXPECT_EQ(r.status().location().rfind("byte ", 0), 0u) << what << ": " << r.status().ToString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos)
      << what << ": " << r.status().ToString();
}

TEST(ArtifactTest, InspectReportsHeaderAndSource) {
  const std::string bytes = SchemaArtifact();
  auto info = InspectArtifact(bytes);
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->format_version, kArtifactFormatVersion);
  EXPECT_TRUE(info->is_grammar);
  EXPECT_EQ(info->vocab_fingerprint, Llama3().vocab->Fingerprint());
  EXPECT_EQ(info->vocab_size, Llama3().vocab->size());
  EXPECT_EQ(info->source_kind, "schema");
  EXPECT_EQ(info->source, "get_weather.json");
  EXPECT_EQ(info->payload_bytes + 64, bytes.size());
}

TEST(ArtifactTest, BadFilesAreClearErrors) {
  const std::string good = SchemaArtifact();
  ASSERT_TRUE(LoadArtifact(*Llama3().compiler, good).ok());
  ExpectInvalid("", "not a lockstep artifact", "empty");
  ExpectInvalid(R"({"type": "object"})", "not a lockstep artifact", "a JSON file");
  ExpectInvalid(good.substr(0, 40), "truncated header", "cut in the header");
  for (std::size_t cut : {std::size_t{64}, std::size_t{65}, good.size() / 2, good.size() - 1}) {
    ExpectInvalid(good.substr(0, cut), "truncated", "truncated payload");
  }
  ExpectInvalid(good + "x", "trailing bytes", "trailing byte");
  std::string flipped = good;
  flipped[good.size() / 3] ^= 0x40;
  ExpectInvalid(flipped, "checksum", "flipped payload byte");
  std::string header = good;
  header[20] ^= 1;  // inside the fingerprint, header checksum not updated
  ExpectInvalid(header, "header checksum", "flipped header byte");
  std::string version = good;
  const std::uint32_t v2 = kArtifactFormatVersion + 1;
  std::memcpy(&version[8], &v2, 4);
  FixChecksums(version);
  ExpectInvalid(version, "format version", "newer format version");
  // The right file for another tokenizer.
  auto gpt2 = Vocabulary::Load("gpt2");
  ASSERT_TRUE(gpt2.ok());
  GrammarCompiler other(*gpt2);
  auto r = LoadArtifact(other, good);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArtifact);
  EXPECT_NE(r.status().message().find("another vocabulary"), std::string::npos) << r.status().ToString();
  // Files.
  auto missing = ReadArtifactFile(*Llama3().compiler, "/nonexistent/x.lsg");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
  const std::string path = ::testing::TempDir() + "/artifact_test.lsg";
  ASSERT_TRUE(WriteArtifactFile(**Llama3().compiler->CompileRegex("[0-9]+"), path).ok());
  auto from_file = ReadArtifactFile(*Llama3().compiler, path);
  ASSERT_TRUE(from_file.ok()) << from_file.status().ToString();
  std::filesystem::remove(path);
}

// Edits behind a valid checksum (a crafted file): every one is either refused with
// kInvalidArtifact or loads into a grammar whose matcher runs without fault (the sanitizer build
// checks memory safety of what follows). Every byte of the header and program area is edited
// once; the rest at random offsets. Then every offset of the program area is overwritten with
// 32-bit extremes (INT32_MAX, INT32_MIN, -2).
TEST(ArtifactTest, CraftedEditsAreRefusedOrHarmless) {
  const Env& env = Llama3();
  std::vector<std::string> bases = {SchemaArtifact()};
  {
    auto g = env.compiler->CompileGrammar(ReadFile(SourceDataDir() + "/grammars/json.gbnf"));
    ASSERT_TRUE(g.ok());
    Matcher m(*g);
    for (const char* piece : {"{\"a\"", ": [1", ", 2", "]}"}) {
      Mask(m);
      ASSERT_TRUE(m.AcceptString(piece));
    }
    bases.push_back(SerializeArtifact(**g));
    bases.push_back(SerializeArtifact(**env.compiler->CompileRegex("(ab|cd)*[0-9]{2,4}", {.precompute_masks = true})));
  }
  std::mt19937 rng(3);
  int refused = 0, loaded = 0;
  const int random_edits = std::max(50, static_cast<int>(400 * TestScale()));
  for (const std::string& base : bases) {
    const std::size_t dense = std::min<std::size_t>(base.size(), 64 + 1200);
    std::vector<std::size_t> offsets;
    const std::size_t step = TestScale() < 1 ? 7 : 1;
    for (std::size_t o = 0; o < dense; o += step) offsets.push_back(o);
    for (int i = 0; i < random_edits; ++i) offsets.push_back(rng() % base.size());
    // Loads `bad` and, if it loads, runs a matcher over it for a few random tokens.
    auto try_load = [&](const std::string& bad) {
      auto r = LoadArtifact(*env.compiler, bad);
      if (!r.ok()) {
        ++refused;
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArtifact) << r.status().ToString();
        return;
      }
      ++loaded;
      Matcher m(*r);
      for (int s = 0; s < 6 && !m.IsTerminated(); ++s) {
        const auto mask = Mask(m);
        TokenId pick = kNoToken;
        for (TokenId id = static_cast<TokenId>(rng() % (*r)->logits_width()), k = 0;
             k < (*r)->logits_width(); ++k, id = (id + 1) % (*r)->logits_width()) {
          if ((mask[id >> 5] >> (id & 31)) & 1) {
            pick = id;
            break;
          }
        }
        if (pick == kNoToken) break;
        m.AcceptToken(pick);
      }
    };
    for (std::size_t o : offsets) {
      std::string bad = base;
      bad[o] = static_cast<char>(bad[o] ^ (1u << (rng() % 8)));
      if (o >= 8) FixChecksums(bad);
      try_load(bad);
    }
    // Extreme 32-bit values over the program area: a count, index or bound at the edge of its
    // type must be refused (or be harmless) without arithmetic overflow in the checks.
    for (std::size_t o = 64; o + 4 <= dense; o += step) {
      for (const std::int32_t v : {std::numeric_limits<std::int32_t>::max(),
                                   std::numeric_limits<std::int32_t>::min(), std::int32_t{-2}}) {
        std::string bad = base;
        std::memcpy(&bad[o], &v, 4);
        FixChecksums(bad);
        try_load(bad);
      }
    }
  }
  EXPECT_GT(refused, 100);
  std::printf("crafted edits: %d refused, %d loaded and ran\n", refused, loaded);
}

}  // namespace
}  // namespace lockstep
