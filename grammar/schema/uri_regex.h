// The URI grammar of the `uri`, `uri-reference`, `iri` and `iri-reference` formats (RFC 3986, and
// RFC 3987 for IRIs: non-ASCII allowed where unreserved characters are, private-use code points
// in the query), written once from the ABNF as a regex, for the two users that need it in two
// regex dialects: the validator (RE2, grammar/schema/json_schema_format.cc) and the schema
// compiler (the ECMA `pattern` dialect, automata/schema/schema_lexical.cc).
#pragma once

#include <string>

namespace lockstep::schema {

struct UriRegexDialect {
  // How a code-point escape opens: "\\x{" (RE2) or "\\u{" (ECMA with code points).
  std::string code_point_open;
  // The regex of an IP literal, brackets included (the host alternative to a registered name):
  // the validator captures "\[[^\]/]*\]" and checks its content afterwards; the compiler spells
  // out IPv6 and IPvFuture exactly.
  std::string ip_literal;
};

// The unanchored regex of a URI (`reference`: a URI reference, relative ones included; `iri`: an
// IRI). Groups are non-capturing except those `dialect.ip_literal` brings: a reference has two
// hosts, one in the branch with a scheme and one in the relative branch.
std::string UriRegex(bool iri, bool reference, const UriRegexDialect& dialect);

}  // namespace lockstep::schema
