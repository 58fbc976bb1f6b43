#include "automata/cfg/state_fold.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <unordered_map>

namespace lockstep {
namespace {

using Bytes = std::array<std::uint64_t, 4>;

bool Has(const Bytes& b, std::uint8_t x) { return (b[x >> 6] >> (x & 63)) & 1; }

// What the fold needs of the trie for the states reading alphabet A: tokens are compared on their
// first `round` bytes by Moore's refinement, and beyond that node by node. Both cost: a round of
// refinement is counted as a pass over every state's row (k columns; RefineToRounds looks at
// fewer, but the model is kept so that the rounds, and the folds, stay as they were), a long
// token's nodes are walked from
// every state of A, with their ancestors (all the trie nodes within A on a path to a node deeper
// than the round). The round is chosen once for all alphabets (the refinement runs to the
// largest anyway) as the one of least total cost, each alphabet using it or the length of its
// longest token prefix, if shorter (then nothing is left to walk). In Llama-3, runs of '-' reach
// 96 bytes while no run of letters and digits is longer than 36; from a state inside a date-time,
// every token of its digits and signs is short.
// At most kMaxRounds rounds of refinement.
constexpr std::int32_t kMaxRounds = 48;

struct Alphabet {
  Bytes bytes;  // A
  // The longest token prefix within A (the byte after a token's prefix within A kills its run
  // from every state reading A).
  std::int32_t longest = 0;
  // walked[r]: the trie nodes within A that the long tokens' walk visits when the round is r
  // (those with a node deeper than r at or below them), r = 0 .. min(longest, kMaxRounds).
  std::vector<std::int64_t> walked;
  // The round that decides a state reading A (min(chosen round, longest)).
  std::int32_t round = 0;
  // The nodes within A below depth `round` and those on their paths, depth-first: depth, byte,
  // and the index past the node's subtree in this list; listed (`listed`) when a state reading
  // A is first walked (most alphabets have none: their states are alone in their class).
  struct Node {
    std::uint16_t depth;
    std::uint8_t byte;
    std::uint32_t end;
  };
  std::vector<Node> deep;
  bool listed = false;
};

// Fills a.longest and a.walked: one depth-first pass, with the deepest node within A under each
// node on the current path.
Alphabet Measure(const TokenTrie& trie, const Bytes& a) {
  const std::span<const TokenTrie::Node> nodes = trie.nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie.num_nodes());
  Alphabet out;
  out.bytes = a;
  // below[d]: the nodes within A whose deepest descendant within A is at depth d.
  std::vector<std::int64_t> below(static_cast<std::size_t>(trie.max_depth()) + 2, 0);
  std::vector<std::int32_t> deepest;  // per depth on the current path (index depth - 1)
  auto close_to = [&](std::size_t d) {
    while (deepest.size() > d) {
      const std::int32_t x = deepest.back();
      ++below[x];
      deepest.pop_back();
      if (!deepest.empty()) deepest.back() = std::max(deepest.back(), x);
    }
  };
  for (std::uint32_t i = 0; i < n;) {
    const TokenTrie::Node& v = nodes[i];
    if (!Has(a, v.byte)) {
      i = v.subtree_end;
      continue;
    }
    close_to(v.depth - 1u);
    deepest.push_back(v.depth);
    out.longest = std::max<std::int32_t>(out.longest, v.depth);
    ++i;
  }
  close_to(0);
  const std::int32_t top = std::min(out.longest, kMaxRounds);
  out.walked.assign(static_cast<std::size_t>(top) + 1, 0);
  // walked[r]: the nodes whose deepest descendant is deeper than r.
  std::int64_t sum = 0;
  for (std::int32_t d = out.longest; d >= 1; --d) {
    sum += below[d];
    if (d - 1 <= top) out.walked[d - 1] = sum;
  }
  return out;
}

// The nodes within A deeper than a.round, with their ancestors, in trie order (a.deep).
void ListDeepNodes(const TokenTrie& trie, const Bytes& a, Alphabet& out) {
  const std::span<const TokenTrie::Node> nodes = trie.nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie.num_nodes());
  const std::int32_t depth = out.round;
  out.deep.clear();
  if (depth >= out.longest) return;
  // The listed nodes whose subtrees are still open: (trie index, index into out.deep).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> open;
  auto close_to = [&](std::size_t d) {
    while (open.size() > d) {
      out.deep[open.back().second].end = static_cast<std::uint32_t>(out.deep.size());
      open.pop_back();
    }
  };
  std::vector<std::uint32_t> stack;  // trie indices of the current path (all within A)
  for (std::uint32_t i = 0; i < n;) {
    const TokenTrie::Node& v = nodes[i];
    if (!Has(a, v.byte)) {
      i = v.subtree_end;
      continue;
    }
    stack.resize(v.depth - 1);
    stack.push_back(i);
    if (v.depth <= depth) {
      ++i;
      continue;
    }
    // A deep node: list its ancestors not listed yet (the open ones are its path's prefix).
    std::size_t common = 0;
    while (common < open.size() && common < stack.size() && open[common].first == stack[common]) {
      ++common;
    }
    close_to(common);
    for (std::size_t d = common; d < stack.size(); ++d) {
      open.emplace_back(stack[d], static_cast<std::uint32_t>(out.deep.size()));
      out.deep.push_back({nodes[stack[d]].depth, nodes[stack[d]].byte, 0});
    }
    ++i;
  }
  close_to(0);
}

