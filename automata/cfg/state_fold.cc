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
// refinement is a pass over every state's row (k columns), a long token's nodes are walked from
// every state of A, with their ancestors (all the trie nodes within A on a path to a node deeper
// than the round). The round is chosen once for all alphabets (the refinement runs to the
// largest anyway) as the one of least total cost, each alphabet using it or the length of its
// longest token prefix, if shorter (then nothing is left to walk). In Llama-3, runs of '-' reach
// 96 bytes while no run of letters and digits is longer than 36; from a state inside a date-time,
// every token of its digits and signs is short.
// At most kMaxRounds rounds of refinement.
constexpr std::int32_t kMaxRounds = 48;

struct Alphabet {
  // The longest token prefix within A (the byte after a token's prefix within A kills its run
  // from every state reading A).
  std::int32_t longest = 0;
  // walked[r]: the trie nodes within A that the long tokens' walk visits when the round is r
  // (those with a node deeper than r at or below them), r = 0 .. min(longest, kMaxRounds).
  std::vector<std::int64_t> walked;
  // The round that decides a state reading A (min(chosen round, longest)).
  std::int32_t round = 0;
  // The nodes within A below depth `round` and those on their paths, depth-first: depth, byte,
  // and the index past the node's subtree in this list.
  struct Node {
    std::uint16_t depth;
    std::uint8_t byte;
    std::uint32_t end;
  };
  std::vector<Node> deep;
};

