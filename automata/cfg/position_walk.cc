// CfgGrammar's positions computed (cfg_grammar.h): a walk of the token trie from a rule state
// (the automaton where it has no rule edges, the stack walk or the local Earley parser below
// them), through the vocabulary's region and counted views where the state lies in a wide byte
// loop or a counter, or composed from a callee's position; and the position made of a walk.
#include "automata/cfg/cfg_grammar.h"

#include <algorithm>
#include <array>
#include <bit>
#include <climits>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "automata/cfg/tail_sort.h"
#include "automata/cfg/word_kernels.h"

namespace lockstep {
using namespace cfg_words;  // NOLINT: the word kernels of this folder

// --- positions ---------------------------------------------------------------------------------

namespace {

// The walk's runtime below rule edges: the parses alive after each byte as explicit stacks
// ("configurations": a DFA state on top of a chain of return frames), the way a recursive
// descent would run them all at once. It computes exactly what the local Earley parser computes
// for a position (which bytes are consumable, and where the position's own rule may finish),
// with no origins or completion scans. Frames are interned, so equal stacks are one
// configuration; closed configuration sets are interned too, and their byte transitions
// memoised, so the many tokens that run through the same sets (whitespace runs, say) cost one
// table lookup per byte. Grammars where this would not stay small (left recursion, wide
// ambiguity) make it give up (`failed`); the position is then walked by the Earley parser.
// The tables mean the same in every walk of one program: a configuration at the bottom
// (kBottom) has its state in the position's own rule, which is the rule that state belongs to,
// so "the own rule may finish" is a property of the set, not of the position. They are kept
// from walk to walk and position to position (a value's sets after `":` are closed once, not
// once per region group, exit and position), and forgotten when they grow past kKeep* or a walk
// gives up.
class StackWalk {
 public:
  static constexpr std::int32_t kBottom = -1;
  struct Config {
    StateId q;
    std::int32_t parent;  // frame index or kBottom (q is in the position's own rule)
    std::int32_t fresh;   // 1: the top rule has consumed nothing since it was entered
    bool operator<(const Config& o) const {
      return std::tie(q, parent, fresh) < std::tie(o.q, o.parent, o.fresh);
    }
    bool operator==(const Config& o) const {
      return q == o.q && parent == o.parent && fresh == o.fresh;
    }
  };

  explicit StackWalk(const CfgProgram* p) : p_(p) { front_.fill({-1, -1, 0}); }
  // For another program's walks: every table is cleared at the next Start, in place (a new
  // StackWalk is 16 KiB of front cache to fill and copy, and its tables to grow again).
  void Rebind(const CfgProgram* p) {
    p_ = p;
    fresh_walk_ = true;
    failed = false;
    ClearCur();
  }

  // Ready for a walk: the tables of earlier walks stay unless they have grown past kKeep* (or
  // Forget was called). Lazily: the next Start clears them.
  void Reset() {
    if (pool_.size() > kKeepPool || frames_.size() > kKeepFrames || memo_size_ > kKeepMemo ||
        start_size_ > kKeepMemo) {
      fresh_walk_ = true;
    }
    failed = false;
  }
  // Forgets every set and frame (after a walk that gave up: its tables are near the limits).
  void Forget() {
    fresh_walk_ = true;
    failed = false;
  }
  // The closed set of the single configuration (q, parent). Memoised like Step: a walk starts
  // the stack at every trie node that enters a state with rule edges (each digit of a number
  // value before the `ws` call after it: a thousand nodes of Llama-3's trie), and the closure
  // is the same each time.
  std::int32_t Start(StateId q, std::int32_t parent) {
    Prepare();
    const std::uint64_t key =
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(q)) << 32 |
        static_cast<std::uint32_t>(parent);
    std::size_t m = start_keys_.size() - 1;
    std::size_t h = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20) & m;
    while (start_keys_[h] != kNoStart) {
      if (start_keys_[h] == key) return start_vals_[h];
      h = (h + 1) & m;
    }
    ClearCur();
    completed_ = false;
    Add(q, parent, 0);
    Close();
    const std::int32_t sid = InternSet();
    if (failed) return sid;
    start_keys_[h] = key;
    start_vals_[h] = sid;
    if (2 * ++start_size_ > start_keys_.size()) GrowStarts();
    return sid;
  }
  // The closed set of counter `rule` after `count` repetitions as the position's own rule (a
  // counter position): its body entered afresh; the counter finishes once a body has.
  std::int32_t StartCounter(std::int32_t rule, std::int32_t count) {
    Prepare();
    ClearCur();
    completed_ = false;
    Counter(rule, count, kBottom, /*fresh=*/true);
    Close();
    return failed ? -1 : InternSet();
  }
  // The set after byte b from set `sid`; -1 if b leads nowhere.
  std::int32_t Step(std::int32_t sid, std::uint8_t b) {
    const std::int64_t key = static_cast<std::int64_t>(sid) * 256 + b;
    // A small direct-mapped cache in front of the memo: a trie walk asks for the same few sets'
    // steps node after node (siblings share their parent's set), and the memo, grown over the
    // walks of a grammar to hundreds of kilobytes, misses the L1 cache on most of them.
    FrontSlot& front = front_[static_cast<std::size_t>(
        (static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull) >> (64 - kFrontBits))];
    if (front.key == key && front.generation == front_generation_) return front.value;
    const std::int32_t next = StepMemo(sid, b, key);
    if (!failed) front = {key, next, front_generation_};
    return next;
  }
  std::int32_t StepMemo(std::int32_t sid, std::uint8_t b, std::int64_t key) {
    std::size_t m = memo_keys_.size() - 1;
    std::size_t h = static_cast<std::size_t>(static_cast<std::uint64_t>(key) * 0x9E3779B97F4A7C15ull >> 20) & m;
    while (memo_keys_[h] >= 0) {
      if (memo_keys_[h] == key) return memo_vals_[h];
      h = (h + 1) & m;
    }
    ClearCur();
    completed_ = false;
    for (std::uint32_t j = set_begin_[sid]; j < set_begin_[sid + 1]; ++j) {
      const StateId t = p_->Step(pool_[j].q, b);
      if (t != CfgProgram::kDead) Add(t, pool_[j].parent, 0);
    }
    Close();
    // (Empty but completed: a counter position's own counter reached its maximum on b.)
    const std::int32_t next = (cur_.empty() && !completed_) || failed ? -1 : InternSet();
    if (failed) return -1;
    memo_keys_[h] = key;
    memo_vals_[h] = next;
    if (2 * ++memo_size_ > memo_keys_.size()) GrowMemo();
    return next;
  }
  std::span<const Config> set(std::int32_t sid) const {
    return {pool_.data() + set_begin_[sid], pool_.data() + set_begin_[sid + 1]};
  }
  // The position's own rule may finish at this set.
  bool completed(std::int32_t sid) const { return set_completed_[sid] != 0; }
  // Whether set `sid` surely takes any run of up to `need` bytes of trie subtree class k
  // (TokenTrie::SubtreeClass): each byte of the class leads from the set to one same set, and
  // so on `need` times, or to the set itself (a number's digits after its first digit: any
  // run). Asked for the small classes only (digits, blanks), each step memoised, and followed
  // only as far as `need` (the bytes below a trie node): a `ws` counter's chain of counts is
  // stepped as deep as the deepest run of blanks below, as the walk would. Kept per set: the
  // run known so far (a lower bound, or exact once the chain ended).
  static constexpr std::int32_t kUnboundedRun = 255;
  bool Takes(std::int32_t sid, int k, std::int32_t need) {
    auto cache = [&](std::int32_t x) -> RunKnown& {
      if (set_runs_.size() <= static_cast<std::size_t>(x)) set_runs_.resize(x + 1, RunCache{});
      return set_runs_[x].run[k];
    };
    thread_local std::vector<std::int32_t> chain;
    chain.clear();
    std::int32_t x = sid;
    std::int32_t tail = 0;     // the run known from x on
    bool exact = false;        // ... and whether it is the whole run
    while (true) {
      const RunKnown c = cache(x);
      tail = c.run;
      exact = c.exact;
      if (exact || static_cast<std::int32_t>(chain.size()) + tail >= need) break;
      // One step on the class from x: the same set for every byte, or none.
      std::int32_t next = -2;
      for (const std::uint8_t b : TokenTrie::SubtreeClassBytes(k)) {
        const std::int32_t t = Step(x, b);
        if (failed) return false;
        if (t < 0 || (next != -2 && t != next)) {
          next = -1;
          break;
        }
        next = t;
      }
      if (next < 0 || next == x) {
        tail = next < 0 ? 0 : kUnboundedRun;
        exact = true;
        cache(x) = {static_cast<std::uint8_t>(tail), true};
        break;
      }
      chain.push_back(x);
      x = next;
    }
    // Back along the chain: each set takes one byte more than the one after it.
    std::int32_t run = tail;
    for (std::size_t j = chain.size(); j-- > 0;) {
      run = std::min(run + 1, kUnboundedRun);
      RunKnown& c = cache(chain[j]);
      if (exact || run > c.run) c = {static_cast<std::uint8_t>(run), exact};
    }
    return run >= need;
  }
  // The bytes that lead on from set `sid` (a superset: the union of its states' first bytes,
  // `first` per state), computed once per set: for sparse jumps in stack mode. The reference
  // holds until the next set is interned.
  const std::array<std::uint64_t, 4>& Bytes(
      std::int32_t sid, const std::vector<std::array<std::uint64_t, 4>>& first,
      std::int32_t* count) {
    if (set_bytes_.size() <= static_cast<std::size_t>(sid)) set_bytes_.resize(sid + 1);
    SetBytes& sb = set_bytes_[sid];
    if (!sb.known) {
      sb.bits = {};
      for (std::uint32_t j = set_begin_[sid]; j < set_begin_[sid + 1]; ++j) {
        const std::array<std::uint64_t, 4>& f = first[pool_[j].q];
        for (int w = 0; w < 4; ++w) sb.bits[w] |= f[w];
      }
      sb.count = 0;
      for (int w = 0; w < 4; ++w) sb.count += static_cast<std::uint16_t>(std::popcount(sb.bits[w]));
      sb.known = true;
    }
    *count = sb.count;
    return sb.bits;
  }

  bool failed = false;

 private:
  // Clears the tables at the first Start after Reset.
  void Prepare() {
    if (fresh_walk_) {
      fresh_walk_ = false;
      frames_.clear();
      frame_table_.assign(256, -1);
      pool_.clear();
      set_begin_.assign(1, 0);
      set_completed_.clear();
      set_bytes_.clear();
      set_runs_.clear();
      set_table_.assign(256, -1);
      memo_keys_.assign(1024, -1);
      memo_vals_.assign(1024, -1);
      memo_size_ = 0;
      start_keys_.assign(256, kNoStart);
      start_vals_.assign(256, -1);
      start_size_ = 0;
      if (++front_generation_ == 0) {
        front_.fill({-1, -1, 0});
        front_generation_ = 1;
      }
    }
  }
  void GrowStarts() {
    std::vector<std::uint64_t> keys(start_keys_.size() * 2, kNoStart);
    std::vector<std::int32_t> vals(keys.size(), -1);
    const std::size_t m = keys.size() - 1;
    for (std::size_t k = 0; k < start_keys_.size(); ++k) {
      if (start_keys_[k] == kNoStart) continue;
      std::size_t h = static_cast<std::size_t>((start_keys_[k] * 0x9E3779B97F4A7C15ull) >> 20) & m;
      while (keys[h] != kNoStart) h = (h + 1) & m;
      keys[h] = start_keys_[k];
      vals[h] = start_vals_[k];
    }
    start_keys_ = std::move(keys);
    start_vals_ = std::move(vals);
  }

  // Configurations per set: an object's optional members predict a few each (a 300-member
  // object: about 900). Past it the walk gives up (the Earley parser walks the position).
  static constexpr std::size_t kMaxConfigs = 1024;
  static constexpr std::size_t kLinearConfigs = 16;
  static constexpr std::size_t kSlots = 4096;  // > 2 * kMaxConfigs
  struct Slot {
    std::uint32_t generation;
    std::int32_t index;
  };
  // Calls nested in one walk. An object of N optional members in declared order calls a chain
  // of N rules before its first key (each "the members after this one"), so a limit of 40 sent
  // every position before a key of a 40-plus-member object to the Earley parser (Snowplow's
  // 130-member events: 25 ms a fill). Frames, configurations and the pool bound the work.
  static constexpr std::int32_t kMaxDepth = 1024;
  static constexpr std::size_t kMaxFrames = 1 << 16;
  static constexpr std::size_t kMaxPool = 1 << 20;
  // Past these, the next walk starts from empty tables (a thread keeps about 1 MB at most).
  static constexpr std::size_t kKeepPool = 1 << 15;
  static constexpr std::size_t kKeepFrames = 1 << 13;
  static constexpr std::size_t kKeepMemo = 1 << 15;
  struct Frame {
    std::int32_t rule;    // -1: return to DFA state `value`; else counter `rule` at `value` reps
    std::int32_t value;
    std::int32_t parent;
    std::int32_t depth;
  };

  static std::uint64_t Mix(std::uint64_t h, std::uint32_t x) {
    h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h;
  }

  static std::uint64_t SetHash(const Config* c, std::size_t n, bool completed) {
    std::uint64_t h = completed ? 0x51ED27u : 0x2545F491u;
    for (std::size_t k = 0; k < n; ++k) {
      h = Mix(h, static_cast<std::uint32_t>(c[k].q));
      h = Mix(h, static_cast<std::uint32_t>(c[k].parent) * 2u + static_cast<std::uint32_t>(c[k].fresh));
    }
    return h ^ (h >> 29);
  }
  static std::uint64_t FrameHash(std::int32_t rule, std::int32_t value, std::int32_t parent) {
    std::uint64_t h = static_cast<std::uint32_t>(rule) * 0x9E3779B97F4A7C15ull;
    h ^= static_cast<std::uint32_t>(value) * 0xC2B2AE3D27D4EB4Full;
    h ^= static_cast<std::uint32_t>(parent + 1) * 0x165667B19E3779F9ull;
    return h ^ (h >> 29);
  }