// The hash of a refinement row (rows are compared exactly after it): two independent multiply
// chains over pairs of entries, so that a row costs about one multiply per two entries in
// latency, not a serial mix per entry (`email` on Llama-3: 26 rounds over up to 25,000 rows).
std::uint64_t RowHash(const std::int32_t* row, std::size_t width) {
  constexpr std::uint64_t kA = 0x9E3779B97F4A7C15ull, kB = 0xC2B2AE3D27D4EB4Full;
  std::uint64_t a = width, b = 0;
  std::size_t j = 0;
  for (; j + 4 <= width; j += 4) {
    a = (a ^ (static_cast<std::uint32_t>(row[j]) |
              std::uint64_t{static_cast<std::uint32_t>(row[j + 1])} << 32)) * kA;
    b = (b ^ (static_cast<std::uint32_t>(row[j + 2]) |
              std::uint64_t{static_cast<std::uint32_t>(row[j + 3])} << 32)) * kB;
  }
  for (; j < width; ++j) a = (a ^ static_cast<std::uint32_t>(row[j])) * kA;
  std::uint64_t h = (a ^ (b >> 29) ^ (b << 35)) * kB;
  return h ^ (h >> 31);
}

bool Passed(const CompileDeadline* deadline) { return deadline != nullptr && deadline->Poll(); }

// The rule's automaton in local numbering (rank in `states`), over the byte classes with
// distinct columns over these states (most of a program's classes split bytes for other rules).
struct LocalDfa {
  std::int32_t n = 0;              // states
  std::int32_t k = 0;              // distinct columns
  std::vector<std::int32_t> cols;  // a class per distinct column
  std::vector<Bytes> col_bytes;    // the bytes of each
  std::vector<std::int32_t> succ;  // n * k successors by local index (-1: dead)
  std::int32_t Succ(std::int32_t i, std::int32_t c) const {
    return succ[static_cast<std::size_t>(i) * k + c];
  }
};

bool ByteEdgesOnly(const CfgProgram& p, std::span<const StateId> states) {
  for (StateId s : states) {
    if (p.nt_begin[s] != p.nt_begin[s + 1]) return false;
    if (!p.sp_begin.empty() && p.sp_begin[s] != p.sp_begin[s + 1]) return false;
  }
  return true;
}

