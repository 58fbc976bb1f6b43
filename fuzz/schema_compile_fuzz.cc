// libFuzzer target for the JSON Schema compiler, differential against the validator. The input
// is schema bytes, a NUL, then instance bytes. The schema must compile (GPT-2 vocabulary) or fail
// with a clean status carrying a location; never crash, hang or blow the stack. When it compiles
// and the instance is JSON, the compiled grammar must accept the instance's rendering under the
// formatting policy (RenderInstance) exactly when the validator (formats asserted, as the
// compiler enforces them) says the instance is valid. The same schema compiled with member
// order any (CompileOptions::schema_member_order) must agree with the validator on that rendering
// and on the rendering with every object's members reversed. Any disagreement aborts.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

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

// The compact JSON text `t` from `*i` on with every object's members in reverse order; false
// when it is not the compact JSON RenderInstance writes (depth is bounded by the text's size).
bool Reversed(std::string_view t, std::size_t* i, std::string* out, int depth) {
  if (*i >= t.size() || depth > 256) return false;
  const char c = t[*i];
  auto string_end = [&](std::size_t j) -> std::size_t {  // past the closing quote
    for (++j; j < t.size(); ++j) {
      if (t[j] == '\\') {
        ++j;
      } else if (t[j] == '"') {
        return j + 1;
      }
    }
    return std::string_view::npos;
  };
  if (c == '"') {
    const std::size_t e = string_end(*i);
    if (e == std::string_view::npos) return false;
    out->append(t.substr(*i, e - *i));
    *i = e;
    return true;
  }
  if (c == '[' || c == '{') {
    const char close = c == '[' ? ']' : '}';
    std::vector<std::string> parts;
    ++*i;
    while (*i < t.size() && t[*i] != close) {
      std::string part;
      if (c == '{') {
        const std::size_t e = string_end(*i);
        if (e == std::string_view::npos || e >= t.size() || t[e] != ':') return false;
        part.append(t.substr(*i, e + 1 - *i));
        *i = e + 1;
      }
      if (!Reversed(t, i, &part, depth + 1)) return false;
      parts.push_back(std::move(part));
      if (*i < t.size() && t[*i] == ',') ++*i;
    }
    if (*i >= t.size()) return false;
    ++*i;
    if (c == '{') std::reverse(parts.begin(), parts.end());
    out->push_back(c);
    for (std::size_t k = 0; k < parts.size(); ++k) {
      if (k > 0) out->push_back(',');
      out->append(parts[k]);
    }
    out->push_back(close);
    return true;
  }
  const std::size_t e = t.find_first_of(",]}", *i);
  const std::size_t end = e == std::string_view::npos ? t.size() : e;
  if (end == *i) return false;
  out->append(t.substr(*i, end - *i));
  *i = end;
  return true;
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
  // Member order any: the rendering, and the rendering with every object's members reversed.
  CompileOptions any = options;
  any.schema_member_order = SchemaMemberOrder::kAny;
  auto any_grammar = Compiler().CompileSchema(schema_text, any);
  if (!any_grammar.ok()) {
    if (!CleanCompileError(any_grammar.status())) {
      std::fprintf(stderr, "unexpected status (any order): %s\n",
                   any_grammar.status().ToString().c_str());
      std::abort();
    }
    return 0;
  }
  std::string reversed;
  std::size_t at = 0;
  if (!Reversed(rendered, &at, &reversed, 0) || at != rendered.size()) {
    std::fprintf(stderr, "rendering is not compact JSON: %s\n", rendered.c_str());
    std::abort();
  }
  for (const std::string* text : {&rendered, static_cast<const std::string*>(&reversed)}) {
    Matcher ma(*any_grammar);
    const bool ok = ma.AcceptString(*text) && ma.CanEnd();
    if (!ma.last_error().ok() && ma.last_error().code() == StatusCode::kResourceLimit) return 0;
    if (ok != *valid) {
      std::fprintf(stderr, "schema %.*s\ninstance %s\nvalidator: %s, any-order grammar: %s\n",
                   static_cast<int>(schema_text.size()), schema_text.data(), text->c_str(),
                   *valid ? "valid" : "invalid", ok ? "accepts" : "rejects");
      std::abort();
    }
  }
  return 0;
}
