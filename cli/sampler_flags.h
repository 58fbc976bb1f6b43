// The sampler flags shared by `lockstep generate`, `explain` and `classify`: declare them on an
// Args with AddSamplerFlags, read them back into a SamplerConfig with SamplerConfigFromArgs, and
// print kSamplerFlagsHelp in the command's --help.
#pragma once

#include <set>
#include <span>
#include <string>

#include "cli/args.h"
#include "lockstep/sampler.h"
#include "lockstep/status.h"

namespace lockstep::cli {

// The value flags read by SamplerConfigFromArgs: --preset --temperature --top-k --top-p --min-p
// --repetition-penalty --repetition-window --frequency-penalty --presence-penalty --logit-bias
// (repeatable, each also a comma list) --seed. Adds them to `value_flags` (names already there
// are fine); kInternal if one of them is declared as a switch in `switches`.
Status AddSamplerFlags(std::set<std::string>* value_flags,
                       const std::set<std::string>& switches = {});

// The config the flags describe: the --preset (schemas/presets/presets.json under the data
// directory) if given, then every explicit flag on top of it. `labels` (explain) lets
// --logit-bias name a token by label as well as by id. kInvalidArgument naming the flag on a bad
// value.
Result<SamplerConfig> SamplerConfigFromArgs(const Args& args,
                                            std::span<const std::string> labels = {});

// Lines for a --help text, one per flag, aligned like the other commands' help.
extern const char* const kSamplerFlagsHelp;

}  // namespace lockstep::cli