// Fills d.cols and d.col_bytes: a class live from some state whose column equals no earlier
// one's starts a column; every live class adds its bytes to its column's. The columns are hashed
// in one pass over the states' rows (row-major, as the table is stored; a pass per class read the
// table column by column, and was a seventh of the fold of `hostname`), then compared exactly.
void FindDistinctColumns(const CfgProgram& p, std::span<const StateId> states, LocalDfa& d) {
  const std::int32_t nc = p.num_classes;
  std::vector<std::uint64_t> hash(nc, 0);
  std::vector<std::uint8_t> live(nc, 0);
  // Over the stored entries (narrow ones are the target + 1, 0 for dead), in a loop the compiler
  // can vectorise: shifts and adds.
  auto pass = [&](const auto* entries, auto dead) {
    for (StateId s : states) {
      const auto* row = entries + static_cast<std::size_t>(s) * nc;
      for (std::int32_t c = 0; c < nc; ++c) {
        live[c] |= row[c] != dead;
        hash[c] = (hash[c] << 5) + hash[c] + static_cast<std::uint32_t>(row[c]);
      }
    }
  };
  if (p.next.narrow()) {
    pass(static_cast<const std::uint16_t*>(p.next.data()), std::uint16_t{0});
  } else {
    pass(static_cast<const StateId*>(p.next.data()), CfgProgram::kDead);
  }
  for (std::int32_t c = 0; c < nc; ++c) {
    if (!live[c]) continue;  // dead from every state: tells no two states apart
    std::int32_t same = -1;
    for (std::size_t k = 0; k < d.cols.size() && same < 0; ++k) {
      if (hash[d.cols[k]] != hash[c]) continue;
      bool eq = true;
      for (StateId s : states) {
        const std::size_t row = static_cast<std::size_t>(s) * nc;
        if (p.next[row + c] != p.next[row + d.cols[k]]) {
          eq = false;
          break;
        }
      }
      if (eq) same = static_cast<std::int32_t>(k);
    }
    if (same < 0) {
      same = static_cast<std::int32_t>(d.cols.size());
      d.cols.push_back(c);
      d.col_bytes.push_back({});
    }
    for (int b = 0; b < 256; ++b) {
      if (p.byte_class[b] == c) d.col_bytes[same][b >> 6] |= std::uint64_t{1} << (b & 63);
    }
  }
  d.k = static_cast<std::int32_t>(d.cols.size());
}

// Fills d.succ through `local` (global state -> rank, -1 outside the rule); false when an edge
// leaves the rule (not a byte automaton of its own).
bool FindSuccessors(const CfgProgram& p, std::span<const StateId> states,
                    const std::vector<std::int32_t>& local, LocalDfa& d) {
  d.succ.resize(static_cast<std::size_t>(d.n) * d.k);
  for (std::int32_t i = 0; i < d.n; ++i) {
    for (std::int32_t c = 0; c < d.k; ++c) {
      const StateId t = p.next[static_cast<std::size_t>(states[i]) * p.num_classes + d.cols[c]];
      if (t != CfgProgram::kDead && local[t] < 0) return false;
      d.succ[static_cast<std::size_t>(i) * d.k + c] = t == CfgProgram::kDead ? -1 : local[t];
    }
  }
  return true;
}

// The predecessors of each state by its live edges (one entry per edge, so a state may appear
// more than once): preds[begin[t] .. begin[t + 1]).
struct Predecessors {
  std::vector<std::int32_t> begin, preds;
};
Predecessors PredecessorsOf(std::span<const std::int32_t> succ, std::int32_t n, std::int32_t k) {
  Predecessors out;
  out.begin.assign(n + 1, 0);
  for (std::int32_t t : succ) {
    if (t >= 0) ++out.begin[t + 1];
  }
  for (std::int32_t i = 0; i < n; ++i) out.begin[i + 1] += out.begin[i];
  out.preds.resize(out.begin[n]);
  std::vector<std::int32_t> fill(out.begin.begin(), out.begin.end() - 1);
  for (std::int32_t i = 0; i < n; ++i) {
    for (std::int32_t c = 0; c < k; ++c) {
      const std::int32_t t = succ[static_cast<std::size_t>(i) * k + c];
      if (t >= 0) out.preds[fill[t]++] = i;
    }
  }
  return out;
}

