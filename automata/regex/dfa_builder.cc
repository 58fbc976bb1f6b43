// BuildSubsetDfa and ComputeByteClasses: byte NFA -> complete DFA over byte classes. State sets
// are sorted vectors of "important" NFA states (byte and match states) kept in one pool and
// found again through an open-addressing hash table, so a typical regex compiles in
// microseconds.
#include "automata/regex/dfa_builder.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace lockstep {

namespace {

// The distinct byte ranges of `nfa`'s byte states, as sorted lo * 256 + hi keys.
std::vector<std::uint16_t> DistinctRanges(const ByteNfa& nfa) {
  std::vector<std::uint16_t> keys;
  for (const NfaState& s : nfa.states) {
    if (s.kind == NfaStateKind::kByte)
      keys.push_back(static_cast<std::uint16_t>(s.lo * 256 + s.hi));
  }
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

std::int32_t ByteClassesOf(const std::vector<std::uint16_t>& ranges,
                           std::array<std::uint8_t, 256>* byte_class) {
  std::array<std::int32_t, 256> cls{};
  std::int32_t num = 1;
  std::array<std::int32_t, 512> remap;
  for (std::uint16_t key : ranges) {
    const int lo = key >> 8;
    const int hi = key & 0xFF;
    // Split every class the range cuts into its inside and outside parts.
    remap.fill(-1);
    for (int b = lo; b <= hi; ++b) {
      std::int32_t& r = remap[cls[b]];
      if (r < 0) r = num++;
      cls[b] = r;
    }
    // Renumber densely, by smallest byte.
    remap.fill(-1);
    std::int32_t dense = 0;
    for (int b = 0; b < 256; ++b) {
      std::int32_t& r = remap[cls[b]];
      if (r < 0) r = dense++;
      cls[b] = r;
    }
    num = dense;
  }
  for (int b = 0; b < 256; ++b) (*byte_class)[b] = static_cast<std::uint8_t>(cls[b]);
  return num;
}

}  // namespace

std::int32_t ComputeByteClasses(const ByteNfa& nfa, std::array<std::uint8_t, 256>* byte_class) {
  return ByteClassesOf(DistinctRanges(nfa), byte_class);
}

namespace {

std::uint64_t HashSet(const StateId* p, std::size_t n) {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<std::uint32_t>(p[i]);
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 32;
  }
  return h;
}

class SubsetBuilder {
 public:
  SubsetBuilder(const ByteNfa& nfa, const RegexCompileOptions& options)
      : nfa_(nfa), options_(options), mark_(nfa.states.size(), 0) {}

