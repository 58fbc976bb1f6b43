// ScriptedSource (include/lockstep/logits_source.h): logits per step or per context suffix from
// a small JSON file, for textbook examples and tests. nlohmann exceptions stay in this file.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lockstep/logits_source.h"

namespace lockstep {
namespace {

using nlohmann::json;

Status Bad(const std::string& msg, const std::string& pointer) {
  return Status(StatusCode::kInvalidArgument, "scripted logits: " + msg,
                pointer.empty() ? "/" : pointer);
}

Result<std::vector<float>> ReadRow(const json& j, std::int32_t width, bool probs,
                                   const std::string& ptr) {
  if (!j.is_array()) return Bad("a row must be an array of numbers", ptr);
  if (j.size() != static_cast<std::size_t>(width)) {
    return Bad("row of " + std::to_string(j.size()) + " numbers, width is " + std::to_string(width),
               ptr);
  }
  std::vector<float> row(width);
  for (std::int32_t i = 0; i < width; ++i) {
    const json& v = j[i];
    const std::string at = ptr + "/" + std::to_string(i);
    if (v.is_null()) {
      row[i] = -std::numeric_limits<float>::infinity();
      continue;
    }
    if (!v.is_number()) return Bad("not a number", at);
    double x = v.get<double>();
    if (probs) {
      if (!(x >= 0.0)) return Bad("a probability must be >= 0", at);
      row[i] = x == 0.0 ? -std::numeric_limits<float>::infinity() : static_cast<float>(std::log(x));
    } else {
      if (!std::isfinite(x)) return Bad("a logit must be finite (null for -inf)", at);
      row[i] = static_cast<float>(x);
    }
  }
  return row;
}

// "" -> {}; otherwise space-separated labels or decimal ids.
Result<std::vector<TokenId>> ReadKey(const std::string& key,
                                     const std::map<std::string, TokenId>& by_label,
                                     std::int32_t width, const std::string& ptr) {
  std::vector<TokenId> ids;
  std::istringstream is(key);
  std::string word;
  while (is >> word) {
    auto it = by_label.find(word);
    if (it != by_label.end()) {
      ids.push_back(it->second);
      continue;
    }
    char* end = nullptr;
    long v = std::strtol(word.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v >= width) {
      return Bad("'" + word + "' is neither a label nor an id below the width", ptr);
    }
    ids.push_back(static_cast<TokenId>(v));
  }
  return ids;
}

std::string Escape(const std::string& key) {  // JSON Pointer escaping
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

Result<std::unique_ptr<ScriptedSource>> ParseImpl(
    std::string_view text, std::unique_ptr<ScriptedSource> src, std::int32_t* width,
    std::vector<std::string>* labels, std::vector<std::vector<float>>* steps,
    std::vector<std::pair<std::vector<TokenId>, std::vector<float>>>* ctx,
    std::vector<float>* def) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    return Status(StatusCode::kInvalidArgument, std::string("scripted logits: ") + e.what(),
                  "offset " + std::to_string(e.byte));
  }
  if (!j.is_object()) return Bad("the file must hold a JSON object", "");
  if (!j.contains("width") || !j["width"].is_number_integer()) {
    return Bad("\"width\" (a positive integer) is required", "/width");
  }
  std::int64_t w = j["width"].get<std::int64_t>();
  if (w <= 0 || w > (1 << 24)) return Bad("width out of range", "/width");
  *width = static_cast<std::int32_t>(w);
  for (auto it = j.begin(); it != j.end(); ++it) {
    static const char* kKnown[] = {"width", "labels",   "probabilities",
                                   "steps", "contexts", "default"};
    if (std::find_if(std::begin(kKnown), std::end(kKnown),
                     [&](const char* k) { return it.key() == k; }) == std::end(kKnown)) {
      return Bad("unknown field", "/" + Escape(it.key()));
    }
  }
  bool probs = false;
  if (j.contains("probabilities")) {
    if (!j["probabilities"].is_boolean()) return Bad("must be true or false", "/probabilities");
    probs = j["probabilities"].get<bool>();
  }
  std::map<std::string, TokenId> by_label;
  if (j.contains("labels")) {
    const json& l = j["labels"];
    if (!l.is_array() || l.size() != static_cast<std::size_t>(w)) {
      return Bad("\"labels\" must be an array of width strings", "/labels");
    }
    for (std::size_t i = 0; i < l.size(); ++i) {
      if (!l[i].is_string()) return Bad("a label must be a string", "/labels/" + std::to_string(i));
      std::string s = l[i].get<std::string>();
      if (s.empty() || s.find(' ') != std::string::npos || !by_label.emplace(s, i).second) {
        return Bad("labels must be distinct, non-empty and without spaces",
                   "/labels/" + std::to_string(i));
      }
      labels->push_back(s);
    }
  }
  if (j.contains("steps")) {
    if (!j["steps"].is_array()) return Bad("\"steps\" must be an array of rows", "/steps");
    for (std::size_t i = 0; i < j["steps"].size(); ++i) {
      auto row = ReadRow(j["steps"][i], *width, probs, "/steps/" + std::to_string(i));
      if (!row.ok()) return row.status();
      steps->push_back(std::move(row).value());
    }
  }
  if (j.contains("contexts")) {
    if (!j["contexts"].is_object()) return Bad("\"contexts\" must be an object", "/contexts");
    for (auto it = j["contexts"].begin(); it != j["contexts"].end(); ++it) {
      const std::string ptr = "/contexts/" + Escape(it.key());
      auto key = ReadKey(it.key(), by_label, *width, ptr);
      if (!key.ok()) return key.status();
      auto row = ReadRow(it.value(), *width, probs, ptr);
      if (!row.ok()) return row.status();
      ctx->emplace_back(std::move(key).value(), std::move(row).value());
    }
  }
  if (j.contains("default")) {
    auto row = ReadRow(j["default"], *width, probs, "/default");
    if (!row.ok()) return row.status();
    *def = std::move(row).value();
  }
  return src;
}

}  // namespace

