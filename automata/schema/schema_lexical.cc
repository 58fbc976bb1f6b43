// JSON Schema compiler: lexical automata (numbers, strings, formats, property names outside a
// set) for automata/schema/schema_compile.cc. See schema_lexical.h for the formatting policy.
//
// Everything that needs more than a native counter is a ByteDfa built by one of two routes:
// regex text through the regex front end (formats written as regexes), or a breadth-first
// exploration of a small state key driven by code (number ranges, mod-k, the time of day, host
// names, and the JSON string token around any content automaton), then trimmed and minimised.
#include "automata/schema/schema_lexical.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "automata/regex/byte_nfa.h"
#include "automata/regex/dfa_builder.h"
#include "automata/schema/ir_nodes.h"
#include "grammar/regex/ecma_pattern.h"
#include "grammar/regex/lookahead.h"
#include "grammar/regex/regex_parser.h"
#include "grammar/base/utf8.h"
#include "grammar/schema/json_schema.h"
#include "grammar/schema/uri_regex.h"

namespace lockstep::schema {
namespace {

using grammar::Expr;
using grammar::ExprId;
using grammar::ExprKind;
using grammar::Grammar;

// The deadline of the compile that is building automata on this thread (LexicalOptions::
// deadline), in effect while an entry point below runs: the constructions take their budgets
// as plain state counts, and a format automaton is built by whichever compile first needs it.
thread_local const CompileDeadline* current_deadline = nullptr;

class DeadlineScope {
 public:
  explicit DeadlineScope(const CompileDeadline& d) : saved_(current_deadline) {
    current_deadline = &d;
  }
  ~DeadlineScope() { current_deadline = saved_; }
  DeadlineScope(const DeadlineScope&) = delete;
  DeadlineScope& operator=(const DeadlineScope&) = delete;

 private:
  const CompileDeadline* saved_;
};

// (An inactive deadline is never written to, so one object serves every thread.)
const CompileDeadline& CurrentDeadline() {
  static const CompileDeadline kNone;
  return current_deadline != nullptr ? *current_deadline : kNone;
}

// ---------------------------------------------------------------------------------------------
// Code-driven DFA construction.

using Key = std::array<std::int32_t, 10>;

// Two multiply chains over the key's five pairs of entries (a serial FNV over ten entries was a
// chain of ten multiplies per lookup, and lookups are most of an exploration's time).
std::uint64_t HashKey(const Key& k) {
  constexpr std::uint64_t kA = 0x9E3779B97F4A7C15ull, kB = 0xC2B2AE3D27D4EB4Full;
  auto pair = [&](int i) {
    return static_cast<std::uint32_t>(k[i]) | std::uint64_t{static_cast<std::uint32_t>(k[i + 1])}
                                                  << 32;
  };
  std::uint64_t a = (pair(0) ^ kB) * kA, b = (pair(2) ^ kA) * kB;
  a = (a ^ pair(4)) * kA;
  b = (b ^ pair(6)) * kB;
  a = (a ^ pair(8)) * kA;
  std::uint64_t h = (a ^ (b >> 29) ^ (b << 35)) * kB;
  return h ^ (h >> 31);
}

// A partition of the bytes: bytes with the same signature share a class.
struct Classes {
  std::array<std::uint8_t, 256> of{};
  std::int32_t n = 0;
  std::vector<std::uint8_t> rep;  // first byte of each class
};

// Refines by `label(b)` and by the byte classes of `dfas`.
template <typename Label>
Classes MakeClasses(const std::vector<const ByteDfa*>& dfas, Label label) {
  Classes c;
  std::map<std::vector<std::int32_t>, std::int32_t> ids;
  for (int b = 0; b < 256; ++b) {
    std::vector<std::int32_t> sig;
    sig.push_back(label(static_cast<std::uint8_t>(b)));
    for (const ByteDfa* d : dfas) sig.push_back(d->byte_class[b]);
    auto [it, inserted] = ids.emplace(sig, c.n);
    if (inserted) {
      c.rep.push_back(static_cast<std::uint8_t>(b));
      ++c.n;
    }
    c.of[b] = static_cast<std::uint8_t>(it->second);
  }
  return c;
}

// Explores the keys reachable from `start`: step(key, byte, &next) returns false for the dead
// state; accept(key) says whether a key is final. The result is trimmed and minimal.
template <typename Step, typename Accept>
Result<ByteDfa> BuildDfa(const Key& start, const Classes& cls, Step step, Accept accept,
                         std::int32_t max_states, std::string_view what) {
  // Keys interned by open addressing: slots hold ids (0: empty), the keys live in `keys`.
  std::vector<Key> keys;
  std::vector<std::uint64_t> hashes;
  std::vector<StateId> slots(1024, 0);
  SubsetDfa sub;
  sub.num_classes = cls.n;
  sub.byte_class = cls.of;
  sub.next.assign(cls.n, 0);  // state 0: dead
  sub.accepting.push_back(0);
  auto intern = [&](const Key& k) -> StateId {
    const std::uint64_t h = HashKey(k);
    std::size_t mask = slots.size() - 1;
    std::size_t i = h & mask;
    for (; slots[i] != 0; i = (i + 1) & mask) {
      const StateId id = slots[i];
      if (hashes[id - 1] == h && keys[id - 1] == k) return id;
    }
    const auto id = static_cast<StateId>(keys.size() + 1);
    keys.push_back(k);
    hashes.push_back(h);
    sub.next.resize(sub.next.size() + cls.n, 0);
    sub.accepting.push_back(accept(k) ? 1 : 0);
    if (keys.size() * 2 > slots.size()) {  // keep the load under a half
      slots.assign(slots.size() * 2, 0);
      mask = slots.size() - 1;
      for (std::size_t j = 0; j < hashes.size(); ++j) {
        std::size_t x = hashes[j] & mask;
        while (slots[x] != 0) x = (x + 1) & mask;
        slots[x] = static_cast<StateId>(j + 1);
      }
    } else {
      slots[i] = id;
    }
    return id;
  };
  sub.start = intern(start);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (CurrentDeadline().Poll()) return CurrentDeadline().Error("");
    if (static_cast<std::int64_t>(keys.size()) > max_states) {
      return Status(StatusCode::kResourceLimit,
                    std::string(what) + " needs more than max_dfa_states = " +
                        std::to_string(max_states) +
                        " automaton states (raise CompileOptions::max_dfa_states, lockstep "
                        "--max-states)");
    }
    for (std::int32_t c = 0; c < cls.n; ++c) {
      Key next;
      if (!step(keys[i], cls.rep[c], &next)) continue;
      const StateId t = intern(next);
      sub.next[(i + 1) * cls.n + c] = t;
    }
  }
  sub.num_states = static_cast<std::int32_t>(keys.size() + 1);
  if (CurrentDeadline().PassedNow()) return CurrentDeadline().Error("");
  return MinimizeDfa(sub);
}

// ---------------------------------------------------------------------------------------------
// DFAs back into NFAs, to concatenate and unite them with the regular subset construction.

// Appends `d` to `nfa`; its accepting states get an epsilon edge to `accept_to`. Returns the
// NFA state that starts it.
StateId AppendDfa(ByteNfa* nfa, const ByteDfa& d, StateId accept_to) {
  auto add = [&](NfaState s) {
    nfa->states.push_back(s);
    return static_cast<StateId>(nfa->states.size() - 1);
  };
  std::vector<StateId> entry(d.num_states, -1);
  for (StateId s = 1; s < d.num_states; ++s) entry[s] = add({NfaStateKind::kFail, 0, 0, 0, 0});
  for (StateId s = 1; s < d.num_states; ++s) {
    std::vector<StateId> alts;
    for (int b = 0; b < 256;) {
      const StateId t = d.Step(s, static_cast<std::uint8_t>(b));
      int e = b;
      while (e + 1 < 256 && d.Step(s, static_cast<std::uint8_t>(e + 1)) == t) ++e;
      if (t != ByteDfa::kDead) {
        alts.push_back(add({NfaStateKind::kByte, static_cast<std::uint8_t>(b),
                            static_cast<std::uint8_t>(e), entry[t], 0}));
      }
      b = e + 1;
    }
    if (d.IsAccepting(s)) alts.push_back(add({NfaStateKind::kEps, 0, 0, accept_to, 0}));
    if (alts.empty()) continue;
    StateId head = alts.back();
    for (std::size_t i = alts.size() - 1; i-- > 0;) {
      head = add({NfaStateKind::kSplit, 0, 0, alts[i], head});
    }
    nfa->states[entry[s]] = {NfaStateKind::kEps, 0, 0, head, 0};
  }
  if (d.start == ByteDfa::kDead) return add({NfaStateKind::kFail, 0, 0, 0, 0});
  return entry[d.start];
}

ByteNfa NewNfa() {
  ByteNfa nfa;
  nfa.states.push_back({NfaStateKind::kMatch, 0, 0, 0, 0});
  return nfa;
}

Result<ByteDfa> NfaToDfa(const ByteNfa& nfa, std::int32_t max_states) {
  RegexCompileOptions ro;
  ro.max_dfa_states = max_states;
  ro.deadline = CurrentDeadline();
  LOCKSTEP_ASSIGN_OR_RETURN(SubsetDfa sub, BuildSubsetDfa(nfa, ro));
  if (ro.deadline.PassedNow()) return ro.deadline.Error("");
  return MinimizeDfa(sub);
}

// The concatenation of `parts`, in order.
Result<ByteDfa> ConcatDfas(const std::vector<const ByteDfa*>& parts, std::int32_t max_states) {
  ByteNfa nfa = NewNfa();
  StateId next = ByteNfa::kMatchState;
  for (std::size_t i = parts.size(); i-- > 0;) next = AppendDfa(&nfa, *parts[i], next);
  nfa.start = next;
  return NfaToDfa(nfa, max_states);
}

bool HasTransitions(const ByteDfa& d, StateId s) {
  for (std::int32_t c = 0; c < d.num_classes; ++c) {
    if (d.next[s * d.num_classes + c] != ByteDfa::kDead) return true;
  }
  return false;
}

// The concatenation of `parts` walked directly when the split is deterministic: every accepting
// state of a part but the last is a dead end and no such part accepts the empty string. Else the
// NFA route (ConcatDfas).
Result<ByteDfa> SeqDfa(const std::vector<const ByteDfa*>& parts, std::int32_t max_states) {
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    const ByteDfa& d = *parts[i];
    if (d.start == ByteDfa::kDead || d.IsAccepting(d.start)) return ConcatDfas(parts, max_states);
    for (StateId s = d.accept_begin; s < d.num_states; ++s) {
      if (HasTransitions(d, s)) return ConcatDfas(parts, max_states);
    }
  }
  const auto last = static_cast<std::int32_t>(parts.size() - 1);
  Classes cls = MakeClasses(parts, [](std::uint8_t) { return 0; });
  auto step = [&](const Key& k, std::uint8_t b, Key* out) {
    const ByteDfa& d = *parts[k[0]];
    const StateId t = d.Step(k[1], b);
    if (t == ByteDfa::kDead) return false;
    *out = Key{k[0], t};
    if (k[0] < last && d.IsAccepting(t)) (*out)[0] = k[0] + 1, (*out)[1] = parts[k[0] + 1]->start;
    return true;
  };
  auto accept = [&](const Key& k) { return k[0] == last && parts[last]->IsAccepting(k[1]); };
  return BuildDfa(Key{0, parts[0]->start}, cls, step, accept, max_states, "this concatenation");
}

