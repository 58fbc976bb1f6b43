// NgramModel::TrainFromCorpus and DefaultNgramCorpus (include/lockstep/ngram_model.h): read
// JSONL corpus files, encode them with a Vocabulary, train. Kept apart from ngram_model.cc so the
// model itself does not depend on the vocabulary code. The boundary for nlohmann_json: its
// exceptions (and bad_alloc) are caught here and returned as a Status.
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/ngram_model.h"
#include "lockstep/vocabulary.h"

namespace lockstep {

Result<NgramModel> NgramModel::TrainFromCorpus(const Vocabulary& vocab,
                                               const std::vector<std::string>& corpus_files,
                                               int order) {
  const TokenId eos = vocab.eos();
  if (eos == kNoToken) {
    return Status(StatusCode::kInvalidVocabulary, "vocabulary has no EOS token", vocab.name());
  }
  std::vector<std::vector<TokenId>> docs;
  try {
    EncodeOptions options;
    options.add_dummy_prefix = false;
    for (const std::string& path : corpus_files) {
      std::ifstream f(path);
      if (!f) return Status(StatusCode::kIoError, "cannot open corpus file", path);
      std::string line;
      for (int line_no = 1; std::getline(f, line); ++line_no) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(line_no);
        const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded() || !j.is_object()) {
          return Status(StatusCode::kInvalidArgument, "corpus line is not a JSON object", where);
        }
        const auto it = j.find("text");
        if (it == j.end() || !it->is_string()) {
          return Status(StatusCode::kInvalidArgument, "corpus line has no string \"text\"", where);
        }
        Result<std::vector<TokenId>> ids = vocab.Encode(it->get_ref<const std::string&>(), options);
        if (!ids.ok()) {
          return Status(ids.status().code(), "cannot encode corpus text: " + ids.status().message(),
                        where);
        }
        docs.push_back(std::move(ids).value());
      }
    }
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory while reading the corpus");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInternal, std::string("reading the corpus: ") + e.what());
  }
  return Train(docs, vocab.logits_width(), eos, order);
}

std::vector<std::string> DefaultNgramCorpus(std::string_view data_dir) {
  std::string dir(data_dir);
  if (!dir.empty() && dir.back() != '/') dir += '/';
  dir += "corpus/";
  return {dir + "json.jsonl", dir + "values.jsonl", dir + "toolcalls.jsonl"};
}

}  // namespace lockstep
