// Fuzzes the compiled-artifact loader (lockstep/artifact.h) on the GPT-2 vocabulary. The input
// either is a whole file (raw bytes: the header checks) or edits one of four real artifacts (a
// lazy and a warmed grammar, a precomputed JSON Schema, a precomputed regex): byte flips at
// chosen offsets, an optional truncation, and, when asked, both checksums recomputed afterwards,
// as a crafted file would have them, so the payload checks themselves are exercised. A load
// must either fail with kInvalidArtifact / kIoError or give a grammar whose matcher runs a few
// steps (fill, accept an allowed token) without fault.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/artifact.h"
#include "lockstep/bitmask.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace {

using namespace lockstep;

struct Env {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::vector<std::string> bases;
};

[[noreturn]] void Die(const Status& st) {
  std::fprintf(stderr, "artifact_fuzz setup: %s\n", st.ToString().c_str());
  std::abort();
}

const Env& GetEnv() {
  static Env* env = [] {
    auto* e = new Env;
    auto v = Vocabulary::Load("gpt2");
    if (!v.ok()) Die(v.status());
    e->vocab = *v;
    e->compiler = std::make_unique<GrammarCompiler>(e->vocab);
    std::ifstream in(DataDirectory() + "/grammars/json.gbnf");
    std::stringstream ss;
    ss << in.rdbuf();
    auto lazy = e->compiler->CompileGrammar(ss.str());
    if (!lazy.ok()) Die(lazy.status());
    e->bases.push_back(SerializeArtifact(**lazy, "grammar", "json.gbnf"));
    Matcher m(*lazy);
    std::vector<std::uint32_t> w(BitmaskWords(e->vocab->logits_width()));
    for (const char* piece : {"{\"k\"", ": [", "1, ", "\"x\"", "]}"}) {
      m.FillNextTokenBitmask(w);
      if (!m.AcceptString(piece)) Die(Status(StatusCode::kInternal, "warm-up text rejected"));
    }
    e->bases.push_back(SerializeArtifact(**lazy, "grammar", "json.gbnf warmed"));
    CompileOptions pre;
    pre.precompute_masks = true;
    auto schema = e->compiler->CompileSchema(
        R"({"type":"object","properties":{"n":{"type":"integer","minimum":-5},)"
        R"("s":{"type":"string","maxLength":4},"e":{"enum":["a","b",null]}},"required":["n"]})",
        pre);
    if (!schema.ok()) Die(schema.status());
    e->bases.push_back(SerializeArtifact(**schema, "schema", ""));
    auto regex = e->compiler->CompileRegex("(ab|cd)*[0-9]{2,4}(x|yz)?", pre);
    if (!regex.ok()) Die(regex.status());
    e->bases.push_back(SerializeArtifact(**regex, "regex", ""));
    return e;
  }();
  return *env;
}

std::uint32_t Crc(const std::string& s, std::size_t from, std::size_t n) {
  return static_cast<std::uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                          reinterpret_cast<const Bytef*>(s.data() + from),
                                          static_cast<uInt>(n)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Env& env = GetEnv();
  if (size < 2) return 0;
  std::string file;
  const std::uint8_t mode = data[0];
  std::size_t at = 2;
  auto u32 = [&]() -> std::uint32_t {
    std::uint32_t v = 0;
    for (int k = 0; k < 4 && at < size; ++k) v |= static_cast<std::uint32_t>(data[at++]) << (8 * k);
    return v;
  };
  if ((mode & 7) == 7) {
    file.assign(reinterpret_cast<const char*>(data + 1), size - 1);  // raw bytes as a file
  } else {
    file = env.bases[(mode & 7) % env.bases.size()];
    const bool truncate = mode & 0x08, fix = mode & 0x10;
    const std::uint8_t edits = data[1] % 16;
    for (std::uint8_t i = 0; i < edits && at + 5 <= size; ++i) {
      const std::uint32_t off = u32();
      const std::uint8_t x = data[at++];
      // Offsets weighted toward the header and the automaton (the first few KB).
      const std::size_t o = (off & 0x80000000u) ? off % file.size() : off % std::min<std::size_t>(file.size(), 4096);
      file[o] = static_cast<char>(file[o] ^ (x == 0 ? 1 : x));
    }
    if (truncate) file.resize(u32() % (file.size() + 1));
    if (fix && file.size() >= 64) {
      const std::uint64_t payload = file.size() - 64;
      std::memcpy(&file[40], &payload, 8);
      const std::uint64_t pc = ArtifactPayloadHash(std::string_view(file).substr(64));
      std::memcpy(&file[48], &pc, 8);
      const std::uint32_t hc = Crc(file, 0, 56);
      std::memcpy(&file[56], &hc, 4);
    }
  }
  (void)InspectArtifact(file);
  auto r = LoadArtifact(*env.compiler, file);
  if (!r.ok()) {
    const StatusCode c = r.status().code();
    if (c != StatusCode::kInvalidArtifact || r.status().message().empty()) {
      std::fprintf(stderr, "unexpected status: %s\n", r.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  Matcher m(*r);
  std::vector<std::uint32_t> w(BitmaskWords((*r)->logits_width()));
  const TokenId width = (*r)->logits_width();
  for (int step = 0; step < 8 && !m.IsTerminated(); ++step) {
    m.FillNextTokenBitmask(w);
    TokenId pick = kNoToken;
    TokenId start = static_cast<TokenId>((at < size ? data[at++] : step) * 197 % width);
    for (TokenId k = 0; k < width; ++k) {
      const TokenId id = (start + k) % width;
      if ((w[id >> 5] >> (id & 31)) & 1) {
        pick = id;
        break;
      }
    }
    if (pick == kNoToken) break;
    m.AcceptToken(pick);
  }
  return 0;
}