  std::int32_t InternSet() {
    std::sort(cur_.begin(), cur_.end());
    const std::uint64_t h = SetHash(cur_.data(), cur_.size(), completed_);
    std::size_t m = set_table_.size() - 1, i = h & m;
    while (set_table_[i] >= 0) {
      const std::int32_t sid = set_table_[i];
      if (set_completed_[sid] == completed_ &&
          std::equal(cur_.begin(), cur_.end(), pool_.begin() + set_begin_[sid],
                     pool_.begin() + set_begin_[sid + 1])) {
        return sid;
      }
      i = (i + 1) & m;
    }
    if (pool_.size() + cur_.size() > kMaxPool) {
      failed = true;
      return -1;
    }
    const std::int32_t sid = static_cast<std::int32_t>(set_completed_.size());
    pool_.insert(pool_.end(), cur_.begin(), cur_.end());
    set_begin_.push_back(static_cast<std::uint32_t>(pool_.size()));
    set_completed_.push_back(completed_ ? 1 : 0);
    set_table_[i] = sid;
    if (2 * set_completed_.size() > set_table_.size()) {
      std::vector<std::int32_t> t(set_table_.size() * 2, -1);
      const std::size_t mm = t.size() - 1;
      for (std::int32_t k = 0; k < static_cast<std::int32_t>(set_completed_.size()); ++k) {
        std::size_t x = SetHash(pool_.data() + set_begin_[k], set_begin_[k + 1] - set_begin_[k],
                                set_completed_[k] != 0) & mm;
        while (t[x] >= 0) x = (x + 1) & mm;
        t[x] = k;
      }
      set_table_ = std::move(t);
    }
    return sid;
  }

  void GrowMemo() {
    std::vector<std::int64_t> keys(memo_keys_.size() * 2, -1);
    std::vector<std::int32_t> vals(keys.size(), -1);
    const std::size_t m = keys.size() - 1;
    for (std::size_t k = 0; k < memo_keys_.size(); ++k) {
      if (memo_keys_[k] < 0) continue;
      std::size_t h = static_cast<std::size_t>(
                          static_cast<std::uint64_t>(memo_keys_[k]) * 0x9E3779B97F4A7C15ull >> 20) & m;
      while (keys[h] >= 0) h = (h + 1) & m;
      keys[h] = memo_keys_[k];
      vals[h] = memo_vals_[k];
    }
    memo_keys_ = std::move(keys);
    memo_vals_ = std::move(vals);
  }

  std::int32_t Intern(std::int32_t rule, std::int32_t value, std::int32_t parent) {
    std::size_t m = frame_table_.size() - 1, i = FrameHash(rule, value, parent) & m;
    while (frame_table_[i] >= 0) {
      const Frame& f = frames_[frame_table_[i]];
      if (f.rule == rule && f.value == value && f.parent == parent) return frame_table_[i];
      i = (i + 1) & m;
    }
    const std::int32_t depth = parent < 0 ? 1 : frames_[parent].depth + 1;
    if (depth > kMaxDepth || frames_.size() >= kMaxFrames) {
      failed = true;
      return kBottom;
    }
    const std::int32_t id = static_cast<std::int32_t>(frames_.size());
    frames_.push_back({rule, value, parent, depth});
    frame_table_[i] = id;
    if (2 * frames_.size() > frame_table_.size()) {
      frame_table_.assign(frame_table_.size() * 2, -1);
      const std::size_t mm = frame_table_.size() - 1;
      for (std::size_t k = 0; k < frames_.size(); ++k) {
        const Frame& f = frames_[k];
        std::size_t j = FrameHash(f.rule, f.value, f.parent) & mm;
        while (frame_table_[j] >= 0) j = (j + 1) & mm;
        frame_table_[j] = static_cast<std::int32_t>(k);
      }
    }
    return id;
  }

  void Add(StateId q, std::int32_t parent, std::int32_t fresh) {
    if (const std::int32_t j = Find(q, parent); j >= 0) {
      Config& c = cur_[j];
      if (c.fresh && !fresh) {
        c.fresh = 0;  // may complete now: process again
        work_.push_back(j);
      }
      return;
    }
    if (cur_.size() >= kMaxConfigs) {
      failed = true;
      return;
    }
    work_.push_back(static_cast<std::int32_t>(cur_.size()));
    cur_.push_back({q, parent, fresh});
    if (indexed_) Insert(static_cast<std::int32_t>(cur_.size()) - 1);
  }
  // The set under construction: empty, its index forgotten.
  void ClearCur() {
    cur_.clear();
    indexed_ = false;
  }
  // cur_'s index of (q, parent), or -1. A scan while the set is small; past kLinearConfigs a
  // hash table (an object with many optional members predicts a few configurations per member:
  // hundreds), whose slots are stamped by generation so that it is never cleared.
  std::int32_t Find(StateId q, std::int32_t parent) {
    if (!indexed_) {
      if (cur_.size() <= kLinearConfigs) {
        for (std::size_t j = 0; j < cur_.size(); ++j) {
          if (cur_[j].q == q && cur_[j].parent == parent) return static_cast<std::int32_t>(j);
        }
        return -1;
      }
      indexed_ = true;
      if (slots_.empty()) slots_.assign(kSlots, {0, 0});
      if (++generation_ == 0) {  // (wrapped: forget every stamp)
        slots_.assign(kSlots, {0, 0});
        generation_ = 1;
      }
      for (std::size_t j = 0; j < cur_.size(); ++j) Insert(static_cast<std::int32_t>(j));
    }
    for (std::size_t h = SlotOf(q, parent);; h = (h + 1) & (kSlots - 1)) {
      const Slot& sl = slots_[h];
      if (sl.generation != generation_) return -1;
      const Config& c = cur_[sl.index];
      if (c.q == q && c.parent == parent) return sl.index;
    }
  }
  void Insert(std::int32_t j) {
    std::size_t h = SlotOf(cur_[j].q, cur_[j].parent);
    while (slots_[h].generation == generation_) h = (h + 1) & (kSlots - 1);
    slots_[h] = {generation_, j};
  }
  static std::size_t SlotOf(StateId q, std::int32_t parent) {
    const std::uint64_t k = static_cast<std::uint64_t>(static_cast<std::uint32_t>(q)) << 32 |
                            static_cast<std::uint32_t>(parent);
    return static_cast<std::size_t>((k * 0x9E3779B97F4A7C15ull) >> 40) & (kSlots - 1);
  }

  // Mirrors EarleyParser::Closure: a rule completes only once it has consumed something (a
  // rule entered here and finished empty is covered by its `nullable` flag), counters count.
  void Close() {
    while (!work_.empty() && !failed) {
      const Config c = cur_[work_.back()];
      work_.pop_back();
      if (p_->accepting[c.q] && !c.fresh) Return(c.parent);
      for (std::int32_t e = p_->nt_begin[c.q]; e < p_->nt_begin[c.q + 1] && !failed; ++e) {
        const auto [sub, target] = p_->nt_edges[e];
        const std::int32_t ret = Intern(-1, target, c.parent);
        if (failed) break;
        Enter(sub, ret);
        if (p_->rules[sub].nullable) Add(target, c.parent, c.fresh);
      }
    }
    work_.clear();
  }
  void Return(std::int32_t parent) {
    if (parent == kBottom) {
      completed_ = true;
      return;
    }
    const Frame f = frames_[parent];
    if (f.rule < 0) {
      Add(f.value, f.parent, 0);
      return;
    }
    const CfgProgram::RuleInfo& r = p_->rules[f.rule];
    if (r.max != CfgProgram::kUnbounded && f.value >= r.max) return;
    std::int32_t c = f.value + 1;
    if (r.max == CfgProgram::kUnbounded && c > r.min) c = r.min;
    Counter(f.rule, c, f.parent, false);
  }
  void Counter(std::int32_t rule, std::int32_t count, std::int32_t parent, bool fresh) {
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    const bool accepting = count >= r.min || p_->rules[r.child].nullable;
    if (accepting && !fresh) Return(parent);
    if (r.max == CfgProgram::kUnbounded || count < r.max) {
      const std::int32_t frame = Intern(rule, count, parent);
      if (!failed) Enter(r.child, frame);
    }
  }
  void Enter(std::int32_t rule, std::int32_t parent) {
    const CfgProgram::RuleInfo& r = p_->rules[rule];
    if (r.kind == CfgProgram::RuleKind::kDfa) {
      Add(r.start, parent, 1);
    } else {
      Counter(rule, 0, parent, true);
    }
  }

  const CfgProgram* p_;
  bool fresh_walk_ = true;
  std::vector<Frame> frames_;
  std::vector<std::int32_t> frame_table_;
  std::vector<Config> cur_;  // the set under construction
  bool indexed_ = false;     // cur_ is in slots_ (generation_)
  std::vector<Slot> slots_;
  std::uint32_t generation_ = 0;
  bool completed_ = false;
  std::vector<std::int32_t> work_;
  std::vector<Config> pool_;  // interned sets: pool_[set_begin_[k], set_begin_[k + 1])
  std::vector<std::uint32_t> set_begin_;
  std::vector<std::uint8_t> set_completed_;
  struct SetBytes {
    std::array<std::uint64_t, 4> bits;
    std::uint16_t count = 0;
    bool known = false;
  };
  std::vector<SetBytes> set_bytes_;  // per set, filled by Bytes
  struct RunKnown {
    std::uint8_t run = 0;  // bytes of the class the set surely takes in a row (255: any number)
    bool exact = false;    // run is all it takes (else a lower bound)
  };
  struct RunCache {
    std::array<RunKnown, TokenTrie::kNumSubtreeClasses> run{};
  };
  std::vector<RunCache> set_runs_;  // per set: what Takes found, per class
  std::vector<std::int32_t> set_table_;
  static constexpr int kFrontBits = 10;
  struct FrontSlot {
    std::int64_t key;  // set * 256 + byte, or -1
    std::int32_t value;
    std::uint32_t generation;  // valid while front_generation_ (0: never)
  };
  std::array<FrontSlot, std::size_t{1} << kFrontBits> front_;
  std::uint32_t front_generation_ = 1;  // moved on with the memo's clearing
  std::vector<std::int64_t> memo_keys_;  // (set * 256 + byte) -> next set (-1: dead)
  std::vector<std::int32_t> memo_vals_;
  std::size_t memo_size_ = 0;
  // (q, parent) -> Start's set (kNoStart: an empty slot; no state is 2^32 - 1)
  static constexpr std::uint64_t kNoStart = ~std::uint64_t{0};
  std::vector<std::uint64_t> start_keys_;
  std::vector<std::int32_t> start_vals_;
  std::size_t start_size_ = 0;
};

}  // namespace

// How the walk runs at one depth of the trie path.
enum class CfgGrammar::WalkMode : std::uint8_t {
  kAutomaton,  // on the rule's byte automaton, at a state without rule edges (or the start)
  kRepeat,     // inside the simple repetition (RepeatEdge) on the rule edge of `state`
  kStack,      // the stack walk: configuration set `stack_set`
  kParser,     // a local Earley parser: level `parser`, its set 0 at depth `parser_base`
};

// The walk's state at one depth of the trie path. Each frame is written at its depth before any
// deeper node reads it.
struct CfgGrammar::WalkFrame {
  WalkMode mode;
  std::uint8_t path_byte;     // the byte of the node at this depth
  StateId state;              // kAutomaton, kRepeat: the DFA state
  std::int32_t count;         // kRepeat: repetitions so far
  std::int32_t stack_set;     // kStack: the configuration set
  // kAutomaton: the stack under `state` (StackWalk::kBottom: in the position's own rule; else
  // the walk left stack mode inside a rule below it, on a state that can neither finish that
  // rule nor enter another one).
  std::int32_t stack_parent;
  std::int32_t parser;        // kParser: the parser level
  std::int32_t parser_base;   // kParser: the depth of that parser's set 0
  std::int32_t parsers_used;  // parser levels in use on the path (the next one free)
  // Sparse jumps: the node at this depth whose children are jumped (kNoJump: none), and the
  // bytes allowed out of it.
  std::uint32_t jump_parent;
  const std::uint64_t* jump_allowed;
  std::array<std::uint64_t, 4> stack_bytes;  // kStack: the set's bytes (jump_allowed points here)
};

// Scratch of one position's computation: local parsers by level (or the stack walk), accepted
// tokens as bits, uncertain (tail, token) pairs.
// One per thread, reused: a position's computation allocates nothing once it has warmed up.
// Accepted ids a walk also collects as a list (sorting a longer list costs more than a scan).
constexpr std::size_t kMaxListedIds = 256;
constexpr int kLoopSlotBits = 8;
constexpr std::uint32_t kMinSkipNodes = 16;  // nodes below a node whose subtree may be taken whole

