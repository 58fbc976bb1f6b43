// Parsing of `lockstep` command lines (see args.h).
#include "cli/args.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <iostream>

namespace lockstep::cli {

int Fail(const Status& st) {
  std::cerr << "lockstep: " << st.ToString() << "\n";
  return st.code() == StatusCode::kInternal ? 1 : 2;
}

Status Args::Parse(int argc, char** argv, int first) {
  bool only_positional = false;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (only_positional || a.size() < 2 || a[0] != '-' || (a[1] != '-' && !aliases_.count(a))) {
      positional_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positional = true;
      continue;
    }
    std::string name, value;
    bool has_value = false;
    if (auto al = aliases_.find(a); al != aliases_.end()) {
      name = al->second;
    } else {
      name = a.substr(2);
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        has_value = true;
      }
    }
    if (switches_.count(name)) {
      if (has_value) {
        return Status(StatusCode::kInvalidArgument, "--" + name + " takes no value",
                      "argument " + std::to_string(i));
      }
      values_[name] = std::string(1, '1');
    } else if (value_flags_.count(name)) {
      if (!has_value) {
        if (i + 1 >= argc) {
          return Status(StatusCode::kInvalidArgument, "--" + name + " needs a value",
                        "argument " + std::to_string(i));
        }
        value = argv[++i];
      }
      values_[name] = value;
      all_values_[name].push_back(value);
    } else {
      return Status(StatusCode::kInvalidArgument, "unknown option '" + a + "' (see --help)",
                    "argument " + std::to_string(i));
    }
  }
  return Status::Ok();
}

Status Args::NoPositional() const {
  if (positional_.empty()) return Status::Ok();
  return Status(StatusCode::kInvalidArgument, "unexpected argument '" + positional_[0] + "'",
                "arguments");
}

Result<std::int64_t> Args::GetInt(const std::string& name, std::int64_t def, std::int64_t lo,
                                  std::int64_t hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < lo || v > hi) {
    return Status(StatusCode::kInvalidArgument,
                  "--" + name + " expects an integer in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got '" + s + "'",
                  "--" + name);
  }
  return static_cast<std::int64_t>(v);
}

Result<double> Args::GetDouble(const std::string& name, double def, double lo, double hi) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  const std::string& s = it->second;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) {
    return Status(StatusCode::kInvalidArgument,
                  "--" + name + " expects a number in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got '" + s + "'",
                  "--" + name);
  }
  return v;
}

std::optional<int> ParseCommand(Args& args, int argc, char** argv, std::string_view help,
                                bool allow_positional) {
  if (Status st = args.Parse(argc, argv, 2); !st.ok()) return Fail(st);
  if (args.Has("help")) {
    std::cout << help;
    return 0;
  }
  if (Status st = args.NoPositional(); !allow_positional && !st.ok()) return Fail(st);
  return std::nullopt;
}

Result<std::shared_ptr<const Vocabulary>> LoadVocabulary(const Args& args) {
  VocabularyOptions options;
  auto width = args.GetInt("logits-width", 0, 0, INT32_MAX);
  if (!width.ok()) return width.status();
  options.logits_width = static_cast<std::int32_t>(*width);
  return Vocabulary::Load(args.Get("tokenizer", "llama3"), options);
}

}  // namespace lockstep::cli