// The union of up to 8 DFAs, run in parallel.
Result<ByteDfa> ParallelUnion(const std::vector<const ByteDfa*>& parts, std::int32_t max_states) {
  Classes cls = MakeClasses(parts, [](std::uint8_t) { return 0; });
  Key start{};
  for (std::size_t i = 0; i < parts.size(); ++i) start[i] = parts[i]->start;
  auto step = [&](const Key& k, std::uint8_t b, Key* out) {
    bool live = false;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      (*out)[i] = k[i] == ByteDfa::kDead ? ByteDfa::kDead : parts[i]->Step(k[i], b);
      live |= (*out)[i] != ByteDfa::kDead;
    }
    return live;
  };
  auto accept = [&](const Key& k) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (k[i] != ByteDfa::kDead && parts[i]->IsAccepting(k[i])) return true;
    }
    return false;
  };
  return BuildDfa(start, cls, step, accept, max_states, "this union");
}

// The intersection of up to 10 DFAs, run in parallel (every pattern of one string).
Result<ByteDfa> ParallelIntersection(const std::vector<const ByteDfa*>& parts,
                                     std::int32_t max_states) {
  Classes cls = MakeClasses(parts, [](std::uint8_t) { return 0; });
  Key start{};
  for (std::size_t i = 0; i < parts.size(); ++i) start[i] = parts[i]->start;
  auto step = [&](const Key& k, std::uint8_t b, Key* out) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      (*out)[i] = parts[i]->Step(k[i], b);
      if ((*out)[i] == ByteDfa::kDead) return false;
    }
    return true;
  };
  auto accept = [&](const Key& k) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      if (!parts[i]->IsAccepting(k[i])) return false;
    }
    return true;
  };
  return BuildDfa(start, cls, step, accept, max_states, "this intersection of patterns");
}

// '"' content '"' built directly, for content automata that never read a control character, '"'
// or '\\' (so the canonical encoding of their strings is the strings themselves). The result is
// minimal and trimmed when `content` is: '"' is outside content's alphabet.
std::optional<ByteDfa> WrapQuotesDirect(const ByteDfa& content, bool open_quote = true) {
  if (content.start == ByteDfa::kDead) return std::nullopt;
  for (int b = 0; b < 256; ++b) {
    if (b >= 0x20 && b != '"' && b != '\\') continue;
    for (StateId s = 1; s < content.num_states; ++s) {
      if (content.Step(s, static_cast<std::uint8_t>(b)) != ByteDfa::kDead) return std::nullopt;
    }
  }
  ByteDfa out;
  const std::int32_t n = content.num_states;  // content states 1..n-1 become 1+o..n-1+o
  const std::int32_t o = open_quote ? 1 : 0;
  const std::int32_t k = content.num_classes + 1;
  const std::int32_t quote = content.num_classes;
  out.num_states = n + 1 + o;
  out.num_classes = k;
  out.byte_class = content.byte_class;
  out.byte_class['"'] = static_cast<std::uint8_t>(quote);
  out.next.assign(static_cast<std::size_t>(out.num_states) * k, ByteDfa::kDead);
  const StateId final_state = n + o;
  if (open_quote) out.next[1 * k + quote] = content.start + 1;
  for (StateId s = 1; s < n; ++s) {
    for (std::int32_t c = 0; c < content.num_classes; ++c) {
      const StateId t = content.next[s * content.num_classes + c];
      out.next[(s + o) * k + c] = t == ByteDfa::kDead ? ByteDfa::kDead : t + o;
    }
    if (content.IsAccepting(s)) out.next[(s + o) * k + quote] = final_state;
  }
  out.start = open_quote ? 1 : content.start;
  out.accept_begin = final_state;
  return out;
}

Result<ByteDfa> Regex(std::string_view pattern, std::int32_t max_states) {
  RegexCompileOptions ro;
  ro.max_dfa_states = max_states;
  ro.deadline = CurrentDeadline();
  return CompileRegexToDfa(pattern, ro);
}

// ---------------------------------------------------------------------------------------------
// Numbers.

// A non-negative exact decimal: int_digits without leading zeros ("0" for zero), frac_digits
// without trailing zeros.
struct Decimal {
  bool negative = false;  // never set for zero
  std::string int_digits = "0";
  std::string frac_digits;
  bool IsZero() const { return int_digits == "0" && frac_digits.empty(); }
};

constexpr std::int64_t kMaxExponent = 100000;

Result<Decimal> ParseDecimal(std::string_view text, std::string_view what) {
  auto bad = [&](std::string why) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) + " '" + std::string(text) + "' is not a JSON number: " + why);
  };
  std::size_t p = 0;
  bool neg = false;
  if (p < text.size() && text[p] == '-') neg = true, ++p;
  std::string digits;
  std::size_t int_begin = p;
  while (p < text.size() && text[p] >= '0' && text[p] <= '9') digits += text[p++];
  if (p == int_begin) return bad("no digits");
  if (p - int_begin > 1 && text[int_begin] == '0') return bad("leading zero");
  std::int64_t point = static_cast<std::int64_t>(digits.size());  // digits before the point
  if (p < text.size() && text[p] == '.') {
    ++p;
    std::size_t b = p;
    while (p < text.size() && text[p] >= '0' && text[p] <= '9') digits += text[p++];
    if (p == b) return bad("no digits after '.'");
  }
  if (p < text.size() && (text[p] == 'e' || text[p] == 'E')) {
    ++p;
    bool eneg = false;
    if (p < text.size() && (text[p] == '+' || text[p] == '-')) eneg = text[p] == '-', ++p;
    std::size_t b = p;
    std::int64_t e = 0;
    while (p < text.size() && text[p] >= '0' && text[p] <= '9') {
      e = std::min<std::int64_t>(e * 10 + (text[p] - '0'), kMaxExponent + 1);
      ++p;
    }
    if (p == b) return bad("no digits in the exponent");
    if (e > kMaxExponent) {
      return Status(StatusCode::kUnsupported,
                    std::string(what) + " '" + std::string(text) + "': exponent too large");
    }
    point += eneg ? -e : e;
  }
  if (p != text.size()) return bad("trailing characters");
  // value = 0.digits * 10^point
  Decimal d;
  std::string ip, fp;
  if (point <= 0) {
    fp = std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= static_cast<std::int64_t>(digits.size())) {
    ip = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    ip = digits.substr(0, static_cast<std::size_t>(point));
    fp = digits.substr(static_cast<std::size_t>(point));
  }
  std::size_t nz = ip.find_first_not_of('0');
  d.int_digits = nz == std::string::npos ? "0" : ip.substr(nz);
  std::size_t last = fp.find_last_not_of('0');
  d.frac_digits = last == std::string::npos ? "" : fp.substr(0, last + 1);
  d.negative = neg && !d.IsZero();
  return d;
}

enum Cmp : std::int32_t { kNone = 0, kLt = 1, kEq = 2, kGt = 3 };

// A bound on the magnitude x of the unsigned part of a number text.
struct MagBound {
  bool present = false;
  bool lower = false;  // x >= value (or >) when lower, x <= value (or <) otherwise
  bool exclusive = false;
  Decimal value;
};

// Number key: [phase, neg, k (int digits read, capped), cmp0, cmp1, j (frac digits, capped),
// r (mod), unused]. Phases: 0 start, 1 after '-', 2 in [1-9][0-9]*, 3 after "0", 4 after '.',
// 5 in the fraction.
struct NumberPlan {
  bool integer = false;
  MagBound bounds[2][2];  // [neg][0 lower, 1 upper]
  bool branch_dead[2] = {false, false};
  bool has_multiple = false;
  std::int64_t mod = 1;    // M
  std::int32_t scale = 0;  // s: x * 10^s must be an integer multiple of M
  std::int32_t k_cap = 1;
  std::int32_t j_cap = 0;
};

Cmp StepInt(Cmp c, std::int32_t k, char d, const MagBound& b) {
  if (!b.present) return kNone;
  const std::string& s = b.value.int_digits;
  if (k >= static_cast<std::int32_t>(s.size())) return kGt;
  if (c != kEq) return c;
  return d < s[k] ? kLt : d > s[k] ? kGt : kEq;
}
// The comparison once the integer part (k digits) is complete.
Cmp EndInt(Cmp c, std::int32_t k, const MagBound& b) {
  if (!b.present) return kNone;
  if (k < static_cast<std::int32_t>(b.value.int_digits.size())) return kLt;
  return c;
}
Cmp StepFrac(Cmp c, std::int32_t j, char d, const MagBound& b) {
  if (!b.present || c != kEq) return c;
  const std::string& s = b.value.frac_digits;
  if (j >= static_cast<std::int32_t>(s.size())) return d > '0' ? kGt : kEq;
  return d < s[j] ? kLt : d > s[j] ? kGt : kEq;
}
Cmp EndFrac(Cmp c, std::int32_t j, const MagBound& b) {
  if (!b.present || c != kEq) return c;
  return j < static_cast<std::int32_t>(b.value.frac_digits.size()) ? kLt : kEq;
}
bool Satisfies(Cmp c, const MagBound& b) {
  if (!b.present) return true;
  if (c == kEq) return !b.exclusive;
  return b.lower ? c == kGt : c == kLt;
}

std::int64_t PowMod(std::int64_t base, std::int64_t e, std::int64_t m) {
  std::int64_t r = 1 % m;
  base %= m;
  while (e > 0) {
    if (e & 1) r = r * base % m;
    base = base * base % m;
    e >>= 1;
  }
  return r;
}

Result<ByteDfa> BuildNumberDfa(const NumberPlan& plan, std::int32_t max_states) {
  Classes cls = MakeClasses({}, [](std::uint8_t b) -> std::int32_t {
    return (b >= '0' && b <= '9') || b == '-' || b == '.' ? b : 256;
  });
  auto accept = [&plan](const Key& k) {
    const std::int32_t phase = k[0];
    if (phase != 2 && phase != 3 && phase != 5) return false;
    const int neg = k[1];
    if (plan.branch_dead[neg]) return false;
    for (int i = 0; i < 2; ++i) {
      const MagBound& b = plan.bounds[neg][i];
      Cmp c = static_cast<Cmp>(k[3 + i]);
      if (phase != 5)
        c = EndFrac(EndInt(c, k[2], b), 0, b);
      else
        c = EndFrac(c, k[5], b);
      if (!Satisfies(c, b)) return false;
    }
    const std::int64_t r = k[6];
    const std::int32_t j = phase == 5 ? std::min(k[5], plan.scale) : 0;
    return r * PowMod(10, plan.scale - j, plan.mod) % plan.mod == 0;
  };
  auto step = [&plan](const Key& k, std::uint8_t byte, Key* out) {
    const char ch = static_cast<char>(byte);
    const bool digit = ch >= '0' && ch <= '9';
    Key n = k;
    switch (k[0]) {
      case 0:
        if (ch == '-') {
          n[0] = 1, n[1] = 1;
          *out = n;
          return !plan.branch_dead[1];
        }
        [[fallthrough]];
      case 1:
        if (!digit) return false;
        if (plan.branch_dead[n[1]]) return false;
        n[0] = ch == '0' ? 3 : 2;
        for (int i = 0; i < 2; ++i) {
          const MagBound& b = plan.bounds[n[1]][i];
          n[3 + i] = StepInt(b.present ? kEq : kNone, 0, ch, b);
        }
        n[2] = 1;
        n[6] = static_cast<std::int32_t>((ch - '0') % plan.mod);
        break;
      case 2:
      case 3:
        if (ch == '.' && !plan.integer) {
          n[0] = 4;
          for (int i = 0; i < 2; ++i)
            n[3 + i] = EndInt(static_cast<Cmp>(k[3 + i]), k[2], plan.bounds[k[1]][i]);
          n[2] = 0;
          n[5] = 0;
          break;
        }
        if (!digit || k[0] == 3) return false;
        for (int i = 0; i < 2; ++i) {
          n[3 + i] = StepInt(static_cast<Cmp>(k[3 + i]), k[2], ch, plan.bounds[k[1]][i]);
        }
        n[2] = std::min(k[2] + 1, plan.k_cap);
        n[6] = static_cast<std::int32_t>((k[6] * 10LL + (ch - '0')) % plan.mod);
        break;
      case 4:
      case 5:
        if (!digit) return false;
        n[0] = 5;
        for (int i = 0; i < 2; ++i) {
          n[3 + i] = StepFrac(static_cast<Cmp>(k[3 + i]), k[5], ch, plan.bounds[k[1]][i]);
        }
        if (k[5] < plan.scale) {
          n[6] = static_cast<std::int32_t>((k[6] * 10LL + (ch - '0')) % plan.mod);
        } else if (plan.has_multiple && ch != '0') {
          return false;  // digits past the scale of multipleOf must be zero
        }
        n[5] = std::min(k[5] + 1, plan.j_cap);
        break;
      default:
        return false;
    }
    *out = n;
    return true;
  };
  return BuildDfa(Key{}, cls, step, accept, max_states, "this number constraint");
}

