// The JSON corpora of the JSON grammar's acceptance tests: every "data" value of the official
// JSON-Schema-Test-Suite (../shared/data/json-schema-test-suite), re-serialised compactly or
// indented, and the malformed documents of schemas/grammars/json-malformed.jsonl.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::testing {

// Walks root_dir/tests/draft*/**/*.json (sorted by path) and returns every test's "data" value,
// deduplicated in first-seen order. Compact: no whitespace at all. Indented: like JavaScript's
// JSON.stringify(v, null, 2): a newline and two spaces per depth before each element and member,
// ": " after keys, [] and {} when empty. Numbers keep their exact source text (simdjson's raw
// token: big integers and 1.0 stay as written); strings are decoded and re-escaped per RFC 8259:
// \" \\ \b \f \n \r \t, \u00XX (lowercase hex) for the other U+0000-U+001F, everything else
// (U+007F, non-ASCII as UTF-8, "/") unescaped. Object members keep their source order.
// On an unreadable or malformed file returns an empty vector and sets *error when given.
std::vector<std::string> LoadJsonSchemaTestSuiteData(std::string_view root_dir, bool indented,
                                                     std::string* error = nullptr);

// One malformed document of the corpus: `kind` names how it was made (e.g. "truncation",
// "lone-high-surrogate"), `doc` holds its bytes.
struct MalformedJson {
  std::string kind;
  std::string doc;
};

// Reads json-malformed.jsonl: one JSON object per line with "kind" and either "doc" (the text,
// as a JSON string) or "hex" (the bytes in hex, for documents that are not valid UTF-8).
// Returns an empty vector and sets *error on failure.
std::vector<MalformedJson> LoadMalformedJson(const std::string& path, std::string* error = nullptr);

}  // namespace lockstep::testing
