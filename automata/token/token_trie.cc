// Builds the flat depth-first token trie from the vocabulary's sorted byte strings: each token
// adds the nodes past its longest common prefix with the previous one.
#include "automata/token/token_trie.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <numeric>
#include <string_view>
#include <tuple>

#include "automata/token/mask_words.h"
#include "automata/vocab/unicode.h"
#include "automata/vocab/token_flags.h"
#include "lockstep/bitmask.h"

namespace lockstep {

namespace {

// The well-formed UTF-8 sequences of two to four bytes (Unicode, Table 3-7, as
// vocab::DecodeUtf8 reads them): the byte ranges of each position, lead byte first.
struct Utf8Form {
  int len;
  std::array<std::array<std::uint8_t, 2>, 4> ranges;
};
constexpr std::array<Utf8Form, 8> kUtf8Forms = {{
    {2, {{{0xC2, 0xDF}, {0x80, 0xBF}}}},
    {3, {{{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}}}},
    {3, {{{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}}}},
    {3, {{{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}}}},
    {3, {{{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
    {4, {{{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
    {4, {{{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}}}},
    {4, {{{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}}},
}};

// Whether every well-formed UTF-8 sequence of two to four bytes, run over a region's `table`
// from any state of `from`, stays in the region (no dead, no exit) and ends in state `to`.
// Sufficient, not necessary: the states after each byte are pooled over the sequences of one
// form, so a table that tells code points apart within a form may fail it and still be fine.
bool Utf8Returns(const std::vector<std::int16_t>& table, std::vector<std::int32_t> from,
                 std::int32_t to) {
  std::sort(from.begin(), from.end());
  from.erase(std::unique(from.begin(), from.end()), from.end());
  std::vector<std::int32_t> cur, next;
  for (const Utf8Form& f : kUtf8Forms) {
    cur = from;
    for (int p = 0; p < f.len; ++p) {
      next.clear();
      for (const std::int32_t q : cur) {
        for (int b = f.ranges[static_cast<std::size_t>(p)][0];
             b <= f.ranges[static_cast<std::size_t>(p)][1]; ++b) {
          const std::int16_t t = table[static_cast<std::size_t>(q) * 256 +
                                       static_cast<std::size_t>(b)];
          if (t < 0) return false;  // dead or leaving
          next.push_back(t);
        }
      }
      std::sort(next.begin(), next.end());
      next.erase(std::unique(next.begin(), next.end()), next.end());
      cur.swap(next);
    }
    if (cur.size() != 1 || cur[0] != to) return false;
  }
  return true;
}

}  // namespace

TokenTrie::TokenTrie(const Vocabulary& vocab) {
  struct Entry {
    std::string_view bytes;
    TokenId id;
  };
  std::vector<Entry> entries;
  entries.reserve(vocab.size());
  for (TokenId id = 0; id < vocab.size(); ++id) {
    TokenKind kind = vocab.Kind(id);
    std::string_view bytes = vocab.TokenBytes(id);
    if ((kind == TokenKind::kNormal || kind == TokenKind::kByte) && !bytes.empty()) {
      entries.push_back({bytes, id});
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    int c = a.bytes.compare(b.bytes);
    return c < 0 || (c == 0 && a.id < b.id);
  });

  // path[d] = index of the node at depth d+1 on the current root-to-leaf path.
  std::vector<std::uint32_t> path;
  std::string_view prev;
  nodes_.reserve(entries.size() * 3);
  tokens_.reserve(entries.size());
  for (const auto& [bytes, id] : entries) {
    std::size_t common = 0;
    while (common < prev.size() && common < bytes.size() && prev[common] == bytes[common]) {
      ++common;
    }
    // Nodes deeper than the common prefix are finished: their subtree ends here.
    for (std::size_t d = common; d < path.size(); ++d) nodes_[path[d]].subtree_end = nodes_.size();
    path.resize(common);
    for (std::size_t d = common; d < bytes.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(nodes_.size()));
      nodes_.push_back(Node{0, static_cast<std::uint32_t>(tokens_.size()),
                            static_cast<std::uint16_t>(d + 1),
                            static_cast<std::uint8_t>(bytes[d])});
    }
    // Identical byte strings (e.g. SentencePiece "▁" and <0x20>) share the node; a token always
    // ends at the last node added, whose token range is still open.
    tokens_.push_back(id);
    max_depth_ = std::max<std::int32_t>(max_depth_, static_cast<std::int32_t>(bytes.size()));
    prev = bytes;
  }
  for (std::uint32_t idx : path) nodes_[idx].subtree_end = nodes_.size();
  nodes_.push_back(Node{static_cast<std::uint32_t>(nodes_.size() + 1),
                        static_cast<std::uint32_t>(tokens_.size()), 0, 0});
  // Each token's byte set and bytes, in the order of tokens_ (that of `entries`).
  byte_sets_.ascii.assign(entries.size(), {0, 0});
  byte_sets_.high.assign(entries.size(), 0);
  byte_sets_.begin.assign(entries.size() + 1, 0);
  std::size_t total = 0;
  for (const Entry& e : entries) total += e.bytes.size();
  byte_sets_.text.reserve(total);
  for (std::size_t k = 0; k < entries.size(); ++k) {
    byte_sets_.begin[k] = static_cast<std::uint32_t>(byte_sets_.text.size());
    byte_sets_.text.append(entries[k].bytes);
    for (const char c : entries[k].bytes) {
      const auto b = static_cast<std::uint8_t>(c);
      if (b >= 0x80) {
        byte_sets_.high[k] = 1;
      } else {
        byte_sets_.ascii[k][b >> 6] |= std::uint64_t{1} << (b & 63);
      }
    }
    if (byte_sets_.high[k] != 0 &&
        vocab::FindInvalidUtf8(entries[k].bytes) != std::string_view::npos) {
      byte_sets_.high[k] = 2;  // (not whole, well-formed UTF-8)
    }
  }
  byte_sets_.begin[entries.size()] = static_cast<std::uint32_t>(byte_sets_.text.size());
  // Children lists (the root's last): node i's children are kids_[kids_begin_[i], kids_begin_[i+1]).
  const std::uint32_t n = static_cast<std::uint32_t>(num_nodes());
  kids_begin_.assign(n + 2, 0);
  kids_.reserve(n);
  kid_bytes_.reserve(n);
  auto list = [&](std::uint32_t first, std::uint32_t stop) {
    for (std::uint32_t c = first; c < stop; c = nodes_[c].subtree_end) {
      kids_.push_back(c);
      kid_bytes_.push_back(nodes_[c].byte);
    }
  };
  for (std::uint32_t i = 0; i < n; ++i) {
    kids_begin_[i] = static_cast<std::uint32_t>(kids_.size());
    list(i + 1, nodes_[i].subtree_end);
  }
  kids_begin_[n] = static_cast<std::uint32_t>(kids_.size());
  list(0, n);
  kids_begin_[n + 1] = static_cast<std::uint32_t>(kids_.size());
  // Per node, the classes every byte below it lies in: bottom-up (a node's subtree follows it),
  // the classes of each child's byte and of what is below the child. A leaf: every class.
  std::array<std::uint8_t, 256> byte_in{};
  for (int b = 0; b < 256; ++b) {
    for (int k = 0; k < kNumSubtreeClasses; ++k) {
      if (InSubtreeClass(k, static_cast<std::uint8_t>(b))) byte_in[b] |= std::uint8_t(1u << k);
    }
  }
  below_in_.assign(n + 1, 0);
  height_below_.assign(n + 1, 0);
  for (std::uint32_t i = n; i-- > 0;) {
    std::uint8_t in = 0xFF;
    int height = 0;
    for (std::uint32_t c = i + 1; c < nodes_[i].subtree_end; c = nodes_[c].subtree_end) {
      in &= byte_in[nodes_[c].byte] & below_in_[c];
      height = std::max(height, 1 + height_below_[c]);
    }
    below_in_[i] = in;
    height_below_[i] = static_cast<std::uint8_t>(std::min(height, 255));
  }
}

namespace {

// TokenTrie::InSubtreeClass, usable in constant expressions.
constexpr bool InClass(int k, std::uint8_t b) {
  const bool digit = b >= '0' && b <= '9';
  const bool lower = b >= 'a' && b <= 'z';
  const bool upper = b >= 'A' && b <= 'Z';
  switch (k) {
    case TokenTrie::kDigits:
      return digit;
    case TokenTrie::kHexDigits:
      return digit || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F');
    case TokenTrie::kLowerLetters:
      return lower;
    case TokenTrie::kLetters:
      return lower || upper;
    case TokenTrie::kAlnum:
      return digit || lower || upper;
    case TokenTrie::kWordChars:
      return digit || lower || upper || b == '_';
    case TokenTrie::kPrintable:
      return b >= 0x20 && b <= 0x7E && b != '"' && b != '\\';
    case TokenTrie::kWhitespace:
      return b == '\t' || b == '\n' || b == '\r' || b == ' ';
    default:
      return false;
  }
}

// The bytes of each class, built at compile time: a constant with nothing to destroy, read by
// walks on any thread, background workers included, until the process ends (a function-local
// static vector was destroyed at exit under a walk still running: ThreadSanitizer's race).
struct ClassBytes {
  std::array<std::array<std::uint8_t, 256>, TokenTrie::kNumSubtreeClasses> bytes{};
  std::array<std::uint16_t, TokenTrie::kNumSubtreeClasses> size{};
};

constexpr ClassBytes MakeClassBytes() {
  ClassBytes c;
  for (int k = 0; k < TokenTrie::kNumSubtreeClasses; ++k) {
    for (int b = 0; b < 256; ++b) {
      if (InClass(k, static_cast<std::uint8_t>(b))) c.bytes[k][c.size[k]++] = static_cast<std::uint8_t>(b);
    }
  }
  return c;
}

constexpr ClassBytes kClassBytes = MakeClassBytes();

}  // namespace

std::span<const std::uint8_t> TokenTrie::SubtreeClassBytes(int k) {
  return {kClassBytes.bytes[k].data(), kClassBytes.size[k]};
}

bool TokenTrie::InSubtreeClass(int k, std::uint8_t b) { return InClass(k, b); }

std::uint32_t TokenTrie::NextChild(std::uint32_t parent, const std::uint64_t* allowed,
                                   int after, std::uint32_t none) const {
  const std::uint32_t p = parent == kRoot ? static_cast<std::uint32_t>(num_nodes()) : parent;
  const std::uint8_t* bytes = kid_bytes_.data();
  std::uint32_t lo = kids_begin_[p];
  const std::uint32_t hi = kids_begin_[p + 1];
  int b = after + 1;
  while (b < 256 && lo < hi) {
    // The next allowed byte >= b.
    int w = b >> 6;
    std::uint64_t x = allowed[w] & (~std::uint64_t{0} << (b & 63));
    while (x == 0 && ++w < 4) x = allowed[w];
    if (x == 0) break;
    b = w * 64 + __builtin_ctzll(x);
    // The first child with byte >= b.
    lo = static_cast<std::uint32_t>(std::lower_bound(bytes + lo, bytes + hi, static_cast<std::uint8_t>(b)) - bytes);
    if (lo == hi) break;
    if (bytes[lo] == b) return kids_[lo];
    b = bytes[lo];
  }
  return none;
}

std::size_t TokenTrie::TableHash::operator()(const std::vector<std::int16_t>& v) const {
  // Four entries a word, four words at a time in independent lanes: a region table is 256
  // entries per state (a JSON string body's, 27 states, is 6,912), and a multiply per entry in
  // one chain cost every region position about 10 µs.
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
  std::array<std::uint64_t, 4> lane = {v.size(), 0x243F6A8885A308D3ull, 0x13198A2E03707344ull,
                                       0xA4093822299F31D0ull};
  const std::size_t words = v.size() / 4;
  const auto* bytes = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t w = 0; w < words; ++w) {
    std::uint64_t x;
    std::memcpy(&x, bytes + w * 8, 8);
    std::uint64_t& h = lane[w & 3];
    h = std::rotl((h ^ x) * kMul, 29);
  }
  std::uint64_t h = lane[0] ^ std::rotl(lane[1], 16) ^ std::rotl(lane[2], 32) ^
                    std::rotl(lane[3], 48);
  for (std::size_t i = words * 4; i < v.size(); ++i) {
    h = (h ^ static_cast<std::uint16_t>(v[i])) * kMul;
  }
  h *= kMul;
  return static_cast<std::size_t>(h ^ (h >> 31));
}

namespace {

// `items` (key, token) into ids and keys, the largest key first: a counting sort (keys are at
// most a token's length).
void SortByKeyDescending(const std::vector<std::pair<std::uint16_t, TokenId>>& items,
                         std::vector<TokenId>& ids, std::vector<std::uint16_t>& keys) {
  std::size_t max_key = 0;
  for (const auto& [key, id] : items) max_key = std::max<std::size_t>(max_key, key);
  std::vector<std::uint32_t> at(max_key + 2, 0);
  for (const auto& [key, id] : items) ++at[max_key - key + 1];
  for (std::size_t k = 1; k < at.size(); ++k) at[k] += at[k - 1];
  ids.resize(items.size());
  keys.resize(items.size());
  for (const auto& [key, id] : items) {
    const std::uint32_t slot = at[max_key - key]++;
    keys[slot] = key;
    ids[slot] = id;
  }
}

// A clear bit set over every id of `tokens`: PaddedBitmaskWords(largest id + 1) words.
std::vector<std::uint32_t> IdBits(std::span<const TokenId> tokens) {
  TokenId max_id = 0;
  for (TokenId t : tokens) max_id = std::max(max_id, t);
  return std::vector<std::uint32_t>(PaddedBitmaskWords(max_id + 1), 0);
}

}  // namespace

const TokenTrie::ByLength& TokenTrie::LongestFirst() const {
  std::call_once(by_length_once_, [this] {
    // A token at node i is nodes_[i].depth bytes long.
    std::vector<std::pair<std::uint16_t, TokenId>> items;
    items.reserve(tokens_.size());
    const std::uint32_t n = static_cast<std::uint32_t>(num_nodes());
    for (std::uint32_t i = 0; i < n; ++i) {
      for (TokenId id : TokensAt(i)) items.push_back({nodes_[i].depth, id});
    }
    SortByKeyDescending(items, by_length_.ids, by_length_.lengths);
  });
  return by_length_;
}

const TokenTrie::CountedView* TokenTrie::Counted(const std::vector<std::int16_t>& unit) const {
  {
    std::lock_guard<std::mutex> lock(region_mu_);
    auto f = counted_.find(unit);
    if (f != counted_.end()) return f->second.get();
    if (counted_.size() >= 256) return nullptr;
  }
  const std::size_t n = unit.size() / 257;
  const std::int16_t* finished = unit.data() + n * 256;
  auto view = std::make_unique<CountedView>();
  view->inside_bits = IdBits(tokens_);
  std::vector<std::pair<std::uint16_t, TokenId>> inside;
  // Token by token, in the trie's order (as Region): a token all of whose bytes are ASCII bytes
  // that are each a whole unit from the start (a one-byte character) is inside and needs its
  // length in units, which its byte set tells; the others run the unit over their bytes.
  std::array<std::uint64_t, 2> whole = {0, 0};  // ASCII bytes that are a unit on their own
  for (int b = 0; b < 128; ++b) {
    const std::int16_t t = unit[static_cast<std::size_t>(b)];
    if (t != kRegionDead && finished[t] != 0) whole[b >> 6] |= std::uint64_t{1} << (b & 63);
  }
  const ByteSets& sets = byte_sets_;
  for (std::size_t k = 0; k < tokens_.size(); ++k) {
    const TokenId id = tokens_[k];
    const std::string_view bytes = sets.Bytes(k);
    if (sets.Within(k, whole)) {
      mask_words::SetBit(view->inside_bits, id);
      inside.push_back({static_cast<std::uint16_t>(bytes.size()), id});
      continue;
    }
    std::int16_t q = 0;
    std::uint16_t units = 0;
    std::size_t d = 0;
    for (; d < bytes.size(); ++d) {
      std::int16_t t =
          unit[static_cast<std::size_t>(q) * 256 + static_cast<std::uint8_t>(bytes[d])];
      if (t == kRegionDead) {
        if (q == 0 && units > 0) {  // between units, on a byte no unit starts with
          view->exits.push_back({id, units, static_cast<std::uint16_t>(d),
                                 static_cast<std::uint8_t>(bytes[d])});
        }
        break;
      }
      if (finished[t] != 0) {
        t = 0;
        ++units;
      }
      q = t;
    }
    if (d == bytes.size()) {
      mask_words::SetBit(view->inside_bits, id);
      inside.push_back({static_cast<std::uint16_t>(units + (q != 0 ? 1 : 0)), id});
    }
  }
  view->inside_count = static_cast<std::int32_t>(inside.size());
  SortByKeyDescending(inside, view->by_need, view->need);  // the most units needed first
  std::stable_sort(view->exits.begin(), view->exits.end(),
                   [](const CountedView::Exit& a, const CountedView::Exit& b) {
                     return a.units < b.units;
                   });
  std::lock_guard<std::mutex> lock(region_mu_);
  auto [it, fresh] = counted_.emplace(unit, std::move(view));
  return it->second.get();
}

std::vector<std::int16_t> TokenTrie::TableOfRuns(std::span<const std::int16_t> runs) {
  std::vector<std::int16_t> table;
  int b = 0;
  for (std::size_t i = 0; i + 1 < runs.size(); i += 2) {
    const int last = runs[i + 1];
    table.insert(table.end(), static_cast<std::size_t>(last - b + 1), runs[i]);
    b = last == 255 ? 0 : last + 1;
  }
  return table;
}

const TokenTrie::RegionView* TokenTrie::RegionOfRuns(const std::vector<std::int16_t>& runs,
                                                     bool* built) const {
  {
    std::lock_guard<std::mutex> lock(region_mu_);
    auto f = region_runs_.find(runs);
    if (f != region_runs_.end()) return f->second;
  }
  const std::vector<std::int16_t> table = TableOfRuns(runs);
  const RegionView* view = Region(table, built);
  std::lock_guard<std::mutex> lock(region_mu_);
  // (Kept when regions_ kept the table's answer: not past its budget.)
  if (regions_.contains(table)) region_runs_.emplace(runs, view);
  return view;
}

const TokenTrie::RegionView* TokenTrie::BuiltRegionOfRuns(const std::vector<std::int16_t>& runs) const {
  {
    std::lock_guard<std::mutex> lock(region_mu_);
    auto f = region_runs_.find(runs);
    if (f != region_runs_.end()) return f->second;
  }
  return BuiltRegion(TableOfRuns(runs));
}

const TokenTrie::RegionView* TokenTrie::BuiltRegion(const std::vector<std::int16_t>& table) const {
  std::lock_guard<std::mutex> lock(region_mu_);
  auto f = regions_.find(table);
  return f == regions_.end() ? nullptr : f->second.get();
}

const TokenTrie::RegionView* TokenTrie::Region(const std::vector<std::int16_t>& table,
                                               bool* built) const {
  {
    std::lock_guard<std::mutex> lock(region_mu_);
    auto f = regions_.find(table);
    if (f != regions_.end()) return f->second.get();
    if (regions_.size() >= 1024) return nullptr;
  }
  if (built != nullptr) *built = true;
  auto view = std::make_unique<RegionView>();
  view->inside_bits = IdBits(tokens_);
  struct Exit {
    std::int32_t q;
    std::string_view suffix;
    TokenId id;
    std::uint16_t offset;
  };
  std::vector<Exit> exits;
  // Token by token, not node by node. The loop state L is where most ASCII bytes go from state
  // 0 (the entry row; L is 0 itself when state 0 loops). A token all of whose bytes are ASCII
  // bytes that go from 0 to L and keep L where it is stays inside, which its byte set tells in
  // two words (most tokens, in a string body); the others run the table over their bytes. A
  // walk of the trie's nodes took 1.8-2.1 ms on Llama-3, once per kind of region, inside the
  // fill that first met it.
  std::vector<std::int32_t> into(table.size() / 256, 0);
  for (int b = 0; b < 128; ++b) {
    const std::int16_t t = table[static_cast<std::size_t>(b)];
    if (t >= 0 && static_cast<std::size_t>(t) < into.size()) ++into[static_cast<std::size_t>(t)];
  }
  const std::size_t loop = static_cast<std::size_t>(
      std::max_element(into.begin(), into.end()) - into.begin());
  std::array<std::uint64_t, 2> stay = {0, 0};  // ASCII bytes from 0 to L and from L to L
  for (int b = 0; b < 128; ++b) {
    if (static_cast<std::size_t>(table[static_cast<std::size_t>(b)]) == loop &&
        static_cast<std::size_t>(table[loop * 256 + static_cast<std::size_t>(b)]) == loop) {
      stay[b >> 6] |= std::uint64_t{1} << (b & 63);
    }
  }
  // Tokens with whole UTF-8 characters too, where each character goes from 0 or L to L (a
  // string body: Llama-3 has 28,802 such tokens of 30,154 with bytes past ASCII).
  const auto l = static_cast<std::int32_t>(loop);
  const bool utf8_stays = Utf8Returns(table, {0, l}, l);
  const ByteSets& sets = byte_sets_;
  const std::size_t too_many = tokens_.size() / 4;
  for (std::size_t k = 0; k < tokens_.size() && exits.size() <= too_many; ++k) {
    const TokenId id = tokens_[k];
    if (sets.Within(k, stay) || (utf8_stays && sets.WithinUtf8(k, stay))) {
      mask_words::SetBit(view->inside_bits, id);
      ++view->inside_count;
      continue;
    }
    const std::string_view bytes = sets.Bytes(k);
    std::int32_t q = 0;
    std::size_t d = 0;
    for (; d < bytes.size(); ++d) {
      const std::int16_t t = table[static_cast<std::size_t>(q) * 256 +
                                   static_cast<std::uint8_t>(bytes[d])];
      if (t == kRegionDead) break;
      if (t == kRegionExit) {
        exits.push_back({q, bytes.substr(d), id, static_cast<std::uint16_t>(d)});
        break;
      }
      q = t;
    }
    if (d == bytes.size()) {
      mask_words::SetBit(view->inside_bits, id);
      ++view->inside_count;
    }
  }
  if (exits.size() > too_many) {
    // Most tokens leave the region (a narrow loop such as [a-z]*): the view would hold most of
    // the vocabulary again and save no walking. Remembered as unusable.
    std::lock_guard<std::mutex> lock(region_mu_);
    auto [it, fresh] = regions_.emplace(table, nullptr);
    return it->second.get();
  }
  std::sort(exits.begin(), exits.end(), [](const Exit& a, const Exit& b) {
    return std::tie(a.q, a.suffix, a.id) < std::tie(b.q, b.suffix, b.id);
  });
  view->exit_tokens = static_cast<std::int64_t>(exits.size());
  std::vector<std::uint32_t> path;
  std::string_view prev;
  for (std::size_t e = 0; e < exits.size(); ++e) {
    const Exit& x = exits[e];
    if (view->groups.empty() || view->groups.back().q != x.q) {
      for (std::uint32_t idx : path) view->nodes[idx].subtree_end = view->nodes.size();
      path.clear();
      prev = {};
      if (!view->groups.empty()) view->groups.back().end = view->nodes.size();
      view->groups.push_back({x.q, static_cast<std::uint32_t>(view->nodes.size()), 0});
    }
    std::size_t common = 0;
    while (common < prev.size() && common < x.suffix.size() && prev[common] == x.suffix[common]) {
      ++common;
    }
    for (std::size_t d = common; d < path.size(); ++d) {
      view->nodes[path[d]].subtree_end = view->nodes.size();
    }
    path.resize(common);
    for (std::size_t d = common; d < x.suffix.size(); ++d) {
      path.push_back(static_cast<std::uint32_t>(view->nodes.size()));
      view->nodes.push_back(Node{0, static_cast<std::uint32_t>(view->tokens.size()),
                                 static_cast<std::uint16_t>(d + 1),
                                 static_cast<std::uint8_t>(x.suffix[d])});
    }
    view->tokens.push_back(x.id);
    view->offsets.push_back(x.offset);
    prev = x.suffix;
  }
  for (std::uint32_t idx : path) view->nodes[idx].subtree_end = view->nodes.size();
  if (!view->groups.empty()) view->groups.back().end = view->nodes.size();
  view->nodes.push_back(Node{static_cast<std::uint32_t>(view->nodes.size() + 1),
                             static_cast<std::uint32_t>(view->tokens.size()), 0, 0});
  std::lock_guard<std::mutex> lock(region_mu_);
  auto [it, fresh] = regions_.emplace(table, std::move(view));
  return it->second.get();
}

}  // namespace lockstep

namespace lockstep {

const TokenTrie::CommaQuoteTokens& TokenTrie::CommaQuotes(const Vocabulary& vocab) const {
  std::call_once(comma_quotes_once_, [&] {
    for (TokenId id = 0; id < vocab.size(); ++id) {
      if (!IsTextToken(vocab, id)) continue;
      const std::string_view bytes = vocab.TokenBytes(id);
      if (const std::size_t close = bytes.find('}'); close != std::string_view::npos) {
        comma_quotes_.brace.push_back(id);
        const std::size_t open = bytes.find('{', close);
        if (open != std::string_view::npos && bytes.find('}', open) != std::string_view::npos)
          comma_quotes_.brace_pairs.push_back(id);
      }
      if (bytes.find(']') != std::string_view::npos) comma_quotes_.bracket.push_back(id);
      if (bytes.find('{') != std::string_view::npos) comma_quotes_.open_brace.push_back(id);
      for (std::size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] != ',' && bytes[i] != '[') continue;
        std::size_t j = i + 1;
        while (j < bytes.size() && (bytes[j] == ' ' || bytes[j] == '\t' || bytes[j] == '\n' ||
                                    bytes[j] == '\r')) {
          ++j;
        }
        // (What follows agrees with a literal: a prefix of it, or it and more.)
        const std::string_view rest = bytes.substr(j);
        bool literal = false;
        for (std::string_view lit : {"true", "false", "null"}) {
          const std::size_t n = std::min(rest.size(), lit.size());
          literal = literal || (!rest.empty() && rest.substr(0, n) == lit.substr(0, n));
        }
        if (literal) {
          comma_quotes_.literal_after.push_back(id);
          break;
        }
      }
      const std::size_t comma = bytes.find(',');
      if (comma != std::string_view::npos) comma_quotes_.comma.push_back(id);
      // (Quotes after a later comma are among those after the first.)
      if (comma == std::string_view::npos ||
          std::count(bytes.begin() + static_cast<std::ptrdiff_t>(comma), bytes.end(), '"') < 2) {
        continue;
      }
      (bytes.find('[') != std::string_view::npos ? comma_quotes_.opening : comma_quotes_.other)
          .push_back(id);
    }
  });
  return comma_quotes_;
}

}  // namespace lockstep