struct CfgGrammar::WalkScratch {
  // Ready for a position of `program` (whose grammar's serial number is `serial`: an address
  // may be reused by a later program, whose tables differ) with `words` mask words.
  void Begin(const CfgProgram* program, std::uint64_t serial, std::size_t words,
             std::size_t max_ids) {
    if (serial != owner) {
      owner = serial;
      parsers.clear();
      stack.Rebind(program);
    }
    use_parser = false;
    if (stack.failed) stack.Forget();
    if (!bits_clean || bits.size() != words) bits.assign(words, 0);
    bits_clean = false;
    ids.clear();
    ids_limit = max_ids;
    unc.clear();
    accepted = 0;
  }
  std::uint64_t owner = 0;  // the serial number of the grammar whose program this is
  std::vector<std::unique_ptr<EarleyParser>> parsers;
  StackWalk stack{nullptr};
  bool use_parser = false;  // the stack walk gave up on this position: Earley only
  bool bits_clean = false;  // every word of bits is zero (PositionFromScratch cleared its ids')
  std::vector<std::uint32_t> bits;
  // The accepted ids as well, while they are few (ids.size() == accepted): a short list needs
  // no scan of the bits.
  std::vector<TokenId> ids;
  std::size_t ids_limit = 0;
  std::vector<std::pair<std::string_view, TokenId>> unc;
  std::int32_t accepted = 0;
  TailTrieBuilder tail_tries;
  // WalkTrie's path: one frame per trie depth.
  std::vector<WalkFrame> frames;
  // TrieWalker::PlainRun's states per depth (frames are written only where it hands back).
  std::vector<StateId> plain_states;
  // TrieWalker::TakesBelow's answers per automaton state, stamped by `walk` (one per WalkTrie).
  struct LoopSlot {
    std::uint64_t walk = 0;
    StateId state = -1;
    bool loops_known = false;
    std::uint8_t loops = 0;       // bit k: the state goes back to itself on every byte of class k
    std::uint8_t runs_known = 0;  // bit k: runs[k] is known
    std::array<std::uint8_t, TokenTrie::kNumSubtreeClasses> runs{};  // TrieWalker::ClassRun
  };
  std::array<LoopSlot, std::size_t{1} << kLoopSlotBits> loop_slots{};
  std::uint64_t walk = 0;
  std::vector<std::int32_t> splits;
};


namespace {
constexpr std::uint32_t kNoJump = 0xFFFFFFFEu;
}  // namespace

// One walk of WalkTrie: the loop over the trie nodes, with a step per mode. The steps a node
// takes on every visit are inlined into the loop (it runs once per trie node: up to ~300k per
// walk of Llama-3's trie), the rare ones (a parser step, a dead subtree's tails) are calls.
class CfgGrammar::TrieWalker {
 public:
  TrieWalker(const CfgGrammar& g, std::span<const TokenTrie::Node> nodes, std::uint32_t end,
             const TokenId* toks, const std::uint16_t* offsets, const EarleyItem& item,
             StateId start, WalkScratch& out, std::int32_t start_depth, bool offsets_from_depths)
      : g_(g),
        p_(g.program_),
        nodes_(nodes),
        end_(end),
        toks_(toks),
        offsets_(offsets),
        item_(item),
        start_(start),
        out_(out),
        counter_(g.program_.IsCounter(item.rule)),
        use_stack_(!out.use_parser),
        follow_(g.follow_[item.rule]),
        start_depth_(start_depth),
        offsets_from_depths_(offsets_from_depths) {}

  void Run(std::uint32_t begin);

 private:
  bool HasNt(StateId s) const { return p_.nt_begin[s] != p_.nt_begin[s + 1]; }
  EarleyParser& Parser(std::int32_t level) {
    std::vector<std::unique_ptr<EarleyParser>>& parsers = out_.parsers;
    while (static_cast<std::int32_t>(parsers.size()) <= level) {
      parsers.push_back(std::make_unique<EarleyParser>(&g_.program_, INT_MAX));
    }
    return *parsers[level];
  }
  // Few bytes out of `s` against the children of trie node `parent`: jump between them.
  bool Sparse(StateId s, std::uint32_t parent) const {
    return g_.first_count_[s] * 8u < g_.trie_->NumChildren(parent);
  }
  // Stack mode at frame f from configuration (t, parent); false if the walk gave up.
  bool StartStack(WalkFrame& f, StateId t, std::int32_t parent) {
    f.stack_set = out_.stack.Start(t, parent);
    f.mode = WalkMode::kStack;
    return !out_.stack.failed;
  }
  // Frame 0 from the start state; false if the walk gave up.
  bool Begin();
  // Frame d (from frame d - 1) after `byte`: `ok` if the byte leads on, `completed` if the
  // position's rule may finish there. False if the walk gave up.
  [[gnu::always_inline]] bool StepStack(std::int32_t d, std::uint8_t byte, bool& ok,
                                        bool& completed);
  [[gnu::always_inline]] bool StepAutomaton(std::int32_t d, std::uint8_t byte, bool& ok,
                                            bool& completed);
  void StepParser(std::int32_t d, std::uint8_t byte, bool& ok, bool& completed);
  // In the position's own rule at automaton state t (not dead) at frame d: the next mode.
  [[gnu::always_inline]] bool EnterState(std::int32_t d, StateId t, bool& completed);
  // A dead node: its subtree's tokens are uncertain at the splits on the path. Returns the
  // next node to visit.
  std::uint32_t Reject(const TokenTrie::Node& node, std::int32_t d);
  // The tokens ending at node i are accepted.
  [[gnu::always_inline]] void AcceptTokens(std::uint32_t i, const TokenTrie::Node& node);
  // The nodes below node i (accepted, its frame a plain automaton state: in the position's own
  // rule, no rule edge, no split on the path) while they stay plain: one automaton step each.
  // Returns the first node it leaves to the general loop (not stepped: a state with a rule edge
  // or one that may finish the rule, or a subtree big enough for Run's questions), or the end
  // of i's subtree.
  std::uint32_t PlainRun(std::uint32_t i, std::uint32_t stop);
  // PlainRun over the program's transition entries as stored (TransitionTable: narrow entries
  // hold the target plus one, wide ones the target), read through raw pointers: the loop runs
  // once per node, and the table's form is the same for the whole walk.
  template <typename Entry>
  std::uint32_t PlainRunOf(std::uint32_t i, std::uint32_t stop);
  // The tokens toks_[begin, end) are accepted.
  [[gnu::noinline]] void AcceptRange(std::uint32_t begin, std::uint32_t end);
  // From frame f, every run of up to `height` bytes of some class of `below` (TokenTrie::BelowIn)
  // stays alive: the state goes back to itself on the class (automaton), the set takes that many
  // (stack, StackWalk::Takes), or the repetition has that many left (a `ws` repeat).
  [[gnu::noinline]] bool TakesBelow(const WalkFrame& f, std::uint8_t below, std::int32_t height);
  // The subtree classes (TokenTrie::BelowIn) on every byte of which automaton state s goes back
  // to itself.
  std::uint8_t LoopClasses(StateId s);
  // How many bytes of class k automaton state s surely takes: every run of that many or fewer
  // stays alive (by the byte transitions alone, so every token of such bytes is accepted);
  // kEndlessRun when every run does (a loop), at most kEndlessRun - 1 otherwise.
  std::uint8_t ClassRun(StateId s, int k);
  static constexpr int kEndlessRun = 255;
  // A subtree below a node at automaton state s, its bytes in the classes `below`, at most
  // `height` deep (TokenTrie::HeightBelow), is accepted whole: a class the state loops on, or
  // one it takes runs of `height` bytes of (the characters a `maxLength` leaves).
  bool AutomatonTakes(StateId s, std::uint8_t below, std::int32_t height);
  // This walk's cache slot of state s (emptied when it held another state or walk).
  WalkScratch::LoopSlot& SlotOf(StateId s);

  const CfgGrammar& g_;
  const CfgProgram& p_;
  std::span<const TokenTrie::Node> nodes_;
  std::uint32_t end_;
  const TokenId* toks_;
  const std::uint16_t* offsets_;
  const EarleyItem& item_;
  StateId start_;
  WalkScratch& out_;
  const bool counter_;
  const bool use_stack_;
  const std::array<bool, 256>& follow_;
  // The walk's first nodes are at depth start_depth_ + 1 (frame start_depth_ is its start).
  const std::int32_t start_depth_;
  // A token's walked bytes start at its length less the depth of the node it ends at (a
  // position's tail trie, ComposeFromCallee), not at offsets_.
  const bool offsets_from_depths_;
  bool can_jump_ = false;
  bool can_skip_ = false;  // whole subtrees by BelowIn (the trie's own nodes and tokens)
  WalkFrame* frames_ = nullptr;
};

bool CfgGrammar::TrieWalker::Begin() {
  WalkFrame& f = frames_[start_depth_];
  f.mode = WalkMode::kAutomaton;
  f.state = start_;
  f.stack_parent = StackWalk::kBottom;
  f.parsers_used = 0;
  StackWalk& stack = out_.stack;
  if (use_stack_) stack.Reset();
  // Below a ViewLeaf's parent (FollowBesideView), whose path's states are plain (no rule edge,
  // cannot finish): the automaton alone, no split above.
  if (start_depth_ > 0) return true;
  if (counter_ && use_stack_) {
    // A counter position (`start` is its count): the stack walk runs the counter natively.
    f.stack_set = stack.StartCounter(item_.rule, start_);
    if (stack.failed) return false;
    f.mode = WalkMode::kStack;
  } else if (!counter_ && HasNt(start_) && g_.repeat_of_[start_] >= 0) {
    f.mode = WalkMode::kRepeat;
    f.count = 0;
  } else if (use_stack_ && HasNt(start_)) {
    if (!StartStack(f, start_, StackWalk::kBottom)) return false;
  } else if (counter_ || HasNt(start_)) {
    Parser(0).InitLocal(item_.rule, counter_ ? item_.state : start_, 0);
    f.mode = WalkMode::kParser;
    f.parser = 0;
    f.parser_base = 0;
    f.parsers_used = 1;
  }
  return true;
}

inline bool CfgGrammar::TrieWalker::StepStack(std::int32_t d, std::uint8_t byte, bool& ok,
                                       bool& completed) {
  StackWalk& stack = out_.stack;
  const WalkFrame& prev = frames_[d - 1];
  WalkFrame& f = frames_[d];
  const std::int32_t next = stack.Step(prev.stack_set, byte);
  if (stack.failed) return false;
  ok = next >= 0;
  if (!ok) return true;
  completed = stack.completed(next);
  f.stack_set = next;
  f.parsers_used = prev.parsers_used;
  f.mode = WalkMode::kStack;
  // One configuration at a state without rule edges that cannot return into a frame: on in
  // the automaton.
  const std::span<const StackWalk::Config> set = stack.set(next);
  if (set.size() == 1 && !HasNt(set[0].q) &&
      (set[0].parent == StackWalk::kBottom || !p_.accepting[set[0].q])) {
    f.mode = WalkMode::kAutomaton;
    f.state = set[0].q;
    f.stack_parent = set[0].parent;
  }
  return true;
}

inline bool CfgGrammar::TrieWalker::StepAutomaton(std::int32_t d, std::uint8_t byte, bool& ok,
                                           bool& completed) {
  const WalkFrame& prev = frames_[d - 1];
  WalkFrame& f = frames_[d];
  StateId t;
  bool repeating = false;
  if (prev.mode == WalkMode::kRepeat) {
    // Inside a simple repetition (`ws`): one more byte of its class, or on after it.
    const RepeatEdge& r = g_.repeat_edges_[g_.repeat_of_[prev.state]];
    const std::int32_t c = prev.count;
    if ((r.bytes[byte >> 6] >> (byte & 63)) & 1) {
      t = c < r.max || r.max < 0 ? prev.state : CfgProgram::kDead;
      if (t != CfgProgram::kDead) {
        repeating = true;
        f.count = c + 1;
      }
    } else {
      t = c >= r.min ? p_.Step(r.after, byte) : CfgProgram::kDead;
    }
  } else {
    t = p_.Step(prev.state, byte);
  }
  ok = t != CfgProgram::kDead;
  if (!ok) return true;
  f.parsers_used = prev.parsers_used;
  if (prev.mode == WalkMode::kAutomaton && prev.stack_parent != StackWalk::kBottom) {
    // Inside a rule below the position's: on in the automaton until that rule may finish or
    // enter another one.
    if (HasNt(t) || p_.accepting[t]) {
      if (!StartStack(f, t, prev.stack_parent)) return false;
      completed = out_.stack.completed(f.stack_set);
    } else {
      f.mode = WalkMode::kAutomaton;
      f.state = t;
      f.stack_parent = prev.stack_parent;
    }
    return true;
  }
  if (repeating) {
    const RepeatEdge& r = g_.repeat_edges_[g_.repeat_of_[t]];
    f.mode = WalkMode::kRepeat;
    f.state = t;
    f.stack_parent = StackWalk::kBottom;
    completed = f.count >= r.min && g_.null_state_[r.after] != 0;
    return true;
  }
  return EnterState(d, t, completed);
}

inline bool CfgGrammar::TrieWalker::EnterState(std::int32_t d, StateId t, bool& completed) {
  WalkFrame& f = frames_[d];
  f.mode = WalkMode::kAutomaton;
  f.state = t;
  f.stack_parent = StackWalk::kBottom;
  completed = g_.null_state_[t] != 0;
  if (!HasNt(t)) return true;
  if (g_.repeat_of_[t] >= 0) {
    f.mode = WalkMode::kRepeat;
    f.count = 0;
  } else if (use_stack_) {
    if (!StartStack(f, t, StackWalk::kBottom)) return false;
  } else {
    // A rule edge in sight: a local parser one level up, its set 0 at this depth.
    Parser(f.parsers_used).InitLocal(item_.rule, t, 0);
    f.mode = WalkMode::kParser;
    f.parser = f.parsers_used;
    f.parser_base = d;
    ++f.parsers_used;
  }
  return true;
}

void CfgGrammar::TrieWalker::StepParser(std::int32_t d, std::uint8_t byte, bool& ok,
                                        bool& completed) {
  const WalkFrame& prev = frames_[d - 1];
  WalkFrame& f = frames_[d];
  const std::int32_t l = prev.parser, b0 = prev.parser_base;
  EarleyParser& local = Parser(l);
  local.PopTo(d - b0);
  ok = local.StepByte(byte);
  if (!ok) return;
  completed = local.bottom_completed(d - b0);
  f.mode = WalkMode::kParser;
  f.parser = l;
  f.parser_base = b0;
  f.parsers_used = prev.parsers_used;
  // The position's own item alone at a state without rule edges (after `ws "\""`, say): back
  // to the automaton; a later rule edge starts a parser one level up, so this one keeps its sets.
  std::span<const EarleyItem> last = local.set(d - b0);
  if (!counter_ && last.size() == 1 && last[0].origin == -1 && last[0].rule == item_.rule &&
      !HasNt(last[0].state)) {
    f.mode = WalkMode::kAutomaton;
    f.state = last[0].state;
    f.stack_parent = StackWalk::kBottom;
  }
}

