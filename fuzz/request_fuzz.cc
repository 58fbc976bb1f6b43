// Fuzzes CompileRequest (lockstep/request.h) on the GPT-2 vocabulary: the input is a
// chat-completions body, compiled with the format "qwen" given (inputs of odd length) or left
// to the body. It must give a grammar or an error with a message, never crash; a grammar's
// matcher takes a few allowed tokens, and with tools ParseToolCalls reads them back (an error
// with a message for a cut-short call is fine).
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
#include "lockstep/request.h"
#include "lockstep/structured.h"
#include "lockstep/vocabulary.h"

namespace {

using namespace lockstep;

const GrammarCompiler& Compiler() {
  static GrammarCompiler* compiler = [] {
    auto v = Vocabulary::Load("gpt2");
    if (!v.ok()) {
      std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
      std::abort();
    }
    return new GrammarCompiler(*v);
  }();
  return *compiler;
}

void CheckError(const Status& st, const char* what) {
  if (st.ok()) return;
  if (st.message().empty() || st.code() == StatusCode::kInternal) {
    std::fprintf(stderr, "%s: bad error: %s\n", what, st.ToString().c_str());
    std::abort();
  }
}

// Up to six allowed tokens, each the first allowed at or after a spot picked by the step.
std::vector<TokenId> Walk(const std::shared_ptr<const CompiledGrammar>& g) {
  Matcher m(g);
  std::vector<std::uint32_t> mask(BitmaskWords(g->logits_width()));
  std::vector<TokenId> out;
  for (std::int32_t step = 0; step < 6 && !m.IsTerminated(); ++step) {
    m.FillNextTokenBitmask(mask);
    for (TokenId k = 0; k < g->logits_width(); ++k) {
      const TokenId id = (step * 7919 + k) % g->logits_width();
      if (((mask[id >> 5] >> (id & 31)) & 1) == 0) continue;
      if (!m.AcceptToken(id)) {
        std::fprintf(stderr, "an allowed token was refused\n");
        std::abort();
      }
      if (!m.IsTerminated()) out.push_back(id);
      break;
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  RequestOptions options;
  if (size % 2 == 1) options.format = "qwen";
  options.compile.max_dfa_states = 3000;
  options.compile.schema_max_exprs = 20000;
  auto r = CompileRequest(Compiler(), body, options);
  CheckError(r.status(), "CompileRequest");
  if (!r.ok()) return 0;
  const std::vector<TokenId> ids = Walk(r->grammar);
  if (!r->tool_choice.empty()) {
    CheckError(ParseToolCalls(r->format, Compiler().vocabulary(), ids, r->tools).status(),
               "ParseToolCalls");
  }
  return 0;
}
