// Loading a JSON Schema into the shared model (json_schema.h): draft detection, the subschema
// index by JSON Pointer, base URIs from `$id`, anchors, and load-time resolution of every
// `$ref`/`$dynamicRef` against the schema and its preloaded remote documents. The only file of
// the schema model that catches nlohmann exceptions.
#include "grammar/schema/json_schema.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "grammar/base/json_pointer.h"
#include "grammar/base/text_place.h"

namespace lockstep::schema {
namespace {

using json = nlohmann::json;

// ---- URI references (RFC 3986 section 5.2) ----

struct Uri {
  bool has_scheme = false, has_authority = false, has_query = false, has_fragment = false;
  std::string scheme, authority, path, query, fragment;
};

Uri ParseUri(std::string_view s) {
  Uri u;
  std::size_t hash = s.find('#');
  if (hash != std::string_view::npos) {
    u.has_fragment = true;
    u.fragment = std::string(s.substr(hash + 1));
    s = s.substr(0, hash);
  }
  std::size_t q = s.find('?');
  if (q != std::string_view::npos) {
    u.has_query = true;
    u.query = std::string(s.substr(q + 1));
    s = s.substr(0, q);
  }
  std::size_t colon = s.find(':');
  if (colon != std::string_view::npos && colon > 0 && s.substr(0, colon).find('/') == s.npos) {
    u.has_scheme = true;
    u.scheme = std::string(s.substr(0, colon));
    s = s.substr(colon + 1);
  }
  if (s.substr(0, 2) == "//") {
    s = s.substr(2);
    std::size_t slash = s.find('/');
    u.has_authority = true;
    u.authority = std::string(s.substr(0, slash));
    s = slash == s.npos ? std::string_view() : s.substr(slash);
  }
  u.path = std::string(s);
  return u;
}

std::string RemoveDotSegments(std::string in) {
  std::string out;
  while (!in.empty()) {
    if (in.rfind("../", 0) == 0) {
      in.erase(0, 3);
    } else if (in.rfind("./", 0) == 0) {
      in.erase(0, 2);
    } else if (in.rfind("/./", 0) == 0) {
      in.erase(0, 2);
    } else if (in == "/.") {
      in = "/";
    } else if (in.rfind("/../", 0) == 0 || in == "/..") {
      in = in == "/.." ? "/" : in.substr(3);
      std::size_t p = out.rfind('/');
      out.erase(p == std::string::npos ? 0 : p);
    } else if (in == "." || in == "..") {
      in.clear();
    } else {
      std::size_t start = in[0] == '/' ? 1 : 0;
      std::size_t p = in.find('/', start);
      out += in.substr(0, p);
      in.erase(0, p == std::string::npos ? in.size() : p);
    }
  }
  return out;
}

std::string Recompose(const Uri& u) {
  std::string out;
  if (u.has_scheme) out += u.scheme + ":";
  if (u.has_authority) out += "//" + u.authority;
  out += u.path;
  if (u.has_query) out += "?" + u.query;
  if (u.has_fragment) out += "#" + u.fragment;
  return out;
}

std::string ResolveUri(const std::string& base_s, const std::string& ref_s) {
  Uri r = ParseUri(ref_s), b = ParseUri(base_s), t;
  if (r.has_scheme) {
    t = r;
    t.path = RemoveDotSegments(r.path);
  } else {
    if (r.has_authority) {
      t = r;
      t.path = RemoveDotSegments(r.path);
    } else {
      if (r.path.empty()) {
        t.path = b.path;
        t.has_query = r.has_query || b.has_query;
        t.query = r.has_query ? r.query : b.query;
      } else {
        if (r.path[0] == '/') {
          t.path = RemoveDotSegments(r.path);
        } else {
          std::string merged;
          if (b.has_authority && b.path.empty()) {
            merged = "/" + r.path;
          } else {
            std::size_t p = b.path.rfind('/');
            merged = (p == std::string::npos ? "" : b.path.substr(0, p + 1)) + r.path;
          }
          t.path = RemoveDotSegments(merged);
        }
        t.has_query = r.has_query;
        t.query = r.query;
      }
      t.has_authority = b.has_authority;
      t.authority = b.authority;
    }
    t.has_scheme = b.has_scheme;
    t.scheme = b.scheme;
  }
  t.has_fragment = r.has_fragment;
  t.fragment = r.fragment;
  return Recompose(t);
}

// Splits "uri#frag" (the fragment percent-decoded); an empty fragment is dropped.
void SplitFragment(const std::string& uri, std::string* base, std::string* fragment) {
  std::size_t hash = uri.find('#');
  *base = uri.substr(0, hash);
  fragment->clear();
  if (hash == std::string::npos) return;
  std::string raw = uri.substr(hash + 1);
  for (std::size_t i = 0; i < raw.size(); ++i) {
    auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (raw[i] == '%' && i + 2 < raw.size() + 0 && hex(raw[i + 1]) >= 0 && hex(raw[i + 2]) >= 0) {
      fragment->push_back(static_cast<char>(hex(raw[i + 1]) * 16 + hex(raw[i + 2])));
      i += 2;
    } else {
      fragment->push_back(raw[i]);
    }
  }
}

Status SchemaError(std::string message, std::string location) {
  return Status(StatusCode::kInvalidSchema, std::move(message),
                location.empty() ? "/" : std::move(location));
}

// The applicators' subschema positions (besides `items` and `dependencies`, whose shape varies):
// one schema, a map of schemas, an array of schemas.
constexpr const char* kSingleSchemaKeywords[] = {"additionalProperties",
                                                 "additionalItems",
                                                 "unevaluatedProperties",
                                                 "unevaluatedItems",
                                                 "contains",
                                                 "propertyNames",
                                                 "if",
                                                 "then",
                                                 "else",
                                                 "not",
                                                 "contentSchema"};
constexpr const char* kSchemaMapKeywords[] = {"properties", "patternProperties", "$defs",
                                              "definitions", "dependentSchemas"};
constexpr const char* kSchemaArrayKeywords[] = {"allOf", "anyOf", "oneOf", "prefixItems"};

// ---- Draft normalisation ----
// Draft-04 and -06 are rewritten into draft-07's vocabulary, 2019-09 into 2020-12's, before the
// document is indexed, so that the model, the validator and the compiler know two vocabularies
// only. Only schema positions are rewritten (the applicators' subschemas), never `properties`
// names or `enum` / `const` values. A keyword its draft does not have is dropped (it would be
// ignored there).

// The dynamic anchor a 2019-09 `$recursiveAnchor: true` becomes, and `$recursiveRef` names; not a
// valid anchor name of any draft, so no schema can declare it.
constexpr char kRecursiveAnchor[] = "lockstep:recursive";

void NormaliseNode(json& node, SchemaDraft d, int depth);

void NormaliseChildren(json& node, SchemaDraft d, int depth) {
  auto schema = [&](json& sub) { NormaliseNode(sub, d, depth + 1); };  // non-objects: no-op
  auto each = [&](json& subs) {
    if (subs.is_object()) {
      for (auto& [key, sub] : subs.items()) schema(sub);
    } else if (subs.is_array()) {
      for (json& sub : subs) schema(sub);
    }
  };
  for (const char* k : kSingleSchemaKeywords) {
    if (auto it = node.find(k); it != node.end()) schema(*it);
  }
  for (const char* k : kSchemaMapKeywords) {
    if (auto it = node.find(k); it != node.end() && it->is_object()) each(*it);
  }
  for (const char* k : kSchemaArrayKeywords) {
    if (auto it = node.find(k); it != node.end() && it->is_array()) each(*it);
  }
  if (auto it = node.find("items"); it != node.end()) it->is_array() ? each(*it) : schema(*it);
  // Schemas, or arrays of property names (NormaliseNode leaves those alone).
  if (auto it = node.find("dependencies"); it != node.end() && it->is_object()) each(*it);
}

// Draft-04's boolean exclusiveMaximum / exclusiveMinimum modify maximum / minimum; from draft-06
// on they are numbers of their own.
void NormaliseExclusive(json& node, const char* bound, const char* exclusive) {
  auto ex = node.find(exclusive);
  if (ex == node.end() || !ex->is_boolean()) return;
  const bool on = ex->get<bool>();
  auto b = node.find(bound);
  if (on && b != node.end()) {
    json value = *b;
    node.erase(bound);
    node[exclusive] = std::move(value);
  } else {
    node.erase(exclusive);
  }
}

void NormaliseNode(json& node, SchemaDraft d, int depth) {
  if (!node.is_object() || depth > 1000) return;  // Index reports the depth
  switch (d) {
    case SchemaDraft::k4:
      if (auto id = node.find("id"); id != node.end() && id->is_string()) {
        json value = *id;
        node.erase("id");
        node["$id"] = std::move(value);  // draft-04 has no `$id` of its own
      } else {
        node.erase("$id");
      }
      NormaliseExclusive(node, "maximum", "exclusiveMaximum");
      NormaliseExclusive(node, "minimum", "exclusiveMinimum");
      for (const char* k : {"const", "contains", "propertyNames"}) node.erase(k);
      [[fallthrough]];
    case SchemaDraft::k6:
      for (const char* k : {"if", "then", "else"}) node.erase(k);
      break;
    case SchemaDraft::k2019_09: {
      for (const char* k : {"prefixItems", "$dynamicRef", "$dynamicAnchor"}) node.erase(k);
      auto items = node.find("items");
      if (items != node.end() && items->is_array()) {
        json prefix = std::move(*items);
        node.erase("items");
        node["prefixItems"] = std::move(prefix);
        if (auto more = node.find("additionalItems"); more != node.end()) {
          json rest = std::move(*more);
          node.erase("additionalItems");
          node["items"] = std::move(rest);
        }
      } else {
        node.erase("additionalItems");
      }
      if (auto ra = node.find("$recursiveAnchor"); ra != node.end()) {
        if (ra->is_boolean() && ra->get<bool>()) node["$dynamicAnchor"] = kRecursiveAnchor;
        node.erase("$recursiveAnchor");
      }
      if (auto rr = node.find("$recursiveRef"); rr != node.end()) {
        if (rr->is_string()) {
          std::string ref = rr->get<std::string>();
          // "#" (the only form 2019-09 gives a dynamic meaning) names the recursive anchor.
          node["$dynamicRef"] = ref == "#" ? std::string("#") + kRecursiveAnchor : ref;
        }
        node.erase("$recursiveRef");
      }
      break;
    }
    default:
      break;
  }
  NormaliseChildren(node, d, depth);
}

}  // namespace

std::optional<SchemaDraft> DraftOfMetaSchemaUri(std::string_view uri) {
  auto has = [&](std::string_view part) { return uri.find(part) != std::string_view::npos; };
  if (!has("json-schema.org/")) return std::nullopt;
  if (has("/draft-04/schema")) return SchemaDraft::k4;
  if (has("/draft-06/schema")) return SchemaDraft::k6;
  if (has("/draft-07/schema")) return SchemaDraft::k7;
  if (has("/draft/2019-09/schema")) return SchemaDraft::k2019_09;
  if (has("/draft/2020-12/schema")) return SchemaDraft::k2020_12;
  return std::nullopt;
}

Status AddRemoteDirectory(const std::string& base_uri, const std::string& dir,
                          std::map<std::string, std::string>* remotes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Status(StatusCode::kIoError, "not a directory", dir);
  }
  // The base names the directory: "http://x.test/schemas" serves DIR/a.json as
  // "http://x.test/schemas/a.json", as "http://x.test/schemas/" does.
  std::string base = base_uri;
  if (!base.empty() && base.back() != '/') base.push_back('/');
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    std::string rel = fs::relative(it->path(), dir).generic_string();
    std::ifstream in(it->path(), std::ios::binary);
    (*remotes)[base + rel] =
        std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  return Status::Ok();
}

