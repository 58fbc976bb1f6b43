// `format` as an assertion (Validator option format_assertion): hand-written checks for the
// common formats of draft 2020-12 / draft-07. Unknown formats pass (the spec's rule).
#include <re2/re2.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "grammar/schema/json_schema.h"

#include "grammar/regex/ecma_pattern.h"
#include "grammar/schema/uri_regex.h"

namespace lockstep::schema {
namespace {

bool Digits(const std::string& s, std::size_t pos, std::size_t n) {
  if (pos + n > s.size()) return false;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}
int Num(const std::string& s, std::size_t pos, std::size_t n) {
  return std::stoi(s.substr(pos, n));
}

bool Date(const std::string& s) {
  if (s.size() != 10 || !Digits(s, 0, 4) || s[4] != '-' || !Digits(s, 5, 2) || s[7] != '-' ||
      !Digits(s, 8, 2)) {
    return false;
  }
  int y = Num(s, 0, 4), m = Num(s, 5, 2), d = Num(s, 8, 2);
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m < 1 || m > 12 || d < 1) return false;
  bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return d <= kDays[m - 1] + (m == 2 && leap ? 1 : 0);
}

bool Time(const std::string& s) {
  // hh:mm:ss[.frac](Z|+hh:mm|-hh:mm), leap second only at 23:59:60 UTC.
  if (s.size() < 9 || !Digits(s, 0, 2) || s[2] != ':' || !Digits(s, 3, 2) || s[5] != ':' ||
      !Digits(s, 6, 2)) {
    return false;
  }
  int h = Num(s, 0, 2), mi = Num(s, 3, 2), sec = Num(s, 6, 2);
  std::size_t p = 8;
  if (p < s.size() && s[p] == '.') {
    std::size_t q = ++p;
    while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
    if (p == q) return false;
  }
  if (p >= s.size()) return false;
  int oh = 0, om = 0, sign = 0;
  if (s[p] == 'Z' || s[p] == 'z') {
    if (p + 1 != s.size()) return false;
  } else if (s[p] == '+' || s[p] == '-') {
    sign = s[p] == '+' ? 1 : -1;
    if (s.size() != p + 6 || !Digits(s, p + 1, 2) || s[p + 3] != ':' || !Digits(s, p + 4, 2)) {
      return false;
    }
    oh = Num(s, p + 1, 2), om = Num(s, p + 4, 2);
    if (oh > 23 || om > 59) return false;
  } else {
    return false;
  }
  if (h > 23 || mi > 59 || sec > 60) return false;
  if (sec == 60) {
    int utc = (h * 60 + mi - sign * (oh * 60 + om) + 2 * 1440) % 1440;
    return utc == 23 * 60 + 59;
  }
  return true;
}

bool DateTime(const std::string& s) {
  return s.size() > 11 && (s[10] == 'T' || s[10] == 't') && Date(s.substr(0, 10)) &&
         Time(s.substr(11));
}

bool Ipv4(const std::string& s) {
  int parts = 0;
  std::size_t p = 0;
  while (true) {
    std::size_t q = p;
    while (q < s.size() && std::isdigit(static_cast<unsigned char>(s[q]))) ++q;
    if (q == p || q - p > 3 || (q - p > 1 && s[p] == '0') || Num(s, p, q - p) > 255) return false;
    ++parts;
    if (q == s.size()) break;
    if (s[q] != '.') return false;
    p = q + 1;
  }
  return parts == 4;
}

bool Ipv6(const std::string& s) {
  if (s.empty()) return false;
  std::size_t groups = 0, p = 0;
  bool compressed = false;
  if (s.rfind("::", 0) == 0) compressed = true, p = 2;
  while (p < s.size()) {
    std::size_t q = p;
    while (q < s.size() && std::isxdigit(static_cast<unsigned char>(s[q]))) ++q;
    if (q < s.size() && s[q] == '.') {  // trailing IPv4
      if (!Ipv4(s.substr(p))) return false;
      groups += 2;
      p = s.size();
      break;
    }
    if (q == p || q - p > 4) return false;
    ++groups;
    if (q == s.size()) {
      p = q;
      break;
    }
    if (s[q] != ':') return false;
    if (q + 1 < s.size() && s[q + 1] == ':') {
      if (compressed) return false;
      compressed = true;
      p = q + 2;
    } else {
      if (q + 1 == s.size()) return false;
      p = q + 1;
    }
  }
  return compressed ? groups < 8 : groups == 8;
}

bool Hostname(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t p = 0;
  while (true) {
    std::size_t q = s.find('.', p);
    std::string label = s.substr(p, q == std::string::npos ? std::string::npos : q - p);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
    if (label.size() >= 4 && label[2] == '-' && label[3] == '-' &&
        !(label.rfind("xn--", 0) == 0 || label.rfind("XN--", 0) == 0)) {
      return false;
    }
    if (q == std::string::npos) return true;
    p = q + 1;
  }
}

bool Email(const std::string& s) {
  std::size_t at = s.rfind('@');
  if (s.find('@') != at && !(s.front() == '"')) return false;
  if (at == std::string::npos || at == 0 || at + 1 == s.size()) return false;
  std::string local = s.substr(0, at), domain = s.substr(at + 1);
  if (local.size() >= 2 && local.front() == '"' && local.back() == '"') {
    for (std::size_t i = 1; i + 1 < local.size(); ++i) {
      if (local[i] == '"' || (local[i] == '\\' && ++i + 1 >= local.size())) return false;
    }
  } else {
    static const RE2 kDotAtom(
        "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*$");
    if (!RE2::FullMatch(local, kDotAtom)) return false;
  }
  if (domain.front() == '[' && domain.back() == ']') {
    std::string lit = domain.substr(1, domain.size() - 2);
    return lit.rfind("IPv6:", 0) == 0 ? Ipv6(lit.substr(5)) : Ipv4(lit);
  }
  return Hostname(domain);
}

bool Uuid(const std::string& s) {
  if (s.size() != 36) return false;
  for (std::size_t i = 0; i < 36; ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

bool JsonPointer(const std::string& s) {
  if (!s.empty() && s[0] != '/') return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '~' && (i + 1 >= s.size() || (s[i + 1] != '0' && s[i + 1] != '1'))) return false;
  }
  return true;
}

bool RelativeJsonPointer(const std::string& s) {
  std::size_t p = 0;
  while (p < s.size() && std::isdigit(static_cast<unsigned char>(s[p]))) ++p;
  if (p == 0 || (p > 1 && s[0] == '0')) return false;
  std::string rest = s.substr(p);
  return rest == "#" || JsonPointer(rest);
}

bool Duration(const std::string& s) {
  static const RE2 kRe(
      "^P(?:\\d+W|(?:\\d+Y(?:\\d+M(?:\\d+D)?)?|\\d+M(?:\\d+D)?|\\d+D)"
      "(?:T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|\\d+M(?:\\d+S)?|\\d+S))?|T(?:\\d+H(?:\\d+M(?:\\d+S)?)?|"
      "\\d+M(?:\\d+S)?|\\d+S))$");
  return RE2::FullMatch(s, kRe);
}

// RFC 3986 (RFC 3987 with `iri`), anchored, in RE2's dialect; an IP literal is captured, and its
// content checked by Ipv6 (or as IPvFuture) afterwards.
std::string UriRegexRe2(bool iri, bool reference) {
  std::string anchored = "^";  // (appended, not "^" + ...: GCC 12's -Wrestrict misfires on that)
  anchored +=
      UriRegex(iri, reference, {.code_point_open = "\\x{", .ip_literal = "(\\[[^\\]/]*\\])"});
  anchored += "$";
  return anchored;
}

bool Uri(const std::string& s, bool iri, bool reference) {
  static const RE2* kRes[4] = {nullptr, nullptr, nullptr, nullptr};
  int k = (iri ? 2 : 0) + (reference ? 1 : 0);
  static const bool kInit = [] {
    for (int i = 0; i < 4; ++i) {
      RE2::Options opt;
      opt.set_log_errors(false);
      kRes[i] = new RE2(UriRegexRe2(i >= 2, i % 2 == 1), opt);
    }
    return true;
  }();
  (void)kInit;
  // A reference has two host groups: one in the branch with a scheme, one in the relative one.
  std::string host, relative_host;
  if (reference ? !RE2::FullMatch(s, *kRes[k], &host, &relative_host)
                : !RE2::FullMatch(s, *kRes[k], &host)) {
    return false;
  }
  if (host.empty()) host = relative_host;
  if (!host.empty() && host.front() == '[') {
    std::string lit = host.substr(1, host.size() - 2);
    if (!lit.empty() && (lit[0] == 'v' || lit[0] == 'V')) {
      static const RE2 kFuture("^[vV][0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~!$&'()*+,;=:]+$");
      return RE2::FullMatch(lit, kFuture);
    }
    return Ipv6(lit);
  }
  return true;
}

// RFC 6570 level 4 templates.
bool UriTemplate(const std::string& s) {
  static const RE2 kRe(
      "^(?:[^\\x00-\\x20\"%'<>\\\\^`{|}\\x7F]|%[0-9A-Fa-f]{2}|"
      "\\{[+#./;?&=,!@|]?"
      "(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*"
      "(?::[1-9][0-9]{0,3}|\\*)?"
      "(?:,(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*"
      "(?::[1-9][0-9]{0,3}|\\*)?)*\\})*$");
  return RE2::FullMatch(s, kRe);
}

}  // namespace

