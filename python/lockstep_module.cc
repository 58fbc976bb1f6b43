// The `lockstep` Python module (pybind11): Vocabulary, the compile_* functions, Matcher, batch
// mask fills, Sampler, the C++ generation loop driven by a Python logits callable, a per-step
// LogitsProcessor for other frameworks, and the JSON Schema validator (SchemaValidator). This
// file is the Python boundary, over the installed headers (lockstep/...) only: every lockstep
// Status becomes a lockstep.Error (a ValueError) carrying its code and location, every NumPy
// buffer is checked before the C++ side sees a pointer, and the GIL is released around mask
// fills, compilation, generation and validation. docs/python.md is the user's guide. Bind runs
// one Bind* step per area of the module.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "lockstep/artifact.h"
#include "lockstep/batch.h"
#include "lockstep/compiler.h"
#include "lockstep/decoding.h"
#include "lockstep/logits_source.h"
#include "lockstep/matcher.h"
#include "lockstep/request.h"
#include "lockstep/sampler.h"
#include "lockstep/status.h"
#include "lockstep/structured.h"
#include "lockstep/types.h"
#include "lockstep/validator.h"
#include "lockstep/vocabulary.h"

namespace py = pybind11;

namespace lockstep::python {
namespace {

// ---- errors ------------------------------------------------------------------------------------

PyObject* g_error_type = nullptr;  // lockstep.Error, created at import

// lockstep.Error(str(status)) with .code (StatusCodeName), .location and .message set.
py::object ErrorObject(const Status& status) {
  py::object type = py::reinterpret_borrow<py::object>(g_error_type);
  py::object err = type(status.ToString());
  err.attr("code") = StatusCodeName(status.code());
  err.attr("location") = status.location();
  err.attr("message") = status.message();
  return err;
}

// Raises ErrorObject(status).
[[noreturn]] void Raise(const Status& status) {
  py::object err = ErrorObject(status);
  PyErr_SetObject(g_error_type, err.ptr());
  throw py::error_already_set();
}

[[noreturn]] void RaiseArg(const std::string& message, const std::string& location = {}) {
  Raise(Status(StatusCode::kInvalidArgument, message, location));
}

template <typename T>
T Unwrap(Result<T> r) {
  if (!r.ok()) Raise(r.status());
  return std::move(r).value();
}

// ---- handles -----------------------------------------------------------------------------------

// A vocabulary and its GrammarCompiler, made on first compile so the token trie is built once per
// Vocabulary object.
struct PyVocab {
  std::shared_ptr<const Vocabulary> vocab;
  std::mutex mu;
  std::shared_ptr<const GrammarCompiler> compiler;

  explicit PyVocab(std::shared_ptr<const Vocabulary> v) : vocab(std::move(v)) {}
  // Call without the GIL: building the trie takes tens of milliseconds on a large vocabulary.
  std::shared_ptr<const GrammarCompiler> Compiler() {
    std::lock_guard<std::mutex> lock(mu);
    if (!compiler) compiler = std::make_shared<GrammarCompiler>(vocab);
    return compiler;
  }
};

struct PyGrammar {
  std::shared_ptr<PyVocab> vocab;
  std::shared_ptr<const CompiledGrammar> grammar;
  std::vector<std::string> warnings;
  // compile_request: what the request chose (its kind, format and tools).
  std::shared_ptr<const CompiledRequest> request;
};

struct PyMatcher {
  std::shared_ptr<PyGrammar> grammar;
  Matcher matcher;
  PyMatcher(std::shared_ptr<PyGrammar> g, Matcher m)
      : grammar(std::move(g)), matcher(std::move(m)) {}
};

void CheckToken(TokenId id, std::int32_t width, const char* what) {
  if (id < 0 || id >= width) {
    RaiseArg("token id " + std::to_string(id) + " is outside [0, " + std::to_string(width) + ")",
             what);
  }
}

std::vector<TokenId> CheckedIds(const std::vector<std::int64_t>& ids, std::int32_t width,
                                const char* what) {
  std::vector<TokenId> out;
  out.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= width) {
      RaiseArg(
          "token id " + std::to_string(ids[i]) + " is outside [0, " + std::to_string(width) + ")",
          std::string(what) + "[" + std::to_string(i) + "]");
    }
    out.push_back(static_cast<TokenId>(ids[i]));
  }
  return out;
}

// Bytes of a str (UTF-8) or bytes-like argument.
std::string BytesOf(const py::object& obj, const char* what) {
  if (py::isinstance<py::str>(obj)) return obj.cast<std::string>();
  if (py::isinstance<py::bytes>(obj)) return std::string(obj.cast<py::bytes>());
  if (py::isinstance<py::bytearray>(obj) || PyObject_CheckBuffer(obj.ptr())) {
    return std::string(py::bytes(py::module_::import("builtins").attr("bytes")(obj)));
  }
  throw py::type_error(std::string(what) + " must be str or bytes, not " +
                       std::string(py::str(obj.get_type().attr("__name__"))));
}

// A JSON document (a schema, an instance) given as text (str or bytes) or as a Python value
// (dict, list, bool, number, None), serialised with the json module.
std::string JsonText(const py::object& value, const char* what) {
  if (py::isinstance<py::str>(value) || py::isinstance<py::bytes>(value)) {
    return BytesOf(value, what);
  }
  return py::module_::import("json").attr("dumps")(value).cast<std::string>();
}

// ---- NumPy buffers -----------------------------------------------------------------------------

std::string TypeName(const py::handle& obj) {
  return std::string(py::str(obj.get_type().attr("__name__")));
}

std::string DtypeName(const py::array& arr) {
  return py::str(arr.attr("dtype")).cast<std::string>();
}

// Row `index` of a bitmask array (int32 or uint32, shape [words] or [batch, words], C-contiguous,
// writable when `writable`): a pointer into the caller's memory, no copy. Raises TypeError for a
// non-array or a wrong dtype, ValueError for a wrong shape, layout or index.
std::uint32_t* MaskRow(const py::object& obj, std::int64_t index, std::size_t words, bool writable,
                       const char* what) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(what) + " must be a numpy int32 array, not " + TypeName(obj));
  }
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  const py::dtype dt = arr.dtype();
  if ((dt.kind() != 'i' && dt.kind() != 'u') || dt.itemsize() != 4) {
    throw py::type_error(std::string(what) + " must have dtype int32 or uint32, not " +
                         DtypeName(arr));
  }
  if (arr.ndim() != 1 && arr.ndim() != 2) {
    throw py::value_error(std::string(what) + " must be 1-D [words] or 2-D [batch, words], not " +
                          std::to_string(arr.ndim()) + "-D");
  }
  if (!(arr.flags() & py::array::c_style)) {
    throw py::value_error(std::string(what) +
                          " must be C-contiguous (a slice with a stride is "
                          "not; use np.ascontiguousarray and copy back)");
  }
  if (writable && !arr.writeable()) {
    throw py::value_error(std::string(what) + " is read-only");
  }
  const std::int64_t rows = arr.ndim() == 2 ? arr.shape(0) : 1;
  const std::int64_t cols = arr.shape(arr.ndim() - 1);
  if (index < 0 || index >= rows) {
    throw py::value_error(std::string(what) + ": row index " + std::to_string(index) +
                          " is outside [0, " + std::to_string(rows) + ")");
  }
  if (cols < static_cast<std::int64_t>(words)) {
    throw py::value_error(std::string(what) + " has " + std::to_string(cols) +
                          " words per row; the grammar needs " + std::to_string(words));
  }
  auto* base = static_cast<std::uint32_t*>(const_cast<void*>(arr.data()));
  return base + index * cols;
}

// A float32, C-contiguous, writable array of shape [width] or [rows, width], edited in place.
py::array CheckScores(const py::object& obj, const char* what) {
  if (!py::isinstance<py::array>(obj)) {
    throw py::type_error(std::string(what) + " must be a numpy float32 array, not " +
                         TypeName(obj));
  }
  py::array arr = py::reinterpret_borrow<py::array>(obj);
  if (!arr.dtype().is(py::dtype::of<float>())) {
    throw py::type_error(std::string(what) + " must have dtype float32, not " + DtypeName(arr));
  }
  if (arr.ndim() != 1 && arr.ndim() != 2) {
    throw py::value_error(std::string(what) + " must be 1-D or 2-D");
  }
  if (!(arr.flags() & py::array::c_style) || !arr.writeable()) {
    throw py::value_error(std::string(what) + " must be C-contiguous and writable");
  }
  return arr;
}