// Builds a Schema: indexes documents and resolves references until every reachable document is
// indexed (remote documents are loaded on first reference).
class SchemaLoader {
 public:
  SchemaLoader(Schema* s, const LoadOptions& o) : s_(s), options_(o) {}

  Status Run(json root) {
    s_->dialect_ = options_.default_draft;
    if (root.is_object() && root.contains("$schema")) {
      if (!root["$schema"].is_string()) return SchemaError("$schema must be a string", "/$schema");
      std::string meta = root["$schema"].get<std::string>();
      if (std::optional<SchemaDraft> d = DraftOfMetaSchemaUri(meta)) {
        s_->dialect_ = *d;
      } else {
        // A custom meta-schema: its $vocabulary says whether validation keywords apply.
        std::string base, frag;
        SplitFragment(meta, &base, &frag);
        auto it = options_.remotes.find(base);
        if (it != options_.remotes.end()) {
          json m = json::parse(it->second, nullptr, false);
          if (m.is_object() && m.contains("$vocabulary") && m["$vocabulary"].is_object()) {
            s_->validation_vocab_ =
                m["$vocabulary"].contains(
                    "https://json-schema.org/draft/2020-12/vocab/validation") ||
                m["$vocabulary"].contains("https://json-schema.org/draft/2019-09/vocab/validation");
          }
        }
      }
    }
    LOCKSTEP_RETURN_IF_ERROR(AddDoc(std::move(root), ""));
    // Resolve references; resolving may index new documents, which adds more references.
    while (!pending_.empty()) {
      const json* node = pending_.front();
      pending_.pop_front();
      LOCKSTEP_RETURN_IF_ERROR(ResolveRefs(node));
    }
    return Status::Ok();
  }