std::uint32_t CfgGrammar::TrieWalker::Reject(const TokenTrie::Node& node, std::int32_t d) {
  // The subtree's tokens are uncertain at every split whose next byte (on the shared path) can
  // follow the rule.
  const std::vector<std::int32_t>& splits = out_.splits;
  for (std::int32_t sp : splits) {
    if (!follow_[frames_[sp + 1].path_byte]) continue;
    if (offsets_from_depths_) {
      for (std::uint32_t k = static_cast<std::uint32_t>(&node - nodes_.data()); k < node.subtree_end;
           ++k) {
        for (std::uint32_t j = nodes_[k].token_begin; j < nodes_[k + 1].token_begin; ++j) {
          const std::string_view bytes = g_.vocab_->TokenBytes(toks_[j]);
          out_.unc.emplace_back(bytes.substr(bytes.size() - nodes_[k].depth + sp), toks_[j]);
        }
      }
      continue;
    }
    for (std::uint32_t j = node.token_begin; j < nodes_[node.subtree_end].token_begin; ++j) {
      const TokenId tok = toks_[j];
      const std::size_t off = offsets_ != nullptr ? offsets_[j] : 0;
      out_.unc.emplace_back(g_.vocab_->TokenBytes(tok).substr(off + sp), tok);
    }
  }
  const std::uint32_t jp = frames_[d - 1].jump_parent;
  if (jp != kNoJump && splits.empty()) {
    const std::uint32_t stop = jp == TokenTrie::kRoot ? end_ : nodes_[jp].subtree_end;
    return g_.trie_->NextChild(jp, frames_[d - 1].jump_allowed, node.byte, stop);
  }
  return node.subtree_end;
}

void CfgGrammar::TrieWalker::AcceptRange(std::uint32_t begin, std::uint32_t end) {
  for (std::uint32_t j = begin; j < end; ++j) {
    out_.bits[static_cast<std::size_t>(toks_[j]) >> 5] |= 1u << (toks_[j] & 31);
    if (out_.ids.size() < out_.ids_limit) out_.ids.push_back(toks_[j]);
  }
  out_.accepted += static_cast<std::int32_t>(end - begin);
}

CfgGrammar::WalkScratch::LoopSlot& CfgGrammar::TrieWalker::SlotOf(StateId s) {
  WalkScratch::LoopSlot& slot =
      out_.loop_slots[(static_cast<std::uint32_t>(s) * 0x9E3779B9u) >> (32 - kLoopSlotBits)];
  if (slot.walk != out_.walk || slot.state != s) {
    slot.walk = out_.walk;
    slot.state = s;
    slot.loops_known = false;
    slot.runs_known = 0;
  }
  return slot;
}

std::uint8_t CfgGrammar::TrieWalker::LoopClasses(StateId s) {
  // Asked once per state and walk (a direct-mapped cache stamped by walk): most trie nodes have
  // a class below them (letters, digits), most states loop on none, and a node's question is
  // then one table read.
  WalkScratch::LoopSlot& slot = SlotOf(s);
  if (!slot.loops_known) {
    std::uint8_t loops = 0;
    for (int k = 0; k < TokenTrie::kNumSubtreeClasses; ++k) {
      bool all = true;
      for (const std::uint8_t b : TokenTrie::SubtreeClassBytes(k)) {
        if (p_.Step(s, b) != s) {
          all = false;
          break;
        }
      }
      if (all) loops = static_cast<std::uint8_t>(loops | (1u << k));
    }
    slot.loops = loops;
    slot.loops_known = true;
  }
  return slot.loops;
}

std::uint8_t CfgGrammar::TrieWalker::ClassRun(StateId s, int k) {
  {
    const WalkScratch::LoopSlot& slot = SlotOf(s);
    if (((slot.runs_known >> k) & 1) != 0) return slot.runs[k];
  }
  // Breadth-first by layers: layer i holds the states that i bytes of the class reach from s.
  // The run is the first layer with a dead state, less one; endless once a layer holds only
  // states of earlier layers (their successors are all known alive). A layer of one state
  // whose run is known ends it (a chain of counted characters: each state's run is the next
  // one's plus one). Bounded: at most kMaxLayer states a layer and kMaxSeen in all, else the
  // layers known alive are the answer (a lower bound: the walk then goes node by node).
  constexpr int kMaxLayer = 4;
  constexpr int kMaxSeen = 64;
  const std::span<const std::uint8_t> bytes = TokenTrie::SubtreeClassBytes(k);
  std::array<StateId, kMaxLayer> layer{s}, next{};
  std::array<StateId, kMaxSeen> seen{s};
  int n_layer = 1, n_seen = 1;
  int run = 0;
  for (int i = 0;; ++i) {
    int n_next = 0;
    bool dead = false, wide = false;
    for (int x = 0; x < n_layer && !dead && !wide; ++x) {
      for (const std::uint8_t b : bytes) {
        const StateId t = p_.Step(layer[x], b);
        if (t == CfgProgram::kDead) {
          dead = true;
          break;
        }
        if (std::find(next.begin(), next.begin() + n_next, t) != next.begin() + n_next) continue;
        if (n_next == kMaxLayer) {
          wide = true;
          break;
        }
        next[n_next++] = t;
      }
    }
    if (dead) {
      run = i;
      break;
    }
    if (wide) {
      run = i + 1;
      break;
    }
    bool all_seen = true;
    for (int x = 0; x < n_next && all_seen; ++x) {
      all_seen = std::find(seen.begin(), seen.begin() + n_seen, next[x]) != seen.begin() + n_seen;
    }
    if (all_seen) {
      run = kEndlessRun;
      break;
    }
    if (i + 1 >= kEndlessRun - 1) {
      run = kEndlessRun - 1;
      break;
    }
    if (n_next == 1) {
      const WalkScratch::LoopSlot& other =
          out_.loop_slots[(static_cast<std::uint32_t>(next[0]) * 0x9E3779B9u) >>
                          (32 - kLoopSlotBits)];
      if (other.walk == out_.walk && other.state == next[0] && ((other.runs_known >> k) & 1)) {
        run = other.runs[k] == kEndlessRun ? kEndlessRun
                                           : std::min(kEndlessRun - 1, i + 1 + other.runs[k]);
        break;
      }
    }
    if (n_seen + n_next > kMaxSeen) {
      run = i + 1;
      break;
    }
    for (int x = 0; x < n_next; ++x) seen[n_seen++] = next[x];
    layer = next;
    n_layer = n_next;
  }
  WalkScratch::LoopSlot& slot = SlotOf(s);
  slot.runs[k] = static_cast<std::uint8_t>(run);
  slot.runs_known = static_cast<std::uint8_t>(slot.runs_known | (1u << k));
  return slot.runs[k];
}

bool CfgGrammar::TrieWalker::AutomatonTakes(StateId s, std::uint8_t below, std::int32_t height) {
  if (below == 0) return false;
  if ((LoopClasses(s) & below) != 0) return true;
  // The narrowest of the classes (the classes nest: digits in hex digits in alphanumerics, lower
  // case in letters in alphanumerics, ...), whose run is the longest; asking the wider ones
  // too cost Snowplow's slow walks 3% of their instructions for nothing.
  // (HeightBelow saturates at 255: a subtree that deep is taken only by an endless run.)
  const std::uint8_t run = ClassRun(s, std::countr_zero(below));
  return run == kEndlessRun || (height < kEndlessRun && run >= height);
}

bool CfgGrammar::TrieWalker::TakesBelow(const WalkFrame& f, std::uint8_t below,
                                         std::int32_t height) {
  if (f.mode == WalkMode::kAutomaton) return AutomatonTakes(f.state, below, height);
  // (Below, a run is bounded: HeightBelow saturates at 255, so a subtree that deep is not
  // known to fit a bounded run, and is walked.)
  if (height >= StackWalk::kUnboundedRun) return false;
  if (f.mode == WalkMode::kStack) {
    // (Digits and blanks only: asking a set about a wider class steps it on bytes the walk may
    // never take, each step a closure of its own.)
    for (const int k : {TokenTrie::kDigits, TokenTrie::kWhitespace}) {
      if (((below >> k) & 1) != 0 && out_.stack.Takes(f.stack_set, k, height)) return true;
      if (out_.stack.failed) return false;
    }
    return false;
  }
  if (f.mode == WalkMode::kRepeat && ((below >> TokenTrie::kWhitespace) & 1) != 0) {
    // Each blank of the repetition's class counts one more, up to its maximum.
    const RepeatEdge& r = g_.repeat_edges_[g_.repeat_of_[f.state]];
    for (const std::uint8_t b : TokenTrie::SubtreeClassBytes(TokenTrie::kWhitespace)) {
      if (((r.bytes[b >> 6] >> (b & 63)) & 1) == 0) return false;
    }
    return r.max < 0 || r.max - f.count >= height;
  }
  return false;
}

inline void CfgGrammar::TrieWalker::AcceptTokens(std::uint32_t i, const TokenTrie::Node& node) {
  for (std::uint32_t j = node.token_begin; j < nodes_[i + 1].token_begin; ++j) {
    out_.bits[static_cast<std::size_t>(toks_[j]) >> 5] |= 1u << (toks_[j] & 31);
    if (out_.ids.size() < out_.ids_limit) out_.ids.push_back(toks_[j]);
    ++out_.accepted;
  }
}

void CfgGrammar::TrieWalker::Run(std::uint32_t begin) {
  const std::size_t maxd = static_cast<std::size_t>(g_.trie_->max_depth()) + 2;
  if (out_.frames.size() < maxd) out_.frames.resize(maxd);
  if (out_.plain_states.size() < maxd) out_.plain_states.resize(maxd);
  frames_ = out_.frames.data();
  if (!Begin()) return;
  std::vector<std::int32_t>& splits = out_.splits;
  splits.clear();
  // Sparse jumps (whole-trie walks): below a node whose automaton state allows a few bytes out
  // of many children, the walk jumps from one allowed child to the next instead of stepping
  // every child. Only while no split is on the path: a dead child then has no uncertain tokens.
  can_jump_ = offsets_ == nullptr && !offsets_from_depths_ &&
              nodes_.data() == g_.trie_->nodes().data() && begin == 0 &&
              !counter_ && start_depth_ == 0;
  can_skip_ = offsets_ == nullptr && !offsets_from_depths_ &&
              nodes_.data() == g_.trie_->nodes().data();
  ++out_.walk;  // (a new stamp: the loop cache's answers were for another program's states)
  std::uint32_t i = begin;
  frames_[start_depth_].jump_parent = kNoJump;
  if (can_jump_ && Sparse(start_, TokenTrie::kRoot)) {
    frames_[0].jump_parent = TokenTrie::kRoot;
    frames_[0].jump_allowed = g_.first_bytes_[start_].data();
    i = g_.trie_->NextChild(TokenTrie::kRoot, frames_[0].jump_allowed, -1, end_);
  }
  while (i < end_) {
    const TokenTrie::Node& node = nodes_[i];
    const std::int32_t d = node.depth;
    while (!splits.empty() && splits.back() >= d) splits.pop_back();
    bool ok = false, completed = false;
    if (d == 1 && !counter_ && !g_.FirstByte(start_, node.byte)) {
      // A token failing on its first byte never completes the rule on the way: rejected.
    } else {
      switch (frames_[d - 1].mode) {
        case WalkMode::kStack:
          if (!StepStack(d, node.byte, ok, completed)) return;
          break;
        case WalkMode::kAutomaton:
        case WalkMode::kRepeat:
          if (!StepAutomaton(d, node.byte, ok, completed)) return;
          break;
        case WalkMode::kParser:
          StepParser(d, node.byte, ok, completed);
          break;
      }
    }
    WalkFrame& f = frames_[d];
    f.path_byte = node.byte;
    if (!ok) {
      i = Reject(node, d);
      continue;
    }
    AcceptTokens(i, node);
    if (completed) splits.push_back(d);
    f.jump_parent = kNoJump;
    // Every byte below this node in a class on which the state (or stack set) goes back to
    // itself (digits after a number's first digit, a run of hex digits): every token below is
    // accepted, each prefix ending in this same state, and none dies, so none is uncertain
    // either. Taken whole instead of node by node (a number's 1,110 digit tokens on Llama-3).
    // (Only subtrees big enough to pay for the question: most nodes have a few nodes below.)
    if (can_skip_ && node.subtree_end > i + kMinSkipNodes) [[unlikely]] {
      if (const std::uint8_t below = g_.trie_->BelowIn(i);
          below != 0 && TakesBelow(f, below, g_.trie_->HeightBelow(i))) {
        AcceptRange(nodes_[i + 1].token_begin, nodes_[node.subtree_end].token_begin);
        i = node.subtree_end;
        continue;
      }
      if (out_.stack.failed) return;
    }
    if (can_jump_ && f.mode == WalkMode::kAutomaton && splits.empty() && !HasNt(f.state) &&
        Sparse(f.state, i)) {
      f.jump_parent = i;
      f.jump_allowed = g_.first_bytes_[f.state].data();
      i = g_.trie_->NextChild(i, f.jump_allowed, -1, node.subtree_end);
      continue;
    }
    // In stack mode the same, on the bytes that lead on from any state of the set (a number's
    // digits before the `ws` call after it, whitespace before a value): the children of the
    // node on other bytes die, and with no split on the path they have no uncertain tokens.
    if (can_jump_ && f.mode == WalkMode::kStack && splits.empty() && node.subtree_end > i + 1) {
      if (const std::uint32_t kids = g_.trie_->NumChildren(i); kids > 8) {
        std::int32_t count = 0;
        const std::array<std::uint64_t, 4>& bytes =
            out_.stack.Bytes(f.stack_set, g_.first_bytes_, &count);
        if (static_cast<std::uint32_t>(count) * 8u < kids) {
          f.stack_bytes = bytes;
          f.jump_parent = i;
          f.jump_allowed = f.stack_bytes.data();
          i = g_.trie_->NextChild(i, f.jump_allowed, -1, node.subtree_end);
          continue;
        }
      }
    }
    // Below a plain state with no split on the path: the tight loop (most of a walk's nodes
    // are a string's, a number's or a literal's bytes).
    if (f.mode == WalkMode::kAutomaton && f.stack_parent == StackWalk::kBottom &&
        splits.empty() && !HasNt(f.state)) {
      i = PlainRun(i, std::min(node.subtree_end, end_));
      continue;
    }
    ++i;
  }
}

