// Paths of the bundled and shared test data, and the scale knob for heavy tests.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lockstep::testing {

inline std::string SourceDataDir() { return LOCKSTEP_SOURCE_DATA_DIR; }
inline std::string SharedDataDir() { return LOCKSTEP_SHARED_DATA_DIR; }
inline bool HaveSharedData() { return std::filesystem::is_directory(SharedDataDir()); }

// Heavy tests multiply their work by this (LOCKSTEP_TEST_SCALE, default 1.0); the sanitizer
// build runs them at a fraction.
inline double TestScale() {
  const char* s = std::getenv("LOCKSTEP_TEST_SCALE");
  double v = s ? std::atof(s) : 1.0;
  return v > 0 ? v : 1.0;
}

// A whole file's bytes ("" if it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Non-empty, non-comment lines of a text file.
inline std::vector<std::string> ReadLines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    out.push_back(line);
  }
  return out;
}

}  // namespace lockstep::testing