// Logits as floats: any array-like convertible to a 1-D float32 array of `width` entries (or of
// any width when `width` < 0), with no NaN and no +inf (the Sampler's precondition).
std::vector<float> LogitsVector(const py::handle& obj, std::int64_t width, const char* what) {
  auto arr = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!arr) {
    throw py::type_error(std::string(what) + " must be convertible to a float32 array, not " +
                         TypeName(obj));
  }
  if (arr.ndim() != 1 || (width >= 0 && arr.shape(0) != width)) {
    std::string shape = "(";
    for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
      shape += (i ? ", " : "") + std::to_string(arr.shape(i));
    }
    shape += arr.ndim() == 1 ? ",)" : ")";
    throw py::value_error(std::string(what) + " must have shape (" +
                          (width >= 0 ? std::to_string(width) : std::string("width")) + ",), got " +
                          shape);
  }
  std::vector<float> out(arr.data(), arr.data() + arr.shape(0));
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::isnan(out[i]) || out[i] == std::numeric_limits<float>::infinity()) {
      throw py::value_error(std::string(what) + "[" + std::to_string(i) +
                            "] is NaN or +inf; logits must be finite or -inf");
    }
  }
  return out;
}

std::vector<std::int64_t> IdList(const py::handle& obj) {
  auto arr = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(obj);
  if (!arr || arr.ndim() != 1) throw py::type_error("expected a 1-D sequence of token ids");
  return std::vector<std::int64_t>(arr.data(), arr.data() + arr.shape(0));
}

// ---- compiling ---------------------------------------------------------------------------------

// lockstep.CancelToken: a flag a Python thread sets to stop compiles running with it (they
// release the GIL, so another thread can run). Shared with them as CompileOptions::cancel.
struct PyCancelToken {
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(false);
};

// The deadline and cancellation keyword arguments every compile_* takes.
void SetBudget(CompileOptions* o, std::int64_t timeout_ms,
               const std::shared_ptr<PyCancelToken>& cancel, bool background_positions) {
  o->background_positions = background_positions;
  if (timeout_ms < 0) throw py::value_error("timeout_ms must be >= 0 (0: no deadline)");
  o->compile_timeout_ms = timeout_ms;
  if (cancel) o->cancel = cancel->flag;
}

// The automaton-size budgets of compile_schema and compile_grammar.
void SetStateBudgets(CompileOptions* o, std::int32_t max_dfa_states,
                     std::int64_t max_program_states) {
  if (max_dfa_states <= 0 || max_program_states <= 0) {
    RaiseArg("max_dfa_states and max_program_states must be positive");
  }
  o->max_dfa_states = max_dfa_states;
  o->max_program_states = max_program_states;
}

template <typename F>
std::shared_ptr<PyGrammar> Compile(const std::shared_ptr<PyVocab>& vocab, F&& compile) {
  auto out = std::make_shared<PyGrammar>();
  out->vocab = vocab;
  Result<std::shared_ptr<const CompiledGrammar>> r = Status(StatusCode::kInternal, "not run");
  {
    py::gil_scoped_release release;
    r = compile(*vocab->Compiler(), &out->warnings);
  }
  out->grammar = Unwrap(std::move(r));
  return out;
}

// ---- generation --------------------------------------------------------------------------------

// Thrown through lockstep::Generate (whose state stays consistent: the model is called between a
// mask fill and a draw) to stop it when the Python callable fails; the Python error is kept.
struct SourceAborted {};

// A Python callable as a LogitsSource: logits_fn(context: np.ndarray[int32]) -> float32 [width].
// Called from Generate with the GIL released; takes it for the call.
class PySource final : public LogitsSource {
 public:
  PySource(py::function fn, std::int32_t width) : fn_(std::move(fn)), width_(width) {}
  std::int32_t width() const override { return width_; }
  void Logits(std::span<const TokenId> context, std::span<float> out) override {
    py::gil_scoped_acquire gil;
    try {
      py::array_t<std::int32_t> ids(static_cast<py::ssize_t>(context.size()));
      if (!context.empty()) {
        std::memcpy(ids.mutable_data(), context.data(), context.size() * sizeof(TokenId));
      }
      py::object r = fn_(ids);
      std::vector<float> v = LogitsVector(r, width_, "logits_fn result");
      std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
    } catch (...) {
      error = std::current_exception();
      throw SourceAborted{};
    }
  }

  std::exception_ptr error;

 private:
  py::function fn_;
  std::int32_t width_;
};

// ---- batch fills -------------------------------------------------------------------------------

BatchMaskFiller& Filler(int num_threads) {
  // Pools live for the process (never destroyed: joining threads during interpreter shutdown is
  // not worth the risk); one per thread count asked for, usually one.
  static std::mutex mu;
  static auto* pools = new std::map<int, std::unique_ptr<BatchMaskFiller>>();
  std::lock_guard<std::mutex> lock(mu);
  auto& p = (*pools)[num_threads];
  if (!p) p = std::make_unique<BatchMaskFiller>(num_threads);
  return *p;
}

// ---- LogitsProcessor ---------------------------------------------------------------------------

class PyProcessor {
 public:
  PyProcessor(std::shared_ptr<PyGrammar> g, std::int32_t batch_size) : grammar_(std::move(g)) {
    if (batch_size < 1) RaiseArg("batch_size must be >= 1", "batch_size");
    for (std::int32_t i = 0; i < batch_size; ++i) matchers_.emplace_back(grammar_->grammar);
    seen_.assign(batch_size, 0);
    mask_.resize(BitmaskWords(grammar_->grammar->logits_width()));
  }

  py::object Call(const py::object& input_ids, const py::object& scores_obj) {
    py::array scores = CheckScores(scores_obj, "scores");
    const std::int32_t width = grammar_->grammar->logits_width();
    const std::int64_t rows = scores.ndim() == 2 ? scores.shape(0) : 1;
    if (scores.shape(scores.ndim() - 1) != width) {
      throw py::value_error("scores have " + std::to_string(scores.shape(scores.ndim() - 1)) +
                            " columns; the grammar's logits width is " + std::to_string(width) +
                            " (load the vocabulary with logits_width=)");
    }
    if (rows != static_cast<std::int64_t>(matchers_.size())) {
      throw py::value_error("scores have " + std::to_string(rows) +
                            " rows; the processor's batch_size is " +
                            std::to_string(matchers_.size()));
    }
    auto ids =
        py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(input_ids);
    if (!ids || ids.ndim() < 1 || ids.ndim() > 2 || (ids.ndim() == 2 && ids.shape(0) != rows) ||
        (ids.ndim() == 1 && rows != 1)) {
      throw py::value_error(
          "input_ids must be a 1-D sequence of ids (batch_size 1) or a 2-D "
          "[batch, length] array with one row per scores row");
    }
    const std::int64_t len = ids.shape(ids.ndim() - 1);
    const std::int64_t* id_data = ids.data();
    float* score_data = static_cast<float*>(scores.mutable_data());
    Status error;
    {
      py::gil_scoped_release release;
      for (std::int64_t r = 0; r < rows && error.ok(); ++r) {
        error = Step(r, id_data + r * len, len, score_data + r * width);
      }
    }
    if (!error.ok()) Raise(error);
    return scores_obj;
  }

  void Reset() {
    for (Matcher& m : matchers_) m.Reset();
    seen_.assign(seen_.size(), 0);
  }

 private:
  // Advances row `r` by its unseen ids, then sets its disallowed scores to -inf.
  Status Step(std::int64_t r, const std::int64_t* ids, std::int64_t len, float* scores) {
    const std::string row = "input_ids row " + std::to_string(r);
    Matcher& m = matchers_[r];
    const Vocabulary& vocab = grammar_->grammar->vocabulary();
    const std::int32_t width = grammar_->grammar->logits_width();
    if (len < seen_[r]) {
      return Status(StatusCode::kInvalidArgument,
                    "has " + std::to_string(len) + " ids but " + std::to_string(seen_[r]) +
                        " were already seen; call reset() before a new sequence",
                    row);
    }
    for (std::int64_t j = seen_[r]; j < len; ++j) {
      const std::int64_t id = ids[j];
      const std::string where = row + ", position " + std::to_string(j);
      if (id < 0 || id >= width) {
        return Status(
            StatusCode::kInvalidArgument,
            "token id " + std::to_string(id) + " is outside [0, " + std::to_string(width) + ")",
            where);
      }
      bool is_eos = false;
      for (TokenId e : vocab.eos_ids()) is_eos |= e == id;
      if (m.IsTerminated() && is_eos) continue;  // EOS padding after the end
      if (!m.AcceptToken(static_cast<TokenId>(id))) {
        return Status(StatusCode::kInvalidArgument,
                      "token " + std::to_string(id) + " is not allowed by the grammar here", where);
      }
    }
    seen_[r] = len;
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    if (m.IsTerminated()) {  // only EOS from now on, so a host that pads with EOS can go on
      for (std::int32_t i = 0; i < width; ++i) {
        bool is_eos = false;
        for (TokenId e : vocab.eos_ids()) is_eos |= e == i;
        if (!is_eos) scores[i] = kNegInf;
      }
      return Status();
    }
    m.FillNextTokenBitmask(mask_);
    for (std::int32_t w = 0; w * 32 < width; ++w) {
      const std::uint32_t bits = mask_[w];
      if (bits == 0xFFFFFFFFu) continue;
      const std::int32_t end = std::min(width, w * 32 + 32);
      for (std::int32_t i = w * 32; i < end; ++i) {
        if (!((bits >> (i & 31)) & 1u)) scores[i] = kNegInf;
      }
    }
    return Status();
  }

