// libFuzzer target for the regex pipeline (CompileRegexToDfa): any byte string must yield a
// DFA that satisfies the ByteDfa invariants or a clean error, within small budgets, never a
// crash, a hang or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "automata/regex/regex_compiler.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  lockstep::RegexCompileOptions options;
  options.max_nfa_states = 20000;
  options.max_dfa_states = 2000;
  options.max_repeat = 200;
  options.max_nesting_depth = 200;
  options.max_subset_elements = 200000;
  lockstep::Result<lockstep::ByteDfa> dfa = lockstep::CompileRegexToDfa(pattern, options);
  if (!dfa.ok()) {
    const lockstep::StatusCode code = dfa.status().code();
    if (code != lockstep::StatusCode::kInvalidRegex &&
        code != lockstep::StatusCode::kResourceLimit) {
      std::abort();
    }
    if (dfa.status().location().rfind("offset ", 0) != 0) std::abort();
    return 0;
  }
  if (!lockstep::CheckDfaInvariants(*dfa).empty()) std::abort();
  // Exercise the matcher on the pattern itself.
  (void)dfa->FullMatch(pattern);
  return 0;
}