std::uint32_t CfgGrammar::TrieWalker::PlainRun(std::uint32_t i, std::uint32_t stop) {
  return p_.next.narrow() ? PlainRunOf<std::uint16_t>(i, stop) : PlainRunOf<StateId>(i, stop);
}

template <typename Entry>
std::uint32_t CfgGrammar::TrieWalker::PlainRunOf(std::uint32_t i, std::uint32_t stop) {
  // What Run does for such a node, without its questions: StepAutomaton from a plain frame
  // (EnterState with no rule edge and no completion), Reject with no split on the path and no
  // jump (the frames set here jump nowhere), AcceptTokens. A node that is not that, or whose
  // subtree is big enough for a whole-subtree or sparse-jump question, goes back to Run
  // unstepped, the frames of its path written (Run steps it from its parent's frame, and later
  // nodes from their parents'). Their path bytes are not: Reject reads a frame's byte only
  // below a split, and no split is on a path through here.
  static_assert(CfgProgram::kDead == -1);
  constexpr StateId kBias = std::is_same_v<Entry, std::uint16_t> ? 1 : 0;
  const Entry* next = static_cast<const Entry*>(p_.next.data());
  const std::uint8_t* byte_class = p_.byte_class.data();
  const std::size_t num_classes = static_cast<std::size_t>(p_.num_classes);
  const std::uint8_t* plain = g_.plain_state_.data();
  const TokenTrie::Node* nodes = nodes_.data();
  const TokenId* toks = toks_;
  std::uint32_t* bits = out_.bits.data();
  std::vector<TokenId>& ids = out_.ids;
  std::size_t ids_room = out_.ids_limit > ids.size() ? out_.ids_limit - ids.size() : 0;
  std::int32_t accepted = 0;
  StateId* st = out_.plain_states.data();
  const std::int32_t d0 = nodes[i].depth;
  st[d0] = frames_[d0].state;
  std::uint32_t j = i + 1;
  while (j < stop) {
    const TokenTrie::Node& n = nodes[j];
    const std::int32_t d = n.depth;
    const StateId t =
        static_cast<StateId>(next[static_cast<std::size_t>(st[d - 1]) * num_classes +
                                  byte_class[n.byte]]) -
        kBias;
    if (t < 0) {
      j = n.subtree_end;
      continue;
    }
    bool hand_back = plain[t] == 0;
    if (!hand_back && n.subtree_end > j + kMinSkipNodes) [[unlikely]] {
      // Run's questions for a big subtree, asked here: taken whole (every byte below in a
      // class the state loops on), or a sparse jump (handed back: Run sets it up). Neither:
      // stepped on here.
      if (const std::uint8_t below = can_skip_ ? g_.trie_->BelowIn(j) : 0;
          below != 0 && AutomatonTakes(t, below, g_.trie_->HeightBelow(j))) {
        out_.accepted += accepted;
        accepted = 0;
        AcceptRange(n.token_begin, nodes[n.subtree_end].token_begin);
        ids_room = out_.ids_limit > ids.size() ? out_.ids_limit - ids.size() : 0;
        j = n.subtree_end;
        continue;
      }
      hand_back = can_jump_ && Sparse(t, j);
    }
    if (hand_back) [[unlikely]] {
      const WalkFrame& top = frames_[d0];
      for (std::int32_t k = d0 + 1; k < d; ++k) {
        WalkFrame& f = frames_[k];
        f.mode = WalkMode::kAutomaton;
        f.state = st[k];
        f.stack_parent = StackWalk::kBottom;
        f.parsers_used = top.parsers_used;
        f.jump_parent = kNoJump;
      }
      break;
    }
    st[d] = t;
    // AcceptTokens, its counts kept here.
    const std::uint32_t tokens_end = nodes[j + 1].token_begin;
    for (std::uint32_t k = n.token_begin; k < tokens_end; ++k) {
      const TokenId tok = toks[k];
      bits[static_cast<std::size_t>(tok) >> 5] |= 1u << (tok & 31);
      if (ids_room != 0) {
        ids.push_back(tok);
        --ids_room;
      }
      ++accepted;
    }
    ++j;
  }
  out_.accepted += accepted;
  return j;
}

// Walks the depth-first trie nodes[begin, end) (token ranges into `toks`; offsets[t] is where
// token toks[t]'s walked bytes start in its bytes, or null for 0) from DFA state `start` of
// `rule` (or the counter item when the rule is a counter), into `out`. The walk runs on the
// rule's byte automaton alone while it stays in states without rule edges (string bodies,
// literals, numbers), and hands a subtree to the stack walk or a local Earley parser started at
// the state it reached once a rule edge is in sight. Both agree: a state without rule edges
// predicts nothing, so the parser's set there is that single item.
void CfgGrammar::WalkTrie(std::span<const TokenTrie::Node> nodes, std::uint32_t begin,
                          std::uint32_t end, const TokenId* toks, const std::uint16_t* offsets,
                          const EarleyItem& item, StateId start, WalkScratch& out,
                          std::int32_t start_depth, bool offsets_from_depths) const {
  TrieWalker(*this, nodes, end, toks, offsets, item, start, out, start_depth, offsets_from_depths)
      .Run(begin);
}

namespace {
// Up to 2^(Bits-1) DFA states numbered in insertion order, found by open addressing.
template <int Bits>
struct StateIndex {
  static constexpr std::size_t kSlots = std::size_t{1} << Bits;
  std::array<StateId, kSlots> key;
  std::array<std::int16_t, kSlots> idx;
  StateIndex() { key.fill(CfgProgram::kDead); }
  static std::size_t Slot(StateId t) {
    return (static_cast<std::uint32_t>(t) * 0x9E3779B9u) >> (32 - Bits);
  }
  std::int32_t Find(StateId t) const {
    for (std::size_t h = Slot(t); key[h] != CfgProgram::kDead; h = (h + 1) & (kSlots - 1)) {
      if (key[h] == t) return idx[h];
    }
    return -1;
  }
  void Insert(StateId t, std::int16_t i) {
    std::size_t h = Slot(t);
    while (key[h] != CfgProgram::kDead) h = (h + 1) & (kSlots - 1);
    key[h] = t;
    idx[h] = i;
  }
};
}  // namespace

// The region of DFA state s that tokens can share across grammars: the states reachable from s
// by bytes through states without rule edges that cannot finish the rule (a string body with
// its escapes and UTF-8 continuations, say), numbered breadth-first from s so that equal
// regions of different grammars have equal tables. Empty when it would not pay: no wide loop
// at s or one byte after it (a literal), or too many states.
bool CfgGrammar::PlainState(StateId t) const { return plain_state_[t] != 0; }

bool CfgGrammar::EquivalentPlainStates(StateId x, StateId y, std::int64_t& work) const {
  const CfgProgram& p = program_;
  // (Scratch per thread: a key state's view asks dozens of these questions per position.)
  thread_local std::vector<std::pair<StateId, StateId>> pairs;
  pairs.assign(1, {x, y});
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const auto [a, b] = pairs[k];
    if (!PlainState(a) || !PlainState(b) || p.accepting[a] != p.accepting[b] ||
        p.sp_begin[a] != p.sp_begin[a + 1] || p.sp_begin[b] != p.sp_begin[b + 1]) {
      return false;
    }
    work += p.num_classes;
    if (work > kEquivalenceWork) return false;
    const TransitionRow ra = p.Row(a);
    const TransitionRow rb = p.Row(b);
    // Only the classes where the rows differ (a few of dozens), compared eight bytes at a time.
    const bool same = ra.ForEachDifference(rb, p.num_classes, [&](std::int32_t c) {
      const StateId u = ra[c], v = rb[c];
      if (u == CfgProgram::kDead || v == CfgProgram::kDead) return false;
      if (std::find(pairs.begin(), pairs.end(), std::make_pair(u, v)) != pairs.end()) return true;
      if (static_cast<std::int64_t>(pairs.size()) == kMaxEquivalentPairs) return false;
      pairs.push_back({u, v});
      return true;
    });
    if (!same) return false;
  }
  return true;
}

std::vector<std::pair<std::int32_t, StateId>> CfgGrammar::SuccessorsByBytes(StateId x) const {
  const CfgProgram& p = program_;
  std::vector<std::pair<std::int32_t, StateId>> targets;  // (-bytes, state)
  const TransitionRow row = p.Row(x);
  for (std::int32_t c = 0; c < p.num_classes; ++c) {
    const StateId t = row[c];
    if (t == CfgProgram::kDead || t == x || !PlainState(t)) continue;
    auto f = std::find_if(targets.begin(), targets.end(),
                          [&](const auto& y) { return y.second == t; });
    if (f == targets.end()) {
      targets.push_back({-class_size_[c], t});
    } else {
      f->first -= class_size_[c];
    }
  }
  std::sort(targets.begin(), targets.end());
  return targets;
}

// RegionRuns' steps, over one question (the region of `s`): the anchor on the wide loop, the
// loop's states, the row s enters the loop by, the canonical numbering, the table.
class CfgGrammar::RegionBuilder {
 public:
  RegionBuilder(const CfgGrammar& g, StateId s) : g_(g), p_(g.program_), s_(s) {}

  std::vector<std::int16_t> Build(std::vector<StateId>& states,
                                  std::array<std::uint64_t, 4>& first_exits,
                                  std::array<std::uint64_t, 4>& removed, RegionFollow& follow);
  // The run form Build returned, interned with its anchor's (when s entered by the anchor's row).
  std::shared_ptr<const RegionKey> interned;

 private:
  // Bytes on a self-loop that make a loop worth sharing. 16: a pattern's `[a-z0-9-]+` (37
  // bytes) too, not only string bodies (at 48, each state of such a loop a fill met was a walk of
  // the whole trie, 350-450 us on Llama-3; Github_medium's per-mask p99 141 -> 127 us).
  static constexpr int kWideLoop = 16;
  static constexpr std::size_t kMaxExplored = 256, kMaxRegion = 192;
  static constexpr int kMaxChain = 8;

  TransitionRow Row(StateId t) const { return p_.Row(t); }
  bool Plain(StateId t) const { return g_.PlainState(t); }
  // (A state with fewer first bytes has no wide loop, and no state equivalent to one: most
  // states a fill meets, a literal's, are told so without reading their rows.)
  bool FewBytes(StateId t) const { return g_.first_count_[t] < kWideLoop; }
  bool WideLoop(StateId t) const {
    if (FewBytes(t)) return false;
    const TransitionRow row = Row(t);
    int loop = 0;
    for (std::int32_t c = 0; c < p_.num_classes; ++c) loop += row[c] == t ? g_.class_size_[c] : 0;
    return loop >= kWideLoop;
  }
  // EquivalentPlainStates, each question answered once for this table.
  bool Equivalent(StateId x, StateId y) {
    if (x == y) return true;
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)) << 32) |
                              static_cast<std::uint32_t>(y);
    for (const auto& [k, eq] : answered_) {  // (a few questions per table)
      if (k == key) return eq;
    }
    const bool eq = g_.EquivalentPlainStates(x, y, equivalence_work_);
    answered_.emplace_back(key, eq);
    return eq;
  }
  // A state on the wide loop: s, or one byte after s, or two (s, then the body's first
  // character, a state equivalent to the loop's: `minLength: 1`); kDead if none.
  StateId FindAnchor();
  // loop_: the plain states reachable from the anchor that lead back to it.
  void ExploreLoop();
  bool InLoop(StateId t) const {
    const std::int32_t f = explored_index_.Find(t);
    return f >= 0 && back_[f];
  }
  // The row region state 0 (s at the token's first byte) enters by (entry_row_), and per class
  // whether s goes where the anchor goes (same_). With `force`, the anchor's row whatever s
  // does (the caller follows s's differences beside the view).
  void ChooseEntryRow(bool force);
  // states: s, then the loop's states breadth-first in byte order (canonical), and the table of
  // the states numbered, entering by entry_row_, in run form (TokenTrie::TableOfRuns); false if
  // the region has more than kMaxRegion states.
  bool NumberStates(std::vector<StateId>& states, std::vector<std::int16_t>& runs);
  bool RegionTarget(StateId t) const {
    return t != CfgProgram::kDead && Plain(t) && region_index_.Find(t) >= 0;
  }

  const CfgGrammar& g_;
  const CfgProgram& p_;
  const StateId s_;
  StateId anchor_ = CfgProgram::kDead;
  std::int64_t equivalence_work_ = 0;
  std::vector<std::pair<std::uint64_t, bool>> answered_;
  StateIndex<9> explored_index_;
  std::vector<StateId> explored_;
  std::vector<std::uint8_t> back_;  // per explored state: leads back to the anchor
  bool as_anchor_ = false;
  bool chain_start_ = false;  // s is a chain of states before the loop (FindAnchor)
  std::vector<std::uint8_t> same_;
  TransitionRow entry_row_;
  StateIndex<9> region_index_;
};

