// Compiled artifacts (.lsg): writer, checked reader and loader (include/lockstep/artifact.h,
// docs/artifacts.md). Every multi-byte value is little-endian; arrays are a u64 count and the
// elements. The reader never trusts a count: it checks it against the bytes left before it
// allocates, and the loader checks every index (states, rules, classes, token ids, trie links)
// against the sizes it belongs to before the runtime sees it.
#include "lockstep/artifact.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <tuple>
#include <type_traits>
#include <vector>

#include "automata/regex/regex_compiler.h"
#include "automata/cfg/cfg_grammar.h"
#include "automata/token/token_dfa.h"
#include "lockstep/bitmask.h"

namespace lockstep {

static_assert(std::endian::native == std::endian::little,
              "the artifact format is little-endian; a big-endian port needs byte swaps here");

namespace {

constexpr char kMagic[8] = {'\x89', 'L', 'S', 'G', '\r', '\n', '\x1a', '\n'};
constexpr std::size_t kHeaderBytes = 64;
constexpr std::uint32_t kKindRegex = 1;
constexpr std::uint32_t kKindGrammar = 2;
// Section tags, so a reader that lost its place says where.
constexpr std::uint32_t kTagOptions = 0x4F505453;   // "STPO"
constexpr std::uint32_t kTagSource = 0x53524345;    // "ECRS"
constexpr std::uint32_t kTagAutomaton = 0x4155544F;
constexpr std::uint32_t kTagCache = 0x43414348;
constexpr std::uint32_t kTagEnd = 0x454E4421;

std::uint32_t Crc32(const char* data, std::size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const uInt chunk = static_cast<uInt>(std::min<std::size_t>(n, 1u << 30));
    c = crc32(c, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<std::uint32_t>(c);
}

}  // namespace

// The payload checksum: four independent 64-bit lanes of multiply-rotate rounds over 8-byte
// words (memory speed; a CRC-32 of a 9 MB automaton took longer than the rest of the load),
// then the tail bytes and a final avalanche.
std::uint64_t ArtifactPayloadHash(std::string_view bytes) {
  constexpr std::uint64_t kP1 = 0x9E3779B185EBCA87ull, kP2 = 0xC2B2AE3D27D4EB4Full;
  auto round = [](std::uint64_t acc, std::uint64_t w) {
    acc += w * kP2;
    acc = (acc << 31) | (acc >> 33);
    return acc * kP1;
  };
  std::uint64_t lane[4] = {kP1 + kP2, kP2, 0, 0 - kP1};
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  while (n >= 32) {
    for (int k = 0; k < 4; ++k) {
      std::uint64_t w;
      std::memcpy(&w, p + 8 * k, 8);
      lane[k] = round(lane[k], w);
    }
    p += 32;
    n -= 32;
  }
  std::uint64_t h = ((lane[0] << 1) | (lane[0] >> 63)) + ((lane[1] << 7) | (lane[1] >> 57)) +
                    ((lane[2] << 12) | (lane[2] >> 52)) + ((lane[3] << 18) | (lane[3] >> 46));
  h ^= static_cast<std::uint64_t>(bytes.size()) * kP1;
  while (n > 0) {
    h = round(h, static_cast<unsigned char>(*p++));
    --n;
  }
  h ^= h >> 33;
  h *= kP2;
  h ^= h >> 29;
  h *= kP1;
  h ^= h >> 32;
  return h;
}

namespace {

// Element types stored as raw bytes: trivially copyable ones, and pairs of them (std::pair is
// not trivially copyable because of its assignment operators, but is laid out as two members).
template <typename T>
struct RawBytes : std::bool_constant<std::is_trivially_copyable_v<T>> {};
template <typename A, typename B>
struct RawBytes<std::pair<A, B>>
    : std::bool_constant<std::is_trivially_copyable_v<A> && std::is_trivially_copyable_v<B> &&
                         sizeof(std::pair<A, B>) == sizeof(A) + sizeof(B)> {};

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const std::size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));
  }
  template <typename T>
  void PutVec(const std::vector<T>& v) {
    static_assert(RawBytes<T>::value);
    Put<std::uint64_t>(v.size());
    if (v.empty()) return;
    const std::size_t at = out_.size();
    out_.resize(at + v.size() * sizeof(T));
    std::memcpy(out_.data() + at, static_cast<const void*>(v.data()), v.size() * sizeof(T));
  }
  void PutStr(std::string_view s) {
    Put<std::uint64_t>(s.size());
    out_.append(s);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads what Writer wrote; the first failure sticks and names the byte offset in the file.
class Reader {
 public:
  Reader(std::string_view bytes, std::size_t base) : p_(bytes), base_(base) {}
  bool ok() const { return err_.empty(); }
  const std::string& error() const { return err_; }
  std::size_t offset() const { return base_ + at_; }
  void Fail(std::string what) {
    if (err_.empty()) {
      err_ = std::move(what);
      err_at_ = offset();
    }
  }
  std::size_t error_offset() const { return err_at_; }
  template <typename T>
  T Get(const char* what) {
    T v{};
    if (!ok()) return v;
    if (p_.size() - at_ < sizeof(T)) {
      Fail(std::string("truncated: ") + what);
      return v;
    }
    std::memcpy(&v, p_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  template <typename T>
  std::vector<T> GetVec(const char* what, std::uint64_t max_count = UINT64_MAX) {
    static_assert(RawBytes<T>::value);
    std::vector<T> v;
    const std::uint64_t n = Get<std::uint64_t>(what);
    if (!ok()) return v;
    if (n > max_count) {
      Fail(std::string(what) + ": count " + std::to_string(n) + " exceeds its bound " +
           std::to_string(max_count));
      return v;
    }
    if (n > (p_.size() - at_) / sizeof(T)) {
      Fail(std::string("truncated: ") + what + " (" + std::to_string(n) + " elements)");
      return v;
    }
    v.resize(n);
    if (n != 0) std::memcpy(static_cast<void*>(v.data()), p_.data() + at_, n * sizeof(T));
    at_ += n * sizeof(T);
    return v;
  }
  std::string GetStr(const char* what) {
    const std::uint64_t n = Get<std::uint64_t>(what);
    if (!ok()) return {};
    if (n > p_.size() - at_) {
      Fail(std::string("truncated: ") + what);
      return {};
    }
    std::string s(p_.substr(at_, n));
    at_ += n;
    return s;
  }
  void Expect(std::uint32_t tag, const char* section) {
    const std::size_t at = offset();
    if (Get<std::uint32_t>(section) != tag && ok()) {
      at_ = at - base_;
      Fail(std::string("bad section marker (expected the ") + section + " section)");
    }
  }
  bool AtEnd() const { return at_ == p_.size(); }

 private:
  std::string_view p_;
  std::size_t base_;
  std::size_t at_ = 0;
  std::string err_;
  std::size_t err_at_ = 0;
};

Status ArtifactError(std::string message, std::size_t offset) {
  return Status(StatusCode::kInvalidArtifact, std::move(message), "byte " + std::to_string(offset));
}

// --- masks in the file: the smallest of a bitset, an id list, a list of blocked ids ----------

void PutMask(Writer& w, const std::uint32_t* mask, std::size_t words, std::int32_t width) {
  std::size_t ones = 0;
  for (std::size_t i = 0; i < words; ++i) ones += static_cast<std::size_t>(std::popcount(mask[i]));
  const std::size_t limit = words / 8;
  const std::size_t zeros = static_cast<std::size_t>(width) - std::min<std::size_t>(ones, width);
  if (ones > limit && zeros > limit) {
    w.Put<std::uint32_t>(0);
    w.PutVec(std::vector<std::uint32_t>(mask, mask + words));
    return;
  }
  const bool complement = ones > limit;
  std::vector<std::uint32_t> ids;
  for (std::int32_t id = 0; id < width; ++id) {
    const bool set = (mask[id >> 5] >> (id & 31)) & 1;
    if (set != complement) ids.push_back(static_cast<std::uint32_t>(id));
  }
  w.Put<std::uint32_t>(complement ? 2 : 1);
  w.PutVec(ids);
}

// Reads a mask written by PutMask into `out` (words words); bits at or past `width` are refused.
void GetMask(Reader& r, std::span<std::uint32_t> out, std::int32_t width) {
  const std::uint32_t form = r.Get<std::uint32_t>("mask form");
  if (!r.ok()) return;
  if (form > 2) return r.Fail("unknown mask form " + std::to_string(form));
  std::vector<std::uint32_t> v = r.GetVec<std::uint32_t>("mask", form == 0 ? out.size() : width);
  if (!r.ok()) return;
  if (form == 0) {
    if (v.size() != out.size()) return r.Fail("mask of the wrong size");
    std::memcpy(out.data(), v.data(), out.size() * 4);
    for (std::size_t w = 0; w < out.size(); ++w) {
      for (std::uint32_t x = out[w]; x != 0; x &= x - 1) {
        if (static_cast<std::int64_t>(w * 32 + std::countr_zero(x)) >= width) {
          return r.Fail("mask allows a token id past the logits width");
        }
      }
    }
    return;
  }
  std::fill(out.begin(), out.end(), form == 2 ? ~0u : 0u);
  if (form == 2) {
    for (std::size_t w = 0; w < out.size(); ++w) {
      const std::int64_t lo = static_cast<std::int64_t>(w) * 32;
      if (lo >= width) out[w] = 0;
      else if (lo + 32 > width) out[w] = (1u << (width - lo)) - 1;
    }
  }
  for (std::uint32_t id : v) {
    if (id >= static_cast<std::uint32_t>(width)) return r.Fail("token id " + std::to_string(id) + " out of range");
    if (form == 2) out[id >> 5] &= ~(1u << (id & 31));
    else out[id >> 5] |= 1u << (id & 31);
  }
}

void PutOptions(Writer& w, const CompileOptions& o) {
  w.Put<std::int64_t>(o.max_dfa_states);
  w.Put<std::int64_t>(o.max_nfa_states);
  w.Put<std::int64_t>(o.max_repeat);
  w.Put<std::int64_t>(o.precompute_masks);
  w.Put<std::int64_t>(o.max_mask_cache_bytes);
  w.Put<std::int64_t>(o.max_nesting_depth);
  w.Put<std::int64_t>(o.max_unrolled_states);
  w.Put<std::int64_t>(o.precompute_threads);
  w.Put<std::int64_t>(o.schema_lenient);
  w.Put<std::int64_t>(o.schema_whitespace_compact);
  w.Put<std::int64_t>(o.schema_max_whitespace_run);
  w.Put<std::int64_t>(o.schema_format_assertion);
  w.Put<std::int64_t>(o.schema_max_exprs);
}

CompileOptions GetOptions(Reader& r) {
  CompileOptions o;
  auto i32 = [&](const char* what, std::int64_t lo, std::int64_t hi) -> std::int32_t {
    const std::int64_t v = r.Get<std::int64_t>(what);
    if (r.ok() && (v < lo || v > hi)) r.Fail(std::string("option ") + what + " out of range");
    return static_cast<std::int32_t>(v);
  };
  auto flag = [&](const char* what) { return i32(what, 0, 1) != 0; };
  o.max_dfa_states = i32("max_dfa_states", 0, INT32_MAX);
  o.max_nfa_states = i32("max_nfa_states", 0, INT32_MAX);
  o.max_repeat = i32("max_repeat", 0, INT32_MAX);
  o.precompute_masks = flag("precompute_masks");
  o.max_mask_cache_bytes = r.Get<std::int64_t>("max_mask_cache_bytes");
  if (r.ok() && o.max_mask_cache_bytes < 0) r.Fail("option max_mask_cache_bytes out of range");
  o.max_nesting_depth = i32("max_nesting_depth", 1, INT32_MAX);
  o.max_unrolled_states = i32("max_unrolled_states", 0, INT32_MAX);
  o.precompute_threads = i32("precompute_threads", 0, 4096);
  o.schema_lenient = flag("schema_lenient");
  o.schema_whitespace_compact = flag("schema_whitespace_compact");
  o.schema_max_whitespace_run = i32("schema_max_whitespace_run", 0, INT32_MAX);
  o.schema_format_assertion = flag("schema_format_assertion");
  o.schema_max_exprs = r.Get<std::int64_t>("schema_max_exprs");
  return o;
}

// --- the lowered grammar program ---------------------------------------------------------------

void PutProgram(Writer& w, const CfgProgram& p) {
  w.Put<std::int32_t>(p.root);
  w.Put<std::uint64_t>(p.rules.size());
  for (const auto& r : p.rules) {
    w.Put<std::uint8_t>(static_cast<std::uint8_t>(r.kind));
    w.PutStr(r.name);
    w.Put<std::int32_t>(r.start);
    w.Put<std::int32_t>(r.child);
    w.Put<std::int32_t>(r.min);
    w.Put<std::int32_t>(r.max);
    w.Put<std::uint8_t>(r.nullable);
    w.Put<std::int32_t>(r.unique_item);
    w.Put<std::uint8_t>(r.unique_open_calls);
    w.Put<std::uint8_t>(r.unique_search);
    w.Put<std::int32_t>(r.max_chars);
    w.Put<std::uint8_t>(r.ecma_pattern);
  }
  w.Put<std::int32_t>(p.num_states);
  w.Put<std::int32_t>(p.num_classes);
  w.Put(p.byte_class);
  // Transitions by state as (class, target) lists: rule automata are sparse (a format
  // automaton of 25k states x 88 classes is 9 MB dense, a few hundred KB listed).
  std::vector<std::uint16_t> counts(p.num_states, 0);
  std::vector<std::uint8_t> classes;
  std::vector<StateId> targets;
  for (std::int32_t st = 0; st < p.num_states; ++st) {
    const TransitionRow row = p.Row(st);
    for (std::int32_t c = 0; c < p.num_classes; ++c) {
      if (row[c] == CfgProgram::kDead) continue;
      ++counts[st];
      classes.push_back(static_cast<std::uint8_t>(c));
      targets.push_back(row[c]);
    }
  }
  w.PutVec(counts);
  w.PutVec(classes);
  w.PutVec(targets);
  w.PutVec(p.accepting);
  w.PutVec(p.state_rule);
  w.PutVec(p.has_bytes);
  w.PutVec(p.nt_begin);
  w.PutVec(p.nt_edges);
  w.PutVec(p.sp_begin);
  w.PutVec(p.sp_edges);
  w.PutVec(p.special_tokens);
  std::vector<std::uint8_t> negated(p.special_tokens.size(), 0);
  for (std::size_t i = 0; i < negated.size(); ++i) {
    negated[i] = p.SpecialNegated(static_cast<std::int32_t>(i));
  }
  w.PutVec(negated);
}

// A program's transitions as PutProgram lists them: per state its count, then (class, target)
// pairs in state order.
struct TransitionLists {
  std::vector<std::uint16_t> counts;
  std::vector<std::uint8_t> classes;
  std::vector<StateId> targets;
};

// Reads the root, the rules, the state and class counts and the byte classes, and checks them
// against each other. False once the reader has failed (so for each step below).
bool GetProgramShape(Reader& r, CfgProgram& p) {
  p.root = r.Get<std::int32_t>("root");
  const std::uint64_t nr = r.Get<std::uint64_t>("rule count");
  if (!r.ok()) return false;
  if (nr == 0 || nr > (1u << 24)) {
    r.Fail("rule count " + std::to_string(nr) + " out of range");
    return false;
  }
  for (std::uint64_t i = 0; i < nr && r.ok(); ++i) {
    CfgProgram::RuleInfo ri;
    const std::uint8_t kind = r.Get<std::uint8_t>("rule kind");
    if (r.ok() && kind > 1) r.Fail("unknown rule kind");
    ri.kind = static_cast<CfgProgram::RuleKind>(kind);
    ri.name = r.GetStr("rule name");
    ri.start = r.Get<std::int32_t>("rule start");
    ri.child = r.Get<std::int32_t>("rule child");
    ri.min = r.Get<std::int32_t>("rule min");
    ri.max = r.Get<std::int32_t>("rule max");
    ri.nullable = r.Get<std::uint8_t>("rule nullable") != 0;
    ri.unique_item = r.Get<std::int32_t>("rule unique_item");
    if (r.ok() && (ri.unique_item < -1 ||
                   (ri.unique_item >= 0 && static_cast<std::uint64_t>(ri.unique_item) >= nr) ||
                   (ri.unique_item >= 0 && ri.kind != CfgProgram::RuleKind::kDfa))) {
      r.Fail("rule unique_item out of range");
    }
    ri.unique_open_calls = r.Get<std::uint8_t>("rule unique_open_calls") != 0;
    if (r.ok() && ri.unique_open_calls && ri.unique_item < 0) r.Fail("rule unique_open_calls without an item");
    ri.unique_search = r.Get<std::uint8_t>("rule unique_search") != 0;
    if (r.ok() && ri.unique_search && ri.unique_item < 0) r.Fail("rule unique_search without an item");
    ri.max_chars = r.Get<std::int32_t>("rule max_chars");
    if (r.ok() && (ri.max_chars < -1 || (ri.max_chars >= 0 && ri.kind != CfgProgram::RuleKind::kDfa))) {
      r.Fail("rule max_chars out of range");
    }
    ri.ecma_pattern = r.Get<std::uint8_t>("rule ecma_pattern") != 0;
    if (r.ok() && ri.ecma_pattern && ri.kind != CfgProgram::RuleKind::kDfa) {
      r.Fail("rule ecma_pattern on a rule that is not an automaton");
    }
    p.rules.push_back(std::move(ri));
  }
  p.num_states = r.Get<std::int32_t>("state count");
  p.num_classes = r.Get<std::int32_t>("class count");
  p.byte_class = r.Get<std::array<std::uint8_t, 256>>("byte classes");
  if (!r.ok()) return false;
  const std::int32_t ns = p.num_states, nc = p.num_classes;
  const std::int32_t nrules = static_cast<std::int32_t>(nr);
  if (ns < 0 || ns > (1 << 26)) return r.Fail("state count out of range"), false;
  if (nc < 1 || nc > 256) return r.Fail("class count out of range"), false;
  if (p.root < 0 || p.root >= nrules) return r.Fail("root rule out of range"), false;
  if (p.rules[p.root].kind != CfgProgram::RuleKind::kDfa) {
    return r.Fail("root rule is a counter"), false;
  }
  for (int b = 0; b < 256; ++b) {
    if (p.byte_class[b] >= nc) return r.Fail("byte class out of range"), false;
  }
  return true;
}

// Reads the per-state arrays and the edges (each bounded before it is allocated), and checks
// that their sizes agree with the state count.
bool GetProgramArrays(Reader& r, CfgProgram& p, TransitionLists& lists) {
  const std::int32_t ns = p.num_states, nc = p.num_classes;
  const std::uint64_t cells = static_cast<std::uint64_t>(ns) * static_cast<std::uint64_t>(nc);
  lists.counts = r.GetVec<std::uint16_t>("transition counts", ns);
  lists.classes = r.GetVec<std::uint8_t>("transition classes", cells);
  lists.targets = r.GetVec<StateId>("transition targets", cells);
  p.accepting = r.GetVec<std::uint8_t>("accepting", ns);
  p.state_rule = r.GetVec<std::int32_t>("state rules", ns);
  p.has_bytes = r.GetVec<std::uint8_t>("has_bytes", ns);
  p.nt_begin = r.GetVec<std::int32_t>("rule edge offsets", static_cast<std::uint64_t>(ns) + 1);
  p.nt_edges = r.GetVec<std::pair<std::int32_t, StateId>>("rule edges", 1u << 28);
  p.sp_begin = r.GetVec<std::int32_t>("special edge offsets", static_cast<std::uint64_t>(ns) + 1);
  p.sp_edges = r.GetVec<std::pair<std::int32_t, StateId>>("special edges", 1u << 28);
  p.special_tokens = r.GetVec<TokenId>("special tokens", 1u << 20);
  p.special_negated = r.GetVec<std::uint8_t>("special token negations", 1u << 20);
  if (!r.ok()) return false;
  if (lists.counts.size() != static_cast<std::size_t>(ns) ||
      lists.classes.size() != lists.targets.size() ||
      p.accepting.size() != static_cast<std::size_t>(ns) ||
      p.state_rule.size() != static_cast<std::size_t>(ns) ||
      p.has_bytes.size() != static_cast<std::size_t>(ns) ||
      p.nt_begin.size() != static_cast<std::size_t>(ns) + 1 ||
      p.sp_begin.size() != static_cast<std::size_t>(ns) + 1 ||
      p.special_negated.size() != p.special_tokens.size()) {
    return r.Fail("program arrays of inconsistent sizes"), false;
  }
  return true;
}

// One kind of edges (rule or special-token), `what` naming it: offsets that cover the edges in
// order, symbols below `nsym`, targets in the rule of the state they leave.
void CheckEdges(Reader& r, const CfgProgram& p, const std::vector<std::int32_t>& begin,
                const std::vector<std::pair<std::int32_t, StateId>>& edges, std::int32_t nsym,
                const char* what) {
  const std::int32_t ns = p.num_states;
  if (begin[0] != 0 || begin[ns] != static_cast<std::int32_t>(edges.size())) {
    return r.Fail(std::string(what) + " offsets do not cover the edges");
  }
  for (std::int32_t s = 0; s < ns; ++s) {
    if (begin[s] > begin[s + 1]) return r.Fail(std::string(what) + " offsets decrease");
  }
  for (std::int32_t s = 0; s < ns; ++s) {
    for (std::int32_t e = begin[s]; e < begin[s + 1]; ++e) {
      const auto [sym, t] = edges[e];
      if (sym < 0 || sym >= nsym || t < 0 || t >= ns || p.state_rule[t] != p.state_rule[s]) {
        return r.Fail(std::string(what) + " of state " + std::to_string(s) + " out of range");
      }
    }
  }
}

// Special token ids in the vocabulary, every state in an automaton rule, edges in range.
bool CheckProgramIndices(Reader& r, const Vocabulary& vocab, const CfgProgram& p) {
  for (TokenId t : p.special_tokens) {
    if (t < 0 || t >= vocab.size()) return r.Fail("special token id out of range"), false;
  }
  const std::int32_t nrules = p.NumRules();
  for (std::int32_t s = 0; s < p.num_states; ++s) {
    const std::int32_t rule = p.state_rule[s];
    if (rule < 0 || rule >= nrules || p.rules[rule].kind != CfgProgram::RuleKind::kDfa) {
      return r.Fail("state " + std::to_string(s) + " belongs to no automaton rule"), false;
    }
  }
  CheckEdges(r, p, p.nt_begin, p.nt_edges, nrules, "rule edge");
  CheckEdges(r, p, p.sp_begin, p.sp_edges, static_cast<std::int32_t>(p.special_tokens.size()),
             "special edge");
  return r.ok();
}

// The dense transition table from the lists: classes strictly increasing per state, targets in
// the rule; has_bytes and the accepting flags checked on the way.
bool FillTransitions(Reader& r, const TransitionLists& lists, CfgProgram& p) {
  const std::int32_t ns = p.num_states, nc = p.num_classes;
  const std::vector<std::uint16_t>& counts = lists.counts;
  p.next.Assign(ns, nc);
  std::size_t k = 0;
  for (std::int32_t s = 0; s < ns; ++s) {
    if (counts[s] > nc || lists.classes.size() - k < counts[s]) {
      return r.Fail("transition lists of state " + std::to_string(s) + " out of range"), false;
    }
    std::int32_t last = -1;
    for (std::uint32_t e = 0; e < counts[s]; ++e, ++k) {
      const std::int32_t c = lists.classes[k];
      const StateId t = lists.targets[k];
      if (c <= last || c >= nc || t < 0 || t >= ns || p.state_rule[t] != p.state_rule[s]) {
        return r.Fail("transition of state " + std::to_string(s) + " out of range"), false;
      }
      last = c;
      p.next.Set(static_cast<std::size_t>(s) * nc + c, t);
    }
    if ((p.has_bytes[s] != 0) != (counts[s] != 0)) {
      return r.Fail("has_bytes of state " + std::to_string(s) + " wrong"), false;
    }
    if (p.accepting[s] > 1) return r.Fail("accepting flag not 0/1"), false;
  }
  if (k != lists.classes.size()) return r.Fail("transition lists longer than the states"), false;
  return true;
}

// Automaton rules start in their own states; counters have a child and bounds in range, and
// every chain of counters ends in an automaton rule (a counter of itself would recurse without
// a byte).
bool CheckRules(Reader& r, const CfgProgram& p) {
  const std::int32_t ns = p.num_states, nrules = p.NumRules();
  for (std::int32_t i = 0; i < nrules; ++i) {
    const auto& ri = p.rules[i];
    if (ri.kind == CfgProgram::RuleKind::kDfa) {
      if (ri.start < 0 || ri.start >= ns || p.state_rule[ri.start] != i) {
        return r.Fail("start state of rule " + std::to_string(i) + " out of range"), false;
      }
    } else {
      if (ri.child < 0 || ri.child >= nrules || ri.min < 0 ||
          (ri.max != CfgProgram::kUnbounded && (ri.max < ri.min || ri.max < 1))) {
        return r.Fail("counter rule " + std::to_string(i) + " out of range"), false;
      }
    }
  }
  for (std::int32_t i = 0; i < nrules; ++i) {
    std::int32_t x = i, steps = 0;
    while (p.rules[x].kind == CfgProgram::RuleKind::kCounter && steps <= nrules) {
      x = p.rules[x].child, ++steps;
    }
    if (steps > nrules) return r.Fail("counter rules form a cycle"), false;
  }
  return true;
}

// The rules' nullable flags equal a recomputation: the runtime's closure relies on them.
void CheckNullable(Reader& r, const CfgProgram& p) {
  const std::int32_t ns = p.num_states, nrules = p.NumRules();
  std::vector<std::uint8_t> null_state(ns, 0), nullable(nrules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::int32_t s = 0; s < ns; ++s) {
      if (null_state[s]) continue;
      bool v = p.accepting[s] != 0;
      for (std::int32_t e = p.nt_begin[s]; e < p.nt_begin[s + 1] && !v; ++e) {
        v = nullable[p.nt_edges[e].first] && null_state[p.nt_edges[e].second];
      }
      if (v) null_state[s] = 1, changed = true;
    }
    for (std::int32_t i = 0; i < nrules; ++i) {
      if (nullable[i]) continue;
      const auto& ri = p.rules[i];
      const bool v = ri.kind == CfgProgram::RuleKind::kDfa ? null_state[ri.start] != 0
                                                           : ri.min == 0 || nullable[ri.child];
      if (v) nullable[i] = 1, changed = true;
    }
  }
  for (std::int32_t i = 0; i < nrules; ++i) {
    if ((nullable[i] != 0) != p.rules[i].nullable) {
      return r.Fail("nullable flag of rule " + std::to_string(i) + " wrong");
    }
  }
}

// Reads and checks a program: every index in range, edges inside their rule, counters acyclic,
// and the flags derived from the automata (has_bytes, nullable) equal to a recomputation.
CfgProgram GetProgram(Reader& r, const Vocabulary& vocab) {
  CfgProgram p;
  TransitionLists lists;
  if (GetProgramShape(r, p) && GetProgramArrays(r, p, lists) && CheckProgramIndices(r, vocab, p) &&
      FillTransitions(r, lists, p) && CheckRules(r, p)) {
    CheckNullable(r, p);
    if (r.ok()) {
      // (Derived from the automata, like the runtime's other per-state summaries.)
      if (Status st = ComputeItemAutomata(&p); !st.ok()) r.Fail(st.message());
      if (Status st = ComputeLengthTables(&p); r.ok() && !st.ok()) r.Fail(st.message());
    }
  }
  return p;
}

bool ValidPosition(const CfgPosition& pos, std::size_t words, std::int32_t width, std::string* why) {
  auto bad = [&](const char* w) {
    *why = w;
    return false;
  };
  if (!pos.accepted_bits.empty() && pos.accepted_bits.size() < words) return bad("accepted bitset too short");
  for (std::size_t w = 0; w < pos.accepted_bits.size(); ++w) {
    for (std::uint32_t x = pos.accepted_bits[w]; x != 0; x &= x - 1) {
      if (static_cast<std::int64_t>(w * 32 + std::countr_zero(x)) >= width) return bad("accepted id past the width");
    }
  }
  for (TokenId t : pos.accepted_list) {
    if (t < 0 || t >= width) return bad("accepted id out of range");
  }
  for (TokenId t : pos.tail_tokens) {
    if (t < 0 || t >= width) return bad("uncertain token id out of range");
  }
  const auto& tails = pos.tails;
  if (tails.empty()) return bad("tail trie without its sentinel");
  const std::uint32_t n = static_cast<std::uint32_t>(tails.size() - 1);
  if (tails[n].token_begin != pos.tail_tokens.size()) return bad("tail trie sentinel wrong");
  // Depth-first order: depths start at 1 and grow by at most one; subtree_end is the first later
  // node no deeper; token ranges are contiguous and increasing.
  std::vector<std::uint32_t> open;
  for (std::uint32_t i = 0; i <= n; ++i) {
    const std::uint32_t depth = i < n ? tails[i].depth : 0;
    while (!open.empty() && tails[open.back()].depth >= depth) {
      if (tails[open.back()].subtree_end != i) return bad("tail trie link wrong");
      open.pop_back();
    }
    if (i == n) break;
    if (depth < 1 || depth > (open.empty() ? 1u : tails[open.back()].depth + 1u)) return bad("tail trie depth wrong");
    if (tails[i].token_begin > tails[i + 1].token_begin) return bad("tail token ranges decrease");
    open.push_back(i);
  }
  return true;
}

}  // namespace

// Friend of CfgGrammar and TokenDfa: reads their caches and restores them.
class ArtifactCodec {
 public:
  static const CompileOptions& Options(const CompiledGrammar& g) {
    if (const CfgGrammar* cfg = CfgOf(g)) return cfg->options_;
    return TokenDfaOf(g)->options_;
  }

  static void PutRegex(Writer& w, const TokenDfa& g) {
    const ByteDfa& d = g.dfa_;
    w.Put<std::uint32_t>(kTagAutomaton);
    w.Put<std::int32_t>(d.num_states);
    w.Put<std::int32_t>(d.num_classes);
    w.Put(d.byte_class);
    w.PutVec(d.next);
    w.Put<std::int32_t>(d.start);
    w.Put<std::int32_t>(d.accept_begin);
    w.Put<double>(g.compile_ms_);
    w.Put<std::uint32_t>(kTagCache);
    std::vector<std::pair<StateId, const std::uint32_t*>> cached;
    for (StateId s = 0; s < d.num_states; ++s) {
      if (const std::uint32_t* m = g.cache_[s].load(std::memory_order_acquire)) cached.emplace_back(s, m);
    }
    w.Put<std::uint64_t>(cached.size());
    for (const auto& [s, m] : cached) {
      w.Put<std::int32_t>(s);
      PutMask(w, m, g.mask_words(), g.width_);
    }
  }

  static std::shared_ptr<const CompiledGrammar> GetRegex(Reader& r, const GrammarCompiler& c,
                                                        const CompileOptions& options) {
    r.Expect(kTagAutomaton, "automaton");
    ByteDfa d;
    d.num_states = r.Get<std::int32_t>("state count");
    d.num_classes = r.Get<std::int32_t>("class count");
    d.byte_class = r.Get<std::array<std::uint8_t, 256>>("byte classes");
    if (!r.ok()) return nullptr;
    if (d.num_states < 1 || d.num_states > (1 << 26) || d.num_classes < 1 || d.num_classes > 256) {
      r.Fail("automaton sizes out of range");
      return nullptr;
    }
    d.next = r.GetVec<StateId>("transitions", static_cast<std::uint64_t>(d.num_states) * d.num_classes);
    d.start = r.Get<std::int32_t>("start state");
    d.accept_begin = r.Get<std::int32_t>("accepting states");
    const double ms = r.Get<double>("compile time");
    if (!r.ok()) return nullptr;
    if (std::string bad = CheckDfaInvariants(d); !bad.empty()) {
      r.Fail("automaton invalid: " + bad);
      return nullptr;
    }
    if (d.start <= ByteDfa::kDead || d.start >= d.num_states) {
      r.Fail("start state out of range");
      return nullptr;
    }
    auto impl = std::make_unique<TokenDfa>(c.vocabulary_ptr(), GrammarAccess::Trie(c),
                                           std::move(d), options, ms);
    r.Expect(kTagCache, "cache");
    const std::uint64_t n = r.Get<std::uint64_t>("cached masks");
    if (r.ok() && n > static_cast<std::uint64_t>(impl->dfa_.num_states)) r.Fail("too many cached masks");
    const std::size_t padded = PaddedBitmaskWords(impl->width_);
    std::vector<std::uint32_t> mask(padded, 0);
    for (std::uint64_t i = 0; i < n && r.ok(); ++i) {
      const StateId s = r.Get<std::int32_t>("state");
      if (r.ok() && (s < 0 || s >= impl->dfa_.num_states)) r.Fail("cached state out of range");
      std::fill(mask.begin(), mask.end(), 0u);
      GetMask(r, std::span<std::uint32_t>(mask).first(impl->mask_words()), impl->width_);
      if (!r.ok()) break;
      const std::int64_t bytes = static_cast<std::int64_t>(padded * 4);
      if (impl->cache_[s].load() != nullptr) {
        r.Fail("state cached twice");
        break;
      }
      if (impl->cache_bytes_.fetch_add(bytes) + bytes > impl->options_.max_mask_cache_bytes) {
        impl->cache_bytes_.fetch_sub(bytes);
        continue;  // over this process's budget: computed on demand instead
      }
      auto* p = static_cast<std::uint32_t*>(
          ::operator new(padded * 4, std::align_val_t{64}));
      std::memcpy(p, mask.data(), padded * 4);
      impl->cache_[s].store(p);
      impl->cached_masks_.fetch_add(1);
    }
    if (!r.ok()) return nullptr;
    return GrammarAccess::Make(std::move(impl));
  }

  static void PutGrammar(Writer& w, const CfgGrammar& g) {
    w.Put<std::uint32_t>(kTagAutomaton);
    PutProgram(w, g.program_);
    w.Put<double>(g.compile_ms_);
    w.Put<std::uint32_t>(kTagCache);
    // Positions: each distinct one once, then the slots that point at them.
    std::vector<const CfgPosition*> owned;
    std::map<const CfgPosition*, std::uint32_t> index;
    {
      std::lock_guard<std::mutex> lock(g.owned_mu_);
      for (const auto& p : g.owned_) {
        index.emplace(p.get(), static_cast<std::uint32_t>(owned.size()));
        owned.push_back(p.get());
      }
    }
    w.Put<std::uint64_t>(owned.size());
    for (const CfgPosition* p : owned) {
      w.PutVec(p->accepted_bits);
      w.PutVec(p->accepted_list);
      w.PutVec(p->tails);
      w.PutVec(p->tail_tokens);
      w.Put<std::int32_t>(p->num_accepted);
      w.Put<std::int32_t>(p->num_uncertain);
    }
    std::vector<std::pair<std::int32_t, std::uint32_t>> slots;
    for (std::int32_t s = 0; s < g.program_.num_states; ++s) {
      const CfgPosition* p = g.dfa_positions_[s].load(std::memory_order_acquire);
      if (p == nullptr) continue;
      auto f = index.find(p);
      if (f != index.end()) slots.emplace_back(s, f->second);  // published after the copy: skip
    }
    w.PutVec(slots);
    std::vector<std::array<std::int32_t, 4>> counters;
    {
      std::lock_guard<std::mutex> lock(g.counter_mu_);
      for (const auto& [key, p] : g.counter_positions_) {
        auto f = index.find(p);
        if (f == index.end()) continue;
        counters.push_back({std::get<0>(key), std::get<1>(key), std::get<2>(key),
                            static_cast<std::int32_t>(f->second)});
      }
    }
    w.PutVec(counters);
    // Signatures and the finished masks cached under them.
    std::vector<std::pair<std::int32_t, const std::vector<std::int32_t>*>> sigs;
    std::lock_guard<std::mutex> lock(g.sig_mu_);
    for (const auto& [key, id] : g.sig_ids_) sigs.emplace_back(id, &key);
    std::sort(sigs.begin(), sigs.end());
    w.Put<std::uint64_t>(sigs.size());
    std::vector<std::uint32_t> mask(g.mask_words());
    for (const auto& [id, key] : sigs) {
      w.PutVec(*key);
      const std::uint32_t* blob = g.CachedFinal(id);
      w.Put<std::uint8_t>(blob != nullptr);
      if (blob == nullptr) continue;
      g.RestoreFinal(blob, mask);
      PutMask(w, mask.data(), mask.size(), g.width_);
    }
  }

  static std::shared_ptr<const CompiledGrammar> GetGrammar(Reader& r, const GrammarCompiler& c,
                                                          const CompileOptions& options) {
    r.Expect(kTagAutomaton, "automaton");
    CfgProgram program = GetProgram(r, c.vocabulary());
    const double ms = r.Get<double>("compile time");
    if (!r.ok()) return nullptr;
    auto cfg = std::make_unique<CfgGrammar>(c.vocabulary_ptr(), GrammarAccess::Trie(c),
                                            std::move(program), options, ms);
    CfgGrammar& g = *cfg;
    const std::size_t words = g.mask_words();
    const std::int32_t ns = g.program_.num_states;
    r.Expect(kTagCache, "cache");
    const std::uint64_t np = r.Get<std::uint64_t>("position count");
    if (r.ok() && np > static_cast<std::uint64_t>(ns) + (1u << 20)) r.Fail("position count out of range");
    std::vector<const CfgPosition*> positions;
    for (std::uint64_t i = 0; i < np && r.ok(); ++i) {
      auto pos = std::make_unique<CfgPosition>();
      pos->accepted_bits = r.GetVec<std::uint32_t>("accepted bitset", PaddedBitmaskWords(g.width_));
      pos->accepted_list = r.GetVec<TokenId>("accepted ids", g.width_);
      pos->tails = r.GetVec<CfgPosition::TailNode>("uncertain tails", 1u << 26);
      pos->tail_tokens = r.GetVec<TokenId>("uncertain tokens", 1u << 26);
      pos->num_accepted = r.Get<std::int32_t>("accepted count");
      pos->num_uncertain = r.Get<std::int32_t>("uncertain count");
      if (!r.ok()) break;
      std::string why;
      if (!ValidPosition(*pos, words, g.width_, &why)) {
        r.Fail("position " + std::to_string(i) + ": " + why);
        break;
      }
      // Through Publish, so the cache budget and the content index hold as after a compile;
      // over the budget the position is dropped and recomputed when needed.
      positions.push_back(g.Publish(std::move(pos)));
    }
    auto slots = r.GetVec<std::pair<std::int32_t, std::uint32_t>>("position slots", ns);
    auto counters = r.GetVec<std::array<std::int32_t, 4>>("counter positions", 1u << 24);
    if (!r.ok()) return nullptr;
    for (const auto& [s, i] : slots) {
      if (s < 0 || s >= ns || i >= positions.size()) {
        r.Fail("position slot out of range");
        return nullptr;
      }
      if (positions[i] != nullptr) g.dfa_positions_[s].store(positions[i]);
    }
    for (const auto& k : counters) {
      const std::int32_t rule = k[0];
      if (rule < 0 || rule >= g.program_.NumRules() || !g.program_.IsCounter(rule) || k[1] < 0 ||
          k[1] > g.counter_clamp_ || k[2] < -1 || k[2] > g.counter_clamp_ || k[3] < 0 ||
          static_cast<std::size_t>(k[3]) >= positions.size()) {
        r.Fail("counter position out of range");
        return nullptr;
      }
      if (positions[k[3]] != nullptr) g.counter_positions_.emplace(std::make_tuple(k[0], k[1], k[2]), positions[k[3]]);
    }
    const std::uint64_t nsig = r.Get<std::uint64_t>("signature count");
    if (r.ok() && nsig > static_cast<std::uint64_t>(CfgGrammar::kMaxSignatures)) r.Fail("signature count out of range");
    std::vector<std::uint32_t> mask(words);
    for (std::uint64_t id = 0; id < nsig && r.ok(); ++id) {
      std::vector<std::int32_t> key = r.GetVec<std::int32_t>("signature", 1u << 24);
      const bool has_mask = r.Get<std::uint8_t>("signature mask flag") != 0;
      if (has_mask) GetMask(r, mask, g.width_);
      if (!r.ok()) break;
      if (key.size() % 4 != 0) {
        r.Fail("signature of the wrong shape");
        break;
      }
      // Origins refer to signatures interned before this one (or -3: the set itself).
      for (std::size_t q = 2; q < key.size(); q += 4) {
        if (key[q] != -3 && (key[q] < 0 || key[q] >= static_cast<std::int32_t>(id))) {
          r.Fail("signature refers to a later one");
        }
      }
      if (!r.ok()) break;
      const std::int64_t bytes = static_cast<std::int64_t>(key.size() * 4 + 64);
      if (!g.ReserveBytes(bytes)) break;  // over this process's budget: the rest is recomputed
      if (!g.sig_ids_.emplace(std::move(key), static_cast<std::int32_t>(id)).second) {
        r.Fail("signature interned twice");
        break;
      }
      if (has_mask) g.StoreFinal(static_cast<std::int32_t>(id), mask);
    }
    if (!r.ok()) return nullptr;
    return GrammarAccess::Make(std::move(cfg));
  }
};

std::string SerializeArtifact(const CompiledGrammar& grammar, std::string_view source_kind,
                              std::string_view source) {
  Writer w;
  w.Put<std::uint32_t>(kTagOptions);
  PutOptions(w, ArtifactCodec::Options(grammar));
  w.Put<std::uint32_t>(kTagSource);
  w.PutStr(source_kind);
  w.PutStr(source);
  if (const CfgGrammar* cfg = CfgOf(grammar)) {
    ArtifactCodec::PutGrammar(w, *cfg);
  } else {
    ArtifactCodec::PutRegex(w, *TokenDfaOf(grammar));
  }
  w.Put<std::uint32_t>(kTagEnd);
  const std::string& payload = w.out();
  const Vocabulary& v = grammar.vocabulary();
  Writer h;
  for (char ch : kMagic) h.Put<char>(ch);
  h.Put<std::uint32_t>(kArtifactFormatVersion);
  h.Put<std::uint32_t>(kHeaderBytes);
  h.Put<std::uint64_t>(v.Fingerprint());
  h.Put<std::int32_t>(v.size());
  h.Put<std::int32_t>(v.logits_width());
  h.Put<std::uint32_t>(grammar.is_grammar() ? kKindGrammar : kKindRegex);
  h.Put<std::uint32_t>(0);  // flags
  h.Put<std::uint64_t>(payload.size());
  h.Put<std::uint64_t>(ArtifactPayloadHash(payload));
  h.Put<std::uint32_t>(Crc32(h.out().data(), h.out().size()));
  h.Put<std::uint32_t>(0);  // reserved
  std::string out = std::move(h.out());
  out += payload;
  return out;
}

Status WriteArtifactFile(const CompiledGrammar& grammar, const std::string& path,
                         std::string_view source_kind, std::string_view source) {
  const std::string bytes = SerializeArtifact(grammar, source_kind, source);
  // Written beside the target and renamed, so a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status(StatusCode::kIoError, "cannot write the artifact", path);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) return Status(StatusCode::kIoError, "cannot write the artifact", path);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status(StatusCode::kIoError, "cannot write the artifact", path);
  }
  return Status::Ok();
}

