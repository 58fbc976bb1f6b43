// libFuzzer target for ParseGbnf: any byte string yields a grammar or a clean kInvalidGrammar /
// kResourceLimit error with a "line:column" location, never a crash or a hang. A grammar that
// parses must print to GBNF that parses back structurally equal, and Normalize must succeed
// and be idempotent.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "grammar/ir/grammar_ir.h"

namespace lg = lockstep::grammar;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lg::GrammarParseOptions options;
  options.max_nesting_depth = 200;
  options.max_repeat = 1000;
  options.allow_unused_rules = size > 0 && (data[0] & 1);
  lockstep::Result<lg::Grammar> g = lg::ParseGbnf(text, options);
  if (!g.ok()) {
    const lockstep::StatusCode code = g.status().code();
    if (code != lockstep::StatusCode::kInvalidGrammar &&
        code != lockstep::StatusCode::kResourceLimit) {
      std::abort();
    }
    if (g.status().location().find(':') == std::string::npos) std::abort();
    return 0;
  }
  lg::GrammarParseOptions reparse = options;
  reparse.allow_unused_rules = true;
  // Printing may add a group where the source had none (a case-insensitive Lark literal).
  reparse.max_nesting_depth = 2 * options.max_nesting_depth + 8;
  lockstep::Result<lg::Grammar> again = lg::ParseGbnf(lg::PrintGbnf(*g), reparse);
  if (!again.ok() || !lg::StructurallyEqual(*g, *again)) std::abort();
  (void)lg::NullableRules(*g);
  lg::Grammar normalized = *g;
  if (!lg::Normalize(normalized).ok()) std::abort();
  lg::Grammar twice = normalized;
  if (!lg::Normalize(twice).ok() || !lg::StructurallyEqual(normalized, twice)) std::abort();
  return 0;
}
