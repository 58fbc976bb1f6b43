// Pre-tokenizers (see pretokenizer.h). The fast splitters decode the text once into code points
// and class bits, then walk the alternatives of their regex in order, reproducing the
// leftmost-first backtracking result of the original pattern without a regex engine.
#include "automata/vocab/pretokenizer.h"

#include <unicode/regex.h>
#include <unicode/utext.h>

#include <cstdint>

#include "automata/vocab/unicode.h"

namespace lockstep::vocab {
namespace {

enum class FastKind { kGpt2, kLlama3, kQwen2, kCl100k, kO200k };

// Decoded text: code point, class bits and byte offset of each character (offs has n + 1).
struct Decoded {
  std::vector<char32_t> cp;
  std::vector<std::uint8_t> cls;
  std::vector<std::uint32_t> offs;
  std::size_t n = 0;
};

void Decode(std::string_view text, Decoded* d) {
  d->cp.clear();
  d->cls.clear();
  d->offs.clear();
  std::size_t i = 0;
  while (i < text.size()) {
    char32_t c;
    int len = DecodeUtf8(text, i, &c);
    if (len == 0) {  // callers validate; be safe: treat the byte as an unassigned character
      c = 0xFFFD;
      len = 1;
    }
    d->cp.push_back(c);
    d->cls.push_back(ClassOf(c));
    d->offs.push_back(static_cast<std::uint32_t>(i));
    i += static_cast<std::size_t>(len);
  }
  d->offs.push_back(static_cast<std::uint32_t>(text.size()));
  d->n = d->cp.size();
}

class FastSplitter final : public Splitter {
 public:
  explicit FastSplitter(FastKind kind) : kind_(kind) {}

  std::string_view kind() const override {
    switch (kind_) {
      case FastKind::kGpt2:
        return "gpt2";
      case FastKind::kLlama3:
        return "llama3";
      case FastKind::kQwen2:
        return "qwen2";
      case FastKind::kCl100k:
        return "cl100k";
      case FastKind::kO200k:
        return "o200k";
    }
    return "?";
  }

  bool Split(std::string_view text, std::vector<std::string_view>* out) const override {
    thread_local Decoded d;
    Decode(text, &d);
    std::size_t i = 0;
    while (i < d.n) {
      std::size_t end;
      switch (kind_) {
        case FastKind::kGpt2:
          end = NextGpt2(d, i);
          break;
        case FastKind::kO200k:
          end = NextO200k(d, i);
          break;
        default:
          end = NextLlama3(d, i);
          break;
      }
      out->push_back(text.substr(d.offs[i], d.offs[end] - d.offs[i]));
      i = end;
    }
    return true;
  }

 private:
  static bool Is(const Decoded& d, std::size_t i, std::uint8_t bits) {
    return i < d.n && (d.cls[i] & bits) != 0;
  }
  static bool IsPunct(const Decoded& d, std::size_t i) {  // [^\s\p{L}\p{N}]
    return i < d.n && (d.cls[i] & (kClassSpace | kClassLetter | kClassNumber)) == 0;
  }
  static std::size_t Run(const Decoded& d, std::size_t i, std::uint8_t bits) {
    while (i < d.n && (d.cls[i] & bits) != 0) ++i;
    return i;
  }
  static std::size_t PunctRun(const Decoded& d, std::size_t i) {
    while (IsPunct(d, i)) ++i;
    return i;
  }
  static char32_t Fold(char32_t c, bool ci) {
    if (!ci) return c;
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's';  // LATIN SMALL LETTER LONG S folds to 's'
    return c;
  }
  // Length in characters of 's|'t|'re|'ve|'m|'ll|'d at i (0 if none).
  static std::size_t Contraction(const Decoded& d, std::size_t i, bool ci) {
    if (i + 1 >= d.n || d.cp[i] != '\'') return 0;
    char32_t a = Fold(d.cp[i + 1], ci);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 >= d.n) return 0;
    char32_t b = Fold(d.cp[i + 2], ci);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }
  // \s+(?!\S) | \s+ on a whitespace run starting at i.
  static std::size_t SpaceRun(const Decoded& d, std::size_t i, bool crlf_rule) {
    std::size_t k = Run(d, i, kClassSpace);
    if (crlf_rule) {  // \s*[\r\n]+ : up to and including the last \r or \n of the run
      for (std::size_t p = k; p > i; --p) {
        if (d.cls[p - 1] & kClassCrLf) return p;
      }
    }
    if (k == d.n || k - i == 1) return k;
    return k - 1;
  }