// A(s): the bytes read on some path from s, to a fixpoint over the predecessors.
std::vector<Bytes> ReadBytes(const LocalDfa& d, const Predecessors& pred) {
  const std::int32_t n = d.n, k = d.k;
  std::vector<Bytes> reads(n, Bytes{});
  for (std::int32_t i = 0; i < n; ++i) {
    for (std::int32_t c = 0; c < k; ++c) {
      if (d.Succ(i, c) < 0) continue;
      for (int w = 0; w < 4; ++w) reads[i][w] |= d.col_bytes[c][w];
    }
  }
  const std::vector<std::int32_t>& pred_begin = pred.begin;
  const std::vector<std::int32_t>& preds = pred.preds;
  std::vector<std::int32_t> work(n);
  std::iota(work.begin(), work.end(), 0);
  std::vector<std::uint8_t> queued(n, 1);
  while (!work.empty()) {
    const std::int32_t t = work.back();
    work.pop_back();
    queued[t] = 0;
    for (std::int32_t e = pred_begin[t]; e < pred_begin[t + 1]; ++e) {
      const std::int32_t i = preds[e];
      bool grew = false;
      for (int w = 0; w < 4; ++w) {
        const std::uint64_t x = reads[i][w] | reads[t][w];
        grew |= x != reads[i][w];
        reads[i][w] = x;
      }
      if (grew && !queued[i]) {
        queued[i] = 1;
        work.push_back(i);
      }
    }
  }
  return reads;
}

// Per distinct alphabet (`alphabets`) the round that decides its states (the long tokens' part
// of the trie is listed later, for the alphabets whose states are walked); per state its
// alphabet's index (`alphabet_of`). The round is the one of least cost for `k` columns (see
// Alphabet). False once the deadline has passed.
bool AnalyzeAlphabets(const TokenTrie& trie, const std::vector<Bytes>& reads, std::int32_t k,
                      const CompileDeadline* deadline, std::vector<Alphabet>& alphabets,
                      std::vector<std::int32_t>& alphabet_of) {
  std::map<Bytes, std::int32_t> memo;
  std::vector<std::int64_t> states_of;
  alphabet_of.resize(reads.size());
  for (std::size_t i = 0; i < reads.size(); ++i) {
    if (Passed(deadline)) return false;
    auto [it, fresh] = memo.try_emplace(reads[i], static_cast<std::int32_t>(alphabets.size()));
    if (fresh) {
      alphabets.push_back(Measure(trie, reads[i]));
      states_of.push_back(0);
    }
    alphabet_of[i] = it->second;
    ++states_of[it->second];
  }
  const auto walked = [&](std::size_t a, std::int32_t r) {
    const std::vector<std::int64_t>& w = alphabets[a].walked;
    return w[std::min<std::size_t>(static_cast<std::size_t>(r), w.size() - 1)];
  };
  std::int32_t best = 0;
  std::int64_t best_cost = -1;
  for (std::int32_t r = 0; r <= kMaxRounds; ++r) {
    std::int64_t cost = static_cast<std::int64_t>(reads.size()) * k * r;
    for (std::size_t a = 0; a < alphabets.size(); ++a) cost += states_of[a] * walked(a, r);
    if (best_cost < 0 || cost < best_cost) best = r, best_cost = cost;
  }
  for (Alphabet& a : alphabets) a.round = std::min(best, a.longest);
  return true;
}

