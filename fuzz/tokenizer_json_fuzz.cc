// Fuzzes the HF tokenizer.json loader: arbitrary bytes must give a vocabulary or a clean error,
// and a vocabulary that loads must encode and decode without crashing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockstep/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto vocab = lockstep::Vocabulary::FromTokenizerJson(json);
  if (vocab.ok()) {
    auto ids = (*vocab)->Encode(json.substr(0, 64));
    if (ids.ok()) (void)(*vocab)->Decode(*ids);
  }
  return 0;
}
