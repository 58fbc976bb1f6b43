// NgramModel (include/lockstep/ngram_model.h): counting, interpolated Witten-Bell probabilities
// and the versioned binary format. Corpus reading is in ngram_corpus.cc (it needs a Vocabulary).
#include "lockstep/ngram_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <utility>

namespace lockstep {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'N', 'G', 'R', 'A', 'M', '\0'};
constexpr int kIdBits = 21;
constexpr std::uint64_t kIdMask = (1ull << kIdBits) - 1;

std::uint64_t Fnv1a64(std::string_view bytes) {
  std::uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

template <typename T>
void Put(std::string& out, T v) {
  char buf[sizeof(T)];
  std::memcpy(buf, &v, sizeof(T));  // the format is little-endian, as is every supported host
  out.append(buf, sizeof(T));
}

class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* v) {
    if (bytes_.size() - pos_ < sizeof(T)) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }
  // Whether `n` records of `size` bytes can still be read (guards allocations).
  bool Has(std::uint64_t n, std::size_t size) const { return n <= (bytes_.size() - pos_) / size; }
  std::size_t pos() const { return pos_; }

 private:
  std::string_view bytes_;
  std::size_t pos_ = 0;
};

Status Corrupt(const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "n-gram model: " + what);
}

}  // namespace

NgramModel::NgramModel(const NgramModel&) = default;
NgramModel& NgramModel::operator=(const NgramModel&) = default;
NgramModel::NgramModel(NgramModel&&) noexcept = default;
NgramModel& NgramModel::operator=(NgramModel&&) noexcept = default;
NgramModel::~NgramModel() = default;

std::size_t NgramModel::num_contexts(int length) const {
  if (length < 1 || length > static_cast<int>(levels_.size())) return 0;
  return levels_[length - 1].keys.size();
}

Result<NgramModel> NgramModel::Train(const std::vector<std::vector<TokenId>>& docs,
                                     std::int32_t width, TokenId eos, int order) {
  if (order < kMinOrder || order > kMaxOrder) {
    return Status(StatusCode::kInvalidArgument,
                  "n-gram order must be in [2, 4], got " + std::to_string(order));
  }
  if (width <= 0 || width > kMaxWidth) {
    return Status(StatusCode::kInvalidArgument,
                  "n-gram width out of range: " + std::to_string(width));
  }
  if (eos < 0 || eos >= width) {
    return Status(StatusCode::kInvalidArgument,
                  "n-gram EOS id out of range: " + std::to_string(eos));
  }
  try {
    NgramModel m;
    m.order_ = order;
    m.width_ = width;
    m.eos_ = eos;
    std::vector<std::uint32_t> uni(width, 0);
    std::vector<std::vector<std::pair<std::uint64_t, TokenId>>> events(order - 1);
    std::vector<TokenId> seq;
    for (std::size_t d = 0; d < docs.size(); ++d) {
      seq.assign(1, eos);
      for (TokenId id : docs[d]) {
        if (id < 0 || id >= width) {
          return Status(
              StatusCode::kInvalidArgument,
              "token id " + std::to_string(id) + " out of range in document " + std::to_string(d));
        }
        seq.push_back(id);
      }
      seq.push_back(eos);
      for (std::size_t j = 1; j < seq.size(); ++j) {
        ++uni[seq[j]];
        ++m.total_;
        std::uint64_t key = 0;
        for (int k = 1; k < order && static_cast<std::size_t>(k) <= j; ++k) {
          // Context of length k, oldest token in the highest bits.
          key |= static_cast<std::uint64_t>(seq[j - k]) << (kIdBits * (k - 1));
          events[k - 1].emplace_back(key, seq[j]);
        }
      }
    }
    if (m.total_ > 0xFFFFFFFFull) {
      return Status(StatusCode::kResourceLimit, "n-gram training corpus over 2^32 tokens");
    }
    for (TokenId w = 0; w < width; ++w) {
      if (uni[w] != 0) {
        m.uni_ids_.push_back(w);
        m.uni_counts_.push_back(uni[w]);
      }
    }
    m.levels_.resize(order - 1);
    for (int k = 1; k < order; ++k) {
      auto& ev = events[k - 1];
      std::sort(ev.begin(), ev.end());
      Level& level = m.levels_[k - 1];
      level.offsets.push_back(0);
      for (std::size_t i = 0; i < ev.size();) {
        std::size_t j = i;
        while (j < ev.size() && ev[j] == ev[i]) ++j;
        if (level.keys.empty() || level.keys.back() != ev[i].first) {
          if (!level.keys.empty())
            level.offsets.push_back(static_cast<std::uint32_t>(level.ids.size()));
          level.keys.push_back(ev[i].first);
        }
        level.ids.push_back(ev[i].second);
        level.counts.push_back(static_cast<std::uint32_t>(j - i));
        i = j;
      }
      level.offsets.push_back(static_cast<std::uint32_t>(level.ids.size()));
      if (level.keys.empty()) level.offsets.assign(1, 0);
      std::vector<std::pair<std::uint64_t, TokenId>>().swap(ev);
    }
    LOCKSTEP_RETURN_IF_ERROR(m.Finish());
    return m;
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory while training the n-gram model");
  }
}