namespace {

struct Parsed {
  ArtifactInfo info;
  std::uint32_t kind = 0;
  std::string_view payload;
};

Result<Parsed> ParseHeader(std::string_view bytes) {
  if (bytes.size() < 8 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return ArtifactError("not a lockstep artifact (no .lsg magic)", 0);
  }
  if (bytes.size() < kHeaderBytes) return ArtifactError("truncated header", bytes.size());
  Reader r(bytes.substr(0, kHeaderBytes), 0);
  r.Get<std::uint64_t>("magic");
  Parsed p;
  p.info.format_version = r.Get<std::uint32_t>("version");
  const std::uint32_t header_bytes = r.Get<std::uint32_t>("header size");
  p.info.vocab_fingerprint = r.Get<std::uint64_t>("fingerprint");
  p.info.vocab_size = r.Get<std::int32_t>("vocabulary size");
  p.info.logits_width = r.Get<std::int32_t>("logits width");
  p.kind = r.Get<std::uint32_t>("kind");
  r.Get<std::uint32_t>("flags");
  p.info.payload_bytes = r.Get<std::uint64_t>("payload size");
  const std::uint64_t payload_hash = r.Get<std::uint64_t>("payload checksum");
  const std::uint32_t header_crc = r.Get<std::uint32_t>("header checksum");
  if (header_crc != Crc32(bytes.data(), 56)) {
    return ArtifactError("header checksum mismatch (corrupted header)", 56);
  }
  if (p.info.format_version != kArtifactFormatVersion) {
    return ArtifactError("format version " + std::to_string(p.info.format_version) +
                             ", this build reads version " + std::to_string(kArtifactFormatVersion) +
                             " (recompile the constraint)",
                         8);
  }
  if (header_bytes != kHeaderBytes) return ArtifactError("unexpected header size", 12);
  if (p.kind != kKindRegex && p.kind != kKindGrammar) return ArtifactError("unknown kind", 32);
  p.info.is_grammar = p.kind == kKindGrammar;
  if (bytes.size() - kHeaderBytes < p.info.payload_bytes) {
    return ArtifactError("truncated: the header announces " + std::to_string(p.info.payload_bytes) +
                             " payload bytes, the file has " +
                             std::to_string(bytes.size() - kHeaderBytes),
                         bytes.size());
  }
  if (bytes.size() - kHeaderBytes > p.info.payload_bytes) {
    return ArtifactError("trailing bytes after the payload", kHeaderBytes + p.info.payload_bytes);
  }
  p.payload = bytes.substr(kHeaderBytes, p.info.payload_bytes);
  if (ArtifactPayloadHash(p.payload) != payload_hash) {
    return ArtifactError("payload checksum mismatch (corrupted file)", kHeaderBytes);
  }
  return p;
}

}  // namespace