 private:
  Status AddDoc(json doc, const std::string& uri) {
    NormaliseNode(doc, s_->dialect_, 0);
    int index = static_cast<int>(s_->docs_.size());
    s_->docs_.push_back({std::make_unique<json>(std::move(doc)), uri});
    const json* root = s_->docs_.back().json.get();
    s_->resources_.emplace(uri, root);
    return Index(*root, index, "", uri, root);
  }

  bool Draft7() const { return s_->draft() == Draft::k7; }

  Status Index(const json& node, int doc, const std::string& ptr, std::string base,
               const json* resource) {
    if (s_->info_.count(&node)) return Status::Ok();
    if (++depth_ > 1000) return SchemaError("schema nested too deeply", ptr);
    struct DepthGuard {
      int* d;
      ~DepthGuard() { --*d; }
    } guard{&depth_};
    if (node.is_object()) {
      bool ref_overrides = Draft7() && node.contains("$ref");
      auto id = node.find("$id");
      if (id != node.end() && !ref_overrides) {
        if (!id->is_string()) return SchemaError("$id must be a string", ptr + "/$id");
        const std::string& v = id->get_ref<const std::string&>();
        if (Draft7() && !v.empty() && v[0] == '#') {
          s_->resources_.emplace(base + v, &node);
        } else {
          std::string abs = ResolveUri(base, v), frag;
          SplitFragment(abs, &base, &frag);
          resource = &node;
          s_->resources_[base] = &node;
          if (Draft7() && !frag.empty()) s_->resources_.emplace(base + "#" + frag, &node);
        }
      }
      auto anchor = node.find("$anchor");
      if (anchor != node.end() && !Draft7()) {
        if (!anchor->is_string()) return SchemaError("$anchor must be a string", ptr + "/$anchor");
        s_->resources_.emplace(base + "#" + anchor->get<std::string>(), &node);
      }
      auto dyn = node.find("$dynamicAnchor");
      if (dyn != node.end() && !Draft7()) {
        if (!dyn->is_string()) {
          return SchemaError("$dynamicAnchor must be a string", ptr + "/$dynamicAnchor");
        }
        s_->resources_.emplace(base + "#" + dyn->get<std::string>(), &node);
        s_->dynamic_anchors_.emplace(std::make_pair(base, dyn->get<std::string>()), &node);
      }
      if (node.contains("$ref") || node.contains("$dynamicRef")) pending_.push_back(&node);
      LOCKSTEP_RETURN_IF_ERROR(CheckKeywords(node, ptr));
    } else if (!node.is_boolean()) {
      return SchemaError("a schema must be an object or a boolean", ptr);
    }
    s_->info_.emplace(&node, NodeInfo{doc, ptr, base, resource});
    if (!node.is_object()) return Status::Ok();

    for (const char* k : kSingleSchemaKeywords) {
      auto it = node.find(k);
      if (it == node.end()) continue;
      LOCKSTEP_RETURN_IF_ERROR(Index(*it, doc, ptr + JsonPointerSegment(k), base, resource));
    }
    for (const char* k : kSchemaMapKeywords) {
      auto it = node.find(k);
      if (it == node.end()) continue;
      if (!it->is_object())
        return SchemaError(std::string(k) + " must be an object", ptr + "/" + k);
      for (auto& [key, sub] : it->items()) {
        LOCKSTEP_RETURN_IF_ERROR(
            Index(sub, doc, ptr + JsonPointerSegment(k) + JsonPointerSegment(key), base, resource));
      }
    }
    for (const char* k : kSchemaArrayKeywords) {
      auto it = node.find(k);
      if (it == node.end()) continue;
      if (!it->is_array() || it->empty()) {
        return SchemaError(std::string(k) + " must be a non-empty array", ptr + "/" + k);
      }
      for (std::size_t i = 0; i < it->size(); ++i) {
        LOCKSTEP_RETURN_IF_ERROR(
            Index((*it)[i], doc, ptr + "/" + k + "/" + std::to_string(i), base, resource));
      }
    }
    if (auto it = node.find("items"); it != node.end()) {
      if (it->is_array() && Draft7()) {
        for (std::size_t i = 0; i < it->size(); ++i) {
          LOCKSTEP_RETURN_IF_ERROR(
              Index((*it)[i], doc, ptr + "/items/" + std::to_string(i), base, resource));
        }
      } else {
        LOCKSTEP_RETURN_IF_ERROR(Index(*it, doc, ptr + "/items", base, resource));
      }
    }
    if (auto it = node.find("dependencies"); it != node.end() && Draft7()) {
      if (!it->is_object())
        return SchemaError("dependencies must be an object", ptr + "/dependencies");
      for (auto& [key, sub] : it->items()) {
        if (sub.is_array()) continue;
        LOCKSTEP_RETURN_IF_ERROR(
            Index(sub, doc, ptr + "/dependencies" + JsonPointerSegment(key), base, resource));
      }
    }
    return Status::Ok();
  }