// Magnitude bounds of the branch `neg` for value bound `v`: value >= v (lower) means x >= v on
// the positive branch and x <= -v on the negative one.
void PlaceBound(NumberPlan* plan, const Decimal& v, bool value_lower, bool exclusive) {
  for (int neg = 0; neg < 2; ++neg) {
    // Bound on x: for neg, value = -x, so value >= v <=> x <= -v.
    const bool lower = neg ? !value_lower : value_lower;
    Decimal mag = v;
    const bool mag_negative = neg ? (!v.negative && !v.IsZero()) : v.negative;
    mag.negative = false;
    if (mag_negative) {
      // x >= negative: always; x <= negative: never.
      if (!lower) plan->branch_dead[neg] = true;
      continue;
    }
    MagBound& b = plan->bounds[neg][lower ? 0 : 1];
    b.present = true;
    b.lower = lower;
    b.exclusive = exclusive;
    b.value = mag;
  }
}

// ---------------------------------------------------------------------------------------------
// Strings.

bool IsShortEscape(std::uint32_t c) {
  return c == 0x08 || c == 0x09 || c == 0x0A || c == 0x0C || c == 0x0D;
}

const ByteDfa& AnyContentDfa() {
  static const ByteDfa* kDfa = new ByteDfa(*CompileRegexToDfa("[\\s\\S]*"));
  return *kDfa;
}

// The escapes of one canonical string unit (backslash included).
const std::shared_ptr<const ByteDfa>& EscapeUnitDfa() {
  static const auto* kDfa = new std::shared_ptr<const ByteDfa>(std::make_shared<const ByteDfa>(
      *CompileRegexToDfa("\\\\(?:[\"\\\\bfnrt]|u00(?:0[0-7bef]|1[0-9a-f]))")));
  return *kDfa;
}

struct Trie {
  std::vector<std::map<std::uint8_t, std::int32_t>> children{{}};
  std::vector<bool> terminal{false};
  void Insert(std::string_view s) {
    std::int32_t n = 0;
    for (unsigned char c : s) {
      auto it = children[n].find(c);
      if (it == children[n].end()) {
        children.emplace_back();
        terminal.push_back(false);
        const auto id = static_cast<std::int32_t>(children.size() - 1);
        children[n][c] = id;
        n = id;
      } else {
        n = it->second;
      }
    }
    terminal[n] = true;
  }
};

// The byte a short escape (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`) stands for; nullopt for any
// other byte after the backslash.
std::optional<std::uint8_t> ShortEscapeByte(std::uint8_t b) {
  switch (b) {
    case '"':
      return '"';
    case '\\':
      return '\\';
    case 'b':
      return 0x08;
    case 'f':
      return 0x0C;
    case 'n':
      return 0x0A;
    case 'r':
      return 0x0D;
    case 't':
      return 0x09;
    default:
      return std::nullopt;
  }
}

