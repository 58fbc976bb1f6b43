// UriRegex: RFC 3986 / RFC 3987 as a regex, built from the ABNF's rules (see uri_regex.h).
#include "grammar/schema/uri_regex.h"

namespace lockstep::schema {

std::string UriRegex(bool iri, bool reference, const UriRegexDialect& dialect) {
  const std::string& cp = dialect.code_point_open;
  const std::string unreserved =
      iri ? "A-Za-z0-9\\-._~" + cp + "80}-" + cp + "10FFFF}" : "A-Za-z0-9\\-._~";
  const std::string pct = "%[0-9A-Fa-f]{2}";
  const std::string sub = "!$&'()*+,;=";
  const std::string pchar = "(?:[" + unreserved + sub + ":@]|" + pct + ")";
  const std::string userinfo = "(?:[" + unreserved + sub + ":]|" + pct + ")*";
  const std::string host =
      "(?:" + dialect.ip_literal + "|(?:[" + unreserved + sub + "]|" + pct + ")*)";
  const std::string authority = "(?:" + userinfo + "@)?" + host + "(?::[0-9]*)?";
  const std::string abempty = "(?:/" + pchar + "*)*";
  const std::string absolute = "/(?:" + pchar + "+(?:/" + pchar + "*)*)?";
  const std::string rootless = pchar + "+(?:/" + pchar + "*)*";
  const std::string noscheme = "(?:[" + unreserved + sub + "@]|" + pct + ")+(?:/" + pchar + "*)*";
  const std::string private_use = iri ? "[" + cp + "E000}-" + cp + "F8FF}]" : "[/]";
  const std::string tail =
      "(?:\\?(?:" + pchar + "|[/?]|" + private_use + ")*)?(?:#(?:" + pchar + "|[/?])*)?";
  const std::string hier = "(?://" + authority + abempty + "|" + absolute + "|" +
                           (reference ? noscheme : rootless) + "|)";
  const std::string scheme = "[A-Za-z][A-Za-z0-9+.\\-]*:";
  if (!reference) return scheme + hier + tail;
  const std::string with_scheme =
      "(?:" + scheme + "(?://" + authority + abempty + "|" + absolute + "|" + rootless + "|))";
  return "(?:" + with_scheme + "|" + hier + ")" + tail;
}

}  // namespace lockstep::schema