  Result<SubsetDfa> Build() {
    const std::vector<std::uint16_t> ranges = DistinctRanges(nfa_);
    dfa_.num_classes = ByteClassesOf(ranges, &dfa_.byte_class);
    const std::int32_t k = dfa_.num_classes;
    // Classes covered by each distinct byte range (CSR), and the range of each NFA byte state.
    range_begin_.push_back(0);
    for (std::uint16_t key : ranges) {
      std::int32_t last = -1;
      for (int b = key >> 8; b <= (key & 0xFF); ++b) {
        const std::int32_t c = dfa_.byte_class[b];
        if (c > last) {  // a class not seen yet in this range
          range_classes_.push_back(c);
          last = c;
        } else if (std::find(range_classes_.begin() + range_begin_.back(), range_classes_.end(),
                             c) == range_classes_.end()) {
          range_classes_.push_back(c);
        }
      }
      range_begin_.push_back(static_cast<std::int32_t>(range_classes_.size()));
    }
    std::vector<std::int32_t> range_of(nfa_.states.size(), -1);
    for (std::size_t i = 0; i < nfa_.states.size(); ++i) {
      const NfaState& s = nfa_.states[i];
      if (s.kind != NfaStateKind::kByte) continue;
      const auto key = static_cast<std::uint16_t>(s.lo * 256 + s.hi);
      range_of[i] = static_cast<std::int32_t>(std::lower_bound(ranges.begin(), ranges.end(), key) -
                                              ranges.begin());
    }
    range_of_ = std::move(range_of);
    buckets_.assign(k, {});

    table_.assign(64, -1);
    // State 0: the empty set, dead.
    set_begin_.push_back(0);
    std::vector<StateId> empty;
    Intern(empty);
    std::vector<StateId> seeds = {nfa_.start};
    Closure(seeds, &scratch_);
    StateId start = Intern(scratch_);
    if (start < 0) return error_;
    dfa_.start = start;

    for (StateId s = 0; s < dfa_.num_states; ++s) {
      // (The caller locates the error: a regex's offset, a schema keyword, a grammar rule.)
      if (options_.deadline.Poll()) return options_.deadline.Error("");
      dfa_.next.resize(static_cast<std::size_t>(dfa_.num_states) * k, 0);
      const std::int64_t b = set_begin_[s];
      const std::int64_t e = set_begin_[s + 1];
      touched_.clear();
      for (std::int64_t i = b; i < e; ++i) {
        const StateId q = pool_[i];
        const NfaState& ns = nfa_.states[q];
        if (ns.kind != NfaStateKind::kByte) continue;
        const std::int32_t r = range_of_[q];
        for (std::int32_t j = range_begin_[r]; j < range_begin_[r + 1]; ++j) {
          const std::int32_t c = range_classes_[j];
          if (buckets_[c].empty()) touched_.push_back(c);
          buckets_[c].push_back(ns.out);
        }
      }
      for (std::int32_t c : touched_) {
        // A kernel (the targets before their closure) met before skips its closure: the copies
        // of a wide Unicode class all step into a few kernels whose closures hold thousands of
        // states (the entries of the next copy), which were closed and sorted again per class.
        std::vector<StateId>& kernel = buckets_[c];
        std::sort(kernel.begin(), kernel.end());
        kernel.erase(std::unique(kernel.begin(), kernel.end()), kernel.end());
        StateId t;
        auto known = kernel.size() <= kMaxKernel ? kernel_ids_.find(kernel) : kernel_ids_.end();
        if (known != kernel_ids_.end()) {
          t = known->second;
        } else {
          Closure(kernel, &scratch_);
          t = Intern(scratch_);
          if (t < 0) return error_;
          if (kernel.size() <= kMaxKernel) kernel_ids_.emplace(kernel, t);
        }
        kernel.clear();
        dfa_.next[static_cast<std::size_t>(s) * k + c] = t;
      }
    }
    dfa_.next.resize(static_cast<std::size_t>(dfa_.num_states) * k, 0);
    dfa_.accepting.assign(dfa_.num_states, 0);
    for (StateId s = 0; s < dfa_.num_states; ++s) {
      dfa_.accepting[s] =
          set_begin_[s] < set_begin_[s + 1] && pool_[set_begin_[s]] == ByteNfa::kMatchState;
    }
    return std::move(dfa_);
  }

 private:
  // The sorted important states reachable from `seeds` by epsilon moves.
  void Closure(const std::vector<StateId>& seeds, std::vector<StateId>* out) {
    out->clear();
    if (++gen_ == 0) {
      std::fill(mark_.begin(), mark_.end(), 0);
      gen_ = 1;
    }
    stack_.clear();
    for (StateId s : seeds) {
      if (mark_[s] != gen_) {
        mark_[s] = gen_;
        stack_.push_back(s);
      }
    }
    while (!stack_.empty()) {
      StateId s = stack_.back();
      stack_.pop_back();
      const NfaState& ns = nfa_.states[s];
      switch (ns.kind) {
        case NfaStateKind::kMatch:
        case NfaStateKind::kByte:
          out->push_back(s);
          break;
        case NfaStateKind::kSplit:
          if (mark_[ns.out1] != gen_) {
            mark_[ns.out1] = gen_;
            stack_.push_back(ns.out1);
          }
          [[fallthrough]];
        case NfaStateKind::kEps:
          if (mark_[ns.out] != gen_) {
            mark_[ns.out] = gen_;
            stack_.push_back(ns.out);
          }
          break;
        case NfaStateKind::kFail:
          break;
      }
    }
    std::sort(out->begin(), out->end());
  }

