// Fuzzes the grammar Matcher's state handling: random sequences of AcceptToken (chosen among the
// ids the fast mask allows, or any id), AcceptString, Rollback(n), Fork (switching between
// forks), Reset, over the shipped grammars and one with token items (<[ID]>, !<[ID]>) on the
// GPT-2 vocabulary. After every operation the
// matcher under test is checked against an oracle matcher rebuilt from scratch by replaying the
// accepted history: same CanEnd, same fast mask, and for 48 random ids the mask bit equals
// whether the oracle accepts the token (brute force). Any difference aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace {

using namespace lockstep;

struct Env {
  std::shared_ptr<const Vocabulary> vocab;
  std::vector<std::shared_ptr<const CompiledGrammar>> grammars;
};

const Env& GetEnv() {
  static Env* env = [] {
    auto* e = new Env;
    auto v = Vocabulary::Load("gpt2");
    if (!v.ok()) {
      std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
      std::abort();
    }
    e->vocab = *v;
    GrammarCompiler compiler(e->vocab);
    for (const char* name : {"json", "arithmetic_leftrec", "c_call", "sql_select", "tool_calls"}) {
      std::ifstream in(DataDirectory() + "/grammars/" + name + ".gbnf");
      std::stringstream ss;
      ss << in.rdbuf();
      auto g = compiler.CompileGrammar(ss.str());
      if (!g.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, g.status().ToString().c_str());
        std::abort();
      }
      e->grammars.push_back(*g);
    }
    // Token items (GPT-2: 13 is ".", 262 is " the"): a text token taken as an item, as bytes, or
    // both at once.
    auto tokens = compiler.CompileGrammar(
        "root ::= item{0,6} \"!\"\nitem ::= !<[13]> | \".\" [a-z]{0,3} | <[262]> \"x\" | \"ab\"");
    if (!tokens.ok()) {
      std::fprintf(stderr, "tokens: %s\n", tokens.status().ToString().c_str());
      std::abort();
    }
    e->grammars.push_back(*tokens);
    return e;
  }();
  return *env;
}

// One step of history: a token or raw bytes.
struct Step {
  TokenId token = kNoToken;
  std::string bytes;
};

struct Tracked {
  Matcher m;
  std::vector<Step> history;
};

void Check(const Tracked& t, const std::shared_ptr<const CompiledGrammar>& g, std::uint32_t salt) {
  Matcher oracle(g);
  for (const Step& s : t.history) {
    bool ok = s.token != kNoToken ? oracle.AcceptToken(s.token) : oracle.AcceptString(s.bytes);
    if (!ok) {
      std::fprintf(stderr, "replay of the history failed\n");
      std::abort();
    }
  }
  if (oracle.CanEnd() != t.m.CanEnd() || oracle.IsTerminated() != t.m.IsTerminated()) {
    std::fprintf(stderr, "CanEnd/IsTerminated differ from the replayed oracle\n");
    std::abort();
  }
  const std::size_t words = BitmaskWords(g->logits_width());
  std::vector<std::uint32_t> a(words), b(words);
  t.m.FillNextTokenBitmask(a);
  oracle.FillNextTokenBitmask(b);
  if (a != b) {
    std::fprintf(stderr, "mask differs from the replayed oracle's\n");
    std::abort();
  }
  if (t.m.IsTerminated()) return;
  std::uint64_t x = 0x9E3779B97F4A7C15ull ^ salt;
  for (int k = 0; k < 48; ++k) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    TokenId id = static_cast<TokenId>(x % static_cast<std::uint64_t>(g->logits_width()));
    bool bit = (a[id >> 5] >> (id & 31)) & 1;
    bool accepts = oracle.AcceptToken(id);
    if (accepts) oracle.Rollback(1);
    if (bit != accepts) {
      std::fprintf(stderr, "mask bit of id %d is %d, brute force says %d\n", id, bit, accepts);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const Env& env = GetEnv();
  auto g = env.grammars[data[0] % env.grammars.size()];
  std::vector<Tracked> forks;
  forks.push_back({Matcher(g), {}});
  std::size_t cur = 0;
  std::vector<std::uint32_t> mask(BitmaskWords(g->logits_width()));
  std::size_t i = 1;
  int ops = 0;
  while (i + 1 < size && ops < 48) {
    ++ops;
    const std::uint8_t op = data[i++] % 8, arg = data[i++];
    Tracked& t = forks[cur];
    switch (op) {
      case 0:
      case 1:
      case 2: {  // accept the arg-th allowed token
        t.m.FillNextTokenBitmask(mask);
        std::vector<TokenId> allowed;
        for (std::size_t w = 0; w < mask.size(); ++w) {
          for (std::uint32_t bits = mask[w]; bits; bits &= bits - 1) {
            allowed.push_back(static_cast<TokenId>(w * 32 + __builtin_ctz(bits)));
          }
        }
        if (allowed.empty()) break;
        TokenId id = allowed[(arg * 7919u + ops) % allowed.size()];
        if (!t.m.AcceptToken(id)) {
          std::fprintf(stderr, "an allowed token was rejected\n");
          std::abort();
        }
        t.history.push_back({id, {}});
        break;
      }
      case 3: {  // any id: accepted iff allowed
        TokenId id = static_cast<TokenId>((arg * 197u + i * 31u) % g->logits_width());
        t.m.FillNextTokenBitmask(mask);
        bool bit = (mask[id >> 5] >> (id & 31)) & 1;
        bool ok = t.m.AcceptToken(id);
        if (ok != bit) {
          std::fprintf(stderr, "AcceptToken(%d) = %d but mask bit = %d\n", id, ok, bit);
          std::abort();
        }
        if (ok) t.history.push_back({id, {}});
        break;
      }
      case 4: {  // raw bytes from the input
        std::size_t n = std::min<std::size_t>(arg % 6, size - i);
        std::string bytes(reinterpret_cast<const char*>(data + i), n);
        i += n;
        if (t.m.AcceptString(bytes)) t.history.push_back({kNoToken, bytes});
        break;
      }
      case 5: {  // rollback
        std::int32_t n = arg % 4;
        bool ok = t.m.Rollback(n);
        if (ok != (n <= static_cast<std::int32_t>(t.history.size()))) {
          std::fprintf(stderr, "Rollback(%d) with %zu steps returned %d\n", n, t.history.size(), ok);
          std::abort();
        }
        if (ok) t.history.resize(t.history.size() - n);
        break;
      }
      case 6:  // fork, continue on the fork or switch to another
        if (forks.size() < 4) {
          forks.push_back({forks[cur].m.Fork(), forks[cur].history});
          cur = forks.size() - 1;
        } else {
          cur = arg % forks.size();
        }
        break;
      case 7:
        if (arg % 8 == 0) {
          t.m.Reset();
          t.history.clear();
        }
        break;
    }
    Check(forks[cur], g, arg);
  }
  for (const Tracked& t : forks) Check(t, g, 1);
  return 0;
}
