// Fuzzes the SentencePiece model loader (a serialized ModelProto from an untrusted file).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "lockstep/vocabulary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view proto(reinterpret_cast<const char*>(data), size);
  auto vocab = lockstep::Vocabulary::FromSentencePiece(proto);
  if (vocab.ok()) {
    auto ids = (*vocab)->Encode("hello world");
    if (ids.ok()) (void)(*vocab)->Decode(*ids);
  }
  return 0;
}