StateId CfgGrammar::RegionBuilder::FindAnchor() {
  if (WideLoop(s_)) return s_;
  // The successors s sends the most bytes to, up to 8 of them, most first.
  const auto targets = g_.SuccessorsByBytes(s_);
  for (std::size_t k = 0; k < targets.size() && k < 8; ++k) {
    if (WideLoop(targets[k].second)) return targets[k].second;
  }
  if (!targets.empty() && !FewBytes(targets[0].second)) {
    // Two bytes before the loop: s's main successor is the body's first character, a state
    // equivalent to the loop's (`minLength: 1`). s then uses the loop's view as a state one
    // byte before it does (ChooseEntryRow).
    const StateId t = targets[0].second;
    const auto next = g_.SuccessorsByBytes(t);
    if (!next.empty() && WideLoop(next[0].second) && Equivalent(t, next[0].second)) {
      return next[0].second;
    }
  }
  // A chain before the loop: s's main successor, then its, ... up to kMaxChain bytes (a string
  // of minLength k beside a pattern or format counts its first k characters in states of their
  // own before the loop). The region then starts at s and holds the chain: s's own view (one
  // pass over the tokens, once per process and table) rather than a walk of the whole trie at
  // each state of the chain (8-11 ms on Llama-3 for `minLength: 3` with `[A-z]+`).
  // Each step of the chain takes a wide set of bytes (a string's characters, ASCII among them): a
  // state before a
  // literal that runs into a string body (a key's opening quote after `{`) is no chain, and its
  // table would be one per grammar with nothing to share.
  StateId x = s_;
  std::vector<std::pair<std::int32_t, StateId>> later;
  for (int i = 0; i < kMaxChain && !FewBytes(x); ++i) {
    const auto& next = i == 0 ? targets : (later = g_.SuccessorsByBytes(x));  // (s's: above)
    if (next.empty() || -next[0].first < kWideLoop) break;
    const StateId t = next[0].second;
    if (t == s_ || !Plain(t)) break;
    // (Whole characters: some ASCII byte goes there. A UTF-8 continuation state's main
    // successor is the next continuation or the loop itself; such states are walked, cheaply.)
    bool ascii = false;
    for (int b = 0x20; b < 0x80 && !ascii; ++b) ascii = p_.Step(x, static_cast<std::uint8_t>(b)) == t;
    if (!ascii) break;
    if (WideLoop(t)) {
      chain_start_ = i > 0;
      return chain_start_ ? t : CfgProgram::kDead;
    }
    x = t;
  }
  return CfgProgram::kDead;
}

void CfgGrammar::RegionBuilder::ExploreLoop() {
  auto insert = [&](StateId t) {
    explored_index_.Insert(t, static_cast<std::int16_t>(explored_.size()));
    explored_.push_back(t);
  };
  const std::int32_t nc = p_.num_classes;
  // Forward from the anchor through plain states (bounded), keeping the edges.
  std::vector<std::pair<std::int16_t, std::int16_t>> edges;  // (to, from), distinct
  edges.reserve(256);
  std::array<std::int16_t, kMaxExplored> last_from;
  last_from.fill(-1);
  insert(anchor_);
  // (A chain start: explored from s too, so that the chain's states, which lead to the anchor,
  // are the region's.)
  if (chain_start_ && s_ != anchor_) insert(s_);
  for (std::size_t k = 0; k < explored_.size(); ++k) {
    const TransitionRow row = Row(explored_[k]);
    StateId last = CfgProgram::kDead;  // the previous class's target, already recorded
    for (std::int32_t c = 0; c < nc; ++c) {
      const StateId t = row[c];
      if (t == last) continue;
      last = t;
      if (t == CfgProgram::kDead || !Plain(t)) continue;
      std::int32_t f = explored_index_.Find(t);
      if (f < 0) {
        if (explored_.size() == kMaxExplored) continue;
        insert(t);
        f = static_cast<std::int32_t>(explored_.size()) - 1;
      }
      if (last_from[f] == static_cast<std::int16_t>(k)) continue;
      last_from[f] = static_cast<std::int16_t>(k);
      edges.push_back({static_cast<std::int16_t>(f), static_cast<std::int16_t>(k)});
    }
  }
  // Those that lead back to the anchor: a backward search over the kept edges.
  std::sort(edges.begin(), edges.end());
  const std::size_t n = explored_.size();
  back_.assign(n, 0);
  // Marks in `mark` the states reached from `start` over `es`: the edges (to, from) sorted by
  // `to` (a backward search) or their reverses (a forward one), through states `allowed` only
  // (null: any).
  std::vector<std::int16_t> todo;
  auto reach = [&](std::int16_t start, const std::vector<std::pair<std::int16_t, std::int16_t>>& es,
                   std::vector<std::uint8_t>& mark, const std::vector<std::uint8_t>* allowed) {
    mark[start] = 1;
    todo.assign(1, start);
    while (!todo.empty()) {
      const std::int16_t v = todo.back();
      todo.pop_back();
      auto e = std::lower_bound(es.begin(), es.end(), std::make_pair(v, std::int16_t{-1}));
      for (; e != es.end() && e->first == v; ++e) {
        if (!mark[e->second] && (allowed == nullptr || (*allowed)[e->second])) {
          mark[e->second] = 1;
          todo.push_back(e->second);
        }
      }
    }
  };
  reach(0, edges, back_, nullptr);
  // A wide loop one byte after the region joins it with the states of its own cycle: the rest
  // of a search pattern once it has matched (`"pattern": "[a-z]"` is `.*[a-z].*`: after the
  // first letter, any string). Left out, the tokens running into it left the view, most of the
  // vocabulary there, so the view was unusable and each such state's position walked the whole
  // trie (2-7 ms on Llama-3). Only while the region stays within kMaxRegion states.
  std::vector<std::pair<std::int16_t, std::int16_t>> forward;
  std::size_t size = static_cast<std::size_t>(std::count(back_.begin(), back_.end(), 1));
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [to, from] : edges) {
      if (!back_[from] || back_[to] || !WideLoop(explored_[to])) continue;
      if (forward.empty()) {
        for (const auto& [t, f] : edges) forward.push_back({f, t});
        std::sort(forward.begin(), forward.end());
      }
      std::vector<std::uint8_t> ahead(n, 0), cycle(n, 0);
      reach(to, forward, ahead, nullptr);
      reach(to, edges, cycle, &ahead);
      const std::size_t added = static_cast<std::size_t>(std::count(cycle.begin(), cycle.end(), 1));
      if (size + added + 1 > kMaxRegion) continue;
      for (std::size_t k = 0; k < n; ++k) back_[k] |= cycle[k];
      size += added;
      grew = true;
      break;
    }
  }
}

// Region state 0 is s at the token's first byte, with only its transitions into the loop: a
// first byte that leaves the region (a digit where a value may also be a number) is walked by
// the caller in the trie directly (first_exits), so the table does not depend on what else s
// allows. A state before the loop that goes where the anchor goes on every byte it sends into
// the loop (a key that is not one of the declared names, some letters into: any other string
// byte goes on as in the string body) takes the anchor's row: its first bytes that differ
// (`removed`: the letters that continue a declared name) are taken out of the view's results
// and walked directly, and the view is the string body's own.
void CfgGrammar::RegionBuilder::ChooseEntryRow(bool force) {
  const std::int32_t nc = p_.num_classes;
  const TransitionRow srow = Row(s_);
  const TransitionRow arow = Row(anchor_);
  // Per class: s goes where the anchor goes, or (s before the loop) to a state equivalent to
  // the anchor's.
  as_anchor_ = s_ != anchor_ && (force || !InLoop(s_));
  same_.assign(nc, 0);
  for (std::int32_t c = 0; c < nc; ++c) {
    same_[c] = srow[c] == arow[c] ||
               (as_anchor_ && srow[c] != CfgProgram::kDead && arow[c] != CfgProgram::kDead &&
                !InLoop(srow[c]) && InLoop(arow[c]) && Equivalent(srow[c], arow[c]));
  }
  for (std::int32_t c = 0; c < nc && as_anchor_ && !force; ++c) {
    const StateId t = srow[c];
    if (t != CfgProgram::kDead && Plain(t) && InLoop(t) && !same_[c]) as_anchor_ = false;
  }
  entry_row_ = as_anchor_ ? arow : srow;
}

// The loop's states follow s, numbered breadth-first in byte order (each class at its first
// byte): canonical. (s is among them too when it is on the loop.) A row's targets are numbered
// as the row is read, so its entries are known then: the table comes in the same pass.
bool CfgGrammar::RegionBuilder::NumberStates(std::vector<StateId>& states,
                                             std::vector<std::int16_t>& runs) {
  runs.clear();
  states.push_back(s_);
  std::array<std::int16_t, 256> by_class;
  for (std::size_t k = 0; k < states.size(); ++k) {
    const TransitionRow row = k == 0 ? entry_row_ : Row(states[k]);
    // (State 0's first bytes that leave the region are walked by the caller.)
    const std::int16_t outside = k == 0 ? TokenTrie::kRegionDead : TokenTrie::kRegionExit;
    StateId last = CfgProgram::kDead - 1;  // (no state)
    std::int16_t entry = 0;
    for (const std::int32_t c : g_.class_order_) {
      const StateId t = row[c];
      if (t != last) {
        last = t;
        if (t == CfgProgram::kDead) {
          entry = TokenTrie::kRegionDead;
        } else if (!Plain(t) || !InLoop(t)) {
          entry = outside;
        } else {
          std::int32_t f = region_index_.Find(t);
          if (f < 0) {
            if (states.size() == kMaxRegion) return false;
            f = static_cast<std::int32_t>(states.size());
            region_index_.Insert(t, static_cast<std::int16_t>(f));
            states.push_back(t);
          }
          entry = static_cast<std::int16_t>(f);
        }
      }
      by_class[c] = entry;
    }
    // The row's runs over the bytes' class runs (a few dozen, where the row is 256 entries).
    std::int16_t run = by_class[g_.class_runs_[0].second];
    std::uint8_t end = 0;
    for (const auto& [run_end, c] : g_.class_runs_) {
      if (by_class[c] != run) {
        runs.push_back(run);
        runs.push_back(end);
        run = by_class[c];
      }
      end = run_end;
    }
    runs.push_back(run);
    runs.push_back(255);
  }
  return true;
}

std::vector<std::int16_t> CfgGrammar::RegionBuilder::Build(
    std::vector<StateId>& states, std::array<std::uint64_t, 4>& first_exits,
    std::array<std::uint64_t, 4>& removed, RegionFollow& follow) {
  states.clear();
  follow = RegionFollow{};
  // Only string bodies and the states one byte before them (an opening quote) pay: a literal
  // that runs into a body gets a table of its own per grammar, with nothing to share.
  if (!Plain(s_)) return {};
  anchor_ = FindAnchor();
  if (anchor_ == CfgProgram::kDead) return {};
  // The region is s and the anchor's loop (a string body with its escapes and UTF-8
  // continuations). What follows the loop (the closing quote, the next key's literal) is left
  // out, so that every grammar's string body has the same table; tokens that leave are walked
  // on from where they leave. A loop met before from the same anchor is the grammar's
  // (AnchorRegion; not for a chain, whose loop holds s's chain too).
  const std::shared_ptr<const AnchorRegion> known =
      chain_start_ ? nullptr : g_.FindAnchorRegion(anchor_);
  if (known != nullptr) {
    explored_ = known->loop;
    for (std::size_t k = 0; k < explored_.size(); ++k) {
      explored_index_.Insert(explored_[k], static_cast<std::int16_t>(k));
    }
    back_.assign(explored_.size(), 1);
  } else {
    ExploreLoop();
  }
  first_exits.fill(0);
  removed.fill(0);
  ChooseEntryRow(/*force=*/false);
  std::vector<std::int16_t> table;
  // The region entered by the anchor's row (entry_row_): the same for every s.
  auto by_anchor_row = [&]() -> bool {
    if (known != nullptr) {
      states.assign(1, s_);
      states.insert(states.end(), known->numbered.begin(), known->numbered.end());
      for (std::size_t k = 1; k < states.size(); ++k) {
        region_index_.Insert(states[k], static_cast<std::int16_t>(k));
      }
      table = known->key->runs;
      interned = known->key;
      return true;
    }
    if (!NumberStates(states, table)) return false;
    if (!chain_start_) {
      std::vector<StateId> loop;
      for (std::size_t k = 0; k < explored_.size(); ++k) {
        if (back_[k]) loop.push_back(explored_[k]);
      }
      interned =
          g_.KeepAnchorRegion(anchor_, std::move(loop), {states.begin() + 1, states.end()}, table);
    }
    return true;
  };
  if (as_anchor_ || s_ == anchor_) {
    if (!by_anchor_row()) return {};
  } else {
    if (!NumberStates(states, table)) return {};
    if (!chain_start_ && g_.trie_->BuiltRegionOfRuns(table) == nullptr) {
      // A state of the loop other than the anchor (a pattern's count of hex digits, where any
      // other byte goes back to the anchor), or a state before it that enters it elsewhere,
      // whose own view is not built: the anchor's view (built once, shared by every such
      // state), s's differences followed beside it, rather than a view of its own (a pass over
      // every token, about 1 ms, for each state of the loop a fill meets).
      region_index_ = StateIndex<9>();
      states.clear();
      ChooseEntryRow(/*force=*/true);
      if (!by_anchor_row()) return {};
    }
  }
  const TransitionRow srow = Row(s_);
  const TransitionRow arow = Row(anchor_);
  // Per class, then per byte.
  enum : std::uint8_t { kViewed = 1, kFollowed = 2, kFirstExit = 4, kRemoved = 8 };
  std::array<std::uint8_t, 256> class_flags;
  for (std::int32_t c = 0; c < p_.num_classes; ++c) {
    const StateId t = srow[c];
    const bool into = as_anchor_ && RegionTarget(arow[c]);
    // The view has a result for c (its entry row goes into the region) that holds for s.
    const bool viewed = into && same_[c];
    const bool differs = into && !same_[c];
    std::uint8_t f = RegionTarget(entry_row_[c]) ? kViewed : 0;
    // Where s differs from the anchor on a first byte but goes to a plain state (a key that is
    // not one of the declared names, after `n` when `name` is declared), the caller follows
    // s's path beside the view's (FollowBesideView).
    if (differs && t != CfgProgram::kDead && Plain(t) && p_.sp_begin[t] == p_.sp_begin[t + 1]) {
      f |= kFollowed;
    } else {
      if (t != CfgProgram::kDead && !RegionTarget(t) && !viewed) f |= kFirstExit;
      if (differs) f |= kRemoved;
    }
    class_flags[c] = f;
  }
  for (int b = 0; b < 256; ++b) {
    const std::uint8_t f = class_flags[p_.byte_class[b]];
    if (f == 0) continue;
    const std::uint64_t bit = std::uint64_t{1} << (b & 63);
    if (f & kViewed) follow.viewed[b >> 6] |= bit;
    if (f & kFollowed) follow.bytes[b >> 6] |= bit;
    if (f & kFirstExit) first_exits[b >> 6] |= bit;
    if (f & kRemoved) removed[b >> 6] |= bit;
  }
  follow.anchor = anchor_;
  return table;
}

