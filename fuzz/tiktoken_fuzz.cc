// Fuzzes the tiktoken rank-file and meta loaders: the input is split at its first NUL byte into
// a rank file and a meta json; either part may be garbage.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockstep/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view all(reinterpret_cast<const char*>(data), size);
  std::size_t cut = all.find('\0');
  std::string_view ranks = all.substr(0, cut);
  std::string_view meta = cut == std::string_view::npos
                              ? std::string_view(R"({"pat_str":"\\S+|\\s+","special_tokens":{}})")
                              : all.substr(cut + 1);
  auto vocab = lockstep::Vocabulary::FromTiktoken(ranks, meta);
  if (vocab.ok()) {
    auto ids = (*vocab)->Encode("hello world 123 {\"a\": 1}");
    if (ids.ok()) (void)(*vocab)->Decode(*ids);
  }
  return 0;
}
