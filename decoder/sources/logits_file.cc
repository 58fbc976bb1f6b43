// Recorded logits: LogitsWriter, SerializeLogits, ReplaySource and RecordingSource
// (include/lockstep/logits_source.h). The format is documented in docs/logits-format.md:
// little-endian, a 24-byte header (magic "LSLOGIT\0", u32 version, i32 width, u64 steps), then
// steps x width float32.
#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "lockstep/logits_source.h"

namespace lockstep {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the logits file format is little-endian; big-endian hosts need byte swaps");

void PutHeader(char* h, std::int32_t width, std::uint64_t steps) {
  std::memcpy(h, kLogitsMagic, 8);
  std::memcpy(h + 8, &kLogitsFormatVersion, 4);
  std::memcpy(h + 12, &width, 4);
  std::memcpy(h + 16, &steps, 8);
}

Status FileError(const std::string& what, const std::string& path) {
  return Status(StatusCode::kIoError, what, path);
}

}  // namespace

Result<std::unique_ptr<LogitsWriter>> LogitsWriter::Open(const std::string& path,
                                                         std::int32_t width) {
  if (width <= 0) {
    return Status(StatusCode::kInvalidArgument, "logits width must be positive", path);
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return FileError("cannot open for writing", path);
  char header[kLogitsHeaderBytes];
  PutHeader(header, width, 0);
  if (std::fwrite(header, 1, sizeof header, f) != sizeof header) {
    std::fclose(f);
    return FileError("write failed", path);
  }
  return std::unique_ptr<LogitsWriter>(new LogitsWriter(f, path, width));
}

LogitsWriter::~LogitsWriter() {
  if (file_ != nullptr) (void)Close();
}

Status LogitsWriter::Append(std::span<const float> row) {
  if (file_ == nullptr) return Status(StatusCode::kInvalidArgument, "writer is closed", path_);
  if (row.size() != static_cast<std::size_t>(width_)) {
    return Status(
        StatusCode::kInvalidArgument,
        "row of " + std::to_string(row.size()) + " floats, width is " + std::to_string(width_),
        path_);
  }
  if (std::fwrite(row.data(), sizeof(float), row.size(), file_) != row.size()) {
    return FileError("write failed", path_);
  }
  ++steps_;
  return Status::Ok();
}

Status LogitsWriter::Close() {
  if (file_ == nullptr) return Status::Ok();
  char header[kLogitsHeaderBytes];
  PutHeader(header, width_, steps_);
  bool ok = std::fseek(file_, 0, SEEK_SET) == 0 &&
            std::fwrite(header, 1, sizeof header, file_) == sizeof header;
  ok = (std::fclose(file_) == 0) && ok;
  file_ = nullptr;
  return ok ? Status::Ok() : FileError("write failed", path_);
}

std::string SerializeLogits(std::int32_t width, std::span<const float> data) {
  const std::uint64_t steps = width > 0 ? data.size() / static_cast<std::size_t>(width) : 0;
  std::string out(kLogitsHeaderBytes + steps * static_cast<std::size_t>(width) * 4, '\0');
  PutHeader(out.data(), width, steps);
  if (steps > 0)
    std::memcpy(out.data() + kLogitsHeaderBytes, data.data(), out.size() - kLogitsHeaderBytes);
  return out;
}

Result<std::unique_ptr<ReplaySource>> ReplaySource::Parse(std::string_view bytes,
                                                          const std::string& name) {
  auto bad = [&](const std::string& msg, std::size_t offset) {
    return Status(StatusCode::kInvalidArgument, "logits file: " + msg,
                  name + ": offset " + std::to_string(offset));
  };
  if (bytes.size() < kLogitsHeaderBytes) {
    return bad("truncated header (" + std::to_string(bytes.size()) + " of " +
                   std::to_string(kLogitsHeaderBytes) + " bytes)",
               bytes.size());
  }
  if (std::memcmp(bytes.data(), kLogitsMagic, 8) != 0)
    return bad("bad magic, not a logits file", 0);
  std::uint32_t version;
  std::int32_t width;
  std::uint64_t steps;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&width, bytes.data() + 12, 4);
  std::memcpy(&steps, bytes.data() + 16, 8);
  if (version != kLogitsFormatVersion) {
    return bad("unsupported version " + std::to_string(version), 8);
  }
  if (width <= 0) return bad("width " + std::to_string(width) + " is not positive", 12);
  const std::uint64_t row_bytes = static_cast<std::uint64_t>(width) * 4;
  const std::uint64_t body = bytes.size() - kLogitsHeaderBytes;
  if (steps > body / row_bytes) {
    const std::uint64_t whole = body / row_bytes;
    return bad("truncated: header says " + std::to_string(steps) + " steps, the file holds " +
                   std::to_string(whole) + " whole rows (row " + std::to_string(whole) +
                   " would start at this offset)",
               kLogitsHeaderBytes + whole * row_bytes);
  }
  if (body != steps * row_bytes) {
    return bad("trailing bytes after " + std::to_string(steps) + " steps",
               kLogitsHeaderBytes + steps * row_bytes);
  }
  std::unique_ptr<ReplaySource> src(new ReplaySource());
  src->width_ = width;
  src->steps_ = steps;
  src->data_.resize(steps * static_cast<std::uint64_t>(width));
  if (!src->data_.empty()) {
    std::memcpy(src->data_.data(), bytes.data() + kLogitsHeaderBytes, body);
  }
  for (std::size_t i = 0; i < src->data_.size(); ++i) {
    const float v = src->data_[i];
    if (v != v || v == std::numeric_limits<float>::infinity()) {
      return bad("NaN or +inf logit (step " + std::to_string(i / width) + ", id " +
                     std::to_string(i % width) + ")",
                 kLogitsHeaderBytes + i * 4);
    }
  }
  return src;
}

Result<std::unique_ptr<ReplaySource>> ReplaySource::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError("cannot open logits file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return Parse(ss.str(), path);
}

void ReplaySource::Logits(std::span<const TokenId> context, std::span<float> out) {
  (void)context;
  if (out.size() != static_cast<std::size_t>(width_)) return;
  if (cursor_ >= steps_) {
    exhausted_ = true;
    std::fill(out.begin(), out.end(), 0.0f);
    return;
  }
  std::span<const float> row = Row(cursor_++);
  std::copy(row.begin(), row.end(), out.begin());
}

void RecordingSource::Logits(std::span<const TokenId> context, std::span<float> out) {
  inner_.Logits(context, out);
  if (!status_.ok()) return;
  status_ = writer_.Append(out);
}

}  // namespace lockstep