  std::shared_ptr<PyGrammar> grammar_;
  std::vector<Matcher> matchers_;
  std::vector<std::int64_t> seen_;
  std::vector<std::uint32_t> mask_;
};

// ---- Sampler -----------------------------------------------------------------------------------

struct PySampler {
  Sampler sampler;
  std::vector<float> scratch;
  explicit PySampler(const SamplerConfig& c) : sampler(c) {}
};

TokenKind KindOf(const py::handle& h) {
  if (py::isinstance<py::str>(h)) {
    const std::string s = h.cast<std::string>();
    if (s == "normal") return TokenKind::kNormal;
    if (s == "byte") return TokenKind::kByte;
    if (s == "special") return TokenKind::kSpecial;
    if (s == "unused") return TokenKind::kUnused;
    throw py::value_error("token type '" + s + "' is not normal, byte, special or unused");
  }
  const int k = h.cast<int>();
  if (k < 0 || k > 3) throw py::value_error("token type " + std::to_string(k) + " is not 0..3");
  return static_cast<TokenKind>(k);
}

// ---- validation --------------------------------------------------------------------------------

// The names lockstep.SchemaValidator gives for the drafts ("draft-04", ..., "2020-12").
const char* DraftName(SchemaDraft d) { return SchemaDraftName(d); }

// A default_draft= argument: "draft-04", "4", "draft-06", "draft-07", "2019-09", "2020-12", ...
SchemaDraft DraftArg(const std::string& name) {
  std::optional<SchemaDraft> d = ParseSchemaDraft(name);
  if (!d) {
    throw py::value_error(
        "default_draft must be one of 'draft-04', 'draft-06', 'draft-07', "
        "'2019-09', '2020-12', not '" +
        name + "'");
  }
  return *d;
}

SchemaMemberOrder MemberOrderArg(const std::string& name) {
  if (name == "declared") return SchemaMemberOrder::kDeclared;
  if (name == "any") return SchemaMemberOrder::kAny;
  throw py::value_error("member_order must be 'declared' or 'any', not '" + name + "'");
}

// A dict argument's items, with str keys: {key: value} of `what`.
std::vector<std::pair<std::string, py::object>> StrKeyedItems(const py::object& obj,
                                                              const char* what) {
  if (!py::isinstance<py::dict>(obj)) {
    throw py::type_error(std::string(what) + " must be a dict, not " + TypeName(obj));
  }
  std::vector<std::pair<std::string, py::object>> out;
  for (const auto& [key, value] : py::reinterpret_borrow<py::dict>(obj)) {
    if (!py::isinstance<py::str>(key)) {
      throw py::type_error(std::string(what) + " keys must be str URIs, not " + TypeName(key));
    }
    out.emplace_back(key.cast<std::string>(), py::reinterpret_borrow<py::object>(value));
  }
  return out;
}

// SchemaValidator's options from its keyword arguments; remote directories are read here.
SchemaValidatorOptions ValidatorOptions(const std::string& default_draft, const py::object& remotes,
                                        const py::object& remote_dirs) {
  SchemaValidatorOptions o;
  o.default_draft = DraftArg(default_draft);
  if (!remotes.is_none()) {
    for (const auto& [uri, doc] : StrKeyedItems(remotes, "remotes")) {
      o.remotes[uri] = JsonText(doc, "remote document");
    }
  }
  if (!remote_dirs.is_none()) {
    const py::object fspath = py::module_::import("os").attr("fspath");
    for (const auto& [uri, dir] : StrKeyedItems(remote_dirs, "remote_dirs")) {
      const Status st = o.AddRemoteDirectory(uri, fspath(dir).cast<std::string>());
      if (!st.ok()) Raise(st);
    }
  }
  return o;
}

// ---- the module, one area per step (Bind runs them in this order) --------------------------

// lockstep.Error, the exception every Status becomes (Raise).
void BindError(py::module_& m) {
  g_error_type = PyErr_NewExceptionWithDoc(
      "lockstep.Error",
      "A lockstep error. str(e) is the C++ Status text with its location; e.code is the status "
      "code name ('invalid schema', 'invalid regex', ...), e.location where the error is (a "
      "JSON Pointer, 'offset N', 'line:col', an argument), e.message the bare message.",
      PyExc_ValueError, nullptr);
  if (g_error_type == nullptr) throw py::error_already_set();
  m.add_object("Error", py::handle(g_error_type));
}

// lockstep.Vocabulary: loading by name or path, and from a host's own token table.
void BindVocabularyLoaders(py::class_<PyVocab, std::shared_ptr<PyVocab>>& cls) {
  cls
      .def_static(
          "load",
          [](const py::object& name_or_path, std::int32_t logits_width) {
            const std::string name =
                py::module_::import("os").attr("fspath")(name_or_path).cast<std::string>();
            VocabularyOptions o;
            o.logits_width = logits_width;
            Result<std::shared_ptr<const Vocabulary>> r = Status();
            {
              py::gil_scoped_release release;
              r = Vocabulary::Load(name, o);
            }
            return std::make_shared<PyVocab>(Unwrap(std::move(r)));
          },
          py::arg("name_or_path"), py::arg("logits_width") = 0,
          "A bundled vocabulary ('llama3', 'gpt2', 'qwen2.5', 'mistral') or a path to a "
          "tokenizer.json (plain or .gz), a .tiktoken file or a SentencePiece tokenizer.model. "
          "logits_width: the model's logits width when wider than the vocabulary (0 = same).")
      .def_static(
          "from_tokens",
          [](const py::sequence& tokens, const py::object& types, const std::vector<TokenId>& eos,
             std::int32_t logits_width, const std::string& name) {
            std::vector<std::string> store;
            store.reserve(tokens.size());
            for (const py::handle& t : tokens) {
              store.push_back(BytesOf(py::reinterpret_borrow<py::object>(t), "token"));
            }
            std::vector<std::string_view> views(store.begin(), store.end());
            std::vector<TokenKind> kinds;
            if (!types.is_none()) {
              for (const py::handle& t : types.cast<py::sequence>()) kinds.push_back(KindOf(t));
            }
            VocabularyOptions o;
            o.logits_width = logits_width;
            return std::make_shared<PyVocab>(
                Unwrap(Vocabulary::FromTokens(views, kinds, eos, o, name)));
          },
          py::arg("tokens"), py::arg("types") = py::none(),
          py::arg("eos_ids") = std::vector<TokenId>{}, py::arg("logits_width") = 0,
          py::arg("name") = "tokens",
          "A host's own token table: token i emits tokens[i] (bytes or str). types: None (all "
          "normal) or one per token of 'normal', 'byte', 'special', 'unused' (or 0..3). eos_ids "
          "must be special tokens; empty looks for the usual EOS names. Encoding treats ids as "
          "BPE merge ranks (exact for tiktoken-style vocabularies).");
}