Result<ArtifactInfo> InspectArtifact(std::string_view bytes) {
  LOCKSTEP_ASSIGN_OR_RETURN(Parsed p, ParseHeader(bytes));
  Reader r(p.payload, kHeaderBytes);
  r.Expect(kTagOptions, "options");
  GetOptions(r);
  r.Expect(kTagSource, "source");
  p.info.source_kind = r.GetStr("source kind");
  p.info.source = r.GetStr("source");
  if (!r.ok()) return ArtifactError(r.error(), r.error_offset());
  return p.info;
}

Result<std::shared_ptr<const CompiledGrammar>> LoadArtifact(const GrammarCompiler& compiler,
                                                            std::string_view bytes) {
  LOCKSTEP_ASSIGN_OR_RETURN(Parsed p, ParseHeader(bytes));
  const Vocabulary& v = compiler.vocabulary();
  if (p.info.vocab_fingerprint != compiler.vocab_fingerprint() ||
      p.info.vocab_size != v.size() || p.info.logits_width != v.logits_width()) {
    std::ostringstream m;
    m << "written for another vocabulary (" << p.info.vocab_size << " tokens, logits width "
      << p.info.logits_width << ", fingerprint " << std::hex << p.info.vocab_fingerprint << std::dec
      << "); this one is '" << v.name() << "' (" << v.size() << " tokens, logits width "
      << v.logits_width() << ", fingerprint " << std::hex << compiler.vocab_fingerprint() << ")";
    return ArtifactError(m.str(), 16);
  }
  Reader r(p.payload, kHeaderBytes);
  r.Expect(kTagOptions, "options");
  const CompileOptions options = GetOptions(r);
  r.Expect(kTagSource, "source");
  r.GetStr("source kind");
  r.GetStr("source");
  if (!r.ok()) return ArtifactError(r.error(), r.error_offset());
  std::shared_ptr<const CompiledGrammar> g =
      p.kind == kKindGrammar ? ArtifactCodec::GetGrammar(r, compiler, options)
                             : ArtifactCodec::GetRegex(r, compiler, options);
  r.Expect(kTagEnd, "end");
  if (r.ok() && !r.AtEnd()) r.Fail("bytes after the end marker");
  if (!r.ok()) return ArtifactError(r.error(), r.error_offset());
  return g;
}

Result<std::shared_ptr<const CompiledGrammar>> ReadArtifactFile(const GrammarCompiler& compiler,
                                                                const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot read the artifact", path);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  if (size < 0) return Status(StatusCode::kIoError, "cannot read the artifact", path);
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), size);
  if (in.gcount() != size) return Status(StatusCode::kIoError, "cannot read the artifact", path);
  auto g = LoadArtifact(compiler, bytes);
  if (!g.ok()) {
    return Status(g.status().code(), g.status().message(), path + ": " + g.status().location());
  }
  return g;
}

}  // namespace lockstep