Result<std::unique_ptr<ScriptedSource>> ScriptedSource::Parse(std::string_view json_text) {
  std::unique_ptr<ScriptedSource> src(new ScriptedSource());
  std::vector<std::pair<std::vector<TokenId>, std::vector<float>>> ctx;
  ScriptedSource* s = src.get();
  auto r =
      ParseImpl(json_text, std::move(src), &s->width_, &s->labels_, &s->steps_, &ctx, &s->default_);
  if (!r.ok()) return r.status();
  // Longest suffix first; equal keys keep the file's last (JSON objects have unique keys anyway).
  std::stable_sort(ctx.begin(), ctx.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  for (auto& [k, row] : ctx) s->contexts_.push_back({std::move(k), std::move(row)});
  return r;
}

Result<std::unique_ptr<ScriptedSource>> ScriptedSource::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot open scripted logits file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = Parse(ss.str());
  if (!r.ok()) {
    return Status(r.status().code(), r.status().message(), path + ": " + r.status().location());
  }
  return r;
}

void ScriptedSource::Logits(std::span<const TokenId> context, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(width_)) return;
  for (const Keyed& k : contexts_) {
    if (k.suffix.size() > context.size()) continue;
    if (std::equal(k.suffix.begin(), k.suffix.end(), context.end() - k.suffix.size())) {
      std::copy(k.row.begin(), k.row.end(), out.begin());
      return;
    }
  }
  if (!steps_.empty()) {
    const auto& row = steps_[std::min(context.size(), steps_.size() - 1)];
    std::copy(row.begin(), row.end(), out.begin());
    return;
  }
  if (!default_.empty()) {
    std::copy(default_.begin(), default_.end(), out.begin());
    return;
  }
  std::fill(out.begin(), out.end(), 0.0f);
}

}  // namespace lockstep