  // The DFA state for `set`, created if new; -1 (with error_ set) when over budget.
  StateId Intern(const std::vector<StateId>& set) {
    const std::uint64_t h = HashSet(set.data(), set.size());
    std::size_t mask = table_.size() - 1;
    for (std::size_t i = h & mask;; i = (i + 1) & mask) {
      const StateId id = table_[i];
      if (id < 0) break;
      if (hashes_[id] != h) continue;
      const std::int64_t b = set_begin_[id];
      const std::int64_t n = set_begin_[id + 1] - b;
      if (n == static_cast<std::int64_t>(set.size()) &&
          std::equal(set.begin(), set.end(), pool_.begin() + b)) {
        return id;
      }
    }
    if (dfa_.num_states >= options_.max_dfa_states) {
      error_ = Status(StatusCode::kResourceLimit,
                      "the DFA needs more than max_dfa_states (" +
                          std::to_string(options_.max_dfa_states) +
                          ") states (raise CompileOptions::max_dfa_states, lockstep "
                          "--max-states)",
                      "offset 0");
      return -1;
    }
    if (static_cast<std::int64_t>(pool_.size() + set.size()) > options_.max_subset_elements) {
      error_ = Status(StatusCode::kResourceLimit,
                      "subset construction needs more than max_subset_elements (" +
                          std::to_string(options_.max_subset_elements) + ") NFA state entries",
                      "offset 0");
      return -1;
    }
    const StateId id = dfa_.num_states++;
    pool_.insert(pool_.end(), set.begin(), set.end());
    set_begin_.push_back(static_cast<std::int64_t>(pool_.size()));
    hashes_.push_back(h);
    if (static_cast<std::size_t>(dfa_.num_states) * 2 > table_.size()) {
      table_.assign(table_.size() * 2, -1);
      mask = table_.size() - 1;
      for (StateId j = 0; j < dfa_.num_states; ++j) {
        std::size_t i = hashes_[j] & mask;
        while (table_[i] >= 0) i = (i + 1) & mask;
        table_[i] = j;
      }
    } else {
      std::size_t i = h & mask;
      while (table_[i] >= 0) i = (i + 1) & mask;
      table_[i] = id;
    }
    return id;
  }

  struct KernelHash {
    std::size_t operator()(const std::vector<StateId>& v) const {
      return static_cast<std::size_t>(HashSet(v.data(), v.size()));
    }
  };
  static constexpr std::size_t kMaxKernel = 64;  // larger kernels are not kept

  const ByteNfa& nfa_;
  const RegexCompileOptions& options_;
  std::unordered_map<std::vector<StateId>, StateId, KernelHash> kernel_ids_;
  SubsetDfa dfa_;
  Status error_;
  std::vector<std::uint32_t> mark_;
  std::uint32_t gen_ = 0;
  std::vector<StateId> stack_;
  std::vector<StateId> scratch_;
  std::vector<std::int32_t> range_of_;
  std::vector<std::int32_t> range_begin_;
  std::vector<std::int32_t> range_classes_;
  std::vector<std::vector<StateId>> buckets_;
  std::vector<std::int32_t> touched_;
  std::vector<StateId> pool_;
  std::vector<std::int64_t> set_begin_;
  std::vector<std::uint64_t> hashes_;
  std::vector<StateId> table_;
};

}  // namespace

Result<SubsetDfa> BuildSubsetDfa(const ByteNfa& nfa, const RegexCompileOptions& options) {
  return SubsetBuilder(nfa, options).Build();
}

}  // namespace lockstep
