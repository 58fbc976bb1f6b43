// Unique items that can run out of values: lists of closed objects (`additionalProperties:
// false`, a bound on the members, constrained keys) under `uniqueItems`. A prefix of such an
// item may have only repeats of earlier items left to finish with (a last member whose value is
// forced, a `null` under way), which the check as items complete (unique_items.h) cannot see
// coming. The mask (CfgGrammar::FilterUniqueItems) takes them into account with an ItemView of
// the item under way, compared member by member with the earlier items, and, for the tokens
// after which the item could still equal an earlier one, a search for a new way to finish
// (SearchNewItem). docs/json-schema-compiler.md, "Objects that can run out of values".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

class EarleyParser;

// The item under way in a list of object items, compared with the list's earlier object items
// (their canonical forms: UniqueKey's, without its leading 'o') as its text goes on. An earlier
// item stays *consistent* while every member value completed so far equals its value there (by
// JSON equality: numbers as the validator compares them, strings decoded), every key so far is
// one of its keys, every container closed so far has as many members as its own, and a string
// or literal under way is a prefix of its value there. When none is left, every way to finish
// the item gives a new value. Reads blanks outside strings as nothing.
class ItemView {
 public:
  enum class Phase : std::uint8_t {
    kNeed,    // between items, where an item must come (after `[` or a comma)
    kDone,    // between items, after one (the parser found it new as it completed)
    kObject,  // inside an object item
    kString,  // inside a string item (beside the objects: strings are open, never a repeat
              // that cannot be avoided)
    kOther,   // the list has ended, or an item of another kind: nothing for this view to check
  };
  // A view between items; `earlier` must outlive it. `strings`: the list takes string items
  // (open ones), so an item to come can always be new.
  ItemView(const std::vector<std::string_view>* earlier, bool need, bool strings);
  // As a view constructed so, keeping its buffers.
  void Reset(const std::vector<std::string_view>* earlier, bool need, bool strings);
  // Reads one byte of the list's text.
  void Step(std::uint8_t b);
  Phase phase() const { return phase_; }
  // Inside a string of the item (blanks there are characters).
  bool InString() const {
    return phase_ == Phase::kString || (phase_ == Phase::kObject && (in_key_ || leaf_ == Leaf::kString));
  }
  // Every way to finish from here gives an item no earlier one equals (or nothing is under way):
  // kDone, kOther, an item to come with no earlier object item, or an object with no earlier
  // item consistent and no key repeated.
  bool Settled() const {
    return phase_ == Phase::kDone || phase_ == Phase::kOther || phase_ == Phase::kString ||
           (phase_ == Phase::kNeed && (earlier_->empty() || strings_)) ||
           (phase_ == Phase::kObject && consistent_.empty() && !repeated_key_);
  }
  // Between two tokens of the JSON text (not inside a key, a string or a bare value): blanks
  // here are whitespace, which changes no way to finish.
  bool AtBoundary() const {
    return phase_ != Phase::kString && (phase_ != Phase::kObject || (!in_key_ && leaf_ == Leaf::kNone));
  }
  // Settled, and no array open inside the item: a list there (of closed objects, of items of
  // any type) could be at a prefix with only repeats of its own earlier items left, which the
  // parser refuses only as that item completes. A search ends here (SearchNewItem).
  bool SettledOutsideArrays() const {
    if (!Settled()) return false;
    for (const Frame& f : frames_)
      if (!f.object) return false;
    return true;
  }
  // The earlier items consistent with the item under way (after it closes: those it equals).
  std::size_t consistent() const { return consistent_.size(); }
  bool repeated_key() const { return repeated_key_; }

 private:
  enum class Leaf : std::uint8_t { kNone, kString, kBare };
  struct Frame {
    bool object = false;
    bool expect_key = false;    // object: before a key (or `}`)
    bool expect_colon = false;  // object: after a key
    std::string key;            // object: the decoded key of the member under way
    bool after_value = false;   // after a member's or element's value (before `,` or the end)
    std::int32_t count = 0;     // members (distinct keys) or elements so far
    std::vector<std::string> keys;  // object: the keys so far
  };
  void StartObjectItem();
  void ValueStarts(std::uint8_t b);   // a value's first byte, in the innermost frame
  void ValueDone();                   // the innermost frame's value under way has ended
  void Structural(std::uint8_t b);    // a byte outside strings and bare values
  void StringByte(std::uint8_t b);
  void CloseContainer();              // `}` or `]` of the innermost frame
  // The earlier item e's value at the path of the frames (the innermost frame's member or
  // element under way when `inner` is set, else the innermost container itself); empty when it
  // has none.
  std::string_view At(std::string_view e, bool inner) const;
  // Keeps the earlier items whose value at the path passes `keep`.
  template <typename F>
  void Filter(bool inner, F keep);

  const std::vector<std::string_view>* earlier_;
  Phase phase_;
  bool strings_;
  std::vector<Frame> frames_;
  std::vector<std::int32_t> consistent_;  // indexes into *earlier_
  bool repeated_key_ = false;
  bool in_key_ = false;
  Leaf leaf_ = Leaf::kNone;
  bool escape_ = false;
  std::int32_t hex_left_ = 0;  // hex digits of a \u escape still to come
  std::string raw_;      // the key's or leaf's text under way (a string from its opening quote)
  std::string decoded_;  // a string's characters so far, decoded (while escapes are simple)
  bool decoded_exact_ = true;  // decoded_ is the string's exact prefix (no \u under way or past)
};

// Whether the parser, at the end of its text, can still finish the item under way (as `view`
// reads it) with a value no earlier item of its list has, or is past it: a depth-first search
// of the bytes the parser takes (no blanks between tokens), each path ended where the view is
// settled outside arrays (ItemView::SettledOutsideArrays) or an item completes. At most `*budget` bytes are tried (each one counted, taken or
// not); past it the answer is kOver. The parser is left as it was.
// `path`, when given and found, receives the bytes of the way found.
enum class SearchResult : std::uint8_t { kFound, kNone, kOver };
SearchResult SearchNewItem(EarleyParser& parser, const ItemView& view, std::int64_t* budget,
                           std::string* path = nullptr);

// Whether `bytes`, taken by the parser from its end, lead the view to settle outside arrays
// (a way found before, tried again: ItemView::SettledOutsideArrays at some byte, every byte up
// to it taken). Each byte counts against `*budget`. The parser is left as it was.
bool ReplayWay(EarleyParser& parser, const ItemView& view, std::string_view bytes,
               std::int64_t* budget);

// The bytes of `bytes` that the view reads as more than blanks between tokens, read from `view`,
// into `*out`.
void WithoutBlanks(const ItemView& view, std::string_view bytes, std::string* out);

}  // namespace lockstep
