#include "automata/cfg/unique_items.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "grammar/base/utf8.h"

namespace lockstep {
namespace {

// The 4 hex digits at text[i..i + 4), or -1.
std::int32_t Hex4(std::string_view text, std::size_t i) {
  if (i + 4 > text.size()) return -1;
  std::int32_t v = 0;
  for (std::size_t j = i; j < i + 4; ++j) {
    const int h = JsonHexDigit(static_cast<std::uint8_t>(text[j]));
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// A number's canonical text: equal for two numbers exactly when the validator's comparison
// (CompareNumbers: integers exactly, otherwise as long doubles) finds them equal. An integral
// double within the 64-bit integers is that integer; another double its exact hex form.
void AppendCanonicalNumber(const nlohmann::json& v, std::string* out) {
  if (v.is_number_unsigned()) {
    out->append(std::to_string(v.get<std::uint64_t>()));
    return;
  }
  if (v.is_number_integer()) {
    out->append(std::to_string(v.get<std::int64_t>()));
    return;
  }
  const double d = v.get<double>();
  if (std::isfinite(d) && d == std::floor(d) && d >= -9223372036854775808.0 &&
      d < 18446744073709551616.0) {
    out->append(d < 0 ? std::to_string(static_cast<std::int64_t>(d))
                      : std::to_string(static_cast<std::uint64_t>(d)));
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", d);
  out->append(buf);
}

void AppendSized(std::string_view bytes, std::string* out) {
  out->append(std::to_string(bytes.size()));
  out->push_back(':');
  out->append(bytes);
}

// An unambiguous text of `root` in which equal JSON values (JsonEqual) are equal texts: members
// in key order (nlohmann's objects are sorted maps), strings by their decoded bytes with their
// length, numbers canonical. Iterative: items nest as deep as the grammar lets them.
void AppendCanonical(const nlohmann::json& root, std::string* out) {
  struct Frame {
    const nlohmann::json* v;
    nlohmann::json::const_iterator it;
  };
  std::vector<Frame> stack;
  const auto open = [&](const nlohmann::json& v) {
    switch (v.type()) {
      case nlohmann::json::value_t::object:
        out->push_back('{');
        stack.push_back({&v, v.cbegin()});
        return;
      case nlohmann::json::value_t::array:
        out->push_back('[');
        stack.push_back({&v, v.cbegin()});
        return;
      case nlohmann::json::value_t::string:
        out->push_back('s');
        AppendSized(v.get_ref<const std::string&>(), out);
        return;
      case nlohmann::json::value_t::boolean:
        out->push_back(v.get<bool>() ? 't' : 'f');
        return;
      case nlohmann::json::value_t::null:
        out->push_back('n');
        return;
      default:
        out->push_back('#');
        AppendCanonicalNumber(v, out);
        out->push_back(';');
        return;
    }
  };
  open(root);
  while (!stack.empty()) {
    Frame& f = stack.back();
    if (f.it == f.v->cend()) {
      out->push_back(f.v->is_object() ? '}' : ']');
      stack.pop_back();
      continue;
    }
    const nlohmann::json* child = &*f.it;
    if (f.v->is_object()) AppendSized(f.it.key(), out);
    ++f.it;
    open(*child);  // (may grow the stack: f is not used after this)
  }
}

}  // namespace

bool StepStructByte(UniqueListScan& s, std::uint8_t byte) {
  if (s.struct_string) {
    if (s.struct_escape) {
      s.struct_escape = false;
    } else if (byte == '\\') {
      s.struct_escape = true;
    } else if (byte == '"') {
      s.struct_string = false;
    }
    return false;
  }
  if (byte == '"') {
    s.struct_string = true;
  } else if (byte == '{' || byte == '[') {
    ++s.depth;
  } else if (byte == '}' || byte == ']') {
    return --s.depth == 0;
  }
  return false;
}

int JsonHexDigit(std::uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

int JsonEscapeChar(std::uint8_t e) {
  switch (e) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
  }
}

bool DecodeJsonString(std::string_view text, std::string* out) {
  out->clear();
  if (text.size() < 2 || text.front() != '"' || text.back() != '"') return false;
  const std::size_t end = text.size() - 1;
  for (std::size_t i = 1; i < end;) {
    const char c = text[i];
    if (c == '"') return false;
    if (static_cast<unsigned char>(c) < 0x20) return false;
    if (c != '\\') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= end) return false;
    const char e = text[i + 1];
    i += 2;
    if (const int simple = JsonEscapeChar(static_cast<std::uint8_t>(e)); simple >= 0) {
      out->push_back(static_cast<char>(simple));
      continue;
    }
    switch (e) {
      case 'u': {
        std::int32_t cp = Hex4(text.substr(0, end), i);
        if (cp < 0) return false;
        i += 4;
        // A high surrogate followed by an escaped low one is one code point.
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= end && text[i] == '\\' &&
            text[i + 1] == 'u') {
          const std::int32_t lo = Hex4(text.substr(0, end), i + 2);
          if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          }
        }
        AppendUtf8(static_cast<char32_t>(cp), out);
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

bool UniqueKey(std::string_view text, std::string* key) {
  if (!text.empty() && (text.front() == '{' || text.front() == '[')) {
    const nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded()) return false;
    key->assign(1, 'o');
    AppendCanonical(v, key);
    return true;
  }
  if (!text.empty() && text.front() == '"') {
    std::string value;
    if (!DecodeJsonString(text, &value)) return false;
    key->assign(1, 's');
    key->append(value);
    return true;
  }
  key->assign(1, 'x');
  if (PlainInteger(text)) {
    key->append(text == "-0" ? std::string_view("0") : text);  // (JSON equality: -0 = 0)
    return true;
  }
  if (!text.empty() && (text.front() == '-' || (text.front() >= '0' && text.front() <= '9'))) {
    // Another number (a fraction, an exponent, an integer past 18 digits): canonical, as the
    // validator compares numbers (1 = 1.0 = 1e0).
    const nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (v.is_discarded() || !v.is_number()) return false;
    AppendCanonicalNumber(v, key);
    return true;
  }
  key->append(text);  // (a literal)
  return true;
}

bool CanonicalValue(std::string_view text, std::string* out) {
  const nlohmann::json v = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) return false;
  out->clear();
  AppendCanonical(v, out);
  return true;
}

bool PlainInteger(std::string_view text) {
  std::size_t i = !text.empty() && text[0] == '-' ? 1 : 0;
  const std::size_t digits = text.size() - i;
  if (digits == 0 || digits > 18) return false;
  if (text[i] == '0' && digits > 1) return false;
  for (; i < text.size(); ++i)
    if (text[i] < '0' || text[i] > '9') return false;
  return true;
}

void UniqueListItems::AddItem(std::int32_t end) {
  std::string key;
  if (UniqueKey(scan_.raw, &key)) {
    ++count_[key];
    items_.emplace_back(end, std::move(key));
  }
  scan_.raw.clear();
}

void UniqueListItems::Feed(std::uint8_t byte) {
  ++read_to_;
  if (scan_.depth > 0) {
    scan_.raw.push_back(static_cast<char>(byte));
    if (StepStructByte(scan_, byte)) AddItem(read_to_);
    return;
  }
  if (scan_.in_bare) {
    const bool ends = byte == ',' || byte == ']' || byte == ' ' || byte == '\t' ||
                      byte == '\n' || byte == '\r';
    if (!ends) {
      scan_.raw.push_back(static_cast<char>(byte));
      return;
    }
    scan_.in_bare = false;
    AddItem(read_to_ - 1);  // (it ended with the byte before)
    return;
  }
  if (!scan_.in_string) {
    if (byte == '{' || byte == '[') {
      scan_.depth = 1;
      scan_.struct_string = scan_.struct_escape = false;
      scan_.raw.assign(1, static_cast<char>(byte));
    } else if (byte == '"') {
      scan_.in_string = true;
      scan_.escape = false;
      scan_.raw.assign(1, '"');
    } else if (byte != ',' && byte != ']' && byte != ' ' && byte != '\t' && byte != '\n' &&
               byte != '\r') {
      scan_.in_bare = true;
      scan_.raw.assign(1, static_cast<char>(byte));
    }
    return;  // (whitespace and commas between items)
  }
  scan_.raw.push_back(static_cast<char>(byte));
  if (scan_.escape) {
    scan_.escape = false;
    return;
  }
  if (byte == '\\') {
    scan_.escape = true;
    return;
  }
  if (byte != '"') return;
  scan_.in_string = false;
  AddItem(read_to_);
}

void UniqueListItems::PopTo(std::int32_t n) {
  if (read_to_ < n) return;
  while (!items_.empty() && items_.back().first >= n) {
    auto it = count_.find(items_.back().second);
    if (--it->second == 0) count_.erase(it);
    items_.pop_back();
  }
  read_to_ = items_.empty() ? origin_ : items_.back().first;
  scan_ = {};
}

}  // namespace lockstep
