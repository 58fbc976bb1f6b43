// CompileAstToNfa and SplitUtf8Range: RegexAst -> Thompson byte NFA. The NFA is built backwards
// from its match state (each construct is compiled knowing its continuation), so nothing needs
// patching and the code stays a plain recursion over the AST.
#include "automata/regex/byte_nfa.h"

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace lockstep {

void SplitUtf8Range(char32_t lo, char32_t hi, std::vector<Utf8Sequence>* out) {
  if (lo > hi) return;
  // Split where the encoded length changes.
  static constexpr char32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (char32_t b : kLengthEnds) {
    if (lo <= b && hi > b) {
      SplitUtf8Range(lo, b, out);
      SplitUtf8Range(b + 1, hi, out);
      return;
    }
  }
  if (hi <= 0x7F) {
    Utf8Sequence s;
    s.len = 1;
    s.lo[0] = static_cast<std::uint8_t>(lo);
    s.hi[0] = static_cast<std::uint8_t>(hi);
    out->push_back(s);
    return;
  }
  const int len = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  // Split until every continuation position spans a full or an aligned sub-range, so that the
  // range is a product of per-byte ranges.
  for (int i = 1; i < len; ++i) {
    const char32_t m = (char32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        SplitUtf8Range(lo, lo | m, out);
        SplitUtf8Range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        SplitUtf8Range(lo, (hi & ~m) - 1, out);
        SplitUtf8Range(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::uint8_t a[4];
  std::uint8_t b[4];
  auto encode = [len](char32_t cp, std::uint8_t* e) {
    for (int k = len - 1; k > 0; --k) {
      e[k] = static_cast<std::uint8_t>(0x80 | (cp & 0x3F));
      cp >>= 6;
    }
    static constexpr std::uint8_t kLead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    e[0] = static_cast<std::uint8_t>(kLead[len] | cp);
  };
  encode(lo, a);
  encode(hi, b);
  Utf8Sequence s;
  s.len = len;
  for (int k = 0; k < len; ++k) {
    s.lo[k] = a[k];
    s.hi[k] = b[k];
  }
  out->push_back(s);
}

namespace {

class NfaCompiler {
 public:
  NfaCompiler(const RegexAst& ast, std::int32_t max_states) : ast_(ast), max_states_(max_states) {}

  Result<ByteNfa> Compile() {
    NewState(NfaStateKind::kMatch);
    StateId start = Emit(ast_.root, ByteNfa::kMatchState);
    if (overflow_) {
      return Status(StatusCode::kResourceLimit,
                    "the regex needs more than max_nfa_states (" +
                        std::to_string(max_states_) + ") NFA states",
                    "offset 0");
    }
    nfa_.start = start;
    return std::move(nfa_);
  }

 private:
  StateId NewState(NfaStateKind kind, StateId out = 0, StateId out1 = 0, std::uint8_t lo = 0,
                   std::uint8_t hi = 0) {
    if (static_cast<std::int64_t>(nfa_.states.size()) >= max_states_) {
      overflow_ = true;
      return ByteNfa::kMatchState;
    }
    NfaState s;
    s.kind = kind;
    s.out = out;
    s.out1 = out1;
    s.lo = lo;
    s.hi = hi;
    nfa_.states.push_back(s);
    return static_cast<StateId>(nfa_.states.size() - 1);
  }

  // Returns a state that matches `id` and then continues at `next`.
  StateId Emit(std::int32_t id, StateId next) {
    if (overflow_) return ByteNfa::kMatchState;
    const RegexNode& n = ast_.node(id);
    switch (n.kind) {
      case RegexNodeKind::kEmpty:
        return next;
      case RegexNodeKind::kClass:
        return EmitClass(n, next);
      case RegexNodeKind::kConcat: {
        StateId cur = next;
        for (std::int32_t k = n.children_end - 1; k >= n.children_begin && !overflow_; --k) {
          cur = Emit(ast_.children[k], cur);
        }
        return cur;
      }
      case RegexNodeKind::kAlternate: {
        StateId cur = Emit(ast_.children[n.children_end - 1], next);
        for (std::int32_t k = n.children_end - 2; k >= n.children_begin && !overflow_; --k) {
          StateId alt = Emit(ast_.children[k], next);
          cur = NewState(NfaStateKind::kSplit, alt, cur);
        }
        return cur;
      }
      case RegexNodeKind::kRepeat:
        return EmitRepeat(n, next);
      case RegexNodeKind::kAnchor:
        return n.min == 0 ? ByteState(0xFE, 0xFE, next) : ByteState(0xFF, 0xFF, next);
    }
    return next;
  }

  StateId EmitRepeat(const RegexNode& n, StateId next) {
    const std::int32_t child = ast_.children[n.children_begin];
    StateId cur = next;
    std::int32_t mandatory = n.min;
    if (n.max == RegexNode::kUnbounded) {
      // child* as a loop; child+ folds one mandatory copy into the loop.
      StateId loop = NewState(NfaStateKind::kSplit);
      if (overflow_) return ByteNfa::kMatchState;
      StateId body = Emit(child, loop);
      if (overflow_) return ByteNfa::kMatchState;
      nfa_.states[loop].out = body;
      nfa_.states[loop].out1 = next;
      if (mandatory > 0) {
        cur = body;
        --mandatory;
      } else {
        cur = loop;
      }
    } else {
      // (child (child (...)?)?)? with every skip going straight to `next`.
      for (std::int32_t k = n.min; k < n.max && !overflow_; ++k) {
        StateId body = Emit(child, cur);
        cur = NewState(NfaStateKind::kSplit, body, next);
      }
    }
    for (std::int32_t k = 0; k < mandatory && !overflow_; ++k) cur = Emit(child, cur);
    return overflow_ ? ByteNfa::kMatchState : cur;
  }

  // Byte state [lo, hi] -> out, shared with an identical one made for the same class. Hashed:
  // a wide Unicode class has thousands of sequences, and a scan per state made each copy of it
  // quadratic (a class counted {1,150} took seconds before the subset construction began).
  StateId ByteState(std::uint8_t lo, std::uint8_t hi, StateId out) {
    const std::uint64_t key =
        (std::uint64_t{lo} << 40) | (std::uint64_t{hi} << 32) | static_cast<std::uint32_t>(out);
    if (auto it = suffix_cache_.find(key); it != suffix_cache_.end()) return it->second;
    StateId id = NewState(NfaStateKind::kByte, out, 0, lo, hi);
    suffix_cache_.emplace(key, id);
    return id;
  }

  StateId EmitClass(const RegexNode& n, StateId next) {
    seqs_.clear();
    for (std::int32_t r = n.ranges_begin; r < n.ranges_end; ++r) {
      SplitUtf8Range(ast_.ranges[r].lo, ast_.ranges[r].hi, &seqs_);
    }
    if (seqs_.empty()) return NewState(NfaStateKind::kFail);
    suffix_cache_.clear();
    entries_.clear();
    entry_set_.clear();
    for (const Utf8Sequence& s : seqs_) {
      StateId cur = next;
      for (int k = s.len - 1; k >= 0 && !overflow_; --k) cur = ByteState(s.lo[k], s.hi[k], cur);
      if (entry_set_.insert(cur).second) entries_.push_back(cur);
    }
    StateId cur = entries_.back();
    for (std::size_t k = entries_.size() - 1; k-- > 0 && !overflow_;) {
      cur = NewState(NfaStateKind::kSplit, entries_[k], cur);
    }
    return cur;
  }

  const RegexAst& ast_;
  const std::int32_t max_states_;
  bool overflow_ = false;
  ByteNfa nfa_;
  std::vector<Utf8Sequence> seqs_;
  std::unordered_map<std::uint64_t, StateId> suffix_cache_;  // (lo, hi, out) -> state
  std::vector<StateId> entries_;
  std::unordered_set<StateId> entry_set_;
};

}  // namespace

Result<ByteNfa> CompileAstToNfa(const RegexAst& ast, std::int32_t max_nfa_states) {
  return NfaCompiler(ast, max_nfa_states).Compile();
}

}  // namespace lockstep
