// Pre-tokenizers: split text into the pieces the BPE model encodes one by one. Hand-written
// splitters for the regexes of GPT-2, Llama-3, Qwen2, cl100k and o200k (recognised by their
// exact pattern string), and ICU's regex engine for any other pattern. Used by vocabulary.cc.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/status.h"

namespace lockstep::vocab {

// The pattern strings the fast splitters implement.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|)"
    R"(\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kCl100kPattern =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|)"
    R"( ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s)";
inline constexpr std::string_view kO200kPattern =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|)"
    R"('re|'ve|'m|'ll|'d)?|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|)"
    R"('re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Splits text into pieces (HF "Isolated": matches and the gaps between them, in order; empty
// matches are dropped). Thread-safe: Split is const and keeps no state between calls.
class Splitter {
 public:
  virtual ~Splitter() = default;
  // Appends the pieces of valid UTF-8 `text` to *out (views into `text`). False only when the
  // ICU engine gives up (its time or stack limit on a pathological pattern).
  virtual bool Split(std::string_view text, std::vector<std::string_view>* out) const = 0;
  // "gpt2", "llama3", "qwen2", "cl100k", "o200k" or "icu".
  virtual std::string_view kind() const = 0;
};

// A fast splitter when `pattern` is one of the known strings (unless force_icu), else an ICU
// regex splitter. kInvalidRegex when ICU rejects the pattern.
Result<std::unique_ptr<Splitter>> MakeRegexSplitter(std::string_view pattern,
                                                    bool force_icu = false);

// Splits a literal string pattern (HF Split with {"String": ...}), Isolated.
std::unique_ptr<Splitter> MakeLiteralSplitter(std::string literal);

}  // namespace lockstep::vocab