// The long tokens' runs: per state, the status at every listed node of its alphabet (0 dead,
// its subtree skipped; 1 alive; 2 alive and the rule may finish), interned into `deep_id`.
// Only for the states with `walk[i]` set (-1 for the others). False once the deadline has
// passed.
bool LongTokenRuns(const LocalDfa& d, std::span<const std::uint8_t> finish,
                   const TokenTrie& trie, std::vector<Alphabet>& alphabets,
                   const std::vector<std::int32_t>& alphabet_of,
                   const std::vector<std::uint8_t>& walk, const CompileDeadline* deadline,
                   std::vector<std::int32_t>& deep_id) {
  // Each byte's column (-1: dead from every state), so that a step is one table read in the
  // rule's own numbering.
  std::array<std::int32_t, 256> column;
  column.fill(-1);
  for (std::int32_t c = 0; c < d.k; ++c) {
    for (int b = 0; b < 256; ++b) {
      if (Has(d.col_bytes[c], static_cast<std::uint8_t>(b))) column[b] = c;
    }
  }
  std::unordered_map<std::string, std::int32_t> ids;
  std::string sig;
  std::vector<std::int32_t> at(static_cast<std::size_t>(trie.max_depth()) + 2);
  deep_id.assign(d.n, -1);
  for (std::int32_t i = 0; i < d.n; ++i) {
    if (!walk[i]) continue;
    if (Passed(deadline)) return false;
    Alphabet& a = alphabets[alphabet_of[i]];
    if (!a.listed) {
      ListDeepNodes(trie, a.bytes, a);
      a.listed = true;
    }
    const std::vector<Alphabet::Node>& deep = a.deep;
    sig.resize(deep.size());  // (at most one status per node)
    std::size_t len = 0;
    at[0] = i;
    for (std::uint32_t v = 0; v < deep.size();) {
      const std::int32_t c = column[deep[v].byte];
      const std::int32_t t = c < 0 ? -1 : d.Succ(at[deep[v].depth - 1], c);
      if (t < 0) {
        sig[len++] = 0;
        v = deep[v].end;
      } else {
        sig[len++] = finish[t] ? 2 : 1;
        at[deep[v].depth] = t;
        ++v;
      }
    }
    sig.resize(len);
    deep_id[i] = ids.try_emplace(sig, static_cast<std::int32_t>(ids.size())).first->second;
  }
  return true;
}