// Byte classes of the string token: the bytes escapes and the trie tell apart, refined by the
// content automata and the negated one.
Classes StringTokenClasses(const std::vector<const ByteDfa*>& contents, const ByteDfa* negated,
                           const Trie* trie) {
  std::array<bool, 256> in_trie{};
  if (trie != nullptr) {
    for (const auto& node : trie->children) {
      for (const auto& [byte, child] : node) in_trie[byte] = true;
    }
  }
  std::vector<const ByteDfa*> all = contents;
  if (negated != nullptr) all.push_back(negated);
  return MakeClasses(all, [&in_trie](std::uint8_t b) -> std::int32_t {
    if (b < 0x20) return 0x200 + b;
    if (b == '"' || b == '\\' || b == 'b' || b == 'f' || b == 'n' || b == 'r' || b == 't' ||
        b == 'u' || (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f')) {
      return b;
    }
    if (in_trie[b]) return b;
    if (b >= 0x80 && b <= 0xBF) return 0x101;
    return 0x102;
  });
}

// BuildStringTokenDfa's automaton as the step and acceptance of BuildDfa's exploration.
// Key: [phase, esc, nibble, count, trie node, d0..d2, neg]. phase: 0 before '"', 1 inside, 2
// done. esc: 0 outside an escape, 1 after the backslash, 2 to 5 inside `\u00xx` (nibble: its
// high hex digit). count: code points so far, capped at count_cap. trie node: -1 once the value
// has left the trie. d0..d2: the states of the content automata; neg: the negated one's.
struct StringToken {
  static constexpr std::size_t kNeg = 8;  // key slot of the negated automaton

  std::vector<const ByteDfa*> contents;  // one to three
  std::int64_t min_len = 0;
  std::int64_t max_len = -1;  // < 0: no limit
  const Trie* trie = nullptr;
  const ByteDfa* negated = nullptr;
  bool open_ended = false;
  std::int32_t count_cap = 0;

  Key Start() const {
    Key start{};
    for (std::size_t i = 0; i < contents.size(); ++i) start[5 + i] = contents[i]->start;
    if (negated != nullptr) start[kNeg] = negated->start;
    return start;
  }

  // One byte `c` of the decoded value fed to the automata, the trie and the count; false when a
  // content automaton dies or the value grows past max_len.
  bool Feed(Key* k, std::uint8_t c) const {
    for (std::size_t i = 0; i < contents.size(); ++i) {
      (*k)[5 + i] = contents[i]->Step((*k)[5 + i], c);
      if ((*k)[5 + i] == ByteDfa::kDead) return false;
    }
    if (negated != nullptr && (*k)[kNeg] != ByteDfa::kDead) {
      (*k)[kNeg] = negated->Step((*k)[kNeg], c);
    }
    if (trie != nullptr && (*k)[4] >= 0) {
      auto it = trie->children[(*k)[4]].find(c);
      (*k)[4] = it == trie->children[(*k)[4]].end() ? -1 : it->second;
    }
    if (c < 0x80 || c >= 0xC0) {
      std::int32_t n = (*k)[3] + 1;
      if (max_len >= 0 && n > max_len) return false;
      (*k)[3] = std::min(n, count_cap);
    }
    return true;
  }

  // Whether some escaped code point (all are ASCII) can follow in every content automaton.
  bool EscapePossible(const Key& k, bool controls_only) const {
    if (max_len >= 0 && k[3] + 1 > max_len) return false;
    for (std::uint32_t c = 0; c < 0x60; ++c) {
      if (c >= 0x20 && (controls_only || (c != '"' && c != '\\'))) continue;
      bool ok = true;
      for (std::size_t i = 0; i < contents.size() && ok; ++i) {
        ok = contents[i]->Step(k[5 + i], c) != 0;
      }
      if (ok) return true;
    }
    return false;
  }

  // The value read so far is in the language: every content automaton accepts it, it is long
  // enough, not in the trie and not accepted by the negated automaton.
  bool ValueAccepted(const Key& k) const {
    for (std::size_t i = 0; i < contents.size(); ++i) {
      if (!contents[i]->IsAccepting(k[5 + i])) return false;
    }
    if (k[3] < min_len) return false;
    if (trie != nullptr && k[4] >= 0 && trie->terminal[k[4]]) return false;
    return negated == nullptr || !negated->IsAccepting(k[kNeg]);
  }

  bool Step(const Key& k, std::uint8_t b, Key* out) const {
    Key n = k;
    if (k[0] == 0) {
      if (b != '"') return false;
      n[0] = 1;
      *out = n;
      return true;
    }
    if (k[0] != 1) return false;
    if (k[1] != 0) return StepEscape(k, b, out);
    if (b == '"') {
      if (open_ended || !ValueAccepted(k)) return false;
      *out = Key{2};
      return true;
    }
    if (b == '\\') {
      if (!EscapePossible(k, false)) return false;
      n[1] = 1;
    } else if (b < 0x20 || !Feed(&n, b)) {
      return false;
    }
    *out = n;
    return true;
  }

  // Inside an escape: only the canonical ones, short where JSON has one, else `\u00xx`.
  bool StepEscape(const Key& k, std::uint8_t b, Key* out) const {
    Key n = k;
    switch (k[1]) {
      case 1:
        if (b == 'u') {
          if (!EscapePossible(k, true)) return false;
          n[1] = 2;
        } else if (std::optional<std::uint8_t> c = ShortEscapeByte(b)) {
          n[1] = 0;
          if (!Feed(&n, *c)) return false;
        } else {
          return false;
        }
        break;
      case 2:
      case 3:
        if (b != '0') return false;
        n[1] = k[1] + 1;
        break;
      case 4:
        if (b != '0' && b != '1') return false;
        n[1] = 5;
        n[2] = b - '0';
        break;
      case 5: {
        std::int32_t lo;
        if (b >= '0' && b <= '9')
          lo = b - '0';
        else if (b >= 'a' && b <= 'f')
          lo = b - 'a' + 10;
        else
          return false;
        const std::uint32_t c = static_cast<std::uint32_t>(k[2] * 16 + lo);
        if (IsShortEscape(c)) return false;
        n[1] = 0;
        n[2] = 0;
        if (!Feed(&n, static_cast<std::uint8_t>(c))) return false;
        break;
      }
      default:
        return false;
    }
    *out = n;
    return true;
  }

  // Open-ended: the token's prefix up to (not including) the closing quote.
  bool Accept(const Key& k) const {
    if (k[0] == 2) return true;
    return open_ended && k[0] == 1 && k[1] == 0 && ValueAccepted(k);
  }
};

// The JSON string token (quotes included, canonical escaping) whose decoded value is accepted by
// every DFA in `contents` and not by `negated` (when given), has between min and max code points
// (max < 0: no limit) and is not in `trie` (when given).
Result<ByteDfa> BuildStringTokenDfa(std::vector<const ByteDfa*> contents, std::int64_t min_len,
                                    std::int64_t max_len, const Trie* trie, std::int32_t max_states,
                                    const ByteDfa* negated = nullptr, bool open_ended = false) {
  if (negated != nullptr && negated->start == ByteDfa::kDead) negated = nullptr;
  if (contents.empty()) contents.push_back(&AnyContentDfa());
  const Classes cls = StringTokenClasses(contents, negated, trie);
  if (contents.size() > 3) return Status(StatusCode::kInternal, "too many content automata");
  for (const ByteDfa* content : contents) {
    if (content->start == ByteDfa::kDead) {
      ByteDfa empty;
      empty.next.assign(1, 0);
      return empty;
    }
  }
  StringToken token;
  token.count_cap =
      static_cast<std::int32_t>(max_len >= 0 ? max_len + 1 : std::max<std::int64_t>(min_len, 0));
  token.contents = std::move(contents);
  token.min_len = min_len;
  token.max_len = max_len;
  token.trie = trie;
  token.negated = negated;
  token.open_ended = open_ended;
  return BuildDfa(
      token.Start(), cls,
      [&token](const Key& k, std::uint8_t b, Key* out) { return token.Step(k, b, out); },
      [&token](const Key& k) { return token.Accept(k); }, max_states, "this string constraint");
}

// The JSON string token (quotes included, canonical escaping) of every value that is not one of
// the trie's strings: the same language as BuildStringTokenDfa({}, 0, -1, &trie, ...), built
// directly. States: before the quote, one per trie node (its UTF-8 state implied by the key's
// bytes), the free string body (one per state of the UTF-8 automaton), the escape states, done.
// nullopt when an excluded value holds a byte that is escaped in a JSON string (control
// characters, '"', '\\': an escape could then spell a key) or is not valid UTF-8.
std::optional<ByteDfa> ExcludedStringTokenDfa(const Trie& trie) {
  const ByteDfa& any = AnyContentDfa();
  const StateId u0 = any.start;
  if (any.Step(u0, 'a') != u0 || !any.IsAccepting(u0)) return std::nullopt;
  const std::int32_t nt = static_cast<std::int32_t>(trie.children.size());
  // UTF-8 state of each trie node, in insertion order (parents before children).
  std::vector<StateId> u_of(nt, ByteDfa::kDead);
  u_of[0] = u0;
  for (std::int32_t n = 0; n < nt; ++n) {
    if (u_of[n] == ByteDfa::kDead) return std::nullopt;
    for (const auto& [b, child] : trie.children[n]) {
      if (b < 0x20 || b == '"' || b == '\\') return std::nullopt;
      u_of[child] = any.Step(u_of[n], b);
    }
    if (trie.terminal[n] && !any.IsAccepting(u_of[n])) return std::nullopt;
  }
  // Trie nodes with the same future (terminal or not, UTF-8 state, equivalent children by byte)
  // are one state: the suffix-sharing merge that makes the automaton minimal, so no partition
  // refinement is needed (the rest is distinct by construction: see the test comparing with the
  // product construction's minimal automaton).
  std::vector<std::int32_t> merged(nt, -1);
  std::int32_t nm = 0;
  {
    std::map<std::vector<std::int32_t>, std::int32_t> by_future;
    std::vector<std::int32_t> key;
    for (std::int32_t n = nt - 1; n >= 0; --n) {  // children come after their parent
      key.assign({trie.terminal[n] ? 1 : 0, u_of[n]});
      for (const auto& [b, child] : trie.children[n]) {
        key.push_back(b);
        key.push_back(merged[child]);
      }
      auto [it, fresh] = by_future.emplace(key, nm);
      if (fresh) ++nm;
      merged[n] = it->second;
    }
  }
  // Numbering: 0 dead, 1 start, 2 done, then escapes, free states, merged trie nodes.
  enum : StateId { kStart = 1, kDone = 2, kEsc = 3, kEscU = 4, kEscU0 = 5, kEscU00 = 6,
                   kEscU000 = 7, kEscU001 = 8, kFree = 9 };
  const StateId trie_base = kFree + any.num_states;
  // Byte classes: the bytes the construction names (quote, backslash, escape letters and hex
  // digits, key bytes) alone, control bytes together, the rest by their UTF-8 class.
  std::array<bool, 256> named{};
  for (const char* p = "\"\\bfnrtu0123456789abcdef"; *p; ++p) named[static_cast<unsigned char>(*p)] = true;
  for (const auto& node : trie.children)
    for (const auto& [b, child] : node) named[b] = true;
  SubsetDfa sub;
  std::array<std::int32_t, 0x201> class_of_label;
  class_of_label.fill(-1);
  std::vector<std::uint8_t> rep;
  for (int b = 0; b < 256; ++b) {
    const int label = b < 0x20 ? 0x200 : named[b] ? b : 0x100 + any.byte_class[b];
    if (class_of_label[label] < 0) {
      class_of_label[label] = static_cast<std::int32_t>(rep.size());
      rep.push_back(static_cast<std::uint8_t>(b));
    }
    sub.byte_class[b] = static_cast<std::uint8_t>(class_of_label[label]);
  }
  const std::size_t nc = rep.size();
  sub.num_states = trie_base + nm;
  sub.num_classes = static_cast<std::int32_t>(nc);
  sub.next.assign(static_cast<std::size_t>(sub.num_states) * nc, ByteDfa::kDead);
  sub.accepting.assign(sub.num_states, 0);
  sub.accepting[kDone] = 1;
  sub.start = kStart;
  auto set = [&](StateId s, int b, StateId t) { sub.next[static_cast<std::size_t>(s) * nc + sub.byte_class[b]] = t; };
  auto free_of = [&](StateId u) { return u == ByteDfa::kDead ? ByteDfa::kDead : kFree + u; };
  set(kStart, '"', trie_base + merged[0]);
  for (const char* p = "\"\\bfnrt"; *p; ++p) set(kEsc, static_cast<unsigned char>(*p), free_of(u0));
  set(kEsc, 'u', kEscU);
  set(kEscU, '0', kEscU0);
  set(kEscU0, '0', kEscU00);
  set(kEscU00, '0', kEscU000);
  set(kEscU00, '1', kEscU001);
  for (const char* p = "01234567bef"; *p; ++p) set(kEscU000, static_cast<unsigned char>(*p), free_of(u0));
  for (const char* p = "0123456789abcdef"; *p; ++p) set(kEscU001, static_cast<unsigned char>(*p), free_of(u0));
  // Body bytes from UTF-8 state u (in a trie node or free): '"' closes where a character ends,
  // '\\' starts an escape there, control bytes are never raw.
  auto body = [&](StateId s, StateId u, bool closes) {
    const bool boundary = any.Step(u, 'a') != ByteDfa::kDead;
    StateId* row = sub.next.data() + static_cast<std::size_t>(s) * nc;
    for (std::size_t c = 0; c < nc; ++c) {
      const std::uint8_t b = rep[c];
      if (b < 0x20) continue;
      if (b == '"') {
        if (boundary && closes) row[c] = kDone;
      } else if (b == '\\') {
        if (boundary) row[c] = kEsc;
      } else {
        row[c] = free_of(any.Step(u, b));
      }
    }
  };
  for (StateId u = 1; u < any.num_states; ++u) body(kFree + u, u, any.IsAccepting(u));
  std::vector<bool> done(nm, false);
  for (std::int32_t n = 0; n < nt; ++n) {
    if (done[merged[n]]) continue;
    done[merged[n]] = true;
    const StateId s = trie_base + merged[n];
    body(s, u_of[n], any.IsAccepting(u_of[n]) && !trie.terminal[n]);
    for (const auto& [b, child] : trie.children[n]) set(s, b, trie_base + merged[child]);
  }
  return MinimizeDfa(sub, /*distinct_states=*/true);
}

// The search automaton of a pattern with '^' or '$' inside a group (ECMA-262: assertions on
// the position, the text's start and end): the pattern runs over "FE^k text FF^m", '^' and '$'
// each matching one marker byte (0xFE, 0xFF: no UTF-8 text holds them), k and m the pattern's
// counts of each, so that a path asserting one several times ("^^a", "(^|x)^y") finds as many
// markers as it uses and an assertion inside the text ("a^b") finds none. The text's automaton
// starts after the k start markers and accepts where m end markers lead to acceptance.
Result<ByteDfa> MarkedSearchDfa(const std::string& pattern, std::size_t carets,
                                std::size_t dollars, std::int32_t max_states) {
  RegexCompileOptions ro;
  ro.max_dfa_states = max_states;
  ro.deadline = CurrentDeadline();
  ro.anchor_markers = true;
  LOCKSTEP_ASSIGN_OR_RETURN(
      ByteDfa d, CompileRegexToDfa("^*[\\s\\S]*(?:" + pattern + ")[\\s\\S]*$*", ro));
  SubsetDfa sub;
  sub.num_states = d.num_states;
  sub.num_classes = d.num_classes + 1;  // a last class, dead everywhere, for the marker bytes
  sub.byte_class = d.byte_class;
  sub.byte_class[0xFE] = sub.byte_class[0xFF] = static_cast<std::uint8_t>(d.num_classes);
  sub.next.assign(static_cast<std::size_t>(sub.num_states) * sub.num_classes, ByteDfa::kDead);
  sub.accepting.assign(sub.num_states, 0);
  for (StateId s = 0; s < d.num_states; ++s) {
    std::copy_n(d.next.begin() + static_cast<std::ptrdiff_t>(s) * d.num_classes, d.num_classes,
                sub.next.begin() + static_cast<std::ptrdiff_t>(s) * sub.num_classes);
    sub.accepting[s] = d.IsAccepting(d.Run(s, std::string(dollars, '\xFF')));
  }
  sub.start = d.Run(d.start, std::string(carets, '\xFE'));
  return MinimizeDfa(sub);
}

// A pattern's syntax errors, located in the pattern as written ('^' and '$' anywhere).
Status CheckPatternSyntax(const std::string& pattern) {
  RegexParseOptions po;
  po.anchor_markers = true;
  Result<RegexAst> ast = ParseRegex(pattern, po);
  return ast.ok() ? Status::Ok() : ast.status();
}

// Every positive part's language minus every negated part's: up to 10 DFAs run in parallel.
Result<ByteDfa> ParallelDifference(const std::vector<const ByteDfa*>& parts,
                                   const std::vector<bool>& negated, std::int32_t max_states) {
  Classes cls = MakeClasses(parts, [](std::uint8_t) { return 0; });
  Key start{};
  for (std::size_t i = 0; i < parts.size(); ++i) start[i] = parts[i]->start;
  auto step = [&](const Key& k, std::uint8_t b, Key* out) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      (*out)[i] = k[i] == ByteDfa::kDead ? ByteDfa::kDead : parts[i]->Step(k[i], b);
      if ((*out)[i] == ByteDfa::kDead && !negated[i]) return false;
    }
    return true;
  };
  auto accept = [&](const Key& k) {
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const bool in = k[i] != ByteDfa::kDead && parts[i]->IsAccepting(k[i]);
      if (in == negated[i]) return false;
    }
    return true;
  };
  return BuildDfa(start, cls, step, accept, max_states, "this pattern's lookaheads");
}

Result<ByteDfa> PatternContentDfa(const std::string& pattern, std::int32_t max_states);

// A pattern opening with lookaheads ("^(?=A)(?!B)R"): its parts' search automata, intersected,
// the negated ones complemented (grammar/regex/lookahead.h).
Result<ByteDfa> LookaheadContentDfa(const std::string& pattern,
                                    const std::vector<LookaheadPart>& split,
                                    std::int32_t max_states) {
  if (split.size() > Key().size()) {
    return Status(StatusCode::kUnsupported,
                  "more than " + std::to_string(Key().size() - 1) + " lookaheads in one pattern");
  }
  std::vector<ByteDfa> dfas(split.size());
  std::vector<const ByteDfa*> parts;
  std::vector<bool> negated;
  for (std::size_t i = 0; i < split.size(); ++i) {
    auto d = PatternContentDfa(split[i].pattern, max_states);
    if (!d.ok()) {
      return Status(d.status().code(),
                    "in " + split[i].pattern + ", a part of " + pattern + ": " +
                        d.status().message(),
                    d.status().location());
    }
    dfas[i] = std::move(*d);
    parts.push_back(&dfas[i]);
    negated.push_back(split[i].negated);
  }
  return ParallelDifference(parts, negated, max_states);
}

