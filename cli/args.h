// A small command-line parser for the `lockstep` subcommands: --flag VALUE, --flag=VALUE,
// boolean switches and positional arguments, with errors that name the offending argument.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "lockstep/status.h"
#include "lockstep/vocabulary.h"

namespace lockstep::cli {

// Prints "lockstep: <status>" to stderr; the exit code of a failed command: 1 for an internal
// error, 2 for anything the user gave.
int Fail(const Status& st);

class Args {
 public:
  // `value_flags` take a value; `switches` do not. Short aliases map to long names.
  Args(std::set<std::string> value_flags, std::set<std::string> switches,
       std::map<std::string, std::string> aliases = {})
      : value_flags_(std::move(value_flags)),
        switches_(std::move(switches)),
        aliases_(std::move(aliases)) {}

  Status Parse(int argc, char** argv, int first);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string Get(const std::string& name, const std::string& def = "") const {
    auto it = values_.find(name);
    return it == values_.end() ? def : it->second;
  }
  Result<std::int64_t> GetInt(const std::string& name, std::int64_t def, std::int64_t lo,
                              std::int64_t hi) const;
  Result<double> GetDouble(const std::string& name, double def, double lo, double hi) const;
  // Every value given for `name`, in command-line order (a value flag may be repeated; Get
  // returns the last one).
  std::vector<std::string> GetAll(const std::string& name) const {
    auto it = all_values_.find(name);
    return it == all_values_.end() ? std::vector<std::string>{} : it->second;
  }
  const std::vector<std::string>& positional() const { return positional_; }
  // For a command that takes no positional arguments: kInvalidArgument naming the first one.
  Status NoPositional() const;

 private:
  std::set<std::string> value_flags_;
  std::set<std::string> switches_;
  std::map<std::string, std::string> aliases_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::vector<std::string> positional_;
};

// Parses subcommand argv[1]'s arguments (argv[2...]) into `args`. nullopt to go on; else the
// command's exit code: 0 after printing `help` for --help, Fail's for a bad command line and,
// unless `allow_positional`, for a positional argument.
std::optional<int> ParseCommand(Args& args, int argc, char** argv, std::string_view help,
                                bool allow_positional = true);

// The vocabulary named by --tokenizer (default llama3), with --logits-width when given (the
// model's logits rows, which may exceed the vocabulary; padding ids are never allowed).
Result<std::shared_ptr<const Vocabulary>> LoadVocabulary(const Args& args);

}  // namespace lockstep::cli
