// SampleRegex: a recursive walk over RegexAst that picks one branch, count or code point at
// every node; it never looks at the automata, so it can check them.
#include "util/regex_sampler.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "grammar/regex/regex_parser.h"

namespace lockstep {
namespace {

class Sampler {
 public:
  Sampler(const RegexAst& ast, std::mt19937_64& rng, int extra)
      : ast_(ast), rng_(rng), extra_(std::max(0, extra)), productive_(ast.nodes.size(), 0) {
    // Which nodes match at least one string; the parser creates children before parents.
    for (std::size_t id = 0; id < ast.nodes.size(); ++id) {
      const RegexNode& n = ast.nodes[id];
      bool p = false;
      switch (n.kind) {
        case RegexNodeKind::kEmpty:
          p = true;
          break;
        case RegexNodeKind::kClass:
          p = n.ranges_end > n.ranges_begin;
          break;
        case RegexNodeKind::kConcat:
          p = true;
          for (std::int32_t k = n.children_begin; k < n.children_end; ++k) {
            p = p && productive_[ast.children[k]];
          }
          break;
        case RegexNodeKind::kAlternate:
          for (std::int32_t k = n.children_begin; k < n.children_end; ++k) {
            p = p || productive_[ast.children[k]];
          }
          break;
        case RegexNodeKind::kRepeat:
          p = n.min == 0 || productive_[ast.children[n.children_begin]];
          break;
        case RegexNodeKind::kAnchor:  // (marker bytes: no text; the sampler parses without)
          p = false;
          break;
      }
      productive_[id] = p;
    }
  }

  bool Productive(std::int32_t id) const { return productive_[id] != 0; }

  // Appends a sample of node `id` to `out`; false if it hit an empty class.
  bool Sample(std::int32_t id, std::string* out) {
    const RegexNode& n = ast_.node(id);
    switch (n.kind) {
      case RegexNodeKind::kEmpty:
        return true;
      case RegexNodeKind::kClass:
        return SampleClass(n, out);
      case RegexNodeKind::kConcat:
        for (std::int32_t k = n.children_begin; k < n.children_end; ++k) {
          if (!Sample(ast_.children[k], out)) return false;
        }
        return true;
      case RegexNodeKind::kAlternate: {
        std::vector<std::int32_t> options;
        for (std::int32_t k = n.children_begin; k < n.children_end; ++k) {
          if (productive_[ast_.children[k]]) options.push_back(ast_.children[k]);
        }
        if (options.empty()) return false;
        return Sample(options[Uniform(0, static_cast<std::int64_t>(options.size()) - 1)], out);
      }
      case RegexNodeKind::kRepeat: {
        if (!productive_[ast_.children[n.children_begin]]) return n.min == 0;
        std::int64_t hi = n.max == RegexNode::kUnbounded
                              ? std::int64_t{n.min} + extra_
                              : std::min<std::int64_t>(n.max, std::int64_t{n.min} + extra_);
        const std::int64_t times = Uniform(n.min, hi);
        for (std::int64_t k = 0; k < times; ++k) {
          if (!Sample(ast_.children[n.children_begin], out)) return false;
        }
        return true;
      }
      case RegexNodeKind::kAnchor:
        return false;
    }
    return false;
  }

 private:
  std::int64_t Uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  bool SampleClass(const RegexNode& n, std::string* out) {
    if (n.ranges_begin == n.ranges_end) return false;
    // ASCII-heavy: 3 in 4 draws stay in the class's ASCII part when it has one.
    std::vector<CodepointRange> ascii;
    for (std::int32_t r = n.ranges_begin; r < n.ranges_end; ++r) {
      const CodepointRange& x = ast_.ranges[r];
      if (x.lo < 0x80) ascii.push_back({x.lo, std::min<char32_t>(x.hi, 0x7F)});
    }
    char32_t cp;
    if (!ascii.empty() && Uniform(0, 3) != 0) {
      const CodepointRange& x = ascii[Uniform(0, static_cast<std::int64_t>(ascii.size()) - 1)];
      cp = static_cast<char32_t>(Uniform(x.lo, x.hi));
    } else {
      // A random range, then a random member: small ranges (often the interesting ones) are
      // not drowned out by the huge ones.
      const CodepointRange& x = ast_.ranges[Uniform(n.ranges_begin, n.ranges_end - 1)];
      cp = static_cast<char32_t>(Uniform(x.lo, x.hi));
    }
    AppendUtf8(cp, out);
    return true;
  }