std::shared_ptr<const CfgGrammar::AnchorRegion> CfgGrammar::FindAnchorRegion(StateId anchor) const {
  std::lock_guard<std::mutex> lock(anchor_mu_);
  auto f = anchor_regions_.find(anchor);
  return f == anchor_regions_.end() ? nullptr : f->second;
}

std::shared_ptr<const CfgGrammar::RegionKey> CfgGrammar::KeepAnchorRegion(
    StateId anchor, std::vector<StateId> loop, std::vector<StateId> numbered,
    const std::vector<std::int16_t>& runs) const {
  std::lock_guard<std::mutex> lock(anchor_mu_);
  if (auto f = anchor_regions_.find(anchor); f != anchor_regions_.end()) {
    return f->second->key;  // (another thread's, the same)
  }
  auto kept = std::make_shared<AnchorRegion>();
  std::int64_t bytes =
      64 + static_cast<std::int64_t>((loop.size() + numbered.size()) * sizeof(StateId));
  if (auto k = region_keys_.find(runs); k != region_keys_.end()) {
    kept->key = k->second;  // (a grammar has a few kinds of string body)
  } else {
    bytes += 64 + static_cast<std::int64_t>(2 * runs.size() * sizeof(std::int16_t));
  }
  if (anchor_region_bytes_ + bytes > kAnchorRegionBytes) return nullptr;
  if (kept->key == nullptr) {
    auto k = std::make_shared<RegionKey>();
    k->runs = runs;
    kept->key = k;
    region_keys_.emplace(runs, kept->key);
  }
  kept->loop = std::move(loop);
  kept->numbered = std::move(numbered);
  anchor_region_bytes_ += bytes;
  std::shared_ptr<const RegionKey> interned = kept->key;
  anchor_regions_.emplace(anchor, std::move(kept));
  return interned;
}

std::vector<std::int16_t> CfgGrammar::RegionRuns(StateId s, std::vector<StateId>& states,
                                                 std::array<std::uint64_t, 4>& first_exits,
                                                 std::array<std::uint64_t, 4>& removed,
                                                 RegionFollow& follow,
                                                 std::shared_ptr<const RegionKey>* interned) const {
  RegionBuilder builder(*this, s);
  std::vector<std::int16_t> table = builder.Build(states, first_exits, removed, follow);
  if (interned != nullptr) *interned = table.empty() ? nullptr : std::move(builder.interned);
  return table;
}

std::vector<std::int16_t> CfgGrammar::RegionPlan(StateId s, std::vector<StateId>& states,
                                                 std::array<std::uint64_t, 4>& first_exits,
                                                 std::array<std::uint64_t, 4>& removed,
                                                 std::vector<ViewLeaf>& leaves,
                                                 std::shared_ptr<const RegionKey>* interned) const {
  leaves.clear();
  RegionFollow follow;
  std::vector<std::int16_t> table = RegionRuns(s, states, first_exits, removed, follow, interned);
  if (table.empty()) return table;
  if ((follow.bytes[0] | follow.bytes[1] | follow.bytes[2] | follow.bytes[3]) != 0) {
    FollowBesideView(s, follow, states, removed, leaves);
  }
  if ((removed[0] | removed[1] | removed[2] | removed[3]) != 0) {
    // The view's results for the removed first bytes are taken out token by token: where they
    // hold more tokens than the first bytes whose results it keeps, walking s's own first
    // bytes in the trie costs less.
    std::array<std::uint64_t, 4> kept;
    for (int w = 0; w < 4; ++w) kept[w] = follow.viewed[w] & ~removed[w];
    if (TokensStartingWith(removed) > TokensStartingWith(kept)) {
      states.clear();
      leaves.clear();
      if (interned != nullptr) interned->reset();
      return {};
    }
  }
  return table;
}

void CfgGrammar::FollowBesideView(StateId s, const RegionFollow& follow,
                                  std::span<const StateId> states,
                                  std::array<std::uint64_t, 4>& removed,
                                  std::vector<ViewLeaf>& leaves) const {
  const CfgProgram& p = program_;
  StateIndex<9> region;  // the view's states (0 is s itself, entering by the anchor's row)
  for (std::size_t k = 1; k < states.size(); ++k) {
    region.Insert(states[k], static_cast<std::int16_t>(k));
  }
  auto in_region = [&](StateId t) {
    return t != CfgProgram::kDead && PlainState(t) && region.Find(t) >= 0;
  };
  auto plain = [&](StateId t) {
    return t != CfgProgram::kDead && PlainState(t) && p.sp_begin[t] == p.sp_begin[t + 1];
  };
  std::vector<std::pair<std::uint64_t, bool>> answered;
  std::int64_t work = 0;
  auto equivalent = [&](StateId x, StateId y) {
    const std::uint64_t key = (static_cast<std::uint64_t>(static_cast<std::uint32_t>(x)) << 32) |
                              static_cast<std::uint32_t>(y);
    for (const auto& [k, eq] : answered) {
      if (k == key) return eq;
    }
    const bool eq = EquivalentPlainStates(x, y, work);
    answered.emplace_back(key, eq);
    return eq;
  };
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const TransitionRow srow = p.Row(s);
  const TransitionRow arow = p.Row(follow.anchor);
  struct Frame {
    std::uint32_t node;
    StateId x, y;  // s's state at the node, and the view's
  };
  std::vector<Frame> stack;
  // Per frame, the verdict for each class (a row has few: the name's next letter, the string
  // body, an escape, the quote), asked once.
  std::vector<std::int8_t> verdict(static_cast<std::size_t>(p.num_classes));
  std::int32_t steps = 0;
  for (const std::uint32_t root : trie_->Children(TokenTrie::kRoot)) {
    const std::uint8_t b = nodes[root].byte;
    if (((follow.bytes[b >> 6] >> (b & 63)) & 1) == 0) continue;
    const std::int32_t c = p.byte_class[b];
    const std::size_t first_leaf = leaves.size();
    bool ok = steps < kFollowSteps;
    stack.assign(1, {root, srow[c], arow[c]});
    while (!stack.empty() && ok) {
      const Frame f = stack.back();
      stack.pop_back();
      const TransitionRow rx = p.Row(f.x);
      const TransitionRow ry = p.Row(f.y);
      std::fill(verdict.begin(), verdict.end(), -1);
      for (const std::uint32_t kid : trie_->Children(f.node)) {
        if (++steps > kFollowSteps) {
          ok = false;
          break;
        }
        const std::int32_t k = p.byte_class[nodes[kid].byte];
        const StateId x = rx[k], y = ry[k];
        if (x == y) continue;  // (dead both ways, or the view goes on from where s does)
        std::int8_t& v = verdict[static_cast<std::size_t>(k)];
        if (v < 0) {
          // 0: s's path joins the view's (states with the same future); 1: on together; 2: a
          // leaf.
          v = in_region(y) && x != CfgProgram::kDead && equivalent(x, y) ? 0
              : in_region(y) && plain(x)                                  ? 1
                                                                          : 2;
        }
        if (v == 1) {
          stack.push_back({kid, x, y});
        } else if (v == 2) {
          leaves.push_back({kid, f.x, static_cast<std::int32_t>(nodes[f.node].depth)});
          if (leaves.size() - first_leaf > static_cast<std::size_t>(kFollowLeaves)) ok = false;
        }
        if (!ok) break;
      }
    }
    if (!ok) {
      // Taken out whole and walked from s, as without following.
      leaves.resize(first_leaf);
      removed[b >> 6] |= std::uint64_t{1} << (b & 63);
    }
  }
}

std::size_t CfgGrammar::TokensStartingWith(const std::array<std::uint64_t, 4>& bytes) const {
  const std::span<const TokenTrie::Node> nodes = trie_->nodes();
  const std::uint32_t none = static_cast<std::uint32_t>(trie_->num_nodes());
  std::size_t n = 0;
  for (std::uint32_t c = trie_->NextChild(TokenTrie::kRoot, bytes.data(), -1, none); c != none;
       c = trie_->NextChild(TokenTrie::kRoot, bytes.data(), nodes[c].byte, none)) {
    n += nodes[nodes[c].subtree_end].token_begin - nodes[c].token_begin;
  }
  return n;
}

int CfgGrammar::RegionUseOfState(StateId s) const {
  std::vector<StateId> states;
  std::array<std::uint64_t, 4> first_exits, removed;
  std::vector<ViewLeaf> leaves;
  const std::vector<std::int16_t> runs = RegionPlan(s, states, first_exits, removed, leaves);
  if (runs.empty() || trie_->RegionOfRuns(runs) == nullptr) return 0;
  RegionFollow follow;
  std::array<std::uint64_t, 4> exits_again, removed_again;
  RegionRuns(s, states, exits_again, removed_again, follow);
  const bool followed = (follow.bytes[0] | follow.bytes[1] | follow.bytes[2] | follow.bytes[3]) != 0;
  return (removed[0] | removed[1] | removed[2] | removed[3]) != 0 || followed ? 2 : 1;
}

const TokenTrie::CountedView* CfgGrammar::MakeCountedView(std::int32_t rule) const {
  constexpr std::size_t kMaxUnitStates = 64;
  const CfgProgram& p = program_;
  const std::int32_t child = p.rules[rule].child;
  if (p.rules[child].kind != CfgProgram::RuleKind::kDfa || p.rules[child].nullable) return nullptr;
  // The unit's states from its start, numbered in the order met (the same unit in two grammars
  // gives the same table).
  std::vector<StateId> states{p.rules[child].start};
  std::vector<std::int16_t> table;
  std::vector<std::int16_t> finished;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const StateId q = states[i];
    if (p.nt_begin[q] != p.nt_begin[q + 1] || p.sp_begin[q] != p.sp_begin[q + 1]) return nullptr;
    const bool fin = p.accepting[q] != 0;
    if (fin && i == 0) return nullptr;
    finished.push_back(fin ? 1 : 0);
    const std::size_t row = table.size();
    table.resize(row + 256, TokenTrie::kRegionDead);
    for (int b = 0; b < 256; ++b) {
      const StateId t = p.Step(q, static_cast<std::uint8_t>(b));
      if (t == CfgProgram::kDead) continue;
      if (fin) return nullptr;  // the unit could go on after finishing
      auto at = std::find(states.begin(), states.end(), t);
      if (at == states.end()) {
        if (states.size() >= kMaxUnitStates) return nullptr;
        states.push_back(t);
        at = states.end() - 1;
      }
      table[row + b] = static_cast<std::int16_t>(at - states.begin());
    }
  }
  // A byte a unit starts with must not also follow the counter.
  for (int b = 0; b < 256; ++b) {
    if (table[b] != TokenTrie::kRegionDead && follow_[rule][b]) return nullptr;
  }
  table.insert(table.end(), finished.begin(), finished.end());
  return trie_->Counted(table);
}