// lockstep.Vocabulary: sizes, ids and their bytes, encoding and decoding.
void BindVocabularyTokens(py::class_<PyVocab, std::shared_ptr<PyVocab>>& cls) {
  cls
      .def_property_readonly("name", [](const PyVocab& v) { return v.vocab->name(); })
      .def_property_readonly("size", [](const PyVocab& v) { return v.vocab->size(); })
      .def_property_readonly("logits_width",
                             [](const PyVocab& v) { return v.vocab->logits_width(); })
      .def_property_readonly(
          "bitmask_words", [](const PyVocab& v) { return BitmaskWords(v.vocab->logits_width()); },
          "int32 words of one token bitmask row: ceil(logits_width / 32).")
      .def_property_readonly("eos_ids", [](const PyVocab& v) { return v.vocab->eos_ids(); })
      .def_property_readonly("bos",
                             [](const PyVocab& v) -> py::object {
                               const TokenId b = v.vocab->bos();
                               return b == kNoToken ? py::object(py::none()) : py::int_(b);
                             })
      .def_property_readonly("fingerprint", [](const PyVocab& v) { return v.vocab->Fingerprint(); })
      .def("__len__", [](const PyVocab& v) { return v.vocab->size(); })
      .def(
          "token_bytes",
          [](const PyVocab& v, TokenId id) {
            CheckToken(id, v.vocab->size(), "id");
            const std::string_view b = v.vocab->TokenBytes(id);
            return py::bytes(b.data(), b.size());
          },
          py::arg("id"), "The exact bytes token `id` emits (b'' for special and unused tokens).")
      .def(
          "token_text",
          [](const PyVocab& v, TokenId id) {
            CheckToken(id, v.vocab->size(), "id");
            const std::string_view b = v.vocab->TokenText(id);
            return py::bytes(b.data(), b.size());
          },
          py::arg("id"), "The token's string as written in the tokenizer file.")
      .def(
          "find_token",
          [](const PyVocab& v, const std::string& text) -> py::object {
            const TokenId id = v.vocab->FindToken(text);
            return id == kNoToken ? py::object(py::none()) : py::int_(id);
          },
          py::arg("text"), "The id of the token written `text` in the tokenizer file, or None.")
      .def(
          "encode",
          [](const PyVocab& v, const py::object& text, bool add_dummy_prefix) {
            const std::string t = BytesOf(text, "text");
            EncodeOptions o;
            o.add_dummy_prefix = add_dummy_prefix;
            Result<std::vector<TokenId>> r = Status();
            {
              py::gil_scoped_release release;
              r = v.vocab->Encode(t, o);
            }
            return Unwrap(std::move(r));
          },
          py::arg("text"), py::arg("add_dummy_prefix") = true,
          "Canonical token ids of `text` (str, or UTF-8 bytes), as the reference tokenizer gives.")
      .def(
          "decode",
          [](const PyVocab& v, const py::object& ids) {
            const std::vector<TokenId> checked =
                CheckedIds(IdList(ids), v.vocab->logits_width(), "ids");
            const std::string s = Unwrap(v.vocab->Decode(checked));
            return py::bytes(s);
          },
          py::arg("ids"), "Concatenated bytes of the tokens `ids` (special tokens emit nothing).")
      .def("__repr__", [](const PyVocab& v) {
        return "<lockstep.Vocabulary '" + v.vocab->name() +
               "' size=" + std::to_string(v.vocab->size()) +
               " logits_width=" + std::to_string(v.vocab->logits_width()) + ">";
      });
}

void BindVocabulary(py::module_& m) {
  py::class_<PyVocab, std::shared_ptr<PyVocab>> vocab_cls(
      m, "Vocabulary",
      "A tokenizer vocabulary: each token's exact bytes, the special tokens and the canonical "
      "encoder. Immutable; compile_* reuse one compiler (token trie) per Vocabulary object.");
  BindVocabularyLoaders(vocab_cls);
  BindVocabularyTokens(vocab_cls);
}

// lockstep.CompiledGrammar (stats, artifacts) and lockstep.CancelToken.
void BindCompiledGrammar(py::module_& m) {
  py::class_<PyGrammar, std::shared_ptr<PyGrammar>>(
      m, "CompiledGrammar",
      "A constraint compiled against one vocabulary; immutable, shared by any number of "
      "Matchers on any number of threads.")
      .def_property_readonly("vocabulary", [](const PyGrammar& g) { return g.vocab; })
      .def_property_readonly("logits_width",
                             [](const PyGrammar& g) { return g.grammar->logits_width(); })
      .def_property_readonly(
          "bitmask_words",
          [](const PyGrammar& g) { return BitmaskWords(g.grammar->logits_width()); })
      .def_property_readonly("is_grammar",
                             [](const PyGrammar& g) { return g.grammar->is_grammar(); })
      .def_property_readonly(
          "warnings", [](const PyGrammar& g) { return g.warnings; },
          "compile_schema(lenient=True): one 'pointer: message' per relaxed keyword; "
          "compile_grammar: one 'line:column: rule ... is never used' per rule the start rule "
          "never reaches; empty otherwise.")
      .def_property_readonly(
          "request_kind",
          [](const PyGrammar& g) -> py::object {
            if (!g.request) return py::none();
            return py::str(RequestKindName(g.request->kind));
          },
          "compile_request: 'text', 'json' or 'tools' (what the output is); None otherwise.")
      .def(
          "parse_calls",
          [](const PyGrammar& g, const py::object& ids) {
            if (!g.request || g.request->tool_choice.empty())
              RaiseArg("parse_calls needs a grammar compiled by compile_request with tools");
            const std::vector<TokenId> checked =
                CheckedIds(IdList(ids), g.grammar->vocabulary().size(), "ids");
            auto calls = ParseToolCalls(g.request->format, g.grammar->vocabulary(), checked,
                                        g.request->tools);
            return py::module_::import("json").attr("loads")(ToolCallsJson(Unwrap(calls)));
          },
          py::arg("ids"),
          "compile_request with tools: the calls in generated token ids (without the final EOS), "
          "read back without the automaton, as [{'name': ..., 'arguments': ...}]. Raises "
          "lockstep.Error for ids that are not well-formed calls under the request's format.")
      .def("stats", [](const PyGrammar& g) {
        const CompiledGrammarStats s = g.grammar->Stats();
        py::dict d;
        d["is_grammar"] = s.is_grammar;
        d["dfa_states"] = s.dfa_states;
        d["byte_classes"] = s.byte_classes;
        d["accepting_states"] = s.accepting_states;
        d["compile_ms"] = s.compile_ms;
        d["source_ms"] = s.source_ms;
        d["tables_ms"] = s.tables_ms;
        d["cached_masks"] = s.cached_masks;
        d["mask_cache_bytes"] = s.mask_cache_bytes;
        d["rules"] = s.rules;
        d["counter_rules"] = s.counter_rules;
        d["positions"] = s.positions;
        d["shared_positions"] = s.shared_positions;
        d["signatures"] = s.signatures;
        return d;
      })
      .def(
          "precompute",
          [](const PyGrammar& g) {
            py::gil_scoped_release release;
            g.grammar->PrecomputeAllMasks();
          },
          "Computes every state's / position's token mask now (what an artifact should carry).")
      .def(
          "to_bytes",
          [](const PyGrammar& g) {
            std::string bytes;
            {
              py::gil_scoped_release release;
              bytes = SerializeArtifact(*g.grammar);
            }
            return py::bytes(bytes);
          },
          "The compiled artifact (.lsg, docs/artifacts.md) with the masks cached so far.")
      .def(
          "save",
          [](const PyGrammar& g, const std::string& path) {
            Status st;
            {
              py::gil_scoped_release release;
              st = WriteArtifactFile(*g.grammar, path);
            }
            if (!st.ok()) Raise(st);
          },
          py::arg("path"),
          "Writes the compiled artifact (.lsg) with the masks cached so far; precompute() first "
          "to ship every mask.");

  py::class_<PyCancelToken, std::shared_ptr<PyCancelToken>>(
      m, "CancelToken",
      "A cancellation flag for compiles: pass it as cancel= to compile_*, and cancel() from "
      "another thread stops them soon after with lockstep.Error (code 'resource limit', "
      "'compile cancelled'). Compiles release the GIL, so the other thread runs meanwhile.")
      .def(py::init<>())
      .def(
          "cancel", [](PyCancelToken& t) { t.flag->store(true); },
          "Sets the flag: running compiles with this token stop, later ones stop at once.")
      .def(
          "reset", [](PyCancelToken& t) { t.flag->store(false); }, "Clears the flag.")
      .def_property_readonly(
          "cancelled", [](const PyCancelToken& t) { return t.flag->load(); },
          "Whether cancel() was called (since the last reset()).");
}

// The budget keyword arguments of every compile_*, for their docstrings.
constexpr const char* kBudgetDoc =
    " timeout_ms: wall-clock budget of the compile (default 10000; 0 = none); past it, "
    "lockstep.Error with code 'resource limit' naming the deadline and the JSON Pointer or "
    "rule being compiled. cancel: a lockstep.CancelToken another thread may set. "
    "background_positions: positions of a grammar in use are computed by one background "
    "thread per vocabulary between fills (False: only on the filling thread).";

constexpr const char* kStatesDoc =
    " max_dfa_states: states of one automaton (a rule's, a string constraint's); "
    "max_program_states: states of all rule automata together. Past either, lockstep.Error "
    "with code 'resource limit' naming it.";

