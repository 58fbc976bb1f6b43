// Loader for SentencePiece tokenizer.model files (Vocabulary::FromSentencePiece) through
// Debian's libsentencepiece, whose own encoder is the canonical one. The no-dummy-prefix
// encoder is a second processor built from the same ModelProto with
// normalizer_spec.add_dummy_prefix rewritten to false in the serialized bytes (the .pb.h
// headers are not installed, so the two protobuf fields are edited by hand here).
#include <sentencepiece_processor.h>

#include <cstdio>

#include "automata/vocab/unicode.h"
#include "automata/vocab/vocabulary_impl.h"

namespace lockstep {
namespace {

bool ReadVarint(std::string_view s, std::size_t* pos, std::uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= s.size()) return false;
    auto b = static_cast<unsigned char>(s[(*pos)++]);
    *v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

void WriteVarint(std::uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Walks one protobuf message; calls fn(field, wire_type, whole field bytes, payload) per field.
template <typename Fn>
bool WalkFields(std::string_view msg, Fn fn) {
  std::size_t pos = 0;
  while (pos < msg.size()) {
    std::size_t start = pos;
    std::uint64_t key;
    if (!ReadVarint(msg, &pos, &key)) return false;
    std::uint64_t field = key >> 3;
    int wire = static_cast<int>(key & 7);
    std::string_view payload;
    std::uint64_t v;
    switch (wire) {
      case 0:
        if (!ReadVarint(msg, &pos, &v)) return false;
        break;
      case 1:
        if (msg.size() - pos < 8) return false;
        pos += 8;
        break;
      case 2:
        if (!ReadVarint(msg, &pos, &v) || v > msg.size() - pos) return false;
        payload = msg.substr(pos, static_cast<std::size_t>(v));
        pos += static_cast<std::size_t>(v);
        break;
      case 5:
        if (msg.size() - pos < 4) return false;
        pos += 4;
        break;
      default:
        return false;
    }
    fn(field, wire, msg.substr(start, pos - start), payload);
  }
  return true;
}

// ModelProto with normalizer_spec (field 3) .add_dummy_prefix (field 3) = false.
bool WithoutDummyPrefix(std::string_view model, std::string* out) {
  out->clear();
  bool have_spec = false;
  bool ok_inner = true;
  bool ok = WalkFields(
      model, [&](std::uint64_t field, int wire, std::string_view whole, std::string_view payload) {
        if (field != 3 || wire != 2) {
          out->append(whole);
          return;
        }
        have_spec = true;
        std::string spec;
        ok_inner &=
            WalkFields(payload, [&](std::uint64_t f, int, std::string_view w, std::string_view) {
              if (f != 3) spec.append(w);
            });
        spec.push_back(static_cast<char>((3 << 3) | 0));
        spec.push_back(0);
        out->push_back(static_cast<char>((3 << 3) | 2));
        WriteVarint(spec.size(), out);
        out->append(spec);
      });
  if (!have_spec) {
    out->push_back(static_cast<char>((3 << 3) | 2));
    out->push_back(2);
    out->push_back(static_cast<char>((3 << 3) | 0));
    out->push_back(0);
  }
  return ok && ok_inner;
}

}  // namespace

Result<std::shared_ptr<const Vocabulary>> Vocabulary::FromSentencePiece(
    std::string_view model_proto, const VocabularyOptions& options, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->name_ = std::move(name);
  impl->encoder_ = Impl::Encoder::kSentencePiece;
  impl->sp_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto st = impl->sp_->LoadFromSerializedProto(model_proto);
  if (!st.ok()) {
    return Status(StatusCode::kInvalidVocabulary, "sentencepiece: " + st.ToString(),
                  "tokenizer.model");
  }
  std::string no_prefix;
  if (!WithoutDummyPrefix(model_proto, &no_prefix)) {
    return Status(StatusCode::kInvalidVocabulary, "malformed ModelProto", "tokenizer.model");
  }
  impl->sp_no_prefix_ = std::make_unique<sentencepiece::SentencePieceProcessor>();
  st = impl->sp_no_prefix_->LoadFromSerializedProto(no_prefix);
  if (!st.ok()) {
    return Status(StatusCode::kInternal, "sentencepiece (no dummy prefix): " + st.ToString(),
                  "tokenizer.model");
  }
  const sentencepiece::SentencePieceProcessor& sp = *impl->sp_;
  const int n = sp.GetPieceSize();
  if (n <= 0) return Status(StatusCode::kInvalidVocabulary, "no pieces", "tokenizer.model");
  impl->Resize(n);
  std::string bytes;
  for (int id = 0; id < n; ++id) {
    const std::string& piece = sp.IdToPiece(id);
    if (sp.IsControl(id) || sp.IsUnknown(id)) {
      impl->AddToken(id, TokenKind::kSpecial, {}, piece);
    } else if (sp.IsUnused(id)) {
      impl->AddToken(id, TokenKind::kUnused, {}, piece);
    } else if (sp.IsByte(id)) {
      unsigned v = 0;
      if (piece.size() != 6 || std::sscanf(piece.c_str(), "<0x%2X>", &v) != 1) {
        return Status(StatusCode::kInvalidVocabulary, "byte piece '" + piece + "' is not <0xNN>",
                      "piece " + std::to_string(id));
      }
      impl->AddToken(id, TokenKind::kByte, std::string(1, static_cast<char>(v)), piece);
    } else {
      vocab::MetaspaceToBytes(piece, &bytes);
      impl->AddToken(id, TokenKind::kNormal, bytes, piece);
    }
  }
  impl->Finish();
  LOCKSTEP_RETURN_IF_ERROR(impl->SetLogitsWidth(options));
  if (sp.eos_id() >= 0 && sp.eos_id() < n) impl->eos_ids_.push_back(sp.eos_id());
  if (sp.bos_id() >= 0 && sp.bos_id() < n) impl->bos_ = sp.bos_id();
  impl->ResolveSpecialIds({}, {});
  return FromImpl(std::move(impl));
}

}  // namespace lockstep