// Pattern (unanchored search semantics) -> DFA over the decoded value's UTF-8 bytes.
Result<ByteDfa> PatternContentDfa(const std::string& pattern, std::int32_t max_states) {
  if (auto split = SplitLeadingLookaheads(pattern)) {
    return LookaheadContentDfa(pattern, *split, max_states);
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckPatternSyntax(pattern));
  // Split the top level alternatives and find which are anchored.
  std::vector<std::pair<std::size_t, std::size_t>> alts;
  std::size_t begin = 0;
  std::vector<std::size_t> carets, dollars;
  ForEachStructural(pattern, [&](std::size_t i, char c, std::size_t depth) {
    if (c == '|' && depth == 0) {
      alts.emplace_back(begin, i);
      begin = i + 1;
    }
    if (c == '^') carets.push_back(i);
    if (c == '$') dollars.push_back(i);
    return true;
  });
  alts.emplace_back(begin, pattern.size());
  // The alternatives grouped by their anchors, each group under one pair of `[\s\S]*`:
  // `.*A.*|.*B.*` is `.*(A|B).*`, whose subset construction does not track which of the
  // alternatives has matched so far (30 unanchored names: 2^30 subsets the other way).
  std::array<std::string, 4> groups;  // by (anchored start, anchored end)
  std::size_t anchors_used = 0;
  for (auto [b, e] : alts) {
    bool anchored_start = false, anchored_end = false;
    if (b < e && pattern[b] == '^') anchored_start = true, ++b, ++anchors_used;
    if (b < e && pattern[e - 1] == '$' && std::count(dollars.begin(), dollars.end(), e - 1) > 0) {
      anchored_end = true, --e, ++anchors_used;
    }
    std::string& group = groups[(anchored_start ? 2 : 0) + (anchored_end ? 1 : 0)];
    if (!group.empty()) group += '|';
    group += "(?:" + pattern.substr(b, e - b) + ")";
  }
  std::string search;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].empty()) continue;
    if (!search.empty()) search += '|';
    search += "(?:";
    if ((g & 2) == 0) search += "[\\s\\S]*";
    search += "(?:" + groups[g] + ")";
    if ((g & 1) == 0) search += "[\\s\\S]*";
    search += ")";
  }
  if (anchors_used != carets.size() + dollars.size()) {
    return MarkedSearchDfa(pattern, carets.size(), dollars.size(), max_states);
  }
  return Regex(search, max_states);
}

// ---------------------------------------------------------------------------------------------
// Formats: DFAs over the decoded value's bytes, built once per process.

const char* const kFormats[] = {
    "date",         "time",          "date-time",    "duration",
    "email",        "hostname",      "ipv4",         "ipv6",
    "uri",          "uri-reference", "iri",          "iri-reference",
    "uri-template", "uuid",          "json-pointer", "relative-json-pointer"};

// Formats built here that only an option asserts (the schema model decides): OpenAPI's `byte`.
bool OptionalFormat(std::string_view f) { return f == "byte"; }

const char kDateRegex[] =
    "[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|"
    "30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]"
    "|[13579][26])00)-02-29";

const char kIpv4Regex[] =
    "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])(?:\\.(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|"
    "[1-9][0-9]|[0-9])){3}";

// The checker's IPv6: 8 groups, or fewer with one "::", an IPv4 tail counting as two groups.
std::string Ipv6Regex() {
  const std::string g = "[0-9A-Fa-f]{1,4}";
  auto groups = [&](int n) {
    std::string s = g;
    if (n > 1) s += "(?::" + g + "){" + std::to_string(n - 1) + "}";
    return s;
  };
  const std::string v4 = std::string("(?:") + kIpv4Regex + ")";
  std::vector<std::string> alts = {"(?:" + g + ":){7}" + g, "(?:" + g + ":){6}" + v4};
  for (int a = 0; a <= 7; ++a) {
    const std::string left = (a == 0 ? "" : groups(a)) + "::";
    alts.push_back(left);
    for (int b = 1; a + b <= 7; ++b) alts.push_back(left + groups(b));
    for (int b = 0; a + b + 2 <= 7; ++b)
      alts.push_back(left + (b == 0 ? v4 : groups(b) + ":" + v4));
  }
  std::string r;
  for (const std::string& s : alts) r += (r.empty() ? "(?:" : "|(?:") + s + ")";
  return r;
}

// The validator's URI grammar (grammar/schema/uri_regex.h) in the pattern dialect, with the IP
// literal (IPv6 or IPvFuture) checked inline.
std::string UriRegex(bool iri, bool reference) {
  return schema::UriRegex(iri, reference,
                          {.code_point_open = "\\u{",
                           .ip_literal = "\\[(?:" + Ipv6Regex() +
                                         "|[vV][0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~!$&'()*+,;=:]+)\\]"});
}

const char kUriTemplateRegex[] =
    "(?:[^\\x00-\\x20\"%'<>\\\\^`{|}\\x7F]|%[0-9A-Fa-f]{2}|"
    "\\{[+#./;?&=,!@|]?"
    "(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*"
    "(?::[1-9][0-9]{0,3}|\\*)?"
    "(?:,(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*"
    "(?::[1-9][0-9]{0,3}|\\*)?)*\\})*";

const char kDurationRegex[] =
    "P(?:[0-9]+W|(?:[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?|[0-9]+M(?:[0-9]+D)?|[0-9]+D)"
    "(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?|T(?:[0-9]+H(?:[0-9]+M("
    "?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))";

// hh:mm:ss[.frac](Z|z|+hh:mm|-hh:mm) with the leap second only at 23:59:60 UTC.
// Key: [pos, h, mi, leap, target offset (leap only), 0...].
Result<ByteDfa> TimeDfa(std::int32_t max_states) {
  auto step = [](const Key& k, std::uint8_t b, Key* out) {
    Key n = k;
    const bool digit = b >= '0' && b <= '9';
    const std::int32_t d = b - '0';
    auto zone = [&](Key* m) {
      if (b == 'Z' || b == 'z') {
        if (k[3] && k[1] * 60 + k[2] != 23 * 60 + 59) return false;
        *m = Key{20};
        return true;
      }
      if (b == '+' || b == '-') {
        Key m2{12};
        if (k[3]) {
          const std::int32_t local = k[1] * 60 + k[2];
          // local - sign * offset == 23:59 (mod 1440)
          std::int32_t off = local - (23 * 60 + 59);
          if (b == '-') off = -off;
          m2[3] = 1;
          m2[4] = ((off % 1440) + 1440) % 1440;
        }
        *m = m2;
        return true;
      }
      return false;
    };
    switch (k[0]) {
      case 0:
        if (!digit || d > 2) return false;
        n[1] = d * 10;
        break;
      case 1:
        if (!digit || k[1] + d > 23) return false;
        n[1] = k[1] + d;
        break;
      case 2:
      case 5:
      case 14:
        if (b != ':') return false;
        break;
      case 3:
        if (!digit || d > 5) return false;
        n[2] = d * 10;
        break;
      case 4:
        if (!digit) return false;
        n[2] = k[2] + d;
        break;
      case 6:
        if (!digit || d > 6) return false;
        n[3] = d == 6;
        if (!n[3]) n[1] = n[2] = 0;
        break;
      case 7:
        if (!digit || (k[3] && d != 0)) return false;
        break;
      case 8:
        if (b == '.') {
          n[0] = 9;
          *out = n;
          return true;
        }
        return zone(out);
      case 9:
        if (!digit) return false;
        n[0] = 10;
        *out = n;
        return true;
      case 10:
        if (digit) {
          *out = n;
          return true;
        }
        return zone(out);
      case 12:  // offset hour tens
        if (!digit || d > 2) return false;
        if (k[3] && d != k[4] / 60 / 10) return false;
        n[5] = d * 10;
        break;
      case 13:
        if (!digit || k[5] + d > 23) return false;
        if (k[3] && d != k[4] / 60 % 10) return false;
        n[5] = 0;
        break;
      case 15:
        if (!digit || d > 5) return false;
        if (k[3] && d != k[4] % 60 / 10) return false;
        break;
      case 16:
        if (!digit) return false;
        if (k[3] && d != k[4] % 10) return false;
        n = Key{20};
        *out = n;
        return true;
      default:
        return false;
    }
    n[0] = k[0] + 1;
    *out = n;
    return true;
  };
  auto accept = [](const Key& k) { return k[0] == 20; };
  // The bytes `step` tells apart: each digit, ':', '.', 'Z'/'z', '+', '-'; every other byte is
  // dead. Exploring by these 16 classes rather than one per ASCII byte (129) is 8x fewer steps
  // and a table 8x smaller before minimisation (the automaton is the same).
  const Classes classes = MakeClasses({}, [](std::uint8_t b) -> std::int32_t {
    if (b >= '0' && b <= '9') return b - '0';
    switch (b) {
      case ':': return 10;
      case '.': return 11;
      case 'Z':
      case 'z': return 12;
      case '+': return 13;
      case '-': return 14;
      default: return 15;
    }
  });
  return BuildDfa(Key{}, classes, step, accept, max_states, "format 'time'");
}

// RFC 1123 host names as the checker reads them: at most 253 bytes, labels of 1-63 letters,
// digits and '-', no '-' at either end, "--" at offset 2 only after "xn"/"XN".
// Key: [total, label length, last was '-', prefix state, 0...].
Result<ByteDfa> HostnameDfa(std::int32_t max_states) {
  auto step = [](const Key& k, std::uint8_t b, Key* out) {
    Key n = k;
    const bool alnum = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
    if (k[0] + 1 > 253) return false;
    n[0] = k[0] + 1;
    if (b == '.') {
      if (k[1] == 0 || k[2]) return false;
      n[1] = n[2] = n[3] = 0;
    } else if (alnum || b == '-') {
      if (k[1] == 0 && b == '-') return false;
      if (k[1] + 1 > 63) return false;
      // Prefix states: 1 "x", 2 "X", 3 "xn", 4 "XN", 5 "xn-"/"XN-", 6 other with '-' at 2,
      // 7 decided.
      switch (k[1]) {
        case 0:
          n[3] = b == 'x' ? 1 : b == 'X' ? 2 : 0;
          break;
        case 1:
          n[3] = (k[3] == 1 && b == 'n') ? 3 : (k[3] == 2 && b == 'N') ? 4 : 0;
          break;
        case 2:
          n[3] = b == '-' ? ((k[3] == 3 || k[3] == 4) ? 5 : 6) : 7;
          break;
        case 3:
          if (b == '-' && k[3] == 6) return false;
          n[3] = 7;
          break;
        default:
          n[3] = 7;
      }
      n[1] = k[1] + 1;
      n[2] = b == '-';
      // Once the 253-byte budget is the tighter one, the label length no longer matters: one
      // representative keeps the exploration near the minimal size.
      if (n[1] >= 4 && 253 - n[0] <= 63 - n[1]) n[1] = 4;
    } else {
      return false;
    }
    *out = n;
    return true;
  };
  auto accept = [](const Key& k) { return k[1] > 0 && !k[2]; };
  // The bytes `step` tells apart: the letters of the "xn--" prefix in either case, other
  // letters and digits, '-', '.'; every other byte is dead (8 classes against 129 per ASCII
  // byte: the exploration and its table before minimisation shrink 16x).
  const Classes classes = MakeClasses({}, [](std::uint8_t b) -> std::int32_t {
    switch (b) {
      case 'x': return 1;
      case 'X': return 2;
      case 'n': return 3;
      case 'N': return 4;
      case '-': return 5;
      case '.': return 6;
      default: break;
    }
    const bool alnum = (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z');
    return alnum ? 0 : 7;
  });
  return BuildDfa(Key{}, classes, step, accept, max_states, "format 'hostname'");
}

// The local part of an address as the checker reads it (dot-atom or quoted string), with the '@'.
const char kEmailLocalRegex[] =
    "(?:[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|"
    "\"(?:[^\"\\\\]|\\\\[\\s\\S])*\")@";

// The automata that several formats are built from, built once per process: `email` needs its
// domain in both its content and its token automaton, and the domain holds the whole `hostname`
// automaton (each about 25,000 states, tens of ms to build). Failures (a passed deadline) are
// not kept.
Result<std::shared_ptr<const ByteDfa>> SharedFormatPart(const char* name, std::int32_t budget,
                                                        Result<ByteDfa> (*build)(std::int32_t)) {
  static std::recursive_mutex mu;  // a part may be built from another
  static auto* parts = new std::map<std::pair<std::string, std::int32_t>,
                                    std::shared_ptr<const ByteDfa>>;
  std::lock_guard<std::recursive_mutex> lock(mu);
  const auto key = std::make_pair(std::string(name), budget);
  if (auto it = parts->find(key); it != parts->end()) return it->second;
  LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa built, build(budget));
  auto shared = std::make_shared<const ByteDfa>(std::move(built));
  parts->emplace(key, shared);
  return shared;
}

