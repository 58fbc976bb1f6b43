// Where a byte offset is in a text, as the errors and warnings of the text front ends report it
// (grammar files, structured-format files): "line:column", both 1-based, columns in bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace lockstep {

struct TextPlace {
  std::string_view line;    // the line holding the offset, without its line break (nor a '\r')
  std::size_t line_no = 1;  // 1-based
  std::size_t col = 0;      // 0-based byte column
  std::string LineColumn() const { return std::to_string(line_no) + ":" + std::to_string(col + 1); }
};

// An offset past the end is the end.
inline TextPlace PlaceOf(std::string_view text, std::size_t offset) {
  offset = std::min(offset, text.size());
  const std::size_t nl = text.substr(0, offset).rfind('\n');
  const std::size_t line_begin = nl == std::string_view::npos ? 0 : nl + 1;
  std::size_t line_end = text.find('\n', line_begin);
  if (line_end == std::string_view::npos) line_end = text.size();
  TextPlace p;
  p.line = text.substr(line_begin, line_end - line_begin);
  if (!p.line.empty() && p.line.back() == '\r') p.line.remove_suffix(1);
  p.line_no =
      1 + static_cast<std::size_t>(std::count(text.begin(), text.begin() + line_begin, '\n'));
  p.col = offset - line_begin;
  return p;
}

// "line:column" of byte `offset` of `text`.
inline std::string LineColumn(std::string_view text, std::size_t offset) {
  return PlaceOf(text, offset).LineColumn();
}

}  // namespace lockstep