  // Malformed assertion keywords are schema errors (not silently ignored).
  Status CheckKeywords(const json& node, const std::string& ptr) {
    static const char* kCounts[] = {"minLength",     "maxLength",     "minItems",    "maxItems",
                                    "minProperties", "maxProperties", "minContains", "maxContains"};
    for (const char* k : kCounts) {
      auto it = node.find(k);
      if (it == node.end()) continue;
      bool ok =
          it->is_number_unsigned() || (it->is_number_integer() && it->get<std::int64_t>() >= 0) ||
          (it->is_number_float() && it->get<double>() >= 0 &&
           it->get<double>() ==
               static_cast<double>(static_cast<std::int64_t>(std::min(it->get<double>(), 9e18))));
      if (!ok)
        return SchemaError(std::string(k) + " must be a non-negative integer", ptr + "/" + k);
    }
    for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
      auto it = node.find(k);
      if (it != node.end() && !it->is_number()) {
        return SchemaError(std::string(k) + " must be a number", ptr + "/" + k);
      }
    }
    if (auto it = node.find("multipleOf"); it != node.end()) {
      if (!it->is_number() || !(it->get<double>() > 0)) {
        return SchemaError("multipleOf must be a number greater than 0", ptr + "/multipleOf");
      }
    }
    if (auto it = node.find("type"); it != node.end()) {
      static const std::set<std::string> kTypes = {"null",   "boolean", "object", "array",
                                                   "number", "string",  "integer"};
      auto known = [&](const json& t) {
        return t.is_string() && kTypes.count(t.get<std::string>());
      };
      bool ok = known(*it) || (it->is_array() && std::all_of(it->begin(), it->end(), known));
      if (!ok) return SchemaError("type must be a type name or an array of them", ptr + "/type");
    }
    if (auto it = node.find("enum"); it != node.end() && !it->is_array()) {
      return SchemaError("enum must be an array", ptr + "/enum");
    }
    if (auto it = node.find("required"); it != node.end()) {
      if (!it->is_array() ||
          !std::all_of(it->begin(), it->end(), [](const json& x) { return x.is_string(); })) {
        return SchemaError("required must be an array of strings", ptr + "/required");
      }
    }
    if (auto it = node.find("pattern"); it != node.end() && !it->is_string()) {
      return SchemaError("pattern must be a string", ptr + "/pattern");
    }
    if (auto it = node.find("uniqueItems"); it != node.end() && !it->is_boolean()) {
      return SchemaError("uniqueItems must be a boolean", ptr + "/uniqueItems");
    }
    return Status::Ok();
  }

  Status ResolveRefs(const json* node) {
    const NodeInfo& info = s_->info_.at(node);
    for (const char* k : {"$ref", "$dynamicRef"}) {
      auto it = node->find(k);
      if (it == node->end()) continue;
      if (std::string(k) == "$dynamicRef" && Draft7()) continue;
      std::string where = info.pointer + "/" + k;
      if (info.doc > 0) where = s_->docs_[info.doc].uri + "#" + where;
      if (!it->is_string()) return SchemaError(std::string(k) + " must be a string", where);
      std::string abs = ResolveUri(info.base_uri, it->get<std::string>());
      const json* target = nullptr;
      LOCKSTEP_RETURN_IF_ERROR(Lookup(abs, where, &target));
      (std::string(k) == "$ref" ? s_->refs_ : s_->dynamic_refs_)[node] = target;
    }
    return Status::Ok();
  }

  Status Lookup(const std::string& abs, const std::string& where, const json** out) {
    std::string base, frag;
    SplitFragment(abs, &base, &frag);
    auto rit = s_->resources_.find(base);
    if (rit == s_->resources_.end()) {
      auto remote = options_.remotes.find(base);
      std::string_view text;
      if (remote != options_.remotes.end()) {
        text = remote->second;
      } else {
        text = BuiltinMetaSchema(base);  // the draft 2020-12 / draft-07 meta-schemas
      }
      if (text.empty()) {
        return SchemaError("unresolvable reference '" + abs +
                               "' (no such resource; remote "
                               "documents are never fetched)",
                           where);
      }
      json doc = json::parse(text, nullptr, false);
      if (doc.is_discarded()) {
        return SchemaError("remote document '" + base + "' is not valid JSON", where);
      }
      LOCKSTEP_RETURN_IF_ERROR(AddDoc(std::move(doc), base));
      rit = s_->resources_.find(base);
    }
    const json* res = rit->second;
    if (frag.empty()) {
      *out = res;
      return Status::Ok();
    }
    if (frag[0] != '/') {
      auto a = s_->resources_.find(base + "#" + frag);
      if (a == s_->resources_.end() && frag == kRecursiveAnchor) {
        *out = res;  // 2019-09 `$recursiveRef: "#"` without `$recursiveAnchor`: the resource root
        return Status::Ok();
      }
      if (a == s_->resources_.end()) {
        return SchemaError("unresolvable reference '" + abs + "' (no such anchor)", where);
      }
      *out = a->second;
      return Status::Ok();
    }
    // A JSON Pointer from the resource root; the target gets indexed if it was not a known
    // subschema position, with the base URI of the nearest indexed ancestor.
    const json* cur = res;
    const NodeInfo* ri = &s_->info_.at(res);
    std::string ptr = ri->pointer, cur_base = ri->base_uri;
    const json* cur_res = ri->resource;
    std::size_t pos = 1;
    while (true) {
      std::size_t next = frag.find('/', pos);
      std::string tok =
          frag.substr(pos, next == std::string::npos ? std::string::npos : next - pos);
      std::string key;
      for (std::size_t i = 0; i < tok.size(); ++i) {
        if (tok[i] == '~' && i + 1 < tok.size() && tok[i + 1] == '0') {
          key += '~', ++i;
        } else if (tok[i] == '~' && i + 1 < tok.size() && tok[i + 1] == '1') {
          key += '/', ++i;
        } else {
          key += tok[i];
        }
      }
      if (s_->dialect_ == SchemaDraft::k2019_09 && cur->is_object() && !cur->contains(key) &&
          cur->contains("prefixItems")) {
        // Normalisation renamed 2019-09's `items` array and `additionalItems`.
        if (key == "items") {
          key = "prefixItems";
        } else if (key == "additionalItems") {
          key = "items";
        }
      }
      if (cur->is_object() && cur->contains(key)) {
        cur = &(*cur)[key];
      } else if (cur->is_array() && !key.empty() &&
                 key.find_first_not_of("0123456789") == std::string::npos && key.size() < 10 &&
                 std::stoul(key) < cur->size()) {
        cur = &(*cur)[std::stoul(key)];
      } else {
        return SchemaError("unresolvable reference '" + abs + "' (no such pointer)", where);
      }
      ptr += JsonPointerSegment(key);
      if (auto it = s_->info_.find(cur); it != s_->info_.end()) {
        cur_base = it->second.base_uri;
        cur_res = it->second.resource;
      }
      if (next == std::string::npos) break;
      pos = next + 1;
    }
    if (!s_->info_.count(cur)) {
      LOCKSTEP_RETURN_IF_ERROR(Index(*cur, s_->info_.at(res).doc, ptr, cur_base, cur_res));
    }
    *out = cur;
    return Status::Ok();
  }

  Schema* s_;
  const LoadOptions& options_;
  std::deque<const json*> pending_;
  int depth_ = 0;
};