Result<std::shared_ptr<const ByteDfa>> SharedHostnameDfa(std::int32_t budget) {
  return SharedFormatPart("hostname", budget, &HostnameDfa);
}

Result<ByteDfa> BuildEmailDomainDfa(std::int32_t budget) {
  LOCKSTEP_ASSIGN_OR_RETURN(
      ByteDfa literal, Regex("\\[(?:IPv6:(?:" + Ipv6Regex() + ")|" + kIpv4Regex + ")\\]", budget));
  LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> host, SharedHostnameDfa(budget));
  return ParallelUnion({&literal, host.get()}, budget);
}

Result<std::shared_ptr<const ByteDfa>> EmailDomainDfa(std::int32_t budget) {
  return SharedFormatPart("email domain", budget, &BuildEmailDomainDfa);
}

// The email token without the whole-content automaton: '"' + canonical(local part) + '@', then
// the domain (never escaped) and '"', so that only one large exploration runs.
Result<ByteDfa> EmailTokenDfa(std::int32_t budget) {
  LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa local, Regex(kEmailLocalRegex, budget));
  LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa open_local,
                            BuildStringTokenDfa({&local}, 0, -1, nullptr, budget, nullptr,
                                                /*open_ended=*/true));
  LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> domain, EmailDomainDfa(budget));
  std::optional<ByteDfa> closing = WrapQuotesDirect(*domain, /*open_quote=*/false);
  if (!closing) return Status(StatusCode::kInternal, "email domain automaton reads specials");
  return SeqDfa({&open_local, &*closing}, budget);
}

Result<ByteDfa> BuildFormatDfa(std::string_view f, std::int32_t budget) {
  if (f == "date") return Regex(kDateRegex, budget);
  if (f == "time") return TimeDfa(budget);
  if (f == "date-time") {
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa date, Regex(kDateRegex, budget));
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa t, Regex("[Tt]", budget));
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa time, TimeDfa(budget));
    return SeqDfa({&date, &t, &time}, budget);
  }
  if (f == "duration") return Regex(kDurationRegex, budget);
  if (f == "ipv4") return Regex(kIpv4Regex, budget);
  if (f == "ipv6") return Regex(Ipv6Regex(), budget);
  if (f == "uuid") {
    return Regex("[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}",
                 budget);
  }
  if (f == "json-pointer") return Regex("(?:/(?:[^~]|~[01])*)?", budget);
  if (f == "relative-json-pointer") {
    return Regex("(?:0|[1-9][0-9]*)(?:#|(?:/(?:[^~]|~[01])*)?)", budget);
  }
  if (f == "hostname") {
    LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> host, SharedHostnameDfa(budget));
    return ByteDfa(*host);
  }
  if (f == "email") {
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa local, Regex(kEmailLocalRegex, budget));
    LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> domain, EmailDomainDfa(budget));
    return SeqDfa({&local, domain.get()}, budget);
  }
  if (f == "uri") return Regex(UriRegex(false, false), budget);
  if (f == "uri-reference") return Regex(UriRegex(false, true), budget);
  if (f == "iri") return Regex(UriRegex(true, false), budget);
  if (f == "iri-reference") return Regex(UriRegex(true, true), budget);
  if (f == "uri-template") return Regex(kUriTemplateRegex, budget);
  if (f == "byte") return Regex(kBase64Pattern, budget);
  return Status(StatusCode::kUnsupported, "format '" + std::string(f) + "' is not supported");
}

constexpr std::int32_t kFormatBudget = 200000;

Result<std::shared_ptr<const ByteDfa>> CachedFormatDfa(std::string_view f, bool token) {
  static std::mutex mu;
  static auto* cache = new std::map<std::pair<std::string, bool>, std::shared_ptr<const ByteDfa>>;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_pair(std::string(f), token);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  if (token && f == "email") {
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa tok, EmailTokenDfa(kFormatBudget));
    auto result = std::make_shared<const ByteDfa>(std::move(tok));
    (*cache)[key] = result;
    return result;
  }
  std::shared_ptr<const ByteDfa> content;
  if (auto c = cache->find({key.first, false}); c != cache->end()) {
    content = c->second;
  } else {
    LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa built, BuildFormatDfa(f, kFormatBudget));
    content = std::make_shared<const ByteDfa>(std::move(built));
    (*cache)[{key.first, false}] = content;
  }
  if (!token) return content;
  std::optional<ByteDfa> direct = WrapQuotesDirect(*content);
  if (!direct) {
    LOCKSTEP_ASSIGN_OR_RETURN(direct,
                              BuildStringTokenDfa({content.get()}, 0, -1, nullptr, kFormatBudget));
  }
  auto result = std::make_shared<const ByteDfa>(std::move(*direct));
  (*cache)[key] = result;
  return result;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

Result<ByteDfa> StringDfaUnion(const std::vector<const ByteDfa*>& parts, std::int32_t max_states) {
  if (parts.empty() || parts.size() > 8) {
    return Status(StatusCode::kResourceLimit, "a union of more than 8 string automata");
  }
  return ParallelUnion(parts, max_states);
}

bool FormatSupported(std::string_view format) {
  for (const char* f : kFormats) {
    if (format == f) return true;
  }
  return false;
}