// compile_schema, compile_regex and compile_grammar.
void BindCompile(py::module_& m) {
  m.def(
      "compile_schema",
      [](const std::shared_ptr<PyVocab>& vocab, const py::object& schema, bool lenient,
         bool compact, std::int32_t max_whitespace_run, bool format_assertion,
         bool precompute_masks, std::int64_t timeout_ms,
         const std::shared_ptr<PyCancelToken>& cancel, bool background_positions,
         bool openapi_formats, const std::string& default_draft, std::int32_t max_dfa_states,
         std::int64_t max_program_states, const std::string& member_order,
         std::int32_t any_order_max_properties, std::int32_t max_oneof_overlaps,
         std::int32_t max_some_member_requirements, std::int64_t max_exprs,
         std::int64_t max_unique_search_bytes) {
        const std::string text = JsonText(schema, "schema");
        CompileOptions o;
        if (max_unique_search_bytes < 0) {
          throw py::value_error("max_unique_search_bytes must be >= 0");
        }
        o.max_unique_search_bytes = max_unique_search_bytes;
        o.schema_member_order = MemberOrderArg(member_order);
        if (any_order_max_properties < 0 || any_order_max_properties > 63) {
          throw py::value_error("any_order_max_properties must be in 0..63");
        }
        o.schema_any_order_max_properties = any_order_max_properties;
        if (max_oneof_overlaps < 0) throw py::value_error("max_oneof_overlaps must be >= 0");
        o.schema_max_oneof_overlaps = max_oneof_overlaps;
        if (max_some_member_requirements < 0 || max_some_member_requirements > 16) {
          throw py::value_error("max_some_member_requirements must be in 0..16");
        }
        o.schema_max_some_member_requirements = max_some_member_requirements;
        if (max_exprs <= 0) throw py::value_error("max_exprs must be positive");
        o.schema_max_exprs = max_exprs;
        SetStateBudgets(&o, max_dfa_states, max_program_states);
        o.schema_default_draft = DraftArg(default_draft);
        o.schema_lenient = lenient;
        o.schema_openapi_formats = openapi_formats;
        o.schema_whitespace_compact = compact;
        o.schema_max_whitespace_run = max_whitespace_run;
        o.schema_format_assertion = format_assertion;
        o.precompute_masks = precompute_masks;
        SetBudget(&o, timeout_ms, cancel, background_positions);
        return Compile(vocab, [&](const GrammarCompiler& c, std::vector<std::string>* w) {
          return c.CompileSchema(text, o, w);
        });
      },
      py::arg("vocab"), py::arg("schema"), py::arg("lenient") = false, py::arg("compact") = false,
      py::arg("max_whitespace_run") = 32, py::arg("format_assertion") = true,
      py::arg("precompute_masks") = false,
      py::arg("timeout_ms") = CompileOptions{}.compile_timeout_ms, py::arg("cancel") = nullptr,
      py::arg("background_positions") = true, py::arg("openapi_formats") = false,
      py::arg("default_draft") = "2020-12",
      py::arg("max_dfa_states") = CompileOptions{}.max_dfa_states,
      py::arg("max_program_states") = CompileOptions{}.max_program_states,
      py::arg("member_order") = "declared",
      py::arg("any_order_max_properties") = CompileOptions{}.schema_any_order_max_properties,
      py::arg("max_oneof_overlaps") = CompileOptions{}.schema_max_oneof_overlaps,
      py::arg("max_some_member_requirements") =
          CompileOptions{}.schema_max_some_member_requirements,
      py::arg("max_exprs") = CompileOptions{}.schema_max_exprs,
      py::arg("max_unique_search_bytes") = CompileOptions{}.max_unique_search_bytes,
      (std::string(
           "Compiles a JSON Schema (str, or a dict/list/bool serialised with json.dumps). "
           "A keyword that cannot be enforced exactly raises lockstep.Error naming its "
           "JSON Pointer; with lenient=True it is relaxed and reported in .warnings. "
           "An unknown format is an annotation, reported in .warnings. "
           "compact: no whitespace at all. openapi_formats: also enforce the OpenAPI "
           "formats int32, int64 (integer ranges) and byte (base64). default_draft: 'draft-04', "
           "'draft-06', 'draft-07', '2019-09' or '2020-12', for a schema whose $schema "
           "names none of them. member_order: 'declared' (declared properties in declared order, "
           "then the others) or 'any' (any order, each property at most once; more than "
           "any_order_max_properties (default 10) declared properties on one object is a "
           "resource limit then: 2^n member sets). max_oneof_overlaps (default 11): the most "
           "oneOf branches one branch may overlap (not provably disjoint: each is negated into "
           "it); max_some_member_requirements (default 3, at most 16): the most negated "
           "additionalProperties / patternProperties / propertyNames on one object; max_exprs "
           "(default 2000000): grammar expressions built from the schema. Past any of them, a "
           "resource limit naming it. max_unique_search_bytes (default 65536): bytes the "
           "searches for a new item of a uniqueItems list of closed objects may try per fill "
           "and per accepted token; past it the fill leaves the undecided tokens out and "
           "accepting raises a resource limit naming it.") + kStatesDoc +
       kBudgetDoc)
          .c_str());
  m.def(
      "compile_regex",
      [](const std::shared_ptr<PyVocab>& vocab, const std::string& pattern, bool precompute_masks,
         std::int32_t max_dfa_states, std::int64_t timeout_ms,
         const std::shared_ptr<PyCancelToken>& cancel, bool background_positions) {
        CompileOptions o;
        o.precompute_masks = precompute_masks;
        o.max_dfa_states = max_dfa_states;
        SetBudget(&o, timeout_ms, cancel, background_positions);
        return Compile(vocab, [&](const GrammarCompiler& c, std::vector<std::string>*) {
          return c.CompileRegex(pattern, o);
        });
      },
      py::arg("vocab"), py::arg("pattern"), py::arg("precompute_masks") = false,
      py::arg("max_dfa_states") = 100000,
      py::arg("timeout_ms") = CompileOptions{}.compile_timeout_ms, py::arg("cancel") = nullptr,
      py::arg("background_positions") = true,
      (std::string("Compiles a regular expression with full-match semantics.") + kBudgetDoc)
          .c_str());
  m.def(
      "compile_grammar",
      [](const std::shared_ptr<PyVocab>& vocab, const std::string& text, const std::string& syntax,
         bool precompute_masks, std::int32_t max_nesting_depth,
         std::int32_t max_earley_items_per_byte, std::int64_t timeout_ms,
         const std::shared_ptr<PyCancelToken>& cancel, bool background_positions,
         std::int32_t max_dfa_states, std::int64_t max_program_states) {
        if (max_nesting_depth <= 0 || max_earley_items_per_byte <= 0) {
          RaiseArg("max_nesting_depth and max_earley_items_per_byte must be positive");
        }
        CompileOptions o;
        SetStateBudgets(&o, max_dfa_states, max_program_states);
        o.precompute_masks = precompute_masks;
        o.max_nesting_depth = max_nesting_depth;
        o.max_earley_items_per_byte = max_earley_items_per_byte;
        SetBudget(&o, timeout_ms, cancel, background_positions);
        return Compile(vocab, [&](const GrammarCompiler& c, std::vector<std::string>* warnings) {
          return c.CompileGrammar(text, o, syntax, warnings);
        });
      },
      py::arg("vocab"), py::arg("text"), py::arg("syntax") = "auto",
      py::arg("precompute_masks") = false, py::arg("max_nesting_depth") = 10000,
      py::arg("max_earley_items_per_byte") = CompileOptions{}.max_earley_items_per_byte,
      py::arg("timeout_ms") = CompileOptions{}.compile_timeout_ms, py::arg("cancel") = nullptr,
      py::arg("background_positions") = true,
      py::arg("max_dfa_states") = CompileOptions{}.max_dfa_states,
      py::arg("max_program_states") = CompileOptions{}.max_program_states,
      (std::string("Compiles a context-free grammar; syntax 'auto' (GBNF if rules use '::='), "
                   "'gbnf' or 'lark'. Input nested deeper than max_nesting_depth, or whose parse "
                   "of one byte takes more than max_earley_items_per_byte items, is rejected. "
                   "A rule the start rule never reaches is listed in .warnings "
                   "('line:column: rule ... is never used').") + kStatesDoc +
       kBudgetDoc)
          .c_str());
}

