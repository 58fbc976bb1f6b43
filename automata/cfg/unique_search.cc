#include "automata/cfg/unique_search.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <optional>

#include "automata/cfg/earley.h"
#include "automata/cfg/unique_items.h"

namespace lockstep {
namespace {

bool Blank(std::uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }

// Canonical forms (unique_items.cc, AppendCanonical): `{` (sized key, value)* `}`,
// `[` value* `]`, `s` sized bytes, `t`, `f`, `n`, `#` number `;`; a sized text is its length in
// decimal, `:`, then its bytes.
bool ReadSized(std::string_view s, std::size_t* i, std::string_view* out) {
  std::size_t n = 0, j = *i;
  while (j < s.size() && s[j] >= '0' && s[j] <= '9') n = n * 10 + static_cast<std::size_t>(s[j++] - '0');
  if (j == *i || j >= s.size() || s[j] != ':' || s.size() - (j + 1) < n) return false;
  *out = s.substr(j + 1, n);
  *i = j + 1 + n;
  return true;
}

// The end of the value that starts at s[i], or npos. Iterative (containers nest).
std::size_t SkipValue(std::string_view s, std::size_t i) {
  std::int32_t depth = 0;
  do {
    if (i >= s.size()) return std::string_view::npos;
    const char c = s[i];
    if (c == '{' || c == '[') {
      ++depth;
      ++i;
    } else if (c == '}' || c == ']') {
      --depth;
      ++i;
    } else if (c == 's') {
      ++i;
      std::string_view v;
      if (!ReadSized(s, &i, &v)) return std::string_view::npos;
    } else if (c == '#') {
      const std::size_t e = s.find(';', i);
      if (e == std::string_view::npos) return e;
      i = e + 1;
    } else if (c == 't' || c == 'f' || c == 'n') {
      ++i;
    } else {
      return std::string_view::npos;
    }
    // Inside an object, a member's key comes before its value.
    if (depth > 0 && i < s.size() && s[i] >= '0' && s[i] <= '9') {
      std::string_view k;
      if (!ReadSized(s, &i, &k)) return std::string_view::npos;
    }
  } while (depth > 0);
  return i;
}

// The value of member `key` of the object `obj`, or empty.
std::string_view Member(std::string_view obj, std::string_view key) {
  if (obj.empty() || obj[0] != '{') return {};
  std::size_t i = 1;
  while (i < obj.size() && obj[i] != '}') {
    std::string_view k;
    if (!ReadSized(obj, &i, &k)) return {};
    const std::size_t e = SkipValue(obj, i);
    if (e == std::string_view::npos) return {};
    if (k == key) return obj.substr(i, e - i);
    i = e;
  }
  return {};
}

// Element n of the array `arr`, or empty.
std::string_view Element(std::string_view arr, std::int32_t n) {
  if (arr.empty() || arr[0] != '[') return {};
  std::size_t i = 1;
  for (std::int32_t k = 0; i < arr.size() && arr[i] != ']'; ++k) {
    const std::size_t e = SkipValue(arr, i);
    if (e == std::string_view::npos) return {};
    if (k == n) return arr.substr(i, e - i);
    i = e;
  }
  return {};
}

// The members or elements of a container; -1 when `c` is none.
std::int32_t Count(std::string_view c) {
  if (c.empty() || (c[0] != '{' && c[0] != '[')) return -1;
  std::size_t i = 1;
  std::int32_t k = 0;
  while (i < c.size() && c[i] != '}' && c[i] != ']') {
    if (c[0] == '{') {
      std::string_view key;
      if (!ReadSized(c, &i, &key)) return -1;
    }
    const std::size_t e = SkipValue(c, i);
    if (e == std::string_view::npos) return -1;
    i = e;
    ++k;
  }
  return k;
}

bool SomeKeyStartsWith(std::string_view obj, std::string_view prefix) {
  if (obj.empty() || obj[0] != '{') return false;
  std::size_t i = 1;
  while (i < obj.size() && obj[i] != '}') {
    std::string_view k;
    if (!ReadSized(obj, &i, &k)) return false;
    if (k.substr(0, prefix.size()) == prefix) return true;
    i = SkipValue(obj, i);
    if (i == std::string_view::npos) return false;
  }
  return false;
}

// A string's value: `s` and its sized bytes.
bool StringValue(std::string_view v, std::string_view* bytes) {
  if (v.empty() || v[0] != 's') return false;
  std::size_t i = 1;
  return ReadSized(v, &i, bytes) && i == v.size();
}

}  // namespace

ItemView::ItemView(const std::vector<std::string_view>* earlier, bool need, bool strings)
    : earlier_(earlier), phase_(need ? Phase::kNeed : Phase::kDone), strings_(strings) {}

void ItemView::Reset(const std::vector<std::string_view>* earlier, bool need, bool strings) {
  earlier_ = earlier;
  phase_ = need ? Phase::kNeed : Phase::kDone;
  strings_ = strings;
  frames_.clear();
  consistent_.clear();
  repeated_key_ = in_key_ = escape_ = false;
  leaf_ = Leaf::kNone;
  hex_left_ = 0;
  raw_.clear();
  decoded_.clear();
  decoded_exact_ = true;
}

std::string_view ItemView::At(std::string_view e, bool inner) const {
  std::string_view v = e;
  for (std::size_t i = 0; i < frames_.size(); ++i) {
    if (i + 1 == frames_.size() && !inner) break;
    const Frame& f = frames_[i];
    v = f.object ? Member(v, f.key) : Element(v, f.count - 1);
    if (v.empty()) return v;
  }
  return v;
}

template <typename F>
void ItemView::Filter(bool inner, F keep) {
  std::size_t k = 0;
  for (std::int32_t idx : consistent_) {
    if (keep(At((*earlier_)[static_cast<std::size_t>(idx)], inner))) consistent_[k++] = idx;
  }
  consistent_.resize(k);
}

void ItemView::StartObjectItem() {
  phase_ = Phase::kObject;
  frames_.resize(1);  // (the frame's buffers are kept)
  Frame& f = frames_[0];
  f.object = true;
  f.expect_key = true;
  f.expect_colon = f.after_value = false;
  f.key.clear();
  f.count = 0;
  f.keys.clear();
  consistent_.clear();
  for (std::size_t i = 0; i < earlier_->size(); ++i) consistent_.push_back(static_cast<std::int32_t>(i));
  repeated_key_ = in_key_ = escape_ = false;
  leaf_ = Leaf::kNone;
}

void ItemView::Step(std::uint8_t b) {
  switch (phase_) {
    case Phase::kOther:
      return;
    case Phase::kNeed:
      if (Blank(b)) return;
      if (b == '{') {
        StartObjectItem();
      } else if (b == '"') {
        phase_ = Phase::kString;
        strings_ = true;  // (the grammar took a string item here)
        escape_ = false;
      } else {
        phase_ = Phase::kOther;
      }
      return;
    case Phase::kString:
      if (escape_) {
        escape_ = false;
      } else if (b == '\\') {
        escape_ = true;
      } else if (b == '"') {
        phase_ = Phase::kDone;
      }
      return;
    case Phase::kDone:
      if (Blank(b)) return;
      phase_ = b == ',' ? Phase::kNeed : Phase::kOther;
      return;
    case Phase::kObject:
      break;
  }
  if (in_key_ || leaf_ == Leaf::kString) {
    StringByte(b);
    return;
  }
  if (leaf_ == Leaf::kBare) {
    if (!Blank(b) && b != ',' && b != '}' && b != ']') {
      raw_.push_back(static_cast<char>(b));
      return;
    }
    ValueDone();
  }
  if (!Blank(b)) Structural(b);
}

void ItemView::ValueStarts(std::uint8_t b) {
  Frame& f = frames_.back();
  f.expect_key = f.expect_colon = false;
  f.after_value = true;  // (once this value ends; a nested one's frame is above it meanwhile)
  if (!f.object) ++f.count;
  if (b == '"') {
    leaf_ = Leaf::kString;
    raw_.assign(1, '"');
    decoded_.clear();
    decoded_exact_ = true;
    escape_ = false;
    hex_left_ = 0;
    Filter(true, [](std::string_view v) { return !v.empty() && v[0] == 's'; });
    return;
  }
  if (b == '{' || b == '[') {
    Filter(true, [b](std::string_view v) { return !v.empty() && v[0] == static_cast<char>(b); });
    frames_.emplace_back();
    frames_.back().object = b == '{';
    frames_.back().expect_key = b == '{';
    return;
  }
  leaf_ = Leaf::kBare;
  raw_.assign(1, static_cast<char>(b));
  if (b == 't' || b == 'f' || b == 'n') {
    Filter(true, [b](std::string_view v) { return v.size() == 1 && v[0] == static_cast<char>(b); });
  } else {
    Filter(true, [](std::string_view v) { return !v.empty() && v[0] == '#'; });
  }
}

void ItemView::ValueDone() {
  std::string canon;
  if (leaf_ == Leaf::kString) {
    std::string value;
    if (DecodeJsonString(raw_, &value)) {
      canon.assign(1, 's');
      canon.append(std::to_string(value.size()));
      canon.push_back(':');
      canon.append(value);
    }
  } else if (!CanonicalValue(raw_, &canon)) {
    canon.clear();
  }
  // (A text that does not read as a value, which the grammar does not let through, compares
  // with nothing: the earlier items stay.)
  if (!canon.empty()) Filter(true, [&canon](std::string_view v) { return v == canon; });
  leaf_ = Leaf::kNone;
}

void ItemView::Structural(std::uint8_t b) {
  Frame& f = frames_.back();
  if (f.object && f.expect_key) {
    if (b == '"') {
      in_key_ = true;
      raw_.assign(1, '"');
      decoded_.clear();
      decoded_exact_ = true;
      escape_ = false;
      hex_left_ = 0;
      return;
    }
    if (b == '}') CloseContainer();
    return;
  }
  if (f.object && f.expect_colon) {
    if (b == ':') f.expect_colon = false;
    return;
  }
  if (!f.after_value) {
    if (!f.object && b == ']') {
      CloseContainer();
      return;
    }
    ValueStarts(b);
    return;
  }
  // After a value.
  if (b == ',') {
    f.after_value = false;
    if (f.object) f.expect_key = true;
    return;
  }
  if (b == '}' || b == ']') CloseContainer();
}

void ItemView::CloseContainer() {
  const std::int32_t count = frames_.back().count;
  Filter(false, [count](std::string_view v) { return Count(v) == count; });
  frames_.pop_back();
  if (frames_.empty()) phase_ = Phase::kDone;
}

void ItemView::StringByte(std::uint8_t b) {
  raw_.push_back(static_cast<char>(b));
  bool appended = false;
  if (hex_left_ > 0) {
    --hex_left_;
    return;
  }
  if (escape_) {
    escape_ = false;
    if (b == 'u') {
      hex_left_ = 4;
      decoded_exact_ = false;  // (surrogate pairs: the whole text decodes at the end)
      return;
    }
    const int c = JsonEscapeChar(b);
    if (c < 0 || !decoded_exact_) return;
    decoded_.push_back(static_cast<char>(c));
    appended = true;
  } else if (b == '\\') {
    escape_ = true;
    return;
  } else if (b == '"') {
    if (in_key_) {
      in_key_ = false;
      Frame& f = frames_.back();
      std::string key;
      if (!DecodeJsonString(raw_, &key)) key = decoded_;
      f.key = key;
      f.expect_key = false;
      f.expect_colon = true;
      if (std::find(f.keys.begin(), f.keys.end(), key) != f.keys.end()) {
        repeated_key_ = true;
      } else {
        f.keys.push_back(key);
        ++f.count;
      }
      Filter(true, [](std::string_view v) { return !v.empty(); });
      return;
    }
    ValueDone();
    return;
  } else if (decoded_exact_) {
    decoded_.push_back(static_cast<char>(b));
    appended = true;
  }
  if (!appended) return;
  if (in_key_) {
    const std::string_view prefix = decoded_;
    Filter(false, [prefix](std::string_view v) { return SomeKeyStartsWith(v, prefix); });
  } else {
    const std::string_view prefix = decoded_;
    Filter(true, [prefix](std::string_view v) {
      std::string_view bytes;
      return StringValue(v, &bytes) && bytes.substr(0, prefix.size()) == prefix;
    });
  }
}

namespace {

// The bytes a search tries, in order: those that end strings, values and objects first (most
// ways to finish are short), then those that start values, then the rest.
const std::array<std::uint8_t, 256>& SearchOrder() {
  static const std::array<std::uint8_t, 256> order = [] {
    std::array<std::uint8_t, 256> o{};
    std::array<bool, 256> used{};
    std::size_t n = 0;
    const auto add = [&](std::uint8_t b) {
      if (!used[b]) used[b] = true, o[n++] = b;
    };
    for (char c : std::string_view("\"}],:{[0tfn1-.eE+")) add(static_cast<std::uint8_t>(c));
    for (int c = 'a'; c <= 'z'; ++c) add(static_cast<std::uint8_t>(c));
    for (int c = 'A'; c <= 'Z'; ++c) add(static_cast<std::uint8_t>(c));
    for (int c = 0x20; c < 0x100; ++c) add(static_cast<std::uint8_t>(c));
    for (int c = 0; c < 0x20; ++c) add(static_cast<std::uint8_t>(c));
    return o;
  }();
  return order;
}

}  // namespace

bool ReplayWay(EarleyParser& parser, const ItemView& from, std::string_view bytes,
               std::int64_t* budget) {
  if (from.SettledOutsideArrays()) return true;
  thread_local std::optional<ItemView> view;  // (assigned into: its buffers are reused)
  view = from;
  const std::int32_t base = parser.num_sets();
  bool found = false;
  for (unsigned char b : bytes) {
    if (--*budget < 0 || !parser.StepByte(b)) break;
    view->Step(b);
    if (view->SettledOutsideArrays()) {
      found = true;
      break;
    }
  }
  parser.PopTo(base);
  return found;
}

void WithoutBlanks(const ItemView& from, std::string_view bytes, std::string* out) {
  thread_local std::optional<ItemView> view;
  view = from;
  out->clear();
  for (unsigned char b : bytes) {
    if (!Blank(b) || view->InString()) out->push_back(static_cast<char>(b));
    view->Step(b);
  }
}

SearchResult SearchNewItem(EarleyParser& parser, const ItemView& view, std::int64_t* budget,
                           std::string* path) {
  if (view.SettledOutsideArrays()) return SearchResult::kFound;
  const std::array<std::uint8_t, 256>& order = SearchOrder();
  struct Entry {
    ItemView view;
    std::size_t next = 0;
    std::bitset<256> live;  // the bytes the parser can scan here (the others are not tried)
  };
  // The path's entries are stack[0, depth); the entries past it keep their buffers for the
  // next push (a search runs per candidate token, many per fill: no allocation once warm).
  thread_local std::vector<Entry> stack;
  if (stack.empty()) stack.push_back({view, 0, {}});
  stack[0].view = view;
  stack[0].next = 0;
  std::size_t depth = 1;
  parser.LiveBytes(&stack[0].live);
  const std::int32_t base = parser.num_sets();
  SearchResult result = SearchResult::kNone;
  while (depth > 0) {
    const std::int32_t taken = static_cast<std::int32_t>(depth) - 1;  // bytes so far
    const std::size_t top = depth - 1;
    if (stack[top].next == order.size()) {
      --depth;
      if (taken > 0) parser.PopTo(base + taken - 1);
      continue;
    }
    const std::uint8_t b = order[stack[top].next++];
    if (!stack[top].live.test(b) || (Blank(b) && !stack[top].view.InString())) continue;
    if (--*budget < 0) {
      result = SearchResult::kOver;
      break;
    }
    if (!parser.StepByte(b)) continue;
    if (depth == stack.size()) {
      stack.push_back({stack[top].view, 0, {}});  // (the entry is copied before the vector grows)
    } else {
      stack[depth].view = stack[top].view;
      stack[depth].next = 0;
    }
    ItemView& v = stack[depth++].view;
    v.Step(b);
    if (v.SettledOutsideArrays()) {
      result = SearchResult::kFound;
      if (path != nullptr) {
        path->clear();
        for (std::size_t d = 0; d + 1 < depth; ++d) {
          path->push_back(static_cast<char>(order[stack[d].next - 1]));
        }
      }
      break;
    }
    parser.LiveBytes(&stack[depth - 1].live);
  }
  parser.PopTo(base);
  return result;
}

}  // namespace lockstep