namespace {

// The content automata of `formats` (each supported, or OpenAPI's byte), shared.
Result<std::vector<std::shared_ptr<const ByteDfa>>> FormatContentDfas(
    const std::vector<std::string>& formats) {
  std::vector<std::shared_ptr<const ByteDfa>> out;
  for (const std::string& f : formats) {
    if (!FormatSupported(f) && !OptionalFormat(f)) {
      return Status(StatusCode::kUnsupported, "format '" + f + "' cannot be enforced exactly");
    }
    LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> d, CachedFormatDfa(f, false));
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const ByteDfa>> FormatContentDfa(std::string_view format) {
  if (!FormatSupported(format)) {
    return Status(StatusCode::kUnsupported,
                  "format '" + std::string(format) + "' cannot be enforced exactly");
  }
  return CachedFormatDfa(format, false);
}

Result<std::optional<bool>> ValuesAreEcmaPatterns(const StringConstraint& c,
                                                  const LexicalOptions& options) {
  const DeadlineScope scope(options.deadline);
  const std::optional<bool> kYes = true, kNo = false, kUndecided;
  const std::int32_t max_states = options.max_dfa_states;
  // The walk's own budget, so that an undecided one stays cheap: product states, and the length
  // of a checker's key (groups open, names defined; past it the keys grow without end, as in
  // `^[a(]+$`'s nesting).
  const std::int64_t max_pairs = std::min<std::int64_t>(max_states, 20000);
  constexpr std::size_t kMaxKeyBytes = 256;
  std::vector<std::string> formats;
  if (c.format && *c.format != "regex") formats.push_back(*c.format);
  for (const std::string& f : c.also_formats) {
    if (f != "regex") formats.push_back(f);
  }
  std::vector<std::string> patterns = c.also_patterns;
  if (c.pattern) patterns.push_back(*c.pattern);
  if (formats.size() + patterns.size() > Key().size()) return kUndecided;
  LOCKSTEP_ASSIGN_OR_RETURN(auto held, FormatContentDfas(formats));
  std::vector<ByteDfa> own(patterns.size());
  std::vector<const ByteDfa*> parts;
  for (const auto& d : held) parts.push_back(d.get());
  for (std::size_t i = 0; i < patterns.size(); ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(own[i], PatternContentDfa(patterns[i], max_states));
    parts.push_back(&own[i]);
  }
  if (parts.empty()) return kNo;
  ByteDfa both;
  if (parts.size() > 1) {
    LOCKSTEP_ASSIGN_OR_RETURN(both, ParallelIntersection(parts, max_states));
    parts = {&both};
  }
  const ByteDfa& dfa = *parts[0];
  if (dfa.start == ByteDfa::kDead) return kYes;  // no value at all
  // Over every (state, checker) pair reached. The automaton is trimmed, so every transition it
  // takes leads on to a value: a checker that dies on it, or stands in an accepting state with a
  // text that is no whole pattern, is a value that is not a pattern.
  std::vector<std::pair<StateId, EcmaPatternChecker>> todo;
  std::unordered_set<std::string> seen;
  std::string key;
  auto add = [&](StateId s, const EcmaPatternChecker& ck) {
    key.assign(reinterpret_cast<const char*>(&s), sizeof s);
    ck.AppendKey(&key);
    if (key.size() > kMaxKeyBytes) return false;
    if (seen.insert(key).second) todo.emplace_back(s, ck);
    return true;
  };
  add(dfa.start, EcmaPatternChecker());
  while (!todo.empty()) {
    auto [s, ck] = std::move(todo.back());
    todo.pop_back();
    if (CurrentDeadline().Poll()) return CurrentDeadline().Error("");
    if (dfa.IsAccepting(s) && !ck.Complete()) return kNo;
    for (int b = 0; b < 256; ++b) {
      const StateId t = dfa.Step(s, static_cast<std::uint8_t>(b));
      if (t == ByteDfa::kDead) continue;
      if (b >= 0x80) return kUndecided;
      EcmaPatternChecker next = ck;
      if (!next.Step(static_cast<char32_t>(b))) return kNo;
      if (!add(t, next) || static_cast<std::int64_t>(seen.size()) > max_pairs) return kUndecided;
    }
  }
  return kYes;
}

namespace {

// A maxLength past this is no bound (a counter that large is never reached); a minLength past
// it is refused.
constexpr std::int64_t kMaxCount = 1 << 30;

// The automata AddStringExpr and AddNumberExpr built, by constraint, for every compile of the
// process: real schemas repeat their patterns and bounds (one hex-id pattern 43 times over 250
// GitHub schemas; 372 bounded numbers, 44 distinct, over 60 others), and a pattern with
// lengths or exclusions costs a subset construction, a product and a minimisation each time.
// Equal constraints give the same automaton object, so normalisation merges the rules holding
// it (it compares automata by identity) and the lowering shares the big ones with their
// positions (SharedRanges keys them by the automaton). Failures other than a passed deadline
// are kept as well (a product past max_dfa_states takes as long to find again). Bounded by
// kBytes of transition tables; an entry that would pass it empties the cache first (before,
// nothing more was kept: one schema of 64 MiB of automata, Github_hard o21819, left every later
// compile of the process without the cache: JsonSchemaStore's rust-toolchain lowered 76% slower
// and 5 rules bigger, its equal strings no longer one object). Within one compile, equal
// constraints are one object whatever the cache does (LexicalOptions::memo).
class LexicalCache {
 public:
  static constexpr std::size_t kBytes = std::size_t{64} << 20;
  using Entry = LexicalOptions::Memo::Entry;

  static std::string Key(const StringConstraint& c, const LexicalOptions& o) {
    std::string k = "s";
    auto add = [&k](std::string_view v) {
      k += std::to_string(v.size());
      k += ':';
      k += v;
    };
    auto add_all = [&](const std::vector<std::string>& vs) {
      add(std::to_string(vs.size()));
      for (const std::string& v : vs) add(v);
    };
    add(std::to_string(c.min_length));
    add(c.max_length ? std::to_string(*c.max_length) : "-");
    add(c.pattern ? "p" + *c.pattern : "-");
    add_all(c.also_patterns);
    add(c.format ? "f" + *c.format : "-");
    add_all(c.also_formats);
    add_all(c.not_formats);
    add_all(c.excluded);
    add_all(c.not_patterns);
    add(std::to_string(o.max_dfa_states));
    add(o.direct_exclusion ? "d" : "g");
    add(std::to_string(o.count_at_run_time_from));
    return k;
  }
  static std::string Key(const NumberConstraint& c, const LexicalOptions& o) {
    std::string k = c.integer ? "i" : "n";
    auto add = [&k](std::string_view v) {
      k += std::to_string(v.size());
      k += ':';
      k += v;
    };
    auto bound = [&](const std::optional<DecimalBound>& b) {
      add(b ? (b->exclusive ? "x" : "i") + b->value : "-");
    };
    bound(c.minimum);
    bound(c.maximum);
    add(c.multiple_of ? "m" + *c.multiple_of : "-");
    add(std::to_string(c.not_multiples.size()));
    for (const std::string& m : c.not_multiples) add(m);
    add(std::to_string(o.max_dfa_states));
    return k;
  }

  // The automaton `build` makes, or the one kept under `key`, added to g.
  template <typename Build>
  Result<ExprId> Add(Grammar* g, const std::string& key, const LexicalOptions& options,
                     Build build) {
    std::optional<Entry> kept;
    if (options.memo != nullptr) {
      if (auto m = options.memo->entries.find(key); m != options.memo->entries.end()) {
        kept = m->second;
      }
    }
    if (!kept) kept = Find(key);
    if (!kept) {
      Result<ByteDfa> built = build();
      if (!built.ok() && options.deadline.PassedNow()) {
        return built.status();  // (a deadline or a cancel: not a property of the constraint)
      }
      Entry e;
      if (built.ok()) {
        e.dfa = std::make_shared<const ByteDfa>(std::move(*built));
      } else {
        e.error = built.status();
      }
      kept = Keep(key, std::move(e));
    }
    if (options.memo != nullptr) options.memo->entries.emplace(key, *kept);
    if (kept->dfa == nullptr) return kept->error;
    return g->Add(ByteDfaNode(kept->dfa));
  }

  std::optional<Entry> Find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  }

  Entry Keep(const std::string& key, Entry e) {
    const std::size_t bytes =
        key.size() + (e.dfa ? e.dfa->next.size() * sizeof(e.dfa->next[0]) + e.dfa->num_states : 0);
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = entries_.find(key); it != entries_.end()) return it->second;  // (a race)
    if (bytes > budget_) return e;
    if (bytes_ + bytes > budget_) {
      entries_.clear();  // (the grammars that hold an automaton keep it alive)
      bytes_ = 0;
      ++flushes_;
    }
    bytes_ += bytes;
    entries_.emplace(key, e);
    return e;
  }

  std::int64_t flushes() {
    std::lock_guard<std::mutex> lock(mu_);
    return flushes_;
  }

  std::size_t SetBudget(std::size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.clear();
    bytes_ = 0;
    return std::exchange(budget_, bytes);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;
  std::size_t bytes_ = 0;
  std::size_t budget_ = kBytes;
  std::int64_t flushes_ = 0;
};

LexicalCache& Lexical() {
  static auto* cache = new LexicalCache;
  return *cache;
}

Result<ByteDfa> BuildStringConstraintDfa(const StringConstraint& c, const LexicalOptions& options);
Result<ByteDfa> BuildNumberConstraintDfa(const NumberConstraint& c, const LexicalOptions& options);

}  // namespace

std::int64_t LexicalCacheFlushes() { return Lexical().flushes(); }

std::size_t SetLexicalCacheBytesForTesting(std::size_t bytes) { return Lexical().SetBudget(bytes); }

Result<grammar::ExprId> AddNumberExpr(grammar::Grammar* g, const NumberConstraint& c,
                                      const LexicalOptions& options) {
  const DeadlineScope scope(options.deadline);
  if (!c.minimum && !c.maximum && !c.multiple_of && c.not_multiples.empty()) {
    static const auto* kInteger = new std::shared_ptr<const ByteDfa>(
        std::make_shared<const ByteDfa>(*CompileRegexToDfa("-?(?:0|[1-9][0-9]*)")));
    static const auto* kNumber = new std::shared_ptr<const ByteDfa>(std::make_shared<const ByteDfa>(
        *CompileRegexToDfa("-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")));
    return g->Add(ByteDfaNode(c.integer ? *kInteger : *kNumber));
  }
  return Lexical().Add(g, LexicalCache::Key(c, options), options,
                       [&] { return BuildNumberConstraintDfa(c, options); });
}

namespace {

// AddNumberExpr's automaton for a number with bounds or multiples.
Result<ByteDfa> BuildNumberConstraintDfa(const NumberConstraint& c,
                                         const LexicalOptions& options) {
  NumberPlan plan;
  plan.integer = c.integer;
  std::int32_t k_max = 0, j_max = 0;
  if (c.minimum) {
    LOCKSTEP_ASSIGN_OR_RETURN(Decimal v, ParseDecimal(c.minimum->value, "minimum"));
    PlaceBound(&plan, v, /*value_lower=*/true, c.minimum->exclusive);
  }
  if (c.maximum) {
    LOCKSTEP_ASSIGN_OR_RETURN(Decimal v, ParseDecimal(c.maximum->value, "maximum"));
    PlaceBound(&plan, v, /*value_lower=*/false, c.maximum->exclusive);
  }
  for (auto& branch : plan.bounds) {
    for (MagBound& b : branch) {
      if (!b.present) continue;
      k_max = std::max(k_max, static_cast<std::int32_t>(b.value.int_digits.size()));
      j_max = std::max(j_max, static_cast<std::int32_t>(b.value.frac_digits.size()));
    }
  }
  auto set_multiple = [&](const std::string& text, NumberPlan* p) -> Status {
    LOCKSTEP_ASSIGN_OR_RETURN(Decimal m, ParseDecimal(text, "multipleOf"));
    if (m.negative || m.IsZero()) {
      return Status(StatusCode::kInvalidArgument, "multipleOf must be greater than 0, got " + text);
    }
    std::string digits = m.int_digits == "0" ? m.frac_digits : m.int_digits + m.frac_digits;
    digits.erase(0, std::min(digits.find_first_not_of('0'), digits.size()));
    if (digits.size() > 9 || std::stoll(digits) > options.max_dfa_states) {
      return Status(StatusCode::kResourceLimit,
                    "multipleOf " + text + " needs a remainder automaton of " + digits +
                        " states, over max_dfa_states = " + std::to_string(options.max_dfa_states));
    }
    p->has_multiple = true;
    p->mod = std::stoll(digits);
    p->scale = static_cast<std::int32_t>(m.frac_digits.size());
    p->k_cap = k_max + 1;
    p->j_cap = std::max(j_max, p->scale);
    return Status::Ok();
  };
  const NumberPlan bounds_only = [&] {
    NumberPlan p = plan;
    p.k_cap = k_max + 1;
    p.j_cap = j_max;
    return p;
  }();
  plan = bounds_only;
  if (c.multiple_of) LOCKSTEP_RETURN_IF_ERROR(set_multiple(*c.multiple_of, &plan));
  LOCKSTEP_ASSIGN_OR_RETURN(ByteDfa dfa, BuildNumberDfa(plan, options.max_dfa_states));
  if (!c.not_multiples.empty() && dfa.start != ByteDfa::kDead) {
    // Not a multiple of m: the numbers above minus the multiples of m under the same bounds (the
    // same texts: plain decimals), one automaton per m run in parallel, complemented.
    if (c.not_multiples.size() + 1 > Key().size()) {
      return Status(StatusCode::kUnsupported,
                    "more than " + std::to_string(Key().size() - 1) +
                        " negated multipleOf on one number");
    }
    std::vector<ByteDfa> each(c.not_multiples.size());
    std::vector<const ByteDfa*> parts = {&dfa};
    std::vector<bool> negated = {false};
    for (std::size_t i = 0; i < each.size(); ++i) {
      NumberPlan q = bounds_only;
      LOCKSTEP_RETURN_IF_ERROR(set_multiple(c.not_multiples[i], &q));
      LOCKSTEP_ASSIGN_OR_RETURN(each[i], BuildNumberDfa(q, options.max_dfa_states));
      parts.push_back(&each[i]);
      negated.push_back(true);
    }
    LOCKSTEP_ASSIGN_OR_RETURN(dfa, ParallelDifference(parts, negated, options.max_dfa_states));
  }
  if (dfa.start == ByteDfa::kDead) {
    return Status(StatusCode::kUnsatisfiable, std::string("no ") +
                                                  (c.integer ? "integer" : "number") +
                                                  " satisfies minimum/maximum/multipleOf here");
  }
  return dfa;
}

}  // namespace

namespace {

struct CountedClass {
  std::vector<CodepointRange> ranges;
  std::int32_t min = 0, max = 0;  // max: RegexNode::kUnbounded for none
};

// The class C and the bounds of a pattern `^C{m,n}$` (also `{m}` and `{m,}`: a count, not `?`,
// `*` or `+`), when every character of C is written raw in a canonically escaped JSON string
// (no control character, quote or backslash: those take an escape): a string matches it exactly
// when it has between m and n characters, each in C. Else nullopt.
std::optional<CountedClass> CountedClassPattern(const std::string& pattern) {
  RegexParseOptions po;
  po.anchor_markers = true;
  Result<RegexAst> ast = ParseRegex(pattern, po);
  if (!ast.ok()) return std::nullopt;
  const RegexNode& root = ast->node(ast->root);
  if (root.kind != RegexNodeKind::kConcat || root.children_end - root.children_begin != 3) {
    return std::nullopt;
  }
  const RegexNode& caret = ast->node(ast->children[root.children_begin]);
  const RegexNode& rep = ast->node(ast->children[root.children_begin + 1]);
  const RegexNode& dollar = ast->node(ast->children[root.children_begin + 2]);
  if (caret.kind != RegexNodeKind::kAnchor || caret.min != 0 ||
      dollar.kind != RegexNodeKind::kAnchor || dollar.min != 1 ||
      rep.kind != RegexNodeKind::kRepeat || rep.children_end - rep.children_begin != 1) {
    return std::nullopt;
  }
  // A count: not `?` (0-1), `*` (0-) or `+` (1-), whose automaton is a loop or two states.
  if (rep.max == RegexNode::kUnbounded ? rep.min <= 1 : rep.max <= 1) return std::nullopt;
  if (rep.max != RegexNode::kUnbounded && rep.max > kMaxCount) return std::nullopt;
  const RegexNode& cls = ast->node(ast->children[rep.children_begin]);
  if (cls.kind != RegexNodeKind::kClass || cls.ranges_begin == cls.ranges_end) return std::nullopt;
  CountedClass out;
  out.min = rep.min;
  out.max = rep.max;
  for (std::int32_t i = cls.ranges_begin; i < cls.ranges_end; ++i) {
    const CodepointRange r = ast->ranges[i];
    if (r.lo < 0x20 || (r.lo <= U'"' && U'"' <= r.hi) || (r.lo <= U'\\' && U'\\' <= r.hi)) {
      return std::nullopt;
    }
    out.ranges.push_back(r);
  }
  return out;
}

// `"` unit{lo,hi} `"` (hi < 0: no limit), the repetition a native counter (never unrolled).
ExprId QuotedCount(grammar::Grammar* g, ExprId unit, std::int64_t lo, std::int64_t hi) {
  Expr rep = RepeatNode(unit, static_cast<std::int32_t>(lo),
                        hi < 0 ? Expr::kUnbounded : static_cast<std::int32_t>(hi));
  rep.count = true;
  const ExprId r = g->Add(std::move(rep));
  const ExprId open = g->Add(LiteralNode("\""));
  const ExprId close = g->Add(LiteralNode("\""));
  return g->Add(ListNode(ExprKind::kSequence, {open, r, close}));
}

}  // namespace

Result<grammar::ExprId> AddStringExpr(grammar::Grammar* g, const StringConstraint& c,
                                      const LexicalOptions& options) {
  const DeadlineScope scope(options.deadline);
  const std::int64_t min_len = std::max<std::int64_t>(c.min_length, 0);
  const std::int64_t max_len = c.max_length ? *c.max_length : -1;
  if (max_len >= 0 && max_len < min_len) {
    return Status(StatusCode::kUnsatisfiable, "minLength " + std::to_string(min_len) +
                                                  " > maxLength " + std::to_string(max_len));
  }
  if (min_len > kMaxCount) {
    return Status(StatusCode::kUnsupported,
                  "minLength " + std::to_string(min_len) + " is too large to enforce");
  }
  const bool has_max = max_len >= 0 && max_len <= kMaxCount;
  if (!c.pattern && !c.format && c.excluded.empty() && c.not_patterns.empty() &&
      c.also_patterns.empty() && c.also_formats.empty() && c.not_formats.empty()) {
    Expr unit_raw;
    unit_raw.kind = ExprKind::kCharClass;
    unit_raw.ranges = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCodepoint}};
    const ExprId raw = g->Add(std::move(unit_raw));
    const ExprId esc = g->Add(ByteDfaNode(EscapeUnitDfa()));
    const ExprId u = g->Add(ListNode(ExprKind::kChoice, {raw, esc}));
    return QuotedCount(g, u, min_len, has_max ? max_len : -1);
  }
  if (options.count_class_patterns && c.pattern && !c.format && c.excluded.empty() &&
      c.not_patterns.empty() &&
      c.also_patterns.empty() && c.also_formats.empty() && c.not_formats.empty()) {
    if (std::optional<CountedClass> cc = CountedClassPattern(*c.pattern)) {
      // `^C{m,n}$`: the same native counter as lengths alone, over the class's characters (its
      // automaton would have a state per count, each a position of its own walked over the
      // vocabulary: 1-2 ms apiece for a class of letters, digits and punctuation on Llama-3).
      const std::int64_t lo = std::max<std::int64_t>(min_len, cc->min);
      std::int64_t hi = cc->max == RegexNode::kUnbounded ? -1 : cc->max;
      if (has_max) hi = hi < 0 ? max_len : std::min(hi, max_len);
      if (hi >= 0 && hi < lo) {
        return Status(StatusCode::kUnsatisfiable,
                      "no string of the lengths allowed matches the pattern " + *c.pattern);
      }
      Expr unit;
      unit.kind = ExprKind::kCharClass;
      unit.ranges = std::move(cc->ranges);
      return QuotedCount(g, g->Add(std::move(unit)), lo, hi);
    }
  }
  if (c.format && !FormatSupported(*c.format) && !OptionalFormat(*c.format)) {
    return Status(StatusCode::kUnsupported,
                  "format '" + *c.format + "' cannot be enforced exactly");
  }
  if (c.format && !c.pattern && c.also_patterns.empty() && c.excluded.empty() &&
      c.not_patterns.empty() && c.also_formats.empty() && c.not_formats.empty() && min_len == 0 &&
      !has_max) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const ByteDfa> tok,
                              CachedFormatDfa(*c.format, true));
    return g->Add(ByteDfaNode(tok));
  }
  return Lexical().Add(g, LexicalCache::Key(c, options), options,
                       [&] { return BuildStringConstraintDfa(c, options); });
}