Status NgramModel::Finish() {
  if (uni_ids_.empty()) return Corrupt("no training tokens");
  std::uint64_t sum = 0;
  for (std::uint32_t c : uni_counts_) sum += c;
  if (total_ == 0) total_ = sum;
  if (sum != total_) return Corrupt("unigram counts do not add up");
  for (Level& level : levels_) {
    level.totals.resize(level.keys.size());
    for (std::size_t i = 0; i < level.keys.size(); ++i) {
      std::uint64_t c = 0;
      for (std::uint32_t e = level.offsets[i]; e < level.offsets[i + 1]; ++e) c += level.counts[e];
      if (c > 0xFFFFFFFFull) return Corrupt("context count overflow");
      level.totals[i] = static_cast<std::uint32_t>(c);
    }
  }
  const double n = static_cast<double>(total_);
  const double types = static_cast<double>(uni_ids_.size());
  const double floor = types / static_cast<double>(width_) / (n + types);
  uni_prob_.assign(width_, floor);
  for (std::size_t i = 0; i < uni_ids_.size(); ++i) {
    uni_prob_[uni_ids_[i]] += static_cast<double>(uni_counts_[i]) / (n + types);
  }
  log_uni_.resize(width_);
  for (std::int32_t w = 0; w < width_; ++w)
    log_uni_[w] = static_cast<float>(std::log(uni_prob_[w]));
  extra_.assign(width_, 0.0);
  touched_.clear();
  touched_.reserve(width_);
  return Status::Ok();
}

void NgramModel::Logits(std::span<const TokenId> context, std::span<float> out) {
  if (out.size() != static_cast<std::size_t>(width_) || width_ == 0) return;
  // P = S * P_unigram + extra, built from the shortest matched context up: at each level
  // P_k = direct_k + alpha_k * P_{k-1}, with direct_k(w) = c(h,w) / (c(h) + T(h)) and
  // alpha_k = T(h) / (c(h) + T(h)). extra is sparse (ids seen after the matched contexts).
  double scale = 1.0;
  std::uint64_t key = 0;
  for (int k = 1; k < order_; ++k) {
    // The k-th most recent token; the history is EOS-prefixed like the training documents.
    const std::int64_t pos = static_cast<std::int64_t>(context.size()) - k;
    TokenId id;
    if (pos >= 0) {
      id = context[pos];
    } else if (pos == -1) {
      id = eos_;
    } else {
      break;  // before the document start
    }
    if (id < 0 || id >= width_) break;  // an id this model cannot know: back off here
    key |= static_cast<std::uint64_t>(id) << (kIdBits * (k - 1));
    const Level& level = levels_[k - 1];
    const auto it = std::lower_bound(level.keys.begin(), level.keys.end(), key);
    if (it == level.keys.end() || *it != key) break;  // longer contexts cannot match either
    const std::size_t c = static_cast<std::size_t>(it - level.keys.begin());
    const std::uint32_t begin = level.offsets[c], end = level.offsets[c + 1];
    const double types = static_cast<double>(end - begin);
    const double denom = static_cast<double>(level.totals[c]) + types;
    const double alpha = types / denom;
    for (TokenId w : touched_) extra_[w] *= alpha;
    for (std::uint32_t e = begin; e < end; ++e) {
      const TokenId w = level.ids[e];
      if (extra_[w] == 0.0) touched_.push_back(w);
      extra_[w] += static_cast<double>(level.counts[e]) / denom;
    }
    scale *= alpha;
  }
  const float log_scale = static_cast<float>(std::log(scale));
  const float* src = log_uni_.data();
  float* dst = out.data();
  for (std::int32_t w = 0; w < width_; ++w) dst[w] = src[w] + log_scale;
  for (TokenId w : touched_) {
    dst[w] = static_cast<float>(std::log(scale * uni_prob_[w] + extra_[w]));
    extra_[w] = 0.0;
  }
  touched_.clear();
}