// RefineToRounds (state_fold.h), given the predecessors.
bool Refine(std::span<const std::int32_t> succ, std::int32_t n, std::int32_t k,
            const Predecessors& pred, std::span<const std::uint8_t> finish,
            std::span<const std::int32_t> round, const CompileDeadline* deadline,
            std::vector<std::int32_t>& decided) {
  decided.assign(n, -1);
  if (n == 0) return true;
  const std::vector<std::int32_t>& pred_begin = pred.begin;
  const std::vector<std::int32_t>& preds = pred.preds;
  // The states decided at each round.
  std::int32_t last_round = 0;
  for (std::int32_t i = 0; i < n; ++i) last_round = std::max(last_round, round[i]);
  std::vector<std::int32_t> by_round_begin(static_cast<std::size_t>(last_round) + 2, 0);
  std::vector<std::int32_t> by_round(n);
  for (std::int32_t i = 0; i < n; ++i) ++by_round_begin[round[i] + 1];
  for (std::int32_t r = 0; r <= last_round; ++r) by_round_begin[r + 1] += by_round_begin[r];
  {
    std::vector<std::int32_t> fill(by_round_begin.begin(), by_round_begin.end() - 1);
    for (std::int32_t i = 0; i < n; ++i) by_round[fill[round[i]]++] = i;
  }
  // Class ids: a class that splits keeps its id for one part, the others take fresh ids, so an
  // id names one class at each round.
  std::vector<std::int32_t> cls(n), size(2, 0);
  for (std::int32_t i = 0; i < n; ++i) ++size[cls[i] = finish[i] ? 1 : 0];
  // Moved: the states whose id changed in the last round (at first, every state).
  std::vector<std::int32_t> moved(n), next_moved, touched;
  std::iota(moved.begin(), moved.end(), 0);
  std::vector<std::uint32_t> mark(n, 0);
  const std::size_t width = static_cast<std::size_t>(k) + 1;
  std::vector<std::int32_t> rows, group_of, table;
  struct Group {
    std::int32_t cls, count, id;
  };
  std::vector<Group> groups;
  std::vector<std::int32_t> in_touched, keeper;  // per class id
  std::int32_t left = n;
  for (std::int32_t r = 0;; ++r) {
    if (deadline != nullptr && deadline->PassedNow()) return false;
    if (r <= last_round) {
      for (std::int32_t j = by_round_begin[r]; j < by_round_begin[r + 1]; ++j) {
        decided[by_round[j]] = cls[by_round[j]];
        --left;
      }
    }
    if (left == 0) break;
    if (moved.empty()) {
      // Stable: every later round is this one.
      for (std::int32_t i = 0; i < n; ++i) {
        if (decided[i] < 0) decided[i] = cls[i];
      }
      break;
    }
    // Two states of one class are told apart in this round only if one of them has a successor
    // whose id just changed (their successors were alike in the last round, and a successor
    // that kept its id kept its class's old members): only those predecessors are looked at;
    // the others of their class keep its id together.
    touched.clear();
    const std::uint32_t stamp = static_cast<std::uint32_t>(r) + 1;
    for (std::int32_t m : moved) {
      for (std::int32_t e = pred_begin[m]; e < pred_begin[m + 1]; ++e) {
        const std::int32_t i = preds[e];
        if (mark[i] != stamp) mark[i] = stamp, touched.push_back(i);
      }
    }
    const std::size_t t_n = touched.size();
    rows.resize(t_n * width);
    group_of.resize(t_n);
    std::size_t slots = 1;
    while (slots < 2 * t_n) slots <<= 1;
    table.assign(slots, -1);
    groups.clear();
    for (std::size_t j = 0; j < t_n; ++j) {
      const std::int32_t i = touched[j];
      std::int32_t* row = &rows[j * width];
      row[0] = cls[i];
      const std::int32_t* out = &succ[static_cast<std::size_t>(i) * k];
      for (std::int32_t c = 0; c < k; ++c) row[c + 1] = out[c] < 0 ? -1 : cls[out[c]];
      const std::uint64_t h = RowHash(row, width);
      for (std::size_t slot = h & (slots - 1);; slot = (slot + 1) & (slots - 1)) {
        const std::int32_t o = table[slot];
        if (o < 0) {
          table[slot] = static_cast<std::int32_t>(j);
          group_of[j] = static_cast<std::int32_t>(groups.size());
          groups.push_back({cls[i], 1, -1});
          break;
        }
        if (std::memcmp(&rows[o * width], row, width * sizeof(std::int32_t)) == 0) {
          group_of[j] = group_of[o];
          ++groups[group_of[o]].count;
          break;
        }
      }
    }
    // Per class: its members not looked at keep its id; when all were looked at, its largest
    // group (the first of equal ones) does. Every other group takes a fresh id.
    if (in_touched.size() < size.size()) in_touched.resize(size.size(), 0);
    if (keeper.size() < size.size()) keeper.resize(size.size(), -1);
    for (std::size_t g = 0; g < groups.size(); ++g) in_touched[groups[g].cls] += groups[g].count;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::int32_t c = groups[g].cls;
      if (in_touched[c] == size[c] &&
          (keeper[c] < 0 || groups[g].count > groups[keeper[c]].count)) {
        keeper[c] = static_cast<std::int32_t>(g);
      }
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::int32_t c = groups[g].cls;
      if (keeper[c] == static_cast<std::int32_t>(g)) {
        groups[g].id = c;
        continue;
      }
      groups[g].id = static_cast<std::int32_t>(size.size());
      size.push_back(groups[g].count);
      size[c] -= groups[g].count;
    }
    for (std::size_t g = 0; g < groups.size(); ++g) {
      in_touched[groups[g].cls] = 0;
      keeper[groups[g].cls] = -1;
    }
    next_moved.clear();
    for (std::size_t j = 0; j < t_n; ++j) {
      const std::int32_t i = touched[j];
      const std::int32_t id = groups[group_of[j]].id;
      if (id != cls[i]) cls[i] = id, next_moved.push_back(i);
    }
    moved.swap(next_moved);
  }
  return true;
}

}  // namespace