Result<std::shared_ptr<const Schema>> Schema::FromJson(nlohmann::json root,
                                                       const LoadOptions& options) {
  auto schema = std::shared_ptr<Schema>(new Schema());
  try {
    SchemaLoader loader(schema.get(), options);
    LOCKSTEP_RETURN_IF_ERROR(loader.Run(std::move(root)));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceLimit, "out of memory loading the schema");
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidSchema, e.what(), "/");
  }
  return std::shared_ptr<const Schema>(std::move(schema));
}

Result<std::shared_ptr<const Schema>> Schema::Load(std::string_view text,
                                                   const LoadOptions& options) {
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    // nlohmann's message reads "[json.exception...] parse error at line L, column C: why".
    const std::string what = e.what();
    const std::size_t colon = what.find(": ", what.find("column"));
    const std::string why = colon == std::string::npos ? what : what.substr(colon + 2);
    const std::size_t at = std::min<std::size_t>(e.byte == 0 ? 0 : e.byte - 1, text.size());
    return Status(StatusCode::kInvalidSchema, "schema is not valid JSON: " + why,
                  LineColumn(text, at));
  } catch (const json::exception& e) {
    // Not a syntax error but a value the parser cannot hold (a number out of range): no offset.
    return Status(StatusCode::kInvalidSchema, std::string("schema is not valid JSON: ") + e.what(),
                  "/");
  }
  return FromJson(std::move(root), options);
}

const NodeInfo* Schema::Info(const nlohmann::json* node) const {
  auto it = info_.find(node);
  return it == info_.end() ? nullptr : &it->second;
}

std::string Schema::Location(const nlohmann::json* node) const {
  const NodeInfo* i = Info(node);
  if (!i) return "?";
  if (i->doc == 0) return i->pointer;
  return docs_[i->doc].uri + "#" + i->pointer;
}

const nlohmann::json* Schema::RefTarget(const nlohmann::json* node) const {
  auto it = refs_.find(node);
  return it == refs_.end() ? nullptr : it->second;
}

const nlohmann::json* Schema::DynamicRefTarget(const nlohmann::json* node) const {
  auto it = dynamic_refs_.find(node);
  return it == dynamic_refs_.end() ? nullptr : it->second;
}

const nlohmann::json* Schema::DynamicAnchor(const std::string& base,
                                            const std::string& name) const {
  auto it = dynamic_anchors_.find({base, name});
  return it == dynamic_anchors_.end() ? nullptr : it->second;
}

}  // namespace lockstep::schema