std::string NgramModel::Serialize(std::uint64_t fingerprint) const {
  std::string out;
  out.append(kMagic, sizeof kMagic);
  Put<std::uint32_t>(out, kFormatVersion);
  Put<std::uint32_t>(out, static_cast<std::uint32_t>(order_));
  Put<std::int32_t>(out, width_);
  Put<std::int32_t>(out, eos_);
  Put<std::uint64_t>(out, fingerprint);
  Put<std::uint32_t>(out, static_cast<std::uint32_t>(uni_ids_.size()));
  for (std::size_t i = 0; i < uni_ids_.size(); ++i) {
    Put<std::int32_t>(out, uni_ids_[i]);
    Put<std::uint32_t>(out, uni_counts_[i]);
  }
  for (const Level& level : levels_) {
    Put<std::uint32_t>(out, static_cast<std::uint32_t>(level.keys.size()));
    for (std::uint64_t k : level.keys) Put<std::uint64_t>(out, k);
    for (std::uint32_t o : level.offsets) Put<std::uint32_t>(out, o);
    Put<std::uint32_t>(out, static_cast<std::uint32_t>(level.ids.size()));
    for (std::size_t e = 0; e < level.ids.size(); ++e) {
      Put<std::int32_t>(out, level.ids[e]);
      Put<std::uint32_t>(out, level.counts[e]);
    }
  }
  Put<std::uint64_t>(out, Fnv1a64(out));
  return out;
}

Status NgramModel::Save(const std::string& path, std::uint64_t fingerprint) const {
  std::string bytes;
  try {
    bytes = Serialize(fingerprint);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory while writing the n-gram model");
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(StatusCode::kIoError, "cannot open for writing", path);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return Status(StatusCode::kIoError, "write failed", path);
  return Status::Ok();
}

Result<NgramModel> NgramModel::Load(const std::string& path, std::uint64_t expected_fingerprint) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(StatusCode::kIoError, "cannot open n-gram model", path);
  std::string bytes;
  try {
    std::ostringstream ss;
    ss << f.rdbuf();
    bytes = std::move(ss).str();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "n-gram model file too large", path);
  }
  Result<NgramModel> r = Deserialize(bytes, expected_fingerprint);
  if (!r.ok()) return Status(r.status().code(), r.status().message(), path);
  return r;
}

