# The regex front end: pattern -> RegexAst (grammar/regex_parser.h).
set(LOCKSTEP_REGEX_SOURCES regex_parser.cc)