// compile_request: an OpenAI-style chat-completions body.
void BindCompileRequest(py::module_& m) {
  m.def(
      "compile_request",
      [](const std::shared_ptr<PyVocab>& vocab, const py::object& request,
         const std::string& format, bool compact, bool precompute_masks, std::int64_t timeout_ms,
         const std::shared_ptr<PyCancelToken>& cancel, bool background_positions,
         const std::string& member_order) {
        const std::string text = JsonText(request, "request");
        RequestOptions ro;
        ro.format = format;
        ro.compile.schema_member_order = MemberOrderArg(member_order);
        ro.compile.schema_whitespace_compact = compact;
        ro.compile.precompute_masks = precompute_masks;
        SetBudget(&ro.compile, timeout_ms, cancel, background_positions);
        std::shared_ptr<const CompiledRequest> kept;
        auto out = Compile(vocab, [&](const GrammarCompiler& c, std::vector<std::string>* w)
                                      -> Result<std::shared_ptr<const CompiledGrammar>> {
          auto r = CompileRequest(c, text, ro);
          if (!r.ok()) return r.status();
          *w = r->warnings;
          kept = std::make_shared<const CompiledRequest>(std::move(*r));
          return kept->grammar;
        });
        out->request = std::move(kept);
        return out;
      },
      py::arg("vocab"), py::arg("request"), py::arg("format") = "", py::arg("compact") = false,
      py::arg("precompute_masks") = false,
      py::arg("timeout_ms") = CompileOptions{}.compile_timeout_ms, py::arg("cancel") = nullptr,
      py::arg("background_positions") = true, py::arg("member_order") = "declared",
      (std::string("Compiles an OpenAI-style chat-completions body (str, or a dict serialised "
                   "with json.dumps): its response_format, tools, tool_choice and "
                   "parallel_tool_calls (docs/requests.md); other keys are ignored. format: the "
                   "tools' chat format ('' = the body's lockstep_format, else the vocabulary's "
                   "family). A malformed body raises lockstep.Error whose .location is the JSON "
                   "Pointer of the bad part. The grammar's .request_kind and .parse_calls(ids) "
                   "read the result back. member_order: 'declared' or 'any', as for "
                   "compile_schema.") +
       kBudgetDoc)
          .c_str());
}

// load_artifact: a compiled artifact (.lsg) back, without compiling.
void BindArtifacts(py::module_& m) {
  m.def(
      "load_artifact",
      [](const std::shared_ptr<PyVocab>& vocab, const py::object& source) {
        auto out = std::make_shared<PyGrammar>();
        out->vocab = vocab;
        Result<std::shared_ptr<const CompiledGrammar>> r = Status(StatusCode::kInternal, "not run");
        if (py::isinstance<py::bytes>(source)) {
          const std::string bytes = source.cast<std::string>();
          py::gil_scoped_release release;
          r = LoadArtifact(*vocab->Compiler(), bytes);
        } else {
          const std::string path = py::str(source).cast<std::string>();
          py::gil_scoped_release release;
          r = ReadArtifactFile(*vocab->Compiler(), path);
        }
        out->grammar = Unwrap(std::move(r));
        return out;
      },
      py::arg("vocab"), py::arg("source"),
      "Loads a compiled artifact (a path, or the bytes of CompiledGrammar.to_bytes()) for this "
      "vocabulary without compiling. A foreign, truncated, corrupted file, or one written for "
      "another vocabulary or format version, raises lockstep.Error (code 'invalid artifact', "
      "location 'byte N').");
}

// lockstep.Matcher and allocate_token_bitmask.
void BindMatcher(py::module_& m) {
  py::class_<PyMatcher>(m, "Matcher",
                        "The per-sequence state of a CompiledGrammar. Not thread-safe: use one "
                        "Matcher per sequence (fork() copies one cheaply).")
      .def(py::init([](const std::shared_ptr<PyGrammar>& g) {
             return std::make_unique<PyMatcher>(g, Matcher(g->grammar));
           }),
           py::arg("grammar"))
      .def_property_readonly("grammar", [](const PyMatcher& pm) { return pm.grammar; })
      .def(
          "accept_token",
          [](PyMatcher& pm, TokenId id) {
            CheckToken(id, pm.matcher.grammar().logits_width(), "id");
            return pm.matcher.AcceptToken(id);
          },
          py::arg("id"),
          "Advances by one token; False (state unchanged) if the grammar does not allow it here. "
          "An id outside [0, logits_width) raises lockstep.Error.")
      .def(
          "accept_string",
          [](PyMatcher& pm, const py::object& s) {
            return pm.matcher.AcceptString(BytesOf(s, "text"));
          },
          py::arg("text"), "Advances by raw bytes (str is UTF-8) as one step; False if rejected.")
      .def(
          "fill_next_token_bitmask",
          [](PyMatcher& pm, const py::object& arr, std::int64_t index) {
            const std::size_t words = BitmaskWords(pm.matcher.grammar().logits_width());
            std::uint32_t* row = MaskRow(arr, index, words, true, "bitmask");
            py::gil_scoped_release release;
            return pm.matcher.FillNextTokenBitmask(std::span<std::uint32_t>(row, words));
          },
          py::arg("bitmask"), py::arg("index") = 0,
          "Writes the next-token mask into row `index` of `bitmask` in place (no copy): a numpy "
          "int32/uint32 array of shape [words] or [batch, words], C-contiguous and writable "
          "(allocate_token_bitmask makes one). Bit i of word i // 32 is token i. Returns False "
          "(all zero) once terminated. Releases the GIL.")
      .def(
          "rollback", [](PyMatcher& pm, std::int32_t n) { return pm.matcher.Rollback(n); },
          py::arg("n"),
          "Undoes the last n accepted steps; False (unchanged) if fewer were accepted.")
      .def(
          "fork",
          [](const PyMatcher& pm) {
            return std::make_unique<PyMatcher>(pm.grammar, pm.matcher.Fork());
          },
          "An independent copy of this matcher in its current state.")
      .def("reset", [](PyMatcher& pm) { pm.matcher.Reset(); })
      .def(
          "is_terminated", [](const PyMatcher& pm) { return pm.matcher.IsTerminated(); },
          "True once an EOS token was accepted.")
      .def(
          "can_end", [](const PyMatcher& pm) { return pm.matcher.CanEnd(); },
          "True if the text so far is a complete match (EOS would be accepted).")
      .def(
          "forced_bytes",
          [](const PyMatcher& pm, std::size_t max_bytes) {
            return py::bytes(pm.matcher.ForcedBytes(max_bytes));
          },
          py::arg("max_bytes") = 4096, "Bytes every continuation must start with (jump-forward).")
      .def(
          "forced_tokens", [](const PyMatcher& pm) { return pm.matcher.ForcedTokens(); },
          "forced_bytes() as canonical tokens, each accepted in order by accept_token.")
      .def(
          "validate_draft",
          [](const PyMatcher& pm, const py::object& ids) {
            const std::vector<TokenId> d =
                CheckedIds(IdList(ids), pm.matcher.grammar().logits_width(), "ids");
            return pm.matcher.ValidateDraft(d);
          },
          py::arg("ids"),
          "How many of `ids` would be accepted in order from here, without changing the state.")
      .def_property_readonly(
          "last_error",
          [](const PyMatcher& pm) -> py::object {
            const Status& e = pm.matcher.last_error();
            return e.ok() ? py::object(py::none()) : ErrorObject(e);
          },
          "Why the last refused accept_token / accept_string was refused when it was not a "
          "plain rejection, as a lockstep.Error (not raised): e.g. code 'resource limit' when a "
          "budget ran out (max_nesting_depth, max_earley_items_per_byte, "
          "max_unique_search_bytes). None otherwise.")
      .def_property_readonly(
          "num_steps", [](const PyMatcher& pm) { return pm.matcher.NumSteps(); },
          "Accepted steps that rollback() can undo.");

  m.def(
      "allocate_token_bitmask",
      [](std::int64_t batch, const py::object& owner) {
        std::int32_t width = 0;
        if (py::isinstance<PyVocab>(owner)) {
          width = owner.cast<const PyVocab&>().vocab->logits_width();
        } else if (py::isinstance<PyGrammar>(owner)) {
          width = owner.cast<const PyGrammar&>().grammar->logits_width();
        } else {
          throw py::type_error("expected a Vocabulary or a CompiledGrammar, not " +
                               TypeName(owner));
        }
        if (batch < 0) throw py::value_error("batch must be >= 0");
        const py::ssize_t words = static_cast<py::ssize_t>(BitmaskWords(width));
        py::array_t<std::int32_t> out({static_cast<py::ssize_t>(batch), words});
        if (batch > 0 && words > 0) {
          std::memset(out.mutable_data(), 0, batch * words * sizeof(std::int32_t));
        }
        return out;
      },
      py::arg("batch"), py::arg("vocab_or_grammar"),
      "A zeroed numpy int32 array [batch, bitmask_words] for fill_next_token_bitmask.");
}