namespace {

// AddStringExpr's automaton for a constraint with a pattern, a format, exclusions or negations
// (the lengths-only and plain-format shapes are handled before).
Result<ByteDfa> BuildStringConstraintDfa(const StringConstraint& c,
                                         const LexicalOptions& options) {
  const std::int64_t min_len = std::max<std::int64_t>(c.min_length, 0);
  const std::int64_t max_len = c.max_length ? *c.max_length : -1;
  const bool has_max = max_len >= 0 && max_len <= kMaxCount;
  std::vector<const ByteDfa*> contents;
  std::shared_ptr<const ByteDfa> format_dfa;
  ByteDfa pattern_dfa;
  if (c.format) {
    LOCKSTEP_ASSIGN_OR_RETURN(format_dfa, CachedFormatDfa(*c.format, false));
    contents.push_back(format_dfa.get());
  }
  if (c.pattern) {
    LOCKSTEP_ASSIGN_OR_RETURN(pattern_dfa, PatternContentDfa(*c.pattern, options.max_dfa_states));
    contents.push_back(&pattern_dfa);
  }
  // Further formats: the format automaton becomes the intersection of all of them.
  ByteDfa all_formats;
  if (!c.also_formats.empty()) {
    if (!c.format) return Status(StatusCode::kInternal, "also_formats without a format");
    LOCKSTEP_ASSIGN_OR_RETURN(auto held, FormatContentDfas(c.also_formats));
    std::vector<const ByteDfa*> parts = {format_dfa.get()};
    for (const auto& d : held) parts.push_back(d.get());
    if (parts.size() > Key().size()) {
      return Status(StatusCode::kUnsupported, "too many formats on one string");
    }
    LOCKSTEP_ASSIGN_OR_RETURN(all_formats, ParallelIntersection(parts, options.max_dfa_states));
    contents[0] = &all_formats;
  }
  ByteDfa all_patterns;
  if (!c.also_patterns.empty()) {
    // Every pattern at once: one automaton for their intersection.
    if (c.also_patterns.size() + (c.pattern ? 1 : 0) > Key().size()) {
      return Status(StatusCode::kUnsupported,
                    "more than " + std::to_string(Key().size()) + " patterns on one string");
    }
    std::vector<ByteDfa> also(c.also_patterns.size());
    std::vector<const ByteDfa*> parts;
    if (c.pattern) parts.push_back(&pattern_dfa);
    for (std::size_t i = 0; i < c.also_patterns.size(); ++i) {
      LOCKSTEP_ASSIGN_OR_RETURN(also[i],
                                PatternContentDfa(c.also_patterns[i], options.max_dfa_states));
      parts.push_back(&also[i]);
    }
    LOCKSTEP_ASSIGN_OR_RETURN(all_patterns, ParallelIntersection(parts, options.max_dfa_states));
    if (c.pattern) contents.pop_back();
    contents.push_back(&all_patterns);
  }
  ByteDfa negated;
  if (!c.not_patterns.empty()) {
    // One search automaton for the union: top-level alternatives keep their anchors. (Patterns
    // with leading lookaheads are no alternatives: then the union of their automata.)
    const bool lookaheads =
        std::any_of(c.not_patterns.begin(), c.not_patterns.end(),
                    [](const std::string& p) { return SplitLeadingLookaheads(p).has_value(); });
    if (lookaheads) {
      if (c.not_patterns.size() > Key().size()) {
        return Status(StatusCode::kUnsupported,
                      "more than " + std::to_string(Key().size()) +
                          " negated patterns with lookaheads on one string");
      }
      std::vector<ByteDfa> each(c.not_patterns.size());
      std::vector<const ByteDfa*> parts;
      for (std::size_t i = 0; i < each.size(); ++i) {
        LOCKSTEP_ASSIGN_OR_RETURN(each[i],
                                  PatternContentDfa(c.not_patterns[i], options.max_dfa_states));
        parts.push_back(&each[i]);
      }
      LOCKSTEP_ASSIGN_OR_RETURN(negated, ParallelUnion(parts, options.max_dfa_states));
    } else {
      std::string joined;
      for (const std::string& p : c.not_patterns) {
        LOCKSTEP_RETURN_IF_ERROR(CheckPatternSyntax(p));
        joined += (&p == &c.not_patterns.front() ? "" : "|") + p;
      }
      LOCKSTEP_ASSIGN_OR_RETURN(negated, PatternContentDfa(joined, options.max_dfa_states));
    }
  }
  if (!c.not_formats.empty()) {
    // The values of any negated format are excluded too: one automaton for the union.
    LOCKSTEP_ASSIGN_OR_RETURN(auto held, FormatContentDfas(c.not_formats));
    std::vector<const ByteDfa*> parts;
    if (!c.not_patterns.empty()) parts.push_back(&negated);
    for (const auto& d : held) parts.push_back(d.get());
    if (parts.size() > Key().size()) {
      return Status(StatusCode::kUnsupported, "too many negated formats on one string");
    }
    LOCKSTEP_ASSIGN_OR_RETURN(negated, ParallelUnion(parts, options.max_dfa_states));
  }
  const bool has_negated = !c.not_patterns.empty() || !c.not_formats.empty();
  if (has_max && contents.size() == 1 && !has_negated && c.excluded.empty()) {
    // A count per state of the content: about its states times maxLength + 1. When that alone
    // is past the budget the product is not tried (it would take up to a second to find out):
    // the schema compiler then counts the characters at run time.
    const std::int64_t estimate =
        static_cast<std::int64_t>(contents[0]->num_states) * (max_len + 1);
    if (estimate > options.max_dfa_states) {
      return Status(StatusCode::kResourceLimit,
                    "this string constraint needs about " + std::to_string(estimate) +
                        " automaton states (its pattern or format's " +
                        std::to_string(contents[0]->num_states) + " times maxLength " +
                        std::to_string(max_len) + " + 1), more than max_dfa_states = " +
                        std::to_string(options.max_dfa_states) +
                        " (raise CompileOptions::max_dfa_states, lockstep --max-states)");
    }
    // (State 0 is the dead state: a content of one state matches nothing, and its product
    // says so, unsatisfiable.)
    if (options.count_at_run_time_from > 0 && max_len >= options.count_at_run_time_from &&
        contents[0]->num_states > 1) {
      // (A compile past its deadline says so, not this: no run-time count will follow.)
      if (options.deadline.PassedNow()) return options.deadline.Error("");
      return Status(StatusCode::kResourceLimit,
                    "maxLength " + std::to_string(max_len) +
                        " is counted at run time beside a pattern or format (from " +
                        std::to_string(options.count_at_run_time_from) + " characters)");
    }
  }
  Trie trie;
  for (const std::string& s : c.excluded) trie.Insert(s);
  if (options.direct_exclusion && contents.empty() && !has_negated && min_len == 0 &&
      !has_max) {
    if (std::optional<ByteDfa> direct = ExcludedStringTokenDfa(trie)) {
      return std::move(*direct);
    }
  }
  LOCKSTEP_ASSIGN_OR_RETURN(
      ByteDfa tok, BuildStringTokenDfa(contents, min_len, has_max ? max_len : -1,
                                       c.excluded.empty() ? nullptr : &trie, options.max_dfa_states,
                                       has_negated ? &negated : nullptr));
  if (tok.start == ByteDfa::kDead) {
    return Status(StatusCode::kUnsatisfiable,
                  "no string satisfies this combination of pattern/format/length/exclusions");
  }
  return tok;
}

}  // namespace

std::string RenderJsonString(std::string_view utf8) {
  static const char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (unsigned char c : utf8) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case 0x08:
        out += "\\b";
        break;
      case 0x0C:
        out += "\\f";
        break;
      case 0x0A:
        out += "\\n";
        break;
      case 0x0D:
        out += "\\r";
        break;
      case 0x09:
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string RenderJsonNumber(const nlohmann::json& number) {
  if (number.is_number_unsigned()) return std::to_string(number.get<std::uint64_t>());
  if (number.is_number_integer()) return std::to_string(number.get<std::int64_t>());
  const double d = number.get<double>();
  if (!std::isfinite(d)) return "null";
  if (d == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, res.ptr);
  // s: -?D(.DDD)?e[+-]XX  ->  plain decimal.
  const bool neg = s[0] == '-';
  if (neg) s.erase(0, 1);
  const std::size_t e = s.find('e');
  const int exp = std::stoi(s.substr(e + 1));
  std::string digits = s.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int point = exp + 1;  // digits before the decimal point
  std::string out;
  if (point <= 0) {
    out = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (point >= static_cast<int>(digits.size())) {
    out = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    out = digits.substr(0, static_cast<std::size_t>(point)) + "." +
          digits.substr(static_cast<std::size_t>(point));
  }
  return neg ? "-" + out : out;
}

}  // namespace lockstep::schema