bool CheckFormat(const std::string& format, const std::string& value) {
  if (format == "date") return Date(value);
  if (format == "time") return Time(value);
  if (format == "date-time") return DateTime(value);
  if (format == "ipv4") return Ipv4(value);
  if (format == "ipv6") return Ipv6(value);
  if (format == "hostname") return Hostname(value);
  if (format == "email") return Email(value);
  if (format == "uuid") return Uuid(value);
  if (format == "json-pointer") return JsonPointer(value);
  if (format == "relative-json-pointer") return RelativeJsonPointer(value);
  if (format == "duration") return Duration(value);
  if (format == "uri") return Uri(value, false, false);
  if (format == "uri-reference") return Uri(value, false, true);
  if (format == "iri") return Uri(value, true, false);
  if (format == "iri-reference") return Uri(value, true, true);
  if (format == "uri-template") return UriTemplate(value);
  // ECMAScript's pattern syntax, Unicode mode, with its early errors (grammar/regex/ecma_pattern.h;
  // the schema compiler checks generated strings with the same checker).
  if (format == "regex") return IsEcmaPattern(value);
  return true;
}

bool FormatKnown(std::string_view format) {
  static const char* const kKnown[] = {
      "date",          "time",         "date-time",    "ipv4",         "ipv6",
      "hostname",      "email",        "uuid",         "json-pointer", "relative-json-pointer",
      "duration",      "uri",          "uri-reference", "iri",         "iri-reference",
      "uri-template",  "regex"};
  for (const char* f : kKnown) {
    if (format == f) return true;
  }
  return false;
}

