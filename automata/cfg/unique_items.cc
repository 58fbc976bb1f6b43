#include "automata/cfg/unique_items.h"

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

}  // namespace

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
  if (!text.empty() && text.front() == '"') {
    std::string value;
    if (!DecodeJsonString(text, &value)) return false;
    key->assign(1, 's');
    key->append(value);
    return true;
  }
  key->assign(1, 'x');
  key->append(text == "-0" ? std::string_view("0") : text);  // (JSON equality: -0 = 0)
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
    if (byte == '"') {
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
