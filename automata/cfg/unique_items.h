// Unique items at run time: `uniqueItems`, which no context-free grammar holds over unbounded
// values (the set of items seen so far is unbounded), is a check the parser makes as each item
// completes, and as an item that can run out of values goes on (EarleyParser, "Unique items");
// masks take it into account (CfgGrammar::FilterUniqueItems). docs/json-schema-compiler.md,
// "uniqueItems at run time", has the whole design. Items are compared by JSON value: a string's escapes are
// decoded, so "a" and "\u0061" are equal (schema grammars spell strings canonically, one
// spelling per value, but the check does not rely on it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lockstep {

// The value of a hex digit, -1 for another byte.
int JsonHexDigit(std::uint8_t b);
// The character a one-letter JSON escape `\e` stands for (`"`, `\`, `/`, b, f, n, r, t); -1 for
// any other byte (`u` included: four hex digits follow it).
int JsonEscapeChar(std::uint8_t e);

// The value of the JSON string `text` (its quotes included) as UTF-8 bytes: escapes decoded,
// \u surrogate pairs combined, a lone surrogate kept as its 3-byte form (so that equal texts
// stay equal). False when text is not one complete JSON string.
bool DecodeJsonString(std::string_view text, std::string* out);

// The key an item's text is compared by: "s" and the decoded value for a string; "o" and a
// canonical form of the value for an object or array (read as the validator reads instances:
// members by key, a repeated key's last value, numbers equal when JSON Schema's comparison says
// so: 1 = 1.0, strings decoded); "x" and the text itself for a literal and a PlainInteger ("-0"
// is keyed as "0"), "x" and the canonical form of any other number (the same as the integer's
// text when the number is an integer of up to 18 digits, so "x1" for 1, 1.0 and 1e0).
// False when `text` starts with a quote, brace or bracket, or with a digit or minus, but is
// not one JSON value.
bool UniqueKey(std::string_view text, std::string* key);

// The canonical form of one JSON value's text, as in an object's key without its leading 'o'
// (members sorted, strings sized, numbers canonical); false when `text` is not one JSON value.
bool CanonicalValue(std::string_view text, std::string* out);

// `text` is an integer of at most 18 digits as JSON writes it (`-?(0|[1-9][0-9]*)`): its key
// is its text ("x" + text; "-0" as "0"), and every key of a longer text of digits is another.
bool PlainInteger(std::string_view text);

// Where a scan inside an object or array item stands, and whether `byte` (already appended to
// the item's text) closed it: depth 0 again.
struct UniqueListScan;
bool StepStructByte(UniqueListScan& s, std::uint8_t byte);

// Where a scan of a unique list's text stands: between items, inside a string item (whose raw
// text so far, from its quote, is `raw`), inside a bare item (a number or literal: `raw`), or
// inside an object or array item (depth > 0: `raw` from its opening bracket).
struct UniqueListScan {
  bool in_string = false;
  bool in_bare = false;
  bool escape = false;  // inside a string, right after a backslash
  std::int32_t depth = 0;             // brackets open inside an object or array item
  bool struct_string = false;         // inside a string of that item
  bool struct_escape = false;         // and right after a backslash there
  std::string raw;
};

// The string items of one unique-items list, read incrementally from the list's text (the
// bytes of the sets after its origin set), as the parser needs them.
class UniqueListItems {
 public:
  // Starts over for the list whose rule was predicted in set `origin`.
  void Reset(std::int32_t origin) {
    origin_ = origin;
    read_to_ = origin;
    items_.clear();
    count_.clear();
    scan_ = {};
  }
  std::int32_t origin() const { return origin_; }
  // The last set whose byte was read.
  std::int32_t read_to() const { return read_to_; }
  // Reads the byte that made set read_to() + 1; an item that it ends is added (by UniqueKey).
  void Feed(std::uint8_t byte);
  bool Contains(const std::string& key) const { return count_.count(key) != 0; }
  // How many distinct keys read start with `prefix`, counting no further than `stop_at`.
  std::size_t CountWithPrefix(std::string_view prefix, std::size_t stop_at) const {
    std::size_t k = 0;
    for (auto it = count_.lower_bound(prefix); it != count_.end() && k < stop_at; ++it, ++k) {
      if (std::string_view(it->first).substr(0, prefix.size()) != prefix) break;
    }
    return k;
  }
  // Forgets what was read from set n on (the parser popped back to n sets): back to the end of
  // the last item read before n, between items (the caller reads on from there).
  void PopTo(std::int32_t n);
  const UniqueListScan& scan() const { return scan_; }
  std::size_t size() const { return items_.size(); }
  // The distinct keys read, sorted, with how many items have each (valid until the next Feed,
  // PopTo or Reset).
  using Keys = std::map<std::string, std::int32_t, std::less<>>;
  const Keys& keys() const { return count_; }

 private:
  std::int32_t origin_ = -1;
  std::int32_t read_to_ = -1;
  void AddItem(std::int32_t end);  // scan_.raw, ended at set `end`
  std::vector<std::pair<std::int32_t, std::string>> items_;  // (set it ends, key), in order
  Keys count_;  // sorted: the keys with a prefix are a range
  UniqueListScan scan_;
};

}  // namespace lockstep
