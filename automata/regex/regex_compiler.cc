// CompileRegexToDfa, the external interface of the regex pipeline (parse -> byte NFA -> subset
// DFA -> minimal DFA), plus DumpDfa and CheckDfaInvariants for tests and debugging.
#include <cstdio>
#include <new>
#include <string>
#include <utility>

#include "automata/regex/regex_compiler.h"
#include "automata/regex/byte_nfa.h"
#include "automata/regex/dfa_builder.h"
#include "grammar/regex/regex_parser.h"

namespace lockstep {
namespace {

Result<ByteDfa> CompileImpl(std::string_view pattern, const RegexCompileOptions& options) {
  RegexParseOptions parse_options;
  parse_options.max_repeat = options.max_repeat;
  parse_options.max_nesting_depth = options.max_nesting_depth;
  parse_options.anchor_markers = options.anchor_markers;
  LOCKSTEP_ASSIGN_OR_RETURN(RegexAst ast, ParseRegex(pattern, parse_options));
  LOCKSTEP_ASSIGN_OR_RETURN(ByteNfa nfa, CompileAstToNfa(ast, options.max_nfa_states));
  LOCKSTEP_ASSIGN_OR_RETURN(SubsetDfa subset, BuildSubsetDfa(nfa, options));
  // Minimisation is O(k n log n) in the states the subset construction was allowed: polled
  // before it, not inside.
  if (options.deadline.PassedNow()) return options.deadline.Error("");
  return MinimizeDfa(subset);
}

}  // namespace

Result<ByteDfa> CompileRegexToDfa(std::string_view pattern, const RegexCompileOptions& options) {
  // The budgets bound memory; bad_alloc can still come from a tiny machine, and must not escape.
  try {
    return CompileImpl(pattern, options);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory compiling the regex",
                  "offset 0");
  }
}

std::string DumpDfa(const ByteDfa& dfa) {
  std::string out = "start " + std::to_string(dfa.start) + "\n";
  char buf[32];
  for (StateId s = 1; s < dfa.num_states; ++s) {
    out += std::to_string(s);
    if (dfa.IsAccepting(s)) out += '*';
    out += ':';
    int b = 0;
    while (b < 256) {
      const StateId t = dfa.Step(s, static_cast<std::uint8_t>(b));
      int e = b;
      while (e + 1 < 256 && dfa.Step(s, static_cast<std::uint8_t>(e + 1)) == t) ++e;
      if (t != ByteDfa::kDead) {
        if (e == b) {
          std::snprintf(buf, sizeof(buf), " %02x->%d", b, t);
        } else {
          std::snprintf(buf, sizeof(buf), " %02x-%02x->%d", b, e, t);
        }
        out += buf;
      }
      b = e + 1;
    }
    out += '\n';
  }
  return out;
}

std::string CheckDfaInvariants(const ByteDfa& dfa) {
  if (dfa.num_states < 1 || dfa.num_classes < 1 || dfa.num_classes > 256) return "bad sizes";
  if (dfa.next.size() != static_cast<std::size_t>(dfa.num_states) * dfa.num_classes) {
    return "next has the wrong size";
  }
  for (int b = 0; b < 256; ++b) {
    if (dfa.byte_class[b] >= dfa.num_classes) return "byte class out of range";
  }
  for (StateId t : dfa.next) {
    if (t < 0 || t >= dfa.num_states) return "transition out of range";
  }
  for (std::int32_t c = 0; c < dfa.num_classes; ++c) {
    if (dfa.next[c] != ByteDfa::kDead) return "dead state has a live transition";
  }
  if (dfa.accept_begin < 1 || dfa.accept_begin > dfa.num_states) return "bad accept_begin";
  if ((dfa.start == ByteDfa::kDead) != (dfa.num_states == 1)) return "start/num_states mismatch";
  // Trimmed: every live state reaches an accepting state.
  std::vector<std::uint8_t> live(dfa.num_states, 0);
  for (StateId s = dfa.accept_begin; s < dfa.num_states; ++s) live[s] = 1;
  for (bool changed = true; changed;) {
    changed = false;
    for (StateId s = 1; s < dfa.num_states; ++s) {
      if (live[s]) continue;
      for (std::int32_t c = 0; c < dfa.num_classes; ++c) {
        if (live[dfa.next[static_cast<std::size_t>(s) * dfa.num_classes + c]]) {
          live[s] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  for (StateId s = 1; s < dfa.num_states; ++s) {
    if (!live[s]) return "state " + std::to_string(s) + " cannot reach acceptance";
  }
  return "";
}

}  // namespace lockstep
