// Loaders of the JSON acceptance corpora (see json_suite.h). simdjson's On Demand API walks the
// suite so numbers can be copied as raw tokens, never rounded through a double.
#include "util/json_suite.h"

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_set>
#include <utility>

namespace lockstep::testing {
namespace {

namespace od = simdjson::ondemand;

void AppendEscaped(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20) {
          out += "\\u00";
          out += kHex[u >> 4];
          out += kHex[u & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

void Indent(bool indented, int depth, std::string& out) {
  if (!indented) return;
  out += '\n';
  out.append(static_cast<std::size_t>(depth) * 2, ' ');
}

simdjson::error_code Serialise(od::value v, bool indented, int depth, std::string& out) {
  od::json_type type;
  if (auto e = v.type().get(type)) return e;
  switch (type) {
    case od::json_type::object: {
      od::object obj;
      if (auto e = v.get_object().get(obj)) return e;
      out += '{';
      bool first = true;
      for (auto field_result : obj) {
        od::field field;
        if (auto e = std::move(field_result).get(field)) return e;
        if (!first) out += ',';
        first = false;
        Indent(indented, depth + 1, out);
        std::string_view key;
        if (auto e = field.unescaped_key().get(key)) return e;
        AppendEscaped(key, out);
        out += indented ? ": " : ":";
        if (auto e = Serialise(field.value(), indented, depth + 1, out)) return e;
      }
      if (!first) Indent(indented, depth, out);
      out += '}';
      return simdjson::SUCCESS;
    }
    case od::json_type::array: {
      od::array arr;
      if (auto e = v.get_array().get(arr)) return e;
      out += '[';
      bool first = true;
      for (auto element_result : arr) {
        od::value element;
        if (auto e = element_result.get(element)) return e;
        if (!first) out += ',';
        first = false;
        Indent(indented, depth + 1, out);
        if (auto e = Serialise(element, indented, depth + 1, out)) return e;
      }
      if (!first) Indent(indented, depth, out);
      out += ']';
      return simdjson::SUCCESS;
    }
    case od::json_type::string: {
      std::string_view s;
      if (auto e = v.get_string().get(s)) return e;
      AppendEscaped(s, out);
      return simdjson::SUCCESS;
    }
    case od::json_type::number: {
      std::string_view raw = v.raw_json_token();
      while (!raw.empty() &&
             (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\n' || raw.back() == '\r'))
        raw.remove_suffix(1);
      out += raw;
      return simdjson::SUCCESS;
    }
    case od::json_type::boolean: {
      bool b;
      if (auto e = v.get_bool().get(b)) return e;
      out += b ? "true" : "false";
      return simdjson::SUCCESS;
    }
    case od::json_type::null: {
      bool is_null;
      if (auto e = v.is_null().get(is_null)) return e;
      if (!is_null) return simdjson::INCORRECT_TYPE;
      out += "null";
      return simdjson::SUCCESS;
    }
  }
  return simdjson::INCORRECT_TYPE;
}

// Appends the "data" of every test of one suite file to `out`.
simdjson::error_code LoadFile(const std::string& path, bool indented,
                              std::vector<std::string>& out) {
  simdjson::padded_string json;
  if (auto e = simdjson::padded_string::load(path).get(json)) return e;
  od::parser parser;
  od::document doc;
  if (auto e = parser.iterate(json).get(doc)) return e;
  od::array groups;
  if (auto e = doc.get_array().get(groups)) return e;
  for (auto group_result : groups) {
    od::object group;
    if (auto e = group_result.get_object().get(group)) return e;
    for (auto field_result : group) {
      od::field field;
      if (auto e = std::move(field_result).get(field)) return e;
      std::string_view key;
      if (auto e = field.unescaped_key().get(key)) return e;
      if (key != "tests") continue;
      od::array tests;
      if (auto e = field.value().get_array().get(tests)) return e;
      for (auto test_result : tests) {
        od::object test;
        if (auto e = test_result.get_object().get(test)) return e;
        for (auto test_field_result : test) {
          od::field test_field;
          if (auto e = std::move(test_field_result).get(test_field)) return e;
          std::string_view test_key;
          if (auto e = test_field.unescaped_key().get(test_key)) return e;
          if (test_key != "data") continue;
          std::string text;
          if (auto e = Serialise(test_field.value(), indented, 0, text)) return e;
          out.push_back(std::move(text));
        }
      }
    }
  }
  return simdjson::SUCCESS;
}

}  // namespace

std::vector<std::string> LoadJsonSchemaTestSuiteData(std::string_view root_dir, bool indented,
                                                     std::string* error) {
  namespace fs = std::filesystem;
  const fs::path tests = fs::path(root_dir) / "tests";
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& draft : fs::directory_iterator(tests, ec)) {
    if (!draft.is_directory() || draft.path().filename().string().rfind("draft", 0) != 0) continue;
    for (const auto& entry : fs::recursive_directory_iterator(draft.path(), ec))
      if (entry.is_regular_file() && entry.path().extension() == ".json")
        files.push_back(entry.path().string());
  }
  if (ec) {
    if (error) *error = tests.string() + ": " + ec.message();
    return {};
  }
  std::sort(files.begin(), files.end());

  std::vector<std::string> all;
  for (const auto& file : files) {
    if (auto e = LoadFile(file, indented, all)) {
      if (error) *error = file + ": " + simdjson::error_message(e);
      return {};
    }
  }
  std::vector<std::string> unique;
  std::unordered_set<std::string> seen;
  for (auto& v : all)
    if (seen.insert(v).second) unique.push_back(std::move(v));
  return unique;
}

std::vector<MalformedJson> LoadMalformedJson(const std::string& path, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    if (error) *error = path + ": cannot open";
    return {};
  }
  std::vector<MalformedJson> out;
  od::parser parser;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    auto fail = [&](std::string_view what) {
      if (error) *error = path + ":" + std::to_string(line_no) + ": " + std::string(what);
      return std::vector<MalformedJson>{};
    };
    simdjson::padded_string padded(line);
    od::document doc;
    od::object obj;
    if (parser.iterate(padded).get(doc) || doc.get_object().get(obj)) return fail("not an object");
    MalformedJson entry;
    bool have_doc = false;
    for (auto field_result : obj) {
      od::field field;
      std::string_view key, value;
      if (std::move(field_result).get(field) || field.unescaped_key().get(key) ||
          field.value().get_string().get(value))
        return fail("bad member");
      if (key == "kind") {
        entry.kind = value;
      } else if (key == "doc") {
        entry.doc = value;
        have_doc = true;
      } else if (key == "hex") {
        if (value.size() % 2 != 0) return fail("odd hex length");
        for (std::size_t i = 0; i < value.size(); i += 2)
          entry.doc += static_cast<char>(std::stoi(std::string(value.substr(i, 2)), nullptr, 16));
        have_doc = true;
      }
    }
    if (!have_doc || entry.kind.empty()) return fail("missing kind or doc/hex");
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace lockstep::testing