// fill_next_token_bitmask_batch: a batch's masks on a thread pool.
void BindBatch(py::module_& m) {
  m.def(
      "fill_next_token_bitmask_batch",
      [](const std::vector<py::object>& matchers, const py::object& arr, int num_threads) {
        if (num_threads < 0) throw py::value_error("num_threads must be >= 0");
        std::vector<Matcher*> ptrs;
        std::size_t words = 0;
        for (std::size_t i = 0; i < matchers.size(); ++i) {
          if (matchers[i].is_none()) {
            ptrs.push_back(nullptr);
            continue;
          }
          if (!py::isinstance<PyMatcher>(matchers[i])) {
            throw py::type_error("matchers[" + std::to_string(i) + "] is not a Matcher");
          }
          Matcher* p = &matchers[i].cast<PyMatcher&>().matcher;
          for (Matcher* q : ptrs) {
            if (q == p) {
              throw py::value_error("matchers[" + std::to_string(i) +
                                    "] appears twice; each row needs its own Matcher");
            }
          }
          ptrs.push_back(p);
          words = std::max(words, BitmaskWords(p->grammar().logits_width()));
        }
        if (!py::isinstance<py::array>(arr) || py::reinterpret_borrow<py::array>(arr).ndim() != 2) {
          throw py::value_error("bitmask must be a 2-D numpy int32 array [batch, words]");
        }
        py::array a = py::reinterpret_borrow<py::array>(arr);
        if (a.shape(0) < static_cast<py::ssize_t>(matchers.size())) {
          throw py::value_error("bitmask has " + std::to_string(a.shape(0)) + " rows for " +
                                std::to_string(matchers.size()) + " matchers");
        }
        if (ptrs.empty()) return;
        std::uint32_t* base = MaskRow(arr, 0, words, true, "bitmask");
        const std::size_t stride = a.shape(1);
        bool ok = false;
        {
          py::gil_scoped_release release;
          ok = Filler(num_threads)
                   .Fill(ptrs, std::span<std::uint32_t>(base, stride * ptrs.size()), stride);
        }
        if (!ok) RaiseArg("batch fill rejected the buffer sizes", "bitmask");
      },
      py::arg("matchers"), py::arg("bitmask"), py::arg("num_threads") = 0,
      "Fills row i of `bitmask` (int32 [batch, words], C-contiguous, writable) with matchers[i]'s "
      "mask, on a persistent thread pool (num_threads including the caller; 0 = all cores), with "
      "the GIL released. A None entry zeroes its row.");
}

// lockstep.Sampler.
void BindSampler(py::module_& m) {
  py::class_<PySampler>(
      m, "Sampler",
      "Logits + mask -> token: logit bias, repetition/frequency/presence penalties, the grammar "
      "mask, temperature (<= 0: greedy), top-k, top-p, min-p, then a draw that depends only on "
      "(seed, sequence_id, step).")
      .def(py::init([](float temperature, std::int32_t top_k, float top_p, float min_p,
                       float repetition_penalty, float frequency_penalty, float presence_penalty,
                       std::uint64_t seed, std::int32_t repetition_window,
                       const std::map<TokenId, float>& logit_bias) {
             SamplerConfig c;
             c.temperature = temperature;
             c.top_k = top_k;
             c.top_p = top_p;
             c.min_p = min_p;
             c.repetition_penalty = repetition_penalty;
             c.frequency_penalty = frequency_penalty;
             c.presence_penalty = presence_penalty;
             c.seed = seed;
             c.repetition_window = repetition_window;
             for (const auto& [id, bias] : logit_bias) c.logit_bias.emplace_back(id, bias);
             return std::make_unique<PySampler>(c);
           }),
           py::arg("temperature") = 1.0f, py::arg("top_k") = 0, py::arg("top_p") = 1.0f,
           py::arg("min_p") = 0.0f, py::arg("repetition_penalty") = 1.0f,
           py::arg("frequency_penalty") = 0.0f, py::arg("presence_penalty") = 0.0f,
           py::arg("seed") = 0, py::arg("repetition_window") = 0,
           py::arg("logit_bias") = std::map<TokenId, float>{})
      .def_property_readonly("config",
                             [](const PySampler& s) {
                               const SamplerConfig& c = s.sampler.config();
                               py::dict d;
                               d["temperature"] = c.temperature;
                               d["top_k"] = c.top_k;
                               d["top_p"] = c.top_p;
                               d["min_p"] = c.min_p;
                               d["repetition_penalty"] = c.repetition_penalty;
                               d["frequency_penalty"] = c.frequency_penalty;
                               d["presence_penalty"] = c.presence_penalty;
                               d["seed"] = c.seed;
                               d["repetition_window"] = c.repetition_window;
                               return d;
                             })
      .def(
          "sample",
          [](PySampler& s, const py::object& logits, const py::object& mask,
             const py::object& history, std::uint64_t sequence_id, std::uint64_t step) {
            s.scratch = LogitsVector(logits, -1, "logits");
            const std::uint32_t* words = nullptr;
            if (!mask.is_none())
              words = MaskRow(mask, 0, BitmaskWords(s.scratch.size()), false, "mask");
            std::vector<TokenId> hist;
            for (std::int64_t id : IdList(history)) {
              if (id >= 0 && id <= std::numeric_limits<TokenId>::max()) {
                hist.push_back(static_cast<TokenId>(id));
              }
            }
            TokenId t = kNoToken;
            {
              py::gil_scoped_release release;
              t = s.sampler.Sample(s.scratch, words, hist, sequence_id, step);
            }
            if (t == kNoToken) RaiseArg("the mask allows no token", "mask");
            return t;
          },
          py::arg("logits"), py::arg("mask") = py::none(), py::arg("history") = py::tuple(),
          py::arg("sequence_id") = 0, py::arg("step") = 0,
          "Draws one token id. `logits` (float32 [width]; other float arrays are converted) is "
          "NOT modified: it is copied first, since the C++ Sampler uses its input as scratch. "
          "`mask`: None (all allowed) or an int32/uint32 row of >= ceil(width / 32) words. "
          "`history`: ids generated so far, for the penalties. Logits must not be NaN or +inf. "
          "Raises lockstep.Error if the mask allows nothing.");
}

// generate (the C++ loop over a Python logits callable) and lockstep.LogitsProcessor.
void BindGeneration(py::module_& m) {
  m.def(
      "generate",
      [](const py::object& grammar_or_matcher, const PySampler& sampler, py::function logits_fn,
         std::int32_t max_tokens, const py::object& prompt, bool jump_forward,
         std::uint64_t sequence_id) {
        std::optional<Matcher> own;
        Matcher* matcher = nullptr;
        if (py::isinstance<PyGrammar>(grammar_or_matcher)) {
          own.emplace(grammar_or_matcher.cast<const PyGrammar&>().grammar);
          matcher = &*own;
        } else if (py::isinstance<PyMatcher>(grammar_or_matcher)) {
          matcher = &grammar_or_matcher.cast<PyMatcher&>().matcher;
        } else {
          throw py::type_error("expected a CompiledGrammar or a Matcher, not " +
                               TypeName(grammar_or_matcher));
        }
        if (max_tokens < 0) throw py::value_error("max_tokens must be >= 0");
        const std::int32_t width = matcher->grammar().logits_width();
        const std::vector<TokenId> ctx = CheckedIds(IdList(prompt), width, "prompt");
        GenerateOptions o;
        o.sampler = sampler.sampler.config();
        o.max_tokens = max_tokens;
        o.jump_forward = jump_forward;
        o.sequence_id = sequence_id;
        PySource source(std::move(logits_fn), width);
        std::optional<Result<GenerateResult>> r;
        bool aborted = false;
        {
          py::gil_scoped_release release;
          try {
            r.emplace(Generate(source, *matcher, ctx, o));
          } catch (const SourceAborted&) {
            aborted = true;
          }
        }
        if (aborted) std::rethrow_exception(source.error);
        GenerateResult g = Unwrap(std::move(*r));
        return py::make_tuple(g.tokens, py::bytes(g.text), FinishReasonName(g.finish));
      },
      py::arg("grammar"), py::arg("sampler"), py::arg("logits_fn"), py::arg("max_tokens") = 256,
      py::arg("prompt") = py::tuple(), py::arg("jump_forward") = true, py::arg("sequence_id") = 0,
      "Runs the C++ generation loop: per step the mask, logits_fn(context) (context: a new "
      "numpy int32 array of prompt + generated ids; returns float32 [logits_width], other float "
      "arrays are converted), the sampler's draw (its config and seed; the draw depends on "
      "(seed, sequence_id, step)), jump-forward over forced tokens. `grammar` may be a Matcher, "
      "which is advanced in place. Returns (ids, text_bytes, finish_reason) with finish_reason "
      "'eos' or 'length'; ids exclude the final EOS. An exception raised by logits_fn, or a "
      "result of the wrong shape, stops generation and propagates.");

  // ---- LogitsProcessor ----
  py::class_<PyProcessor>(
      m, "LogitsProcessor",
      "processor(input_ids, scores) -> scores, for any framework's sampling loop. input_ids: the "
      "ids generated so far for each sequence (1-D for batch_size 1, or 2-D [batch, length]); "
      "each call advances that row's matcher by the ids it has not seen yet (they must be "
      "appended one step at a time, never rewritten; call reset() for new sequences). scores: a "
      "numpy float32 array [logits_width] or [batch, logits_width], C-contiguous; disallowed "
      "entries are set to -inf in place and the same array is returned. After a row's EOS only "
      "EOS ids stay allowed. A disallowed id raises lockstep.Error.")
      .def(py::init([](const std::shared_ptr<PyGrammar>& g, std::int32_t batch_size) {
             return std::make_unique<PyProcessor>(g, batch_size);
           }),
           py::arg("grammar"), py::arg("batch_size") = 1)
      .def("__call__", &PyProcessor::Call, py::arg("input_ids"), py::arg("scores"))
      .def("reset", &PyProcessor::Reset, "Starts every row over (new sequences).");
}

