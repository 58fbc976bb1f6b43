// Names and one-line rendering of Status, shared by every front end and the CLI.
#include "lockstep/status.h"

namespace lockstep {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kInvalidRegex: return "invalid regex";
    case StatusCode::kInvalidGrammar: return "invalid grammar";
    case StatusCode::kInvalidSchema: return "invalid schema";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kUnsatisfiable: return "unsatisfiable";
    case StatusCode::kResourceLimit: return "resource limit";
    case StatusCode::kInvalidVocabulary: return "invalid vocabulary";
    case StatusCode::kIoError: return "i/o error";
    case StatusCode::kInternal: return "internal error";
    case StatusCode::kInvalidArtifact: return "invalid artifact";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out = StatusCodeName(code_);
  if (!location_.empty()) out += " at " + location_;
  out += ": " + message_;
  return out;
}

}  // namespace lockstep
