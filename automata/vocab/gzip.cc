// File reading and gzip inflation for the vocabulary loaders (see vocabulary_impl.h): bounded
// sizes, and errors with a byte offset instead of crashes on corrupt streams.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "automata/vocab/vocabulary_impl.h"

namespace lockstep::vocab {
namespace {
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 30;      // 1 GiB
constexpr std::size_t kSlack = 64;                               // >= simdjson::SIMDJSON_PADDING
constexpr std::size_t kMaxInflatedBytes = std::size_t{1} << 28;  // 256 MiB
}  // namespace

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot open file", path);
  in.seekg(0, std::ios::end);
  std::streamoff size = in.tellg();
  if (size < 0) return Status(StatusCode::kIoError, "cannot read file", path);
  if (static_cast<std::size_t>(size) > kMaxFileBytes) {
    return Status(StatusCode::kIoError, "file larger than 1 GiB", path);
  }
  std::string data;
  data.reserve(static_cast<std::size_t>(size) + kSlack);  // room for simdjson's padding
  data.resize(static_cast<std::size_t>(size));
  in.seekg(0, std::ios::beg);
  if (size > 0 && !in.read(data.data(), size)) {
    return Status(StatusCode::kIoError, "cannot read file", path);
  }
  return data;
}

Result<std::string> MaybeGunzip(std::string data) {
  if (data.size() < 2 || static_cast<unsigned char>(data[0]) != 0x1F ||
      static_cast<unsigned char>(data[1]) != 0x8B) {
    return data;
  }
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 16) != Z_OK) {
    return Status(StatusCode::kInternal, "zlib inflateInit2 failed");
  }
  std::string out;
  out.resize(
      std::min<std::size_t>(kMaxInflatedBytes, std::max<std::size_t>(data.size() * 4, 4096)));
  zs.next_in = reinterpret_cast<Bytef*>(data.data());
  std::size_t in_left = data.size();
  std::size_t produced = 0;
  int ret = Z_OK;
  while (true) {
    if (zs.avail_in == 0 && in_left > 0) {
      auto chunk = static_cast<uInt>(std::min<std::size_t>(in_left, 1u << 30));
      zs.avail_in = chunk;
      in_left -= chunk;
    }
    if (produced == out.size()) {
      if (out.size() >= kMaxInflatedBytes) {
        inflateEnd(&zs);
        return Status(StatusCode::kInvalidVocabulary, "gzip stream inflates past 256 MiB",
                      "offset " + std::to_string(zs.total_in));
      }
      out.resize(std::min(kMaxInflatedBytes, out.size() * 2));
    }
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
    auto room = static_cast<uInt>(std::min<std::size_t>(out.size() - produced, 1u << 30));
    zs.avail_out = room;
    ret = inflate(&zs, Z_NO_FLUSH);
    produced += room - zs.avail_out;
    if (ret == Z_STREAM_END) break;
    if (ret == Z_BUF_ERROR && zs.avail_in == 0 && in_left == 0) {
      inflateEnd(&zs);
      return Status(StatusCode::kInvalidVocabulary, "truncated gzip stream",
                    "offset " + std::to_string(zs.total_in));
    }
    if (ret != Z_OK && ret != Z_BUF_ERROR) {
      std::string msg = zs.msg ? zs.msg : "corrupt gzip stream";
      inflateEnd(&zs);
      return Status(StatusCode::kInvalidVocabulary, "gzip: " + msg,
                    "offset " + std::to_string(zs.total_in));
    }
  }
  inflateEnd(&zs);
  if (out.size() - produced < kSlack) out.resize(produced + kSlack);  // keep padding room
  out.resize(produced);
  return out;
}

}  // namespace lockstep::vocab
