// MinimizeDfa: SubsetDfa -> the canonical ByteDfa (trimmed, minimal, renumbered, coarsest byte
// classes). Minimisation is Hopcroft's partition refinement over predecessor lists, so large
// DFAs (long counted repetitions) stay O(k n log n).
#include <algorithm>
#include <utility>

#include "automata/regex/dfa_builder.h"

namespace lockstep {
namespace {

// Hopcroft's algorithm on a complete DFA; returns the block of every state.
std::vector<std::int32_t> HopcroftBlocks(std::int32_t n, std::int32_t k,
                                         const std::vector<StateId>& next,
                                         const std::vector<std::uint8_t>& accepting) {
  // Predecessors of (t, c) in CSR form, by class then state (a splitter (B, c) reads the lists of
  // B's states for one class: n entries apart, not n * k). Edges into the dead state 0 (most of
  // them) are left out: the dead state is a block of its own from the start and is never used
  // as a splitter, which is sound because Hopcroft needs all but one block of the initial
  // partition as splitters.
  std::vector<std::int32_t> inv_begin(static_cast<std::size_t>(n) * k + 1, 0);
  for (std::int32_t s = 0; s < n; ++s) {
    const StateId* row = &next[static_cast<std::size_t>(s) * k];
    for (std::int32_t c = 0; c < k; ++c) {
      if (row[c] != 0) ++inv_begin[static_cast<std::size_t>(c) * n + row[c] + 1];
    }
  }
  for (std::size_t i = 1; i < inv_begin.size(); ++i) inv_begin[i] += inv_begin[i - 1];
  std::vector<std::int32_t> inv(inv_begin.back());
  {
    std::vector<std::int32_t> fill(inv_begin.begin(), inv_begin.end() - 1);
    for (std::int32_t s = 0; s < n; ++s) {
      const StateId* row = &next[static_cast<std::size_t>(s) * k];
      for (std::int32_t c = 0; c < k; ++c) {
        if (row[c] != 0) inv[fill[static_cast<std::size_t>(c) * n + row[c]]++] = s;
      }
    }
  }

  // Per state: the classes on which it has a predecessor (a bit per class). A splitter (B, c)
  // with no c-predecessor in B splits nothing, so a split queues (block, c) only for the classes
  // some state of the block has predecessors on: without this, every split queued all k classes
  // (`email`: a million splitters for 25,000 splits over 43 classes, most of them empty).
  const std::int32_t words = (k + 63) / 64;
  std::vector<std::uint64_t> pred_classes(static_cast<std::size_t>(n) * words, 0);
  for (std::int32_t c = 0; c < k; ++c) {
    for (std::int32_t t = 0; t < n; ++t) {
      const std::size_t key = static_cast<std::size_t>(c) * n + t;
      if (inv_begin[key] != inv_begin[key + 1]) {
        pred_classes[static_cast<std::size_t>(t) * words + (c >> 6)] |= std::uint64_t{1} << (c & 63);
      }
    }
  }

  // Blocks are contiguous runs of `elems`; the marked part of block b is [first[b], mid[b]).
  std::vector<std::int32_t> elems(n);
  std::vector<std::int32_t> loc(n);
  std::vector<std::int32_t> block(n);
  std::vector<std::int32_t> first;
  std::vector<std::int32_t> end;
  std::vector<std::int32_t> mid;
  // Initial partition: {dead}, live non-accepting, accepting (empty blocks are skipped).
  std::int32_t pos = 0;
  for (int group = 0; group < 3; ++group) {
    const std::int32_t b = static_cast<std::int32_t>(first.size());
    const std::int32_t begin = pos;
    for (std::int32_t s = 0; s < n; ++s) {
      const int g = s == 0 ? 0 : (accepting[s] ? 2 : 1);
      if (g != group) continue;
      elems[pos] = s;
      loc[s] = pos++;
      block[s] = b;
    }
    if (pos > begin) {
      first.push_back(begin);
      end.push_back(pos);
      mid.push_back(begin);
    }
  }

  std::vector<std::uint64_t> nb_classes(words), pick_classes(words);
  // The classes of the states elems[from .. to).
  auto classes_of = [&](std::int32_t from, std::int32_t to, std::vector<std::uint64_t>& out) {
    std::fill(out.begin(), out.end(), 0);
    for (std::int32_t i = from; i < to; ++i) {
      const std::uint64_t* m = &pred_classes[static_cast<std::size_t>(elems[i]) * words];
      for (std::int32_t w = 0; w < words; ++w) out[w] |= m[w];
    }
  };
  auto has = [](const std::vector<std::uint64_t>& m, std::int32_t c) {
    return ((m[c >> 6] >> (c & 63)) & 1) != 0;
  };
  std::vector<std::uint8_t> in_work(static_cast<std::size_t>(n) * k, 0);
  std::vector<std::pair<std::int32_t, std::int32_t>> work;
  for (std::int32_t b = 1; b < static_cast<std::int32_t>(first.size()); ++b) {
    for (std::int32_t c = 0; c < k; ++c) {
      work.push_back({b, c});
      in_work[static_cast<std::size_t>(b) * k + c] = 1;
    }
  }
  std::vector<std::int32_t> preds;
  std::vector<std::int32_t> touched;
  while (!work.empty()) {
    auto [splitter, c] = work.back();
    work.pop_back();
    in_work[static_cast<std::size_t>(splitter) * k + c] = 0;
    preds.clear();
    const std::int32_t* by_state = &inv_begin[static_cast<std::size_t>(c) * n];
    for (std::int32_t i = first[splitter]; i < end[splitter]; ++i) {
      const std::int32_t s = elems[i];
      for (std::int32_t e = by_state[s]; e < by_state[s + 1]; ++e) preds.push_back(inv[e]);
    }
    touched.clear();
    for (std::int32_t s : preds) {
      const std::int32_t b = block[s];
      const std::int32_t i = loc[s];
      if (i < mid[b]) continue;  // already marked
      const std::int32_t j = mid[b]++;
      std::swap(elems[i], elems[j]);
      loc[elems[i]] = i;
      loc[elems[j]] = j;
      if (j == first[b]) touched.push_back(b);
    }
    for (std::int32_t b : touched) {
      if (mid[b] == end[b]) {
        mid[b] = first[b];
        continue;
      }
      const std::int32_t nb = static_cast<std::int32_t>(first.size());
      first.push_back(first[b]);
      end.push_back(mid[b]);
      mid.push_back(first[b]);
      first[b] = mid[b];
      for (std::int32_t i = first[nb]; i < end[nb]; ++i) block[elems[i]] = nb;
      const bool nb_smaller = end[nb] - first[nb] <= end[b] - first[b];
      const std::int32_t pick = nb_smaller ? nb : b;
      classes_of(first[nb], end[nb], nb_classes);
      if (!nb_smaller) classes_of(first[b], end[b], pick_classes);
      const std::vector<std::uint64_t>& pick_has = nb_smaller ? nb_classes : pick_classes;
      for (std::int32_t d = 0; d < k; ++d) {
        if (in_work[static_cast<std::size_t>(b) * k + d]) {
          if (!has(nb_classes, d)) continue;
          work.push_back({nb, d});
          in_work[static_cast<std::size_t>(nb) * k + d] = 1;
        } else {
          if (!has(pick_has, d)) continue;
          work.push_back({pick, d});
          in_work[static_cast<std::size_t>(pick) * k + d] = 1;
        }
      }
    }
  }
  return block;
}

// Moore's refinement for small DFAs (states x classes up to kMooreCells): each round renames
// every state by (its block, the blocks of its successors) until the count stops growing. The
// coarsest partition is unique, so it is Hopcroft's, at a fraction of the bookkeeping.
constexpr std::int64_t kMooreCells = 1 << 14;

std::vector<std::int32_t> MooreBlocks(std::int32_t n, std::int32_t k,
                                      const std::vector<StateId>& next,
                                      const std::vector<std::uint8_t>& accepting) {
  std::vector<std::int32_t> block(n), fresh(n);
  std::int32_t count = 0;
  {
    std::int32_t ids[3] = {-1, -1, -1};
    for (std::int32_t s = 0; s < n; ++s) {
      const int g = s == 0 ? 0 : (accepting[s] ? 2 : 1);
      if (ids[g] < 0) ids[g] = count++;
      block[s] = ids[g];
    }
  }
  const std::size_t w = static_cast<std::size_t>(k) + 1;
  std::vector<std::int32_t> sig(static_cast<std::size_t>(n) * w);
  std::vector<std::uint64_t> hash(n);
  std::vector<std::int32_t> slots;
  for (;;) {
    for (std::int32_t s = 0; s < n; ++s) {
      std::int32_t* row = &sig[static_cast<std::size_t>(s) * w];
      row[0] = block[s];
      std::uint64_t h = 1469598103934665603ull ^ static_cast<std::uint32_t>(block[s]);
      for (std::int32_t c = 0; c < k; ++c) {
        row[c + 1] = block[next[static_cast<std::size_t>(s) * k + c]];
        h = (h ^ static_cast<std::uint32_t>(row[c + 1])) * 1099511628211ull;
      }
      hash[s] = h ^ (h >> 31);
    }
    std::size_t cap = 16;
    while (cap < static_cast<std::size_t>(n) * 2) cap *= 2;
    slots.assign(cap, -1);  // representative state of each new block
    std::int32_t fresh_count = 0;
    for (std::int32_t s = 0; s < n; ++s) {
      const std::int32_t* row = &sig[static_cast<std::size_t>(s) * w];
      std::size_t i = hash[s] & (cap - 1);
      for (;; i = (i + 1) & (cap - 1)) {
        const std::int32_t r = slots[i];
        if (r < 0) {
          slots[i] = s;
          fresh[s] = fresh_count++;
          break;
        }
        if (hash[r] == hash[s] &&
            std::equal(row, row + w, &sig[static_cast<std::size_t>(r) * w])) {
          fresh[s] = fresh[r];
          break;
        }
      }
    }
    const bool stable = fresh_count == count;
    block.swap(fresh);
    count = fresh_count;
    if (stable) return block;
  }
}

// ---- the steps of MinimizeDfa, in the order it runs them ----

// 1. Live states: those that reach acceptance (reverse BFS).
std::vector<std::uint8_t> LiveStates(const SubsetDfa& in) {
  const std::int32_t k = in.num_classes;
  const std::int32_t n0 = in.num_states;
  std::vector<std::uint8_t> live(n0, 0);
  std::vector<std::int32_t> rbegin(n0 + 1, 0);
  for (StateId t : in.next) {
    if (t != 0) ++rbegin[t + 1];  // the dead state is never live: skip edges into it
  }
  for (std::int32_t i = 0; i < n0; ++i) rbegin[i + 1] += rbegin[i];
  std::vector<std::int32_t> rsrc(rbegin[n0]);
  std::vector<std::int32_t> fill(rbegin.begin(), rbegin.end() - 1);
  for (std::int32_t s = 0; s < n0; ++s) {
    for (std::int32_t c = 0; c < k; ++c) {
      const StateId t = in.next[static_cast<std::size_t>(s) * k + c];
      if (t != 0) rsrc[fill[t]++] = s;
    }
  }
  std::vector<std::int32_t> queue;
  for (std::int32_t s = 0; s < n0; ++s) {
    if (in.accepting[s]) {
      live[s] = 1;
      queue.push_back(s);
    }
  }
  for (std::size_t qi = 0; qi < queue.size(); ++qi) {
    const std::int32_t t = queue[qi];
    for (std::int32_t i = rbegin[t]; i < rbegin[t + 1]; ++i) {
      const std::int32_t s = rsrc[i];
      if (!live[s]) {
        live[s] = 1;
        queue.push_back(s);
      }
    }
  }
  return live;
}

// The canonical DFA of the empty language: the dead state alone, one byte class.
ByteDfa EmptyLanguageDfa() {
  ByteDfa out;
  out.num_states = 1;
  out.num_classes = 1;
  out.byte_class.fill(0);
  out.next.assign(1, ByteDfa::kDead);
  out.start = ByteDfa::kDead;
  out.accept_begin = 1;
  return out;
}

// The complete DFA over the dead state 0 and the live states of a SubsetDfa (same classes).
struct LiveDfa {
  std::int32_t num_states = 0;
  std::vector<StateId> next;            // num_states * classes
  std::vector<std::uint8_t> accepting;  // num_states
  StateId start = 0;
};

// 2. Compact to the dead state plus live states; edges into non-live states go to 0.
LiveDfa CompactToLive(const SubsetDfa& in, const std::vector<std::uint8_t>& live) {
  const std::int32_t k = in.num_classes;
  const std::int32_t n0 = in.num_states;
  std::vector<std::int32_t> compact(n0, 0);
  std::int32_t n = 1;
  for (std::int32_t s = 1; s < n0; ++s) {
    if (live[s]) compact[s] = n++;
  }
  LiveDfa d;
  d.num_states = n;
  d.next.assign(static_cast<std::size_t>(n) * k, 0);
  d.accepting.assign(n, 0);
  for (std::int32_t s = 1; s < n0; ++s) {
    if (!live[s]) continue;
    const std::int32_t cs = compact[s];
    d.accepting[cs] = in.accepting[s];
    for (std::int32_t c = 0; c < k; ++c) {
      d.next[static_cast<std::size_t>(cs) * k + c] =
          compact[in.next[static_cast<std::size_t>(s) * k + c]];
    }
  }
  d.start = compact[in.start];
  return d;
}

// One class of each distinct column of d (at least one class).
std::vector<std::int32_t> DistinctColumns(const LiveDfa& d, std::int32_t k) {
  const std::int32_t n = d.num_states;
  std::vector<std::uint64_t> hash(k, 1469598103934665603ull);
  for (std::int32_t s = 0; s < n; ++s) {
    const StateId* row = &d.next[static_cast<std::size_t>(s) * k];
    for (std::int32_t c = 0; c < k; ++c) {
      hash[c] = (hash[c] ^ static_cast<std::uint32_t>(row[c])) * 1099511628211ull;
    }
  }
  std::vector<std::int32_t> distinct;
  for (std::int32_t c = 0; c < k; ++c) {
    bool seen = false;
    for (std::int32_t e : distinct) {
      if (hash[e] != hash[c]) continue;
      bool equal = true;
      for (std::int32_t s = 0; s < n && equal; ++s) {
        const std::size_t row = static_cast<std::size_t>(s) * k;
        equal = d.next[row + c] == d.next[row + e];
      }
      if (equal) {
        seen = true;
        break;
      }
    }
    if (!seen) distinct.push_back(c);
  }
  return distinct;
}

// 3. Merge equivalent states: the block of every state.
std::vector<std::int32_t> EquivalenceBlocks(const LiveDfa& d, std::int32_t k,
                                            bool distinct_states, bool moore_only = false) {
  const std::int32_t n = d.num_states;
  if (distinct_states) {
    std::vector<std::int32_t> block(n);
    for (std::int32_t s = 0; s < n; ++s) block[s] = s;
    return block;
  }
  // Classes whose columns are equal split the same blocks: refine over one of each (a
  // code-built automaton starts from one class per ASCII byte, `hostname` 129 of them, 8
  // distinct).
  std::vector<std::int32_t> distinct = DistinctColumns(d, k);
  const std::vector<StateId>* next = &d.next;
  std::vector<StateId> narrow;
  const std::int32_t kd = static_cast<std::int32_t>(distinct.size());
  if (kd < k) {
    narrow.resize(static_cast<std::size_t>(n) * kd);
    for (std::int32_t s = 0; s < n; ++s) {
      for (std::int32_t j = 0; j < kd; ++j) {
        narrow[static_cast<std::size_t>(s) * kd + j] =
            d.next[static_cast<std::size_t>(s) * k + distinct[j]];
      }
    }
    next = &narrow;
  }
  if (moore_only || static_cast<std::int64_t>(n) * kd <= kMooreCells) {
    return MooreBlocks(n, kd, *next, d.accepting);
  }
  return HopcroftBlocks(n, kd, *next, d.accepting);
}

// The blocks of the minimal DFA and their final numbers.
struct BlockNumbering {
  std::vector<std::int32_t> rep;    // a state of each block
  std::vector<std::int32_t> order;  // the blocks reachable from the start's, breadth-first
  std::vector<StateId> id;          // the final state of each block (kDead for the dead block)
};

// 4. Breadth-first numbering over bytes: dead 0, then non-accepting, then accepting. Sets the
// counts and the start state of *out.
BlockNumbering NumberBlocks(const LiveDfa& d, std::int32_t k,
                            const std::vector<std::int32_t>& block, ByteDfa* out) {
  std::int32_t num_blocks = 0;
  for (std::int32_t b : block) num_blocks = std::max(num_blocks, b + 1);
  BlockNumbering num;
  num.rep.assign(num_blocks, -1);
  for (std::int32_t s = 0; s < d.num_states; ++s) {
    if (num.rep[block[s]] < 0) num.rep[block[s]] = s;
  }
  std::vector<std::uint8_t> seen(num_blocks, 0);
  const std::int32_t dead_block = block[0];
  seen[dead_block] = 1;
  const std::int32_t start_block = block[d.start];
  num.order.push_back(start_block);
  seen[start_block] = 1;
  // Classes are numbered by their smallest byte, so visiting classes in order visits targets in
  // the order of the first byte that reaches them.
  for (std::size_t qi = 0; qi < num.order.size(); ++qi) {
    const std::int32_t s = num.rep[num.order[qi]];
    for (std::int32_t c = 0; c < k; ++c) {
      const std::int32_t t = block[d.next[static_cast<std::size_t>(s) * k + c]];
      if (!seen[t]) {
        seen[t] = 1;
        num.order.push_back(t);
      }
    }
  }
  num.id.assign(num_blocks, ByteDfa::kDead);
  StateId next_id = 1;
  for (std::int32_t b : num.order) {
    if (!d.accepting[num.rep[b]]) num.id[b] = next_id++;
  }
  out->accept_begin = next_id;
  for (std::int32_t b : num.order) {
    if (d.accepting[num.rep[b]]) num.id[b] = next_id++;
  }
  out->num_states = next_id;
  out->start = num.id[start_block];
  return num;
}

// 5a. Coarsest byte classes for the final table: classes whose columns agree (over the numbered
// blocks) share a new class. Returns the old class of each new class; sets (*class_map)[old].
std::vector<std::int32_t> MergeEqualColumns(const LiveDfa& d, std::int32_t k,
                                            const std::vector<std::int32_t>& block,
                                            const BlockNumbering& num,
                                            std::vector<std::int32_t>* class_map) {
  std::vector<std::uint64_t> col_hash(k, 0);
  for (std::int32_t b : num.order) {
    const std::size_t row = static_cast<std::size_t>(num.rep[b]) * k;
    for (std::int32_t c = 0; c < k; ++c) {
      col_hash[c] =
          (col_hash[c] ^ static_cast<std::uint64_t>(block[d.next[row + c]])) * 0x100000001B3ull;
    }
  }
  class_map->assign(k, -1);
  std::vector<std::int32_t> kept;  // old class of each new class
  for (std::int32_t c = 0; c < k; ++c) {
    for (std::size_t j = 0; j < kept.size() && (*class_map)[c] < 0; ++j) {
      if (col_hash[kept[j]] != col_hash[c]) continue;
      bool same = true;
      for (std::size_t qi = 0; qi < num.order.size() && same; ++qi) {
        const std::size_t row = static_cast<std::size_t>(num.rep[num.order[qi]]) * k;
        same = block[d.next[row + c]] == block[d.next[row + kept[j]]];
      }
      if (same) (*class_map)[c] = static_cast<std::int32_t>(j);
    }
    if ((*class_map)[c] < 0) {
      (*class_map)[c] = static_cast<std::int32_t>(kept.size());
      kept.push_back(c);
    }
  }
  return kept;
}

// 5b. The final byte classes and transition table of *out.
void FillTable(const SubsetDfa& in, const LiveDfa& d, const std::vector<std::int32_t>& block,
               const BlockNumbering& num, ByteDfa* out) {
  const std::int32_t k = in.num_classes;
  std::vector<std::int32_t> class_map;
  const std::vector<std::int32_t> kept = MergeEqualColumns(d, k, block, num, &class_map);
  out->num_classes = static_cast<std::int32_t>(kept.size());
  for (int b = 0; b < 256; ++b) {
    out->byte_class[b] = static_cast<std::uint8_t>(class_map[in.byte_class[b]]);
  }
  out->next.assign(static_cast<std::size_t>(out->num_states) * out->num_classes, ByteDfa::kDead);
  for (std::int32_t b : num.order) {
    const std::size_t row = static_cast<std::size_t>(num.rep[b]) * k;
    for (std::int32_t c = 0; c < out->num_classes; ++c) {
      out->next[static_cast<std::size_t>(num.id[b]) * out->num_classes + c] =
          num.id[block[d.next[row + kept[c]]]];
    }
  }
}

}  // namespace

ByteDfa MinimizeDfa(const SubsetDfa& in, bool distinct_states) {
  return MinimizeDfaWith(in, distinct_states, false);
}

ByteDfa MinimizeDfaWith(const SubsetDfa& in, bool distinct_states, bool moore_only) {
  const std::vector<std::uint8_t> live = LiveStates(in);
  if (in.start == 0 || !live[in.start]) return EmptyLanguageDfa();
  const LiveDfa d = CompactToLive(in, live);
  const std::vector<std::int32_t> block =
      EquivalenceBlocks(d, in.num_classes, distinct_states, moore_only);
  ByteDfa out;
  const BlockNumbering num = NumberBlocks(d, in.num_classes, block, &out);
  FillTable(in, d, block, num, &out);
  return out;
}

}  // namespace lockstep