bool RefineToRounds(std::span<const std::int32_t> succ, std::int32_t n, std::int32_t k,
                    std::span<const std::uint8_t> finish, std::span<const std::int32_t> round,
                    const CompileDeadline* deadline, std::vector<std::int32_t>& decided) {
  return Refine(succ, n, k, PredecessorsOf(succ, n, k), finish, round, deadline, decided);
}

std::vector<std::int32_t> FoldStatesForTokens(const CfgProgram& p, std::span<const StateId> states,
                                              std::span<const std::uint8_t> finish,
                                              const TokenTrie& trie,
                                              const CompileDeadline* deadline) {
  const std::int32_t n = static_cast<std::int32_t>(states.size());
  std::vector<std::int32_t> rep(n);
  std::iota(rep.begin(), rep.end(), 0);
  if (n < 2) return rep;
  std::vector<std::int32_t> local(p.num_states, -1);
  for (std::int32_t i = 0; i < n; ++i) local[states[i]] = i;
  if (!ByteEdgesOnly(p, states)) return rep;
  LocalDfa d;
  d.n = n;
  FindDistinctColumns(p, states, d);
  if (!FindSuccessors(p, states, local, d)) return rep;
  const Predecessors pred = PredecessorsOf(d.succ, d.n, d.k);
  const std::vector<Bytes> reads = ReadBytes(d, pred);
  std::vector<Alphabet> alphabets;
  std::vector<std::int32_t> alphabet_of;
  if (!AnalyzeAlphabets(trie, reads, d.k, deadline, alphabets, alphabet_of)) return rep;
  std::vector<std::int32_t> round(n);
  for (std::int32_t i = 0; i < n; ++i) round[i] = alphabets[alphabet_of[i]].round;
  std::vector<std::int32_t> decided;
  if (!Refine(d.succ, d.n, d.k, pred, finish, round, deadline, decided)) return rep;
  // The long tokens can only split the groups of equal alphabet and class further: a state
  // alone in its group is not walked. (A rule the refinement leaves with no two states alike
  // folds nothing, and walking its long tokens from every state was most of the fold's time:
  // an 11,063-state automaton of a Github_ultra schema, 362 ms for no fold.)
  std::vector<std::uint8_t> walk(n, 0);
  {
    std::map<std::pair<std::int32_t, std::int32_t>, std::int32_t> first_of;
    for (std::int32_t i = 0; i < n; ++i) {
      auto [it, fresh] = first_of.try_emplace({alphabet_of[i], decided[i]}, i);
      if (!fresh) walk[i] = walk[it->second] = 1;
    }
  }
  std::vector<std::int32_t> deep_id;
  if (!LongTokenRuns(d, finish, trie, alphabets, alphabet_of, walk, deadline, deep_id)) {
    return rep;
  }
  // States with equal alphabets, equal classes at their round and equal long-token runs agree on
  // every token: each takes the first such state.
  std::map<std::array<std::int32_t, 3>, std::int32_t> first;
  for (std::int32_t i = 0; i < n; ++i) {
    rep[i] = first.try_emplace({alphabet_of[i], decided[i], deep_id[i]}, i).first->second;
  }
  return rep;
}

}  // namespace lockstep