  std::size_t NextGpt2(const Decoded& d, std::size_t i) const {
    if (std::size_t c = Contraction(d, i, false)) return i + c;
    std::size_t s = (d.cp[i] == ' ' && i + 1 < d.n) ? i + 1 : i;
    for (std::size_t start : {i, s}) {
      if (Is(d, start, kClassLetter)) return Run(d, start, kClassLetter);
      if (Is(d, start, kClassNumber)) return Run(d, start, kClassNumber);
      if (IsPunct(d, start)) return PunctRun(d, start);
    }
    return SpaceRun(d, i, false);
  }

  std::size_t NextLlama3(const Decoded& d, std::size_t i) const {
    if (std::size_t c = Contraction(d, i, true)) return i + c;
    if (Is(d, i, kClassLetter)) return Run(d, i, kClassLetter);
    if (!Is(d, i, kClassCrLf | kClassNumber) && Is(d, i + 1, kClassLetter)) {
      return Run(d, i + 1, kClassLetter);
    }
    if (Is(d, i, kClassNumber)) {
      std::size_t max = kind_ == FastKind::kQwen2 ? 1 : 3;
      std::size_t e = i;
      while (e < d.n && e - i < max && (d.cls[e] & kClassNumber)) ++e;
      return e;
    }
    if (IsPunct(d, i) || (d.cp[i] == ' ' && IsPunct(d, i + 1))) {
      std::size_t e = PunctRun(d, IsPunct(d, i) ? i : i + 1);
      return Run(d, e, kClassCrLf);
    }
    if (kind_ == FastKind::kCl100k) {  // \s++$
      std::size_t k = Run(d, i, kClassSpace);
      if (k == d.n) return k;
    }
    return SpaceRun(d, i, true);
  }

  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+ at s, with backtracking.
  static std::size_t UpperStarLowerPlus(const Decoded& d, std::size_t s) {
    std::size_t b = Run(d, s, kClassUpper);
    if (Is(d, b, kClassLower)) return Run(d, b, kClassLower);
    for (std::size_t m = b; m > s; --m) {
      if (d.cls[m - 1] & kClassLower) return m;
    }
    return 0;
  }
  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]* at s.
  static std::size_t UpperPlusLowerStar(const Decoded& d, std::size_t s) {
    std::size_t b = Run(d, s, kClassUpper);
    if (b == s) return 0;
    return Run(d, b, kClassLower);
  }

  std::size_t NextO200k(const Decoded& d, std::size_t i) const {
    const bool prefix = !Is(d, i, kClassCrLf | kClassLetter | kClassNumber);
    for (int alt = 0; alt < 2; ++alt) {
      for (int skip = prefix ? 1 : 0; skip >= 0; --skip) {
        std::size_t s = i + static_cast<std::size_t>(skip);
        if (s >= d.n) continue;
        std::size_t e = alt == 0 ? UpperStarLowerPlus(d, s) : UpperPlusLowerStar(d, s);
        if (e == 0) continue;
        return e + Contraction(d, e, true);
      }
    }
    if (Is(d, i, kClassNumber)) {
      std::size_t e = i;
      while (e < d.n && e - i < 3 && (d.cls[e] & kClassNumber)) ++e;
      return e;
    }
    if (IsPunct(d, i) || (d.cp[i] == ' ' && IsPunct(d, i + 1))) {
      std::size_t e = PunctRun(d, IsPunct(d, i) ? i : i + 1);
      while (e < d.n && ((d.cls[e] & kClassCrLf) || d.cp[e] == '/')) ++e;
      return e;
    }
    return SpaceRun(d, i, true);
  }

  FastKind kind_;
};