// validate: one instance against one schema, loaded for the call.
void BindValidate(py::module_& m) {
  m.def(
      "validate",
      [](const py::object& schema, const py::object& instance, bool format_assertion) {
        const std::string text = JsonText(schema, "schema");
        const std::string inst = BytesOf(instance, "instance");
        SchemaValidatorOptions o;
        o.format_assertion = format_assertion;
        Result<SchemaValidator> validator = Status();
        Result<JsonInstance> parsed = Status();
        Result<ValidationResult> r = Status();
        {
          py::gil_scoped_release release;
          validator = SchemaValidator::Create(text, o);
          if (validator.ok()) parsed = JsonInstance::Parse(inst);
          if (parsed.ok()) r = validator->Validate(*parsed);
        }
        Unwrap(std::move(validator));
        py::list out;
        if (!parsed.ok() && parsed.status().code() == StatusCode::kInvalidArgument) {
          out.append(py::make_tuple("", "", parsed.status().ToString()));  // not JSON
          return py::make_tuple(false, out);
        }
        Unwrap(std::move(parsed));
        const ValidationResult result = Unwrap(std::move(r));
        for (const ValidationError& e : result.errors) {
          out.append(py::make_tuple(e.instance_pointer, e.schema_pointer, e.message));
        }
        return py::make_tuple(result.valid, out);
      },
      py::arg("schema"), py::arg("instance"), py::arg("format_assertion") = false,
      "Validates one JSON text against a JSON Schema (draft 2020-12 / draft-07). Returns (ok, "
      "errors), errors a list of (instance_pointer, schema_pointer, message); text that is not "
      "JSON is (False, [('', '', why)]). An unusable schema raises lockstep.Error. To validate "
      "many instances, load the schema once with SchemaValidator.");
}

// lockstep.ValidationError and lockstep.ValidationResult, what SchemaValidator.validate returns.
void BindValidationResult(py::module_& m) {
  py::class_<ValidationError>(
      m, "ValidationError",
      "One failed assertion of an instance (a record in ValidationResult.errors, not an "
      "exception: a failing call raises lockstep.Error).")
      .def_readonly("instance_pointer", &ValidationError::instance_pointer,
                    "JSON Pointer of the failing value in the instance ('' for the root).")
      .def_readonly("schema_pointer", &ValidationError::schema_pointer,
                    "JSON Pointer of the failing keyword in the schema ('URI#/pointer' inside a "
                    "remote document).")
      .def_readonly("message", &ValidationError::message)
      .def("__repr__", [](const ValidationError& e) {
        return "<lockstep.ValidationError at '" + e.instance_pointer + "' (schema '" +
               e.schema_pointer + "'): " + e.message + ">";
      });
  py::class_<ValidationResult>(m, "ValidationResult",
                               "The verdict on one instance: .valid (also bool(result)) and "
                               ".errors, a list of ValidationError (empty when valid).")
      .def_readonly("valid", &ValidationResult::valid)
      .def_readonly("errors", &ValidationResult::errors)
      .def("__bool__", [](const ValidationResult& r) { return r.valid; })
      .def("__repr__", [](const ValidationResult& r) {
        return std::string("<lockstep.ValidationResult valid=") + (r.valid ? "True" : "False") +
               " errors=" + std::to_string(r.errors.size()) + ">";
      });
}

// lockstep.SchemaValidator: a schema loaded once (lockstep/validator.h), any number of instances.
void BindSchemaValidator(py::module_& m) {
  py::class_<SchemaValidator>(
      m, "SchemaValidator",
      "A JSON Schema (draft 2020-12 or draft-07) loaded once, every $ref resolved (never over "
      "the network) and every pattern compiled, to validate any number of instances. Immutable; "
      "validate() releases the GIL and may run on several threads at once.")
      .def(py::init([](const py::object& schema, bool format_assertion,
                       const std::string& default_draft, const py::object& remotes,
                       const py::object& remote_dirs, std::int64_t max_errors,
                       std::int32_t max_depth, bool openapi_formats) {
             SchemaValidatorOptions o = ValidatorOptions(default_draft, remotes, remote_dirs);
             o.format_assertion = format_assertion;
             o.openapi_formats = openapi_formats;
             if (max_errors < 0) throw py::value_error("max_errors must be >= 0");
             o.max_errors = static_cast<std::size_t>(max_errors);
             o.max_depth = max_depth;
             const std::string text = JsonText(schema, "schema");
             Result<SchemaValidator> r = Status();
             {
               py::gil_scoped_release release;
               r = SchemaValidator::Create(text, o);
             }
             return Unwrap(std::move(r));
           }),
           py::arg("schema"), py::arg("format_assertion") = false,
           py::arg("default_draft") = "2020-12", py::arg("remotes") = py::none(),
           py::arg("remote_dirs") = py::none(),
           py::arg("max_errors") = SchemaValidatorOptions{}.max_errors,
           py::arg("max_depth") = SchemaValidatorOptions{}.max_depth,
           py::arg("openapi_formats") = false,
           "schema: JSON text (str or bytes) or a dict/bool serialised with json.dumps. "
           "format_assertion: check `format` (date, email, ipv4, ...) instead of ignoring it. "
           "openapi_formats: check the OpenAPI formats int32, int64 (integer ranges) and byte "
           "(base64), as compile_schema(openapi_formats=True) enforces them. "
           "default_draft: 'draft-04', 'draft-06', 'draft-07', '2019-09' or '2020-12' (or '4', "
           "'6', '7'), for a schema whose $schema names none of them. "
           "remotes: {uri: document} for $ref targets (text, or objects serialised with "
           "json.dumps). remote_dirs: {base_uri: directory}, every file under the directory "
           "served as base_uri + its relative path (lockstep validate --remote). max_errors: "
           "errors kept per instance (0: the verdict only, fastest). An unusable schema raises "
           "lockstep.Error naming its JSON Pointer.")
      .def(
          "validate",
          [](const SchemaValidator& v, const py::object& instance) {
            const std::string text = JsonText(instance, "instance");
            Result<ValidationResult> r = Status();
            {
              py::gil_scoped_release release;
              r = v.Validate(text);
            }
            return Unwrap(std::move(r));
          },
          py::arg("instance"),
          "Validates one instance (JSON text as str or bytes, or an object serialised with "
          "json.dumps) and returns a ValidationResult. Text that is not JSON raises "
          "lockstep.Error (code 'invalid argument', location 'byte N'), as does evaluation past "
          "max_depth (code 'resource limit').")
      .def_property_readonly(
          "draft", [](const SchemaValidator& v) { return DraftName(v.draft()); },
          "The draft in force: '2020-12' or 'draft-07'.")
      .def("__repr__", [](const SchemaValidator& v) {
        return std::string("<lockstep.SchemaValidator draft ") + DraftName(v.draft()) + ">";
      });
}

void BindValidation(py::module_& m) {
  BindValidate(m);
  BindValidationResult(m);
  BindSchemaValidator(m);
}

}  // namespace

void Bind(py::module_& m) {
  m.doc() =
      "Grammar-constrained structured output: compile a JSON Schema, regex or grammar against a "
      "tokenizer vocabulary, then get exact per-step token masks, sample, or generate. See "
      "docs/python.md.";
  BindError(m);
  BindVocabulary(m);
  BindCompiledGrammar(m);
  BindCompile(m);
  BindCompileRequest(m);
  BindArtifacts(m);
  BindMatcher(m);
  BindBatch(m);
  BindSampler(m);
  BindGeneration(m);
  BindValidation(m);
  m.attr("__version__") = "0.1.0";
}

}  // namespace lockstep::python

PYBIND11_MODULE(lockstep, m) { lockstep::python::Bind(m); }
