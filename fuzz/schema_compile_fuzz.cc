// libFuzzer target for the JSON Schema compiler, differential against the validator. The input
// is schema bytes, a NUL, then instance bytes. The schema must compile (GPT-2 vocabulary) or fail
// with a clean status carrying a location; never crash, hang or blow the stack. When it compiles
// and the instance is JSON, the compiled grammar must accept the instance's rendering under the
// formatting policy (RenderInstance) exactly when the validator (formats asserted, as the
// compiler enforces them) says the instance is valid. Any disagreement aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "automata/schema/schema_compile.h"
#include "grammar/schema/json_schema.h"
#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace {

using namespace lockstep;

const GrammarCompiler& Compiler() {
  static GrammarCompiler* c = [] {
    auto v = Vocabulary::Load("gpt2");
    if (!v.ok()) {
      std::fprintf(stderr, "%s\n", v.status().ToString().c_str());
      std::abort();
    }
    return new GrammarCompiler(*v);
  }();
  return *c;
}

bool CleanCompileError(const Status& st) {
  switch (st.code()) {
    case StatusCode::kInvalidSchema:
    case StatusCode::kUnsupported:
    case StatusCode::kUnsatisfiable:
    case StatusCode::kResourceLimit:
    case StatusCode::kInvalidRegex:  // a `pattern` that is not a regex
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = all.find('\0');
  const std::string_view schema_text = all.substr(0, nul);
  const std::string_view instance_text = nul == all.npos ? "null" : all.substr(nul + 1);

  CompileOptions options;
  options.max_nesting_depth = 200;
  auto grammar = Compiler().CompileSchema(schema_text, options);
  if (!grammar.ok()) {
    if (!CleanCompileError(grammar.status())) {
      std::fprintf(stderr, "unexpected status: %s\n", grammar.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  auto schema = schema::Schema::Load(schema_text);
  if (!schema.ok()) {
    std::fprintf(stderr, "compiled but does not load: %s\n", schema.status().ToString().c_str());
    std::abort();
  }
  schema::ValidateOptions vo;
  vo.format_assertion = true;
  vo.max_depth = 200;
  auto validator = schema::Validator::Create(*schema, vo);
  if (!validator.ok()) return 0;  // e.g. a pattern RE2 cannot run: the validator refuses it
  auto instance = schema::ParseInstance(instance_text);
  if (!instance.ok()) return 0;
  auto valid = validator->Validate(*instance);
  if (!valid.ok()) return 0;  // runaway recursion in the validator
  // Render with the declared property order read from the text, as CompileSchema compiles it.
  const schema::SchemaCompileOptions so =
      schema::SchemaOptionsFrom(options, schema_text, CompileDeadline());
  const std::string rendered = schema::RenderInstance(**schema, *instance, -1, so);
  if (rendered.size() > 2048) return 0;
  Matcher m(*grammar);
  const bool accepted = m.AcceptString(rendered) && m.CanEnd();
  if (!m.last_error().ok() && m.last_error().code() == StatusCode::kResourceLimit) return 0;
  if (accepted != *valid) {
    std::fprintf(stderr, "schema %.*s\ninstance %s\nvalidator: %s, grammar: %s\n",
                 static_cast<int>(schema_text.size()), schema_text.data(), rendered.c_str(),
                 *valid ? "valid" : "invalid", accepted ? "accepts" : "rejects");
    std::abort();
  }
  return 0;
}