bool IsOpenApiFormat(std::string_view format) {
  static const char* const kOpenApi[] = {"int32",  "int64",  "float",   "double",
                                         "byte",   "binary", "password"};
  for (const char* f : kOpenApi) {
    if (format == f) return true;
  }
  return false;
}

bool OpenApiIntegerRange(std::string_view format, nlohmann::json* lo, nlohmann::json* hi) {
  if (format == "int32") {
    *lo = std::int64_t{-2147483648LL};
    *hi = std::int64_t{2147483647LL};
    return true;
  }
  if (format == "int64") {
    *lo = std::numeric_limits<std::int64_t>::min();
    *hi = std::numeric_limits<std::int64_t>::max();
    return true;
  }
  return false;
}

bool CheckOpenApiFormat(std::string_view format, const nlohmann::json& instance) {
  nlohmann::json lo, hi;
  if (OpenApiIntegerRange(format, &lo, &hi)) {
    if (!instance.is_number()) return true;
    if (instance.is_number_float()) {
      const double d = instance.get<double>();
      if (!std::isfinite(d) || std::floor(d) != d) return false;
    }
    return CompareNumbers(instance, lo) >= 0 && CompareNumbers(instance, hi) <= 0;
  }
  if (format == "byte") {
    if (!instance.is_string()) return true;
    static const RE2* const kBase64 = new RE2(kBase64Pattern);
    return RE2::FullMatch(instance.get_ref<const std::string&>(), *kBase64);
  }
  return true;
}

}  // namespace lockstep::schema