void CfgGrammar::PositionFromCounted(const TokenTrie::CountedView& view, const EarleyItem& item,
                                     WalkScratch& out) const {
  // What the walk finds, without it: a token ending inside needs room for its units; one
  // leaving between units is a tail where the counter may finish there, its first byte one that
  // can follow the counter.
  const CfgProgram::RuleInfo& r = program_.rules[item.rule];
  const std::int64_t to_min = std::max<std::int64_t>(r.min - item.state, 0);
  const std::int64_t room = r.max == CfgProgram::kUnbounded
                                ? std::numeric_limits<std::int64_t>::max()
                                : static_cast<std::int64_t>(r.max) - item.state;
  // The tokens ending inside that need more than `room` units are the first `cut` of by_need
  // (every inside token, the most units first). Near the bound that is most of them: then the
  // few that fit are set one by one (out.bits is empty here) instead of clearing the others.
  const std::size_t n = view.by_need.size();
  const std::size_t cut = static_cast<std::size_t>(
      std::partition_point(view.need.begin(), view.need.end(),
                           [room](std::uint16_t need) { return need > room; }) -
      view.need.begin());
  const std::size_t words = std::min(view.inside_bits.size(), out.bits.size());
  if (cut <= n - cut) {
    OrWords(out.bits.data(), view.inside_bits.data(), words);
    for (std::size_t i = 0; i < cut; ++i) {
      const TokenId t = view.by_need[i];
      out.bits[static_cast<std::size_t>(t) >> 5] &= ~(1u << (t & 31));
    }
  } else {
    for (std::size_t i = cut; i < n; ++i) {
      const TokenId t = view.by_need[i];
      if (static_cast<std::size_t>(t) >> 5 < words) {
        out.bits[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
      }
    }
  }
  out.accepted = static_cast<std::int32_t>(n - cut);
  const std::array<bool, 256>& follow = follow_[item.rule];
  auto e = std::lower_bound(view.exits.begin(), view.exits.end(), to_min,
                            [](const TokenTrie::CountedView::Exit& x, std::int64_t k) {
                              return x.units < k;
                            });
  for (; e != view.exits.end() && e->units <= room; ++e) {
    if (follow[e->byte]) out.unc.emplace_back(vocab_->TokenBytes(e->id).substr(e->offset), e->id);
  }
}

std::int32_t CfgGrammar::ComposableCall(StateId s) const {
  const CfgProgram& p = program_;
  if (p.has_bytes[s] || p.accepting[s] || null_state_[s] || p.sp_begin[s] != p.sp_begin[s + 1] ||
      p.nt_begin[s + 1] - p.nt_begin[s] != 1 || repeat_of_[s] >= 0) {
    return -1;
  }
  const auto [callee, after] = p.nt_edges[p.nt_begin[s]];
  if (callee == p.state_rule[s] || (p.rules[callee].nullable && after == s)) return -1;
  return callee;
}

std::unique_ptr<CfgPosition> CfgGrammar::ComputePosition(const EarleyItem& item, bool regions) const {
  const bool counter = program_.IsCounter(item.rule);
  // A state whose only way on is one call (a member's value: `"id":` then an integer rule, an
  // object rule): its position is the callee's start position (computed once, shared by every
  // call site and grammar) plus the callee's tails walked on from the state after the call.
  // A token either stays inside the callee (accepted there, so here too) or leaves it at a
  // split where the callee may finish on a byte that can follow it, which is exactly a tail of
  // the callee's position: walking the tails' tries from the return state replaces a walk of
  // the whole trie through the call. Nested calls compose the same way, a few levels deep.
  // A callee that may match nothing (a string of `maxLength` only, an array of `maxItems`: a
  // counter from 0) adds the tokens that skip it: the return state's own position.
  const CfgPosition* callee_pos = nullptr;
  const CfgPosition* skip_pos = nullptr;
  StateId return_state = CfgProgram::kDead;
  thread_local std::int32_t compose_depth = 0;
  if (!counter && regions && compose_depth < kMaxComposeDepth) {
    if (const std::int32_t callee = ComposableCall(item.state); callee >= 0) {
      return_state = program_.nt_edges[program_.nt_begin[item.state]].second;
      ++compose_depth;
      callee_pos = PositionFor(
          {callee, program_.IsCounter(callee) ? 0 : program_.rules[callee].start, 0, 0});
      if (callee_pos != nullptr && program_.rules[callee].nullable) {
        skip_pos = PositionFor({item.rule, return_state, 0, 0});
        if (skip_pos == nullptr) callee_pos = nullptr;
      }
      --compose_depth;
    }
  }
  thread_local WalkScratch scratch;
  const std::size_t words = PaddedBitmaskWords(width_);
  scratch.Begin(&program_, serial_, words, kMaxListedIds);
  if (callee_pos != nullptr &&
      ComposeFromCallee(*callee_pos, skip_pos, item, return_state, scratch)) {
    ++CurrentFillTrace().positions_walked;
    return PositionFromScratch(scratch);
  }
  if (callee_pos != nullptr) scratch.Begin(&program_, serial_, words, kMaxListedIds);
  std::vector<StateId> region_states;
  std::vector<std::int16_t> table;
  std::array<std::uint64_t, 4> first_exits, removed;
  std::vector<ViewLeaf> leaves;
  std::shared_ptr<const RegionKey> interned;
  if (!counter && regions) {
    table = RegionPlan(item.state, region_states, first_exits, removed, leaves, &interned);
  }
  FillTrace& trace = CurrentFillTrace();
  bool built = false;
  // (`table` is in run form. An interned one keeps its view, not looked up again.)
  const TokenTrie::RegionView* view =
      interned != nullptr ? interned->view.load(std::memory_order_acquire) : nullptr;
  if (view == nullptr && !table.empty()) {
    view = trie_->RegionOfRuns(table, &built);
    if (view != nullptr && interned != nullptr) {
      interned->view.store(view, std::memory_order_release);
    }
  }
  const TokenTrie::CountedView* counted =
      counter && regions ? counted_views_[item.rule] : nullptr;
  ++trace.positions_walked;
  trace.regions_built += built;
  trace.region_walks += view != nullptr || counted != nullptr;
  if (counted != nullptr) PositionFromCounted(*counted, item, scratch);
  for (; counted == nullptr;) {
    if (view != nullptr) {
      // Tokens inside the region: shared; tokens leaving it: walked from where they leave (no
      // split before: region states cannot finish the rule).
      OrWords(scratch.bits.data(), view->inside_bits.data(),
              std::min(view->inside_bits.size(), words));
      scratch.accepted = view->inside_count;
      for (const auto& g : view->groups) {
        WalkTrie(view->nodes, g.begin, g.end, view->tokens.data(), view->offsets.data(), item,
                 region_states[g.q], scratch);
        if (scratch.stack.failed) break;
      }
      const std::span<const TokenTrie::Node> nodes = trie_->nodes();
      const std::uint32_t none = static_cast<std::uint32_t>(trie_->num_nodes());
      // The view's results for first bytes on which the state differs from the anchor whose
      // row the view starts with, and for the tokens under the leaves where the state's path
      // and the view's part below the first bytes followed: out (their tokens are walked below).
      const TokenId* toks = trie_->tokens().data();
      thread_local std::vector<TokenId> leaf_tokens;
      leaf_tokens.clear();
      auto take_out = [&](std::uint32_t node) {
        for (std::uint32_t j = nodes[node].token_begin;
             j < nodes[nodes[node].subtree_end].token_begin; ++j) {
          std::uint32_t& w = scratch.bits[static_cast<std::size_t>(toks[j]) >> 5];
          const std::uint32_t bit = 1u << (toks[j] & 31);
          if (w & bit) {
            w &= ~bit;
            --scratch.accepted;
          }
        }
      };
      for (const ViewLeaf& leaf : leaves) {
        take_out(leaf.node);
        const std::span<const TokenId> under = trie_->TokensUnder(leaf.node);
        leaf_tokens.insert(leaf_tokens.end(), under.begin(), under.end());
      }
      const bool any_removed = (removed[0] | removed[1] | removed[2] | removed[3]) != 0;
      if (!scratch.stack.failed && (any_removed || !leaf_tokens.empty())) {
        std::sort(leaf_tokens.begin(), leaf_tokens.end());
        auto gone = [&](TokenId t) {
          const std::uint8_t b = static_cast<std::uint8_t>(vocab_->TokenBytes(t)[0]);
          return ((removed[b >> 6] >> (b & 63)) & 1) != 0 ||
                 std::binary_search(leaf_tokens.begin(), leaf_tokens.end(), t);
        };
        for (std::uint32_t c = trie_->NextChild(TokenTrie::kRoot, removed.data(), -1, none);
             c != none; c = trie_->NextChild(TokenTrie::kRoot, removed.data(), nodes[c].byte, none)) {
          take_out(c);
        }
        std::erase_if(scratch.ids, gone);
        std::erase_if(scratch.unc, [&](const auto& u) { return gone(u.second); });
      }
      // The leaves' subtrees, each from the state at its parent.
      for (std::size_t k = 0; k < leaves.size() && !scratch.stack.failed; ++k) {
        const ViewLeaf& leaf = leaves[k];
        WalkTrie(nodes, leaf.node, nodes[leaf.node].subtree_end, toks, nullptr, item, leaf.from,
                 scratch, leaf.depth);
      }
      // First bytes that leave the region, or were taken out: their subtrees of the trie, from
      // the state itself.
      for (int w = 0; w < 4; ++w) first_exits[w] |= removed[w];
      for (std::uint32_t c = trie_->NextChild(TokenTrie::kRoot, first_exits.data(), -1, none);
           c != none && !scratch.stack.failed;
           c = trie_->NextChild(TokenTrie::kRoot, first_exits.data(), nodes[c].byte, none)) {
        WalkTrie(nodes, c, nodes[c].subtree_end, trie_->tokens().data(), nullptr, item, item.state,
                 scratch);
      }
    } else {
      WalkTrie(trie_->nodes(), 0, static_cast<std::uint32_t>(trie_->num_nodes()),
               trie_->tokens().data(), nullptr, item, item.state, scratch);
    }
    if (!scratch.stack.failed) break;
    // The stack walk gave up (left recursion, ambiguity): again with the Earley parser.
    scratch.Begin(&program_, serial_, words, kMaxListedIds);
    scratch.use_parser = true;
    ++trace.parser_walks;
  }
  return PositionFromScratch(scratch);
}

bool CfgGrammar::ComposeFromCallee(const CfgPosition& callee, const CfgPosition* skip,
                                   const EarleyItem& item, StateId return_state,
                                   WalkScratch& scratch) const {
  const std::size_t words = PaddedBitmaskWords(width_);
  // The callee's tails are a trie of the walker's own node type, read in place: a token's tail
  // is its last `depth` bytes, depth that of the node it ends at (copying the nodes and
  // computing each token's offset took 50-200 us for the 4,400 tails of a value rule, four
  // times the walk itself).
  const std::span<const TokenTrie::Node> nodes = callee.tails;
  if (nodes.size() > 1) {
    WalkTrie(nodes, 0, static_cast<std::uint32_t>(nodes.size() - 1), callee.tail_tokens.data(),
             nullptr, item, return_state, scratch, /*start_depth=*/0, /*offsets_from_depths=*/true);
    if (scratch.stack.failed) return false;
    if (null_state_[return_state]) {
      // This rule may finish right where the callee does: each callee tail is a tail here too
      // (the walk above records only the splits after a byte of its own).
      const std::array<bool, 256>& follow = follow_[item.rule];
      for (std::size_t i = 0; i + 1 < nodes.size(); ++i) {
        for (std::uint32_t j = nodes[i].token_begin; j < nodes[i + 1].token_begin; ++j) {
          const TokenId t = callee.tail_tokens[j];
          const std::string_view bytes = vocab_->TokenBytes(t);
          const std::string_view rest = bytes.substr(bytes.size() - nodes[i].depth);
          if (follow[static_cast<std::uint8_t>(rest[0])]) scratch.unc.emplace_back(rest, t);
        }
      }
    }
  }
  // The tokens that stay inside the callee; then each token once: a token accepted either way
  // is accepted, with no tails (a walk of the whole trie would give it none).
  std::vector<std::uint32_t>& bits = scratch.bits;
  auto accept_all_of = [&](const CfgPosition& p) {
    if (!p.accepted_bits.empty()) {
      OrWords(bits.data(), p.accepted_bits.data(), std::min(p.accepted_bits.size(), words));
    }
    for (const TokenId t : p.accepted_list) bits[static_cast<std::size_t>(t) >> 5] |= 1u << (t & 31);
  };
  accept_all_of(callee);
  if (skip != nullptr) {
    // The tokens that skip the callee: the return state's position, its tails as they are.
    accept_all_of(*skip);
    for (std::size_t i = 0; i + 1 < skip->tails.size(); ++i) {
      const CfgPosition::TailNode& n = skip->tails[i];
      for (std::uint32_t j = n.token_begin; j < skip->tails[i + 1].token_begin; ++j) {
        const TokenId t = skip->tail_tokens[j];
        const std::string_view bytes = vocab_->TokenBytes(t);
        scratch.unc.emplace_back(bytes.substr(bytes.size() - n.depth), t);
      }
    }
  }
  scratch.accepted = static_cast<std::int32_t>(cfg_words::CountOnes(bits.data(), words));
  scratch.ids.clear();  // (the finished position lists its tokens from the bits)
  std::erase_if(scratch.unc, [&](const std::pair<std::string_view, TokenId>& u) {
    return (bits[static_cast<std::size_t>(u.second) >> 5] >> (u.second & 31)) & 1;
  });
  return true;
}

std::unique_ptr<CfgPosition> CfgGrammar::PositionFromScratch(WalkScratch& scratch) const {
  const std::size_t words = PaddedBitmaskWords(width_);
  auto pos = std::make_unique<CfgPosition>();
  std::vector<std::uint32_t>& bits = scratch.bits;
  std::vector<std::pair<std::string_view, TokenId>>& unc = scratch.unc;
  const std::int32_t accepted = scratch.accepted;
  pos->num_accepted = accepted;
  if (static_cast<std::size_t>(accepted) < words) {
    if (scratch.ids.size() == static_cast<std::size_t>(accepted)) {
      pos->accepted_list = scratch.ids;  // walk order; sorted below
      std::sort(pos->accepted_list.begin(), pos->accepted_list.end());
      pos->accepted_list.erase(std::unique(pos->accepted_list.begin(), pos->accepted_list.end()),
                               pos->accepted_list.end());
      if (pos->accepted_list.size() == static_cast<std::size_t>(accepted)) {
        // (The ids are every bit set: clearing their words leaves the scratch clean.)
        for (TokenId t : pos->accepted_list) bits[static_cast<std::size_t>(t) >> 5] = 0;
        scratch.bits_clean = true;
      }
    } else {
      // Fewer ids than words: most words are zero, skipped eight at a time.
      pos->accepted_list.reserve(static_cast<std::size_t>(accepted));
      const std::uint32_t* w0 = bits.data();
      for (std::size_t w = cfg_words::SkipWords(w0, 0, words, 0); w < words;) {
        for (const std::size_t e = std::min(w + 8, words); w < e; ++w) {
          for (std::uint32_t x = w0[w]; x != 0; x &= x - 1) {
            pos->accepted_list.push_back(static_cast<TokenId>(w * 32 + std::countr_zero(x)));
          }
        }
        if (w < words) w = cfg_words::SkipWords(w0, w, words, 0);
      }
    }
  } else {
    pos->accepted_bits = bits;
  }
  scratch.tail_tries.Build(unc, *pos);
  pos->accepted_bits.shrink_to_fit();
  pos->accepted_list.shrink_to_fit();
  pos->tails.shrink_to_fit();
  pos->tail_tokens.shrink_to_fit();
  return pos;
}

}  // namespace lockstep