// Fills a.longest and a.walked: one depth-first pass, with the deepest node within A under each
// node on the current path.
Alphabet Measure(const TokenTrie& trie, const Bytes& a) {
  const std::span<const TokenTrie::Node> nodes = trie.nodes();
  const std::uint32_t n = static_cast<std::uint32_t>(trie.num_nodes());
  Alphabet out;
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

std::uint64_t Mix(std::uint64_t h, std::uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDull;
}

// The hash of a refinement row (rows are compared exactly after it): two independent multiply
// chains over pairs of entries, so that a row costs about one multiply per two entries in
// latency, not the serial chain of Mix per entry (the rounds hash every state's row; `email`
// on Llama-3: 26 rounds over 25,000 rows).
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
// one's starts a column; every live class adds its bytes to its column's.
void FindDistinctColumns(const CfgProgram& p, std::span<const StateId> states, LocalDfa& d) {
  const std::int32_t nc = p.num_classes;
  std::vector<std::uint64_t> hash(nc, 0);
  for (std::int32_t c = 0; c < nc; ++c) {
    std::uint64_t h = 0;
    bool live = false;
    for (StateId s : states) {
      const StateId t = p.next[static_cast<std::size_t>(s) * nc + c];
      live |= t != CfgProgram::kDead;
      h = Mix(h, static_cast<std::uint64_t>(t));
    }
    hash[c] = live ? h : 0;
    if (!live) continue;  // dead from every state: tells no two states apart
    std::int32_t same = -1;
    for (std::size_t k = 0; k < d.cols.size() && same < 0; ++k) {
      if (hash[d.cols[k]] != h) continue;
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

// A(s): the bytes read on some path from s, to a fixpoint over the predecessors.
std::vector<Bytes> ReadBytes(const LocalDfa& d) {
  const std::int32_t n = d.n, k = d.k;
  std::vector<Bytes> reads(n, Bytes{});
  std::vector<std::int32_t> pred_begin(n + 1, 0), preds;
  for (std::int32_t i = 0; i < n; ++i) {
    for (std::int32_t c = 0; c < k; ++c) {
      const std::int32_t t = d.Succ(i, c);
      if (t < 0) continue;
      for (int w = 0; w < 4; ++w) reads[i][w] |= d.col_bytes[c][w];
      ++pred_begin[t + 1];
    }
  }
  for (std::int32_t i = 0; i < n; ++i) pred_begin[i + 1] += pred_begin[i];
  preds.resize(pred_begin[n]);
  {
    std::vector<std::int32_t> fill(pred_begin.begin(), pred_begin.end() - 1);
    for (std::int32_t i = 0; i < n; ++i) {
      for (std::int32_t c = 0; c < k; ++c) {
        const std::int32_t t = d.Succ(i, c);
        if (t >= 0) preds[fill[t]++] = i;
      }
    }
  }
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

// Per distinct alphabet (`alphabets`) the round that decides its states and the long tokens'
// part of the trie; per state its alphabet's index (`alphabet_of`). The round is the one of
// least cost for `k` columns (see Alphabet). False once the deadline has passed.
bool AnalyzeAlphabets(const TokenTrie& trie, const std::vector<Bytes>& reads, std::int32_t k,
                      const CompileDeadline* deadline, std::vector<Alphabet>& alphabets,
                      std::vector<std::int32_t>& alphabet_of) {
  std::map<Bytes, std::int32_t> memo;
  std::vector<Bytes> distinct;
  std::vector<std::int64_t> states_of;
  alphabet_of.resize(reads.size());
  for (std::size_t i = 0; i < reads.size(); ++i) {
    if (Passed(deadline)) return false;
    auto [it, fresh] = memo.try_emplace(reads[i], static_cast<std::int32_t>(alphabets.size()));
    if (fresh) {
      alphabets.push_back(Measure(trie, reads[i]));
      distinct.push_back(reads[i]);
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
  for (std::size_t a = 0; a < alphabets.size(); ++a) {
    if (Passed(deadline)) return false;
    alphabets[a].round = std::min(best, alphabets[a].longest);
    ListDeepNodes(trie, distinct[a], alphabets[a]);
  }
  return true;
}

// The long tokens' runs: per state, the status at every listed node of its alphabet (0 dead,
// its subtree skipped; 1 alive; 2 alive and the rule may finish), interned into `deep_id`.
// Only for the states with `walk[i]` set (-1 for the others). False once the deadline has
// passed.
bool LongTokenRuns(const CfgProgram& p, std::span<const StateId> states,
                   std::span<const std::uint8_t> finish, const std::vector<std::int32_t>& local,
                   const TokenTrie& trie, const std::vector<Alphabet>& alphabets,
                   const std::vector<std::int32_t>& alphabet_of,
                   const std::vector<std::uint8_t>& walk, const CompileDeadline* deadline,
                   std::vector<std::int32_t>& deep_id) {
  std::unordered_map<std::string, std::int32_t> ids;
  std::string sig;
  std::vector<StateId> at(static_cast<std::size_t>(trie.max_depth()) + 2);
  deep_id.assign(states.size(), -1);
  for (std::size_t i = 0; i < states.size(); ++i) {
    if (!walk[i]) continue;
    if (Passed(deadline)) return false;
    const std::vector<Alphabet::Node>& deep = alphabets[alphabet_of[i]].deep;
    sig.clear();
    at[0] = states[i];
    for (std::uint32_t v = 0; v < deep.size();) {
      const StateId t = p.Step(at[deep[v].depth - 1], deep[v].byte);
      if (t == CfgProgram::kDead) {
        sig.push_back(0);
        v = deep[v].end;
      } else {
        sig.push_back(finish[local[t]] ? 2 : 1);
        at[deep[v].depth] = t;
        ++v;
      }
    }
    deep_id[i] = ids.try_emplace(sig, static_cast<std::int32_t>(ids.size())).first->second;
  }
  return true;
}

// Moore's refinement. Round 0: by finish; round r + 1: by the round-r classes of the state and
// of its successors (dead apart). Rows are compared exactly, never by hash alone. Fills per
// state its class at its round (`round`), or at the round where the classes stopped splitting.
// False once the deadline has passed.
bool RefineToRounds(const LocalDfa& d, std::span<const std::uint8_t> finish,
                    const std::vector<std::int32_t>& round, const CompileDeadline* deadline,
                    std::vector<std::int32_t>& decided) {
  const std::int32_t n = d.n, k = d.k;
  std::vector<std::int32_t> cls(n), next_cls(n);
  decided.assign(n, -1);
  for (std::int32_t i = 0; i < n; ++i) cls[i] = finish[i] ? 1 : 0;
  const bool both = std::any_of(finish.begin(), finish.end(), [](auto f) { return f != 0; }) &&
                    std::any_of(finish.begin(), finish.end(), [](auto f) { return f == 0; });
  std::int32_t num_cls = both ? 2 : 1, left = n;
  const std::size_t width = static_cast<std::size_t>(k) + 1;
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n) * width);
  std::size_t slots = 1;
  while (slots < 2 * static_cast<std::size_t>(n)) slots <<= 1;
  std::vector<std::int32_t> table(slots);
  for (std::int32_t r = 0; left > 0; ++r) {
    if (deadline != nullptr && deadline->PassedNow()) return false;
    for (std::int32_t i = 0; i < n; ++i) {
      if (round[i] == r) decided[i] = cls[i], --left;
    }
    if (left == 0) break;
    std::fill(table.begin(), table.end(), -1);
    std::int32_t count = 0;
    for (std::int32_t i = 0; i < n; ++i) {
      std::int32_t* row = &rows[i * width];
      row[0] = cls[i];
      for (std::int32_t c = 0; c < k; ++c) {
        const std::int32_t t = d.Succ(i, c);
        row[c + 1] = t < 0 ? -1 : cls[t];
      }
      const std::uint64_t h = RowHash(row, width);
      for (std::size_t slot = h & (slots - 1);; slot = (slot + 1) & (slots - 1)) {
        const std::int32_t o = table[slot];
        if (o < 0) {
          table[slot] = i;
          next_cls[i] = count++;
          break;
        }
        if (std::memcmp(&rows[o * width], row, width * sizeof(std::int32_t)) == 0) {
          next_cls[i] = next_cls[o];
          break;
        }
      }
    }
    cls.swap(next_cls);
    if (count == num_cls) {
      // Stable: every later round is this one.
      for (std::int32_t i = 0; i < n; ++i) {
        if (decided[i] < 0) decided[i] = cls[i];
      }
      break;
    }
    num_cls = count;
  }
  return true;
}

}  // namespace

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
  const std::vector<Bytes> reads = ReadBytes(d);
  std::vector<Alphabet> alphabets;
  std::vector<std::int32_t> alphabet_of;
  if (!AnalyzeAlphabets(trie, reads, d.k, deadline, alphabets, alphabet_of)) return rep;
  std::vector<std::int32_t> round(n);
  for (std::int32_t i = 0; i < n; ++i) round[i] = alphabets[alphabet_of[i]].round;
  std::vector<std::int32_t> decided;
  if (!RefineToRounds(d, finish, round, deadline, decided)) return rep;
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
  if (!LongTokenRuns(p, states, finish, local, trie, alphabets, alphabet_of, walk, deadline,
                     deep_id)) {
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
