#include "automata/cfg/tail_sort.h"

#include <algorithm>
#include <array>
#include <cstddef>

namespace lockstep {
namespace {

std::uint64_t TailPrefix(std::string_view t) {
  std::uint64_t k = 0;
  const std::size_t n = std::min<std::size_t>(t.size(), 8);
  for (std::size_t i = 0; i < n; ++i) {
    k |= std::uint64_t{static_cast<std::uint8_t>(t[i])} << (56 - 8 * i);
  }
  return k;
}

// Digit d of a key, least significant first: the token's 4 bytes, then the prefix's 8.
constexpr int kDigits = 12;
std::uint32_t Digit(const TailSortBuffers::Key& k, int d) {
  return d < 4 ? (k.token >> (8 * d)) & 0xffu
               : static_cast<std::uint32_t>(k.prefix >> (8 * (d - 4))) & 0xffu;
}

}  // namespace

void SortTails(std::vector<Tail>& tails, TailSortBuffers& buf) {
  // std::sort over the pairs compares string_views through memcmp, 70-80 ns an element: 68 µs
  // for the 888 tails after a JSON string's closing quote on Llama-3, a third of the fill time
  // of a replay of real-world schemas. Here a stable radix sort, least significant byte first,
  // of the token and then of the tail's first 8 bytes (big-endian, zero-padded: ordered as the
  // bytes are), skipping the digits every element shares (the high ones of the token, the low
  // ones of a short tail's prefix). Tails with equal prefixes are then in token order; a run of
  // them whose tails may still differ (8 bytes or more, or lengths that differ by trailing zero
  // bytes) is sorted again by the whole pair.
  const std::size_t n = tails.size();
  if (n <= 32) {
    std::sort(tails.begin(), tails.end());
    return;
  }
  std::vector<TailSortBuffers::Key>& keys = buf.keys;
  std::vector<TailSortBuffers::Key>& tmp = buf.tmp;
  keys.resize(n);
  tmp.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys[i] = {TailPrefix(tails[i].first), static_cast<std::uint32_t>(tails[i].second),
               static_cast<std::uint32_t>(i)};
  }
  std::array<std::array<std::uint32_t, 256>, kDigits> count{};
  for (const TailSortBuffers::Key& k : keys) {
    for (int d = 0; d < kDigits; ++d) ++count[d][Digit(k, d)];
  }
  for (int d = 0; d < kDigits; ++d) {
    std::array<std::uint32_t, 256>& c = count[d];
    if (c[Digit(keys[0], d)] == n) continue;
    std::uint32_t sum = 0;
    for (std::uint32_t& x : c) {
      const std::uint32_t v = x;
      x = sum;
      sum += v;
    }
    for (const TailSortBuffers::Key& k : keys) tmp[c[Digit(k, d)]++] = k;
    keys.swap(tmp);
  }
  auto by_pair = [&](const TailSortBuffers::Key& a, const TailSortBuffers::Key& b) {
    return tails[a.index] < tails[b.index];
  };
  for (std::size_t i = 0; i < n;) {
    const std::size_t len = tails[keys[i].index].first.size();
    bool equal_tails = len < 8;
    std::size_t j = i + 1;
    for (; j < n && keys[j].prefix == keys[i].prefix; ++j) {
      equal_tails = equal_tails && tails[keys[j].index].first.size() == len;
    }
    if (!equal_tails && j - i > 1) {
      std::sort(keys.begin() + static_cast<std::ptrdiff_t>(i),
                keys.begin() + static_cast<std::ptrdiff_t>(j), by_pair);
    }
    i = j;
  }
  buf.out.resize(n);
  for (std::size_t i = 0; i < n; ++i) buf.out[i] = tails[keys[i].index];
  tails.swap(buf.out);
}

namespace {

// The trie of `tails`, sorted by (bytes, token) without repeats, into pos.
void TrieOfSorted(const std::vector<Tail>& unc, CfgPosition& pos) {
  pos.num_uncertain = static_cast<std::int32_t>(unc.size());
  std::vector<std::uint32_t> open;  // node indices on the current path, by depth - 1
  std::string_view prev;
  for (std::size_t u = 0; u < unc.size();) {
    std::string_view tail = unc[u].first;
    std::size_t c = 0;
    while (c < prev.size() && c < tail.size() && prev[c] == tail[c]) ++c;
    while (open.size() > c) {
      pos.tails[open.back()].subtree_end = static_cast<std::uint32_t>(pos.tails.size());
      open.pop_back();
    }
    for (std::size_t dd = c; dd < tail.size(); ++dd) {
      open.push_back(static_cast<std::uint32_t>(pos.tails.size()));
      pos.tails.push_back({0, static_cast<std::uint32_t>(pos.tail_tokens.size()),
                           static_cast<std::uint16_t>(dd + 1),
                           static_cast<std::uint8_t>(tail[dd])});
    }
    while (u < unc.size() && unc[u].first == tail) pos.tail_tokens.push_back(unc[u++].second);
    prev = tail;
  }
  while (!open.empty()) {
    pos.tails[open.back()].subtree_end = static_cast<std::uint32_t>(pos.tails.size());
    open.pop_back();
  }
  pos.tails.push_back({static_cast<std::uint32_t>(pos.tails.size() + 1),
                       static_cast<std::uint32_t>(pos.tail_tokens.size()), 0, 0});
}

}  // namespace

void TailTrieBuilder::Build(std::vector<Tail>& tails, CfgPosition& pos) {
  pos.tails.clear();
  pos.tail_tokens.clear();
  Kept* keep = nullptr;
  if (tails.size() >= kMinKept && tails.size() <= kMaxKept) {
    // Hashed by tokens and lengths (no read of the vocabulary's bytes), matched by bytes too.
    std::uint64_t h = 0x9E3779B97F4A7C15ull ^ tails.size();
    for (const auto& [tail, tok] : tails) {
      h = (h ^ (std::uint64_t{static_cast<std::uint32_t>(tok)} << 16) ^ tail.size()) *
          0x100000001B3ull;
    }
    for (Kept& k : kept_) {
      if (k.hash != h || k.tokens.size() != tails.size()) continue;
      bool same = true;
      for (std::size_t i = 0; same && i < tails.size(); ++i) {
        const std::uint32_t b = i == 0 ? 0 : k.ends[i - 1];
        same = k.tokens[i] == tails[i].second &&
               std::string_view(k.bytes).substr(b, k.ends[i] - b) == tails[i].first;
      }
      if (same) {
        pos.tails = k.tails;
        pos.tail_tokens = k.tail_tokens;
        pos.num_uncertain = k.num_uncertain;
        ++reused_;
        return;
      }
    }
    keep = &kept_[next_];
    next_ = (next_ + 1) % kKept;
    keep->hash = h;
    keep->tokens.clear();
    keep->ends.clear();
    keep->bytes.clear();
    for (const auto& [tail, tok] : tails) {
      keep->tokens.push_back(tok);
      keep->bytes.append(tail);
      keep->ends.push_back(static_cast<std::uint32_t>(keep->bytes.size()));
    }
  }
  SortTails(tails, sort_);
  tails.erase(std::unique(tails.begin(), tails.end()), tails.end());
  TrieOfSorted(tails, pos);
  if (keep != nullptr) {
    keep->tails = pos.tails;
    keep->tail_tokens = pos.tail_tokens;
    keep->num_uncertain = pos.num_uncertain;
  }
}

}  // namespace lockstep
