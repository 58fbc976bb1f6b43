// JSON Pointer (RFC 6901) segments for error locations: every front end that reports where in a
// JSON document something is wrong (tokenizer.json, sampler presets, JSON Schema) builds
// its pointer with these.
#pragma once

#include <string>
#include <string_view>

namespace lockstep {

// "/" followed by `key` with '~' written "~0" and '/' written "~1".
inline std::string JsonPointerSegment(std::string_view key) {
  std::string out = "/";
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace lockstep
