// Fuzzes the triggered-constraint parsers (lockstep/structured.h) on the GPT-2 vocabulary: the
// input is split at NUL bytes into a format file, a tools file and a generated output (token
// ids, two bytes each). ParseFormat and ParseTools must return a value or an error with a
// location, never crash; when both succeed the structured grammar is compiled (small budgets)
// and a matcher takes a few allowed tokens; ParseToolCalls runs on the output under the parsed
// format and under every bundled one.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/bitmask.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/structured.h"
#include "lockstep/vocabulary.h"

namespace {

using namespace lockstep;

struct Env {
  std::shared_ptr<const Vocabulary> vocab;
  std::unique_ptr<GrammarCompiler> compiler;
  std::vector<StructuredFormat> bundled;
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
    e->compiler = std::make_unique<GrammarCompiler>(e->vocab);
    for (const std::string& name : BundledFormatNames()) {
      auto f = LoadFormat(name);
      if (!f.ok()) {
        std::fprintf(stderr, "%s\n", f.status().ToString().c_str());
        std::abort();
      }
      e->bundled.push_back(*f);
    }
    return e;
  }();
  return *env;
}

void CheckError(const Status& st, const char* what) {
  if (st.ok()) return;
  if (st.message().empty() || st.code() == StatusCode::kInternal) {
    std::fprintf(stderr, "%s: bad error: %s\n", what, st.ToString().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Env& env = GetEnv();
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> parts;
  for (std::size_t start = 0; parts.size() < 2;) {
    const std::size_t nul = in.find('\0', start);
    if (nul == std::string_view::npos) break;
    parts.push_back(in.substr(start, nul - start));
    in.remove_prefix(nul + 1);
  }
  while (parts.size() < 2) parts.push_back({});
  std::vector<TokenId> ids;
  for (std::size_t i = 0; i + 1 < in.size(); i += 2) {
    const unsigned v = static_cast<unsigned char>(in[i]) | (static_cast<unsigned char>(in[i + 1]) << 8);
    ids.push_back(static_cast<TokenId>(v % static_cast<unsigned>(env.vocab->size())));
  }
  auto format = ParseFormat(parts[0], "fuzz");
  CheckError(format.status(), "ParseFormat");
  auto tools = ParseTools(parts[1]);
  CheckError(tools.status(), "ParseTools");
  if (format.ok() && tools.ok()) {
    CompileOptions o;
    o.max_dfa_states = 3000;
    o.schema_max_exprs = 20000;
    auto g = CompileStructured(*env.compiler, *format, *tools, o);
    CheckError(g.status(), "CompileStructured");
    if (g.ok()) {
      Matcher m(*g);
      std::vector<std::uint32_t> mask(BitmaskWords((*g)->logits_width()));
      for (std::size_t step = 0; step < 6 && !m.IsTerminated(); ++step) {
        m.FillNextTokenBitmask(mask);
        const TokenId start = step < ids.size() ? ids[step] : 0;
        for (TokenId k = 0; k < (*g)->logits_width(); ++k) {
          const TokenId id = (start + k) % (*g)->logits_width();
          if ((mask[id >> 5] >> (id & 31)) & 1) {
            if (!m.AcceptToken(id)) {
              std::fprintf(stderr, "an allowed token was refused\n");
              std::abort();
            }
            break;
          }
        }
      }
    }
  }
  if (format.ok()) CheckError(ParseToolCalls(*format, *env.vocab, ids).status(), "ParseToolCalls");
  for (const StructuredFormat& f : env.bundled) {
    auto calls = ParseToolCalls(f, *env.vocab, ids);
    // Bundled formats may name special tokens GPT-2 lacks: that is an error with a message.
    CheckError(calls.status(), "ParseToolCalls (bundled)");
  }
  return 0;
}