Result<NgramModel> NgramModel::Deserialize(std::string_view bytes,
                                           std::uint64_t expected_fingerprint) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return Corrupt("not an n-gram model file (bad magic)");
  }
  Reader r(bytes.substr(sizeof kMagic));
  std::uint32_t version = 0, order = 0;
  std::int32_t width = 0, eos = 0;
  std::uint64_t fingerprint = 0;
  if (!r.Get(&version)) return Corrupt("truncated header");
  if (version != kFormatVersion) {
    return Corrupt("unsupported format version " + std::to_string(version) + " (this build reads " +
                   std::to_string(kFormatVersion) + ")");
  }
  if (!r.Get(&order) || !r.Get(&width) || !r.Get(&eos) || !r.Get(&fingerprint)) {
    return Corrupt("truncated header");
  }
  if (expected_fingerprint != 0 && fingerprint != expected_fingerprint) {
    return Corrupt("vocabulary fingerprint mismatch: the model was trained for another vocabulary");
  }
  if (bytes.size() < sizeof kMagic + 8) return Corrupt("truncated file");
  const std::size_t body = bytes.size() - 8;
  std::uint64_t stored_sum;
  std::memcpy(&stored_sum, bytes.data() + body, sizeof stored_sum);
  if (Fnv1a64(bytes.substr(0, body)) != stored_sum)
    return Corrupt("checksum mismatch (corrupt file)");
  if (order < static_cast<std::uint32_t>(kMinOrder) ||
      order > static_cast<std::uint32_t>(kMaxOrder)) {
    return Corrupt("order out of range");
  }
  if (width <= 0 || width > kMaxWidth) return Corrupt("width out of range");
  if (eos < 0 || eos >= width) return Corrupt("EOS id out of range");
  try {
    NgramModel m;
    m.order_ = static_cast<int>(order);
    m.width_ = width;
    m.eos_ = eos;
    std::uint32_t n = 0;
    if (!r.Get(&n) || !r.Has(n, 8)) return Corrupt("truncated unigram table");
    m.uni_ids_.resize(n);
    m.uni_counts_.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      r.Get(&m.uni_ids_[i]);
      r.Get(&m.uni_counts_[i]);
      if (m.uni_ids_[i] < 0 || m.uni_ids_[i] >= width || m.uni_counts_[i] == 0 ||
          (i > 0 && m.uni_ids_[i] <= m.uni_ids_[i - 1])) {
        return Corrupt("bad unigram entry " + std::to_string(i));
      }
    }
    m.levels_.resize(order - 1);
    for (std::uint32_t k = 1; k < order; ++k) {
      Level& level = m.levels_[k - 1];
      std::uint32_t contexts = 0;
      if (!r.Get(&contexts) || !r.Has(contexts, 12)) return Corrupt("truncated context table");
      level.keys.resize(contexts);
      for (std::uint32_t i = 0; i < contexts; ++i) {
        r.Get(&level.keys[i]);
        std::uint64_t key = level.keys[i];
        for (std::uint32_t j = 0; j < k; ++j, key >>= kIdBits) {
          if ((key & kIdMask) >= static_cast<std::uint64_t>(width))
            return Corrupt("bad context key");
        }
        if (key != 0 || (i > 0 && level.keys[i] <= level.keys[i - 1])) {
          return Corrupt("bad context key");
        }
      }
      level.offsets.resize(static_cast<std::size_t>(contexts) + 1);
      for (auto& o : level.offsets) {
        if (!r.Get(&o)) return Corrupt("truncated offsets");
      }
      std::uint32_t entries = 0;
      if (!r.Get(&entries) || !r.Has(entries, 8)) return Corrupt("truncated continuations");
      if (level.offsets[0] != 0 || level.offsets.back() != entries) return Corrupt("bad offsets");
      for (std::uint32_t i = 0; i < contexts; ++i) {
        if (level.offsets[i + 1] <= level.offsets[i]) return Corrupt("bad offsets");
      }
      level.ids.resize(entries);
      level.counts.resize(entries);
      for (std::uint32_t e = 0; e < entries; ++e) {
        r.Get(&level.ids[e]);
        r.Get(&level.counts[e]);
        if (level.ids[e] < 0 || level.ids[e] >= width || level.counts[e] == 0) {
          return Corrupt("bad continuation entry");
        }
      }
      for (std::uint32_t i = 0; i < contexts; ++i) {
        for (std::uint32_t e = level.offsets[i] + 1; e < level.offsets[i + 1]; ++e) {
          if (level.ids[e] <= level.ids[e - 1]) return Corrupt("continuations out of order");
        }
      }
    }
    if (r.pos() + sizeof kMagic != body) return Corrupt("trailing bytes before the checksum");
    m.total_ = 0;
    LOCKSTEP_RETURN_IF_ERROR(m.Finish());
    return m;
  } catch (const std::bad_alloc&) {
    return Corrupt("out of memory while reading");
  }
}

}  // namespace lockstep