class IcuSplitter final : public Splitter {
 public:
  explicit IcuSplitter(std::unique_ptr<icu::RegexPattern> pattern) : pattern_(std::move(pattern)) {}
  std::string_view kind() const override { return "icu"; }

  bool Split(std::string_view text, std::vector<std::string_view>* out) const override {
    UErrorCode status = U_ZERO_ERROR;
    UText* ut =
        utext_openUTF8(nullptr, text.data(), static_cast<std::int64_t>(text.size()), &status);
    std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(status));
    if (U_FAILURE(status) || m == nullptr) {
      utext_close(ut);
      return false;
    }
    m->reset(ut);
    // A hostile pattern (nested quantifiers) must not hang an encoder: bound the work per find.
    m->setTimeLimit(kTimeLimit, status);
    std::size_t last = 0;
    while (m->find(status) && U_SUCCESS(status)) {
      auto s = static_cast<std::size_t>(m->start64(status));
      auto e = static_cast<std::size_t>(m->end64(status));
      if (U_FAILURE(status)) break;
      if (e == s) continue;
      if (s > last) out->push_back(text.substr(last, s - last));
      out->push_back(text.substr(s, e - s));
      last = e;
    }
    if (last < text.size()) out->push_back(text.substr(last));
    m.reset();
    utext_close(ut);
    return U_SUCCESS(status);
  }

 private:
  static constexpr std::int32_t kTimeLimit = 1000;  // ICU's units: roughly milliseconds
  std::unique_ptr<icu::RegexPattern> pattern_;
};

class LiteralSplitter final : public Splitter {
 public:
  explicit LiteralSplitter(std::string literal) : literal_(std::move(literal)) {}
  std::string_view kind() const override { return "literal"; }
  bool Split(std::string_view text, std::vector<std::string_view>* out) const override {
    if (literal_.empty()) {
      if (!text.empty()) out->push_back(text);
      return true;
    }
    std::size_t last = 0;
    for (std::size_t p = text.find(literal_); p != std::string_view::npos;
         p = text.find(literal_, p + literal_.size())) {
      if (p > last) out->push_back(text.substr(last, p - last));
      out->push_back(text.substr(p, literal_.size()));
      last = p + literal_.size();
    }
    if (last < text.size()) out->push_back(text.substr(last));
    return true;
  }

 private:
  std::string literal_;
};

}  // namespace

Result<std::unique_ptr<Splitter>> MakeRegexSplitter(std::string_view pattern, bool force_icu) {
  if (!force_icu) {
    if (pattern == kGpt2Pattern)
      return std::unique_ptr<Splitter>(new FastSplitter(FastKind::kGpt2));
    if (pattern == kLlama3Pattern) {
      return std::unique_ptr<Splitter>(new FastSplitter(FastKind::kLlama3));
    }
    if (pattern == kQwen2Pattern) {
      return std::unique_ptr<Splitter>(new FastSplitter(FastKind::kQwen2));
    }
    if (pattern == kCl100kPattern) {
      return std::unique_ptr<Splitter>(new FastSplitter(FastKind::kCl100k));
    }
    if (pattern == kO200kPattern) {
      return std::unique_ptr<Splitter>(new FastSplitter(FastKind::kO200k));
    }
  }
  UErrorCode status = U_ZERO_ERROR;
  UParseError perr{};
  icu::UnicodeString upat = icu::UnicodeString::fromUTF8(
      icu::StringPiece(pattern.data(), static_cast<std::int32_t>(pattern.size())));
  std::unique_ptr<icu::RegexPattern> compiled(icu::RegexPattern::compile(upat, 0, perr, status));
  if (U_FAILURE(status) || compiled == nullptr) {
    return Status(StatusCode::kInvalidRegex,
                  std::string("pre-tokenizer regex rejected by ICU: ") + u_errorName(status),
                  "offset " + std::to_string(perr.offset));
  }
  return std::unique_ptr<Splitter>(new IcuSplitter(std::move(compiled)));
}

std::unique_ptr<Splitter> MakeLiteralSplitter(std::string literal) {
  return std::make_unique<LiteralSplitter>(std::move(literal));
}

}  // namespace lockstep::vocab