  const RegexAst& ast_;
  std::mt19937_64& rng_;
  const int extra_;
  std::vector<std::uint8_t> productive_;
};

}  // namespace

std::optional<std::string> SampleRegex(std::string_view pattern, std::mt19937_64& rng,
                                       int max_repeat_extra) {
  Result<RegexAst> ast = ParseRegex(pattern);
  if (!ast.ok()) return std::nullopt;
  Sampler sampler(*ast, rng, max_repeat_extra);
  // Only productive branches are drawn, so a draw fails only if the language is empty.
  std::string out;
  if (!sampler.Productive(ast->root) || !sampler.Sample(ast->root, &out)) return std::nullopt;
  return out;
}

}  // namespace lockstep

namespace lockstep {
namespace {

constexpr std::string_view kRe2Space =
    "\\t\\n\\v\\f\\r \\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}"
    "\\x{3000}\\x{feff}";

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string HexEscape(std::uint32_t cp) {
  static const char kDigits[] = "0123456789abcdef";
  std::string h;
  do {
    h.insert(h.begin(), kDigits[cp % 16]);
    cp /= 16;
  } while (cp != 0);
  return "\\x{" + h + "}";
}

}  // namespace

std::optional<std::string> ToRe2Pattern(std::string_view p) {
  if (!ParseRegex(p).ok()) return std::nullopt;
  std::string out;
  bool in_class = false;
  std::size_t i = 0;
  auto read_hex = [&](std::size_t at, std::size_t n) {
    std::uint32_t v = 0;
    for (std::size_t k = 0; k < n; ++k) v = v * 16 + Hex(p[at + k]);
    return v;
  };
  while (i < p.size()) {
    const char c = p[i];
    if (c == '\\') {
      const char e = p[i + 1];  // the pattern parsed, so an escape is complete
      if (e == 'u') {
        std::uint32_t cp;
        if (p[i + 2] == '{') {
          std::size_t j = i + 3;
          cp = 0;
          while (p[j] != '}') cp = cp * 16 + Hex(p[j++]);
          i = j + 1;
        } else {
          cp = read_hex(i + 2, 4);
          i += 6;
          if (cp >= 0xD800 && cp < 0xDC00) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (read_hex(i + 2, 4) - 0xDC00);
            i += 6;
          }
        }
        out += HexEscape(cp);
        continue;
      }
      if (e == 's' || e == 'S') {
        if (in_class && e == 'S') return std::nullopt;
        if (in_class) {
          out += kRe2Space;
        } else {
          out += e == 's' ? "[" : "[^";
          out += kRe2Space;
          out += "]";
        }
        i += 2;
        continue;
      }
      if (e == 'c') {
        out += HexEscape(static_cast<unsigned char>(p[i + 2]) % 32);
        i += 3;
        continue;
      }
      if (e == '0') {
        out += "\\x00";
        i += 2;
        continue;
      }
      if (e == 'b') {  // only valid inside a class: backspace
        out += "\\x08";
        i += 2;
        continue;
      }
      if (e == 'v') {
        out += "\\x0b";
        i += 2;
        continue;
      }
      out.append(p.substr(i, 2));
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      if (c == '[') {
        out += "\\[";
      } else {
        out += c;
      }
      ++i;
      continue;
    }
    if (c == '[') {
      if (p.substr(i, 2) == "[]") {
        out += "[^\\x00-\\x{10ffff}]";
        i += 2;
        continue;
      }
      if (p.substr(i, 3) == "[^]") {
        out += "[\\x00-\\x{10ffff}]";
        i += 3;
        continue;
      }
      in_class = true;
      out += c;
      ++i;
      if (i < p.size() && p[i] == '^') {
        out += '^';
        ++i;
      }
      continue;
    }
    if (c == '.') {
      out += "[^\\n\\r\\x{2028}\\x{2029}]";
      ++i;
      continue;
    }
    if (p.substr(i, 3) == "(?<") {
      out += "(?P<";
      i += 3;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

}  // namespace lockstep
