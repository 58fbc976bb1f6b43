// Grammars of the kinds llama.cpp documents for its GBNF (grammars/README.md: JSON, JSON arrays,
// arithmetic, chess moves, lists, C-like code, Japanese text), written here from its documented
// syntax (comments, rule names with '-', classes with Unicode ranges and escapes, {m,n},
// nested groups), each with strings that must pass and strings that must fail, on the Llama-3
// vocabulary. A string passes when the matcher takes all its bytes and may end there.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lockstep/compiler.h"
#include "lockstep/matcher.h"
#include "lockstep/vocabulary.h"

namespace lockstep {
namespace {

struct Case {
  const char* name;
  const char* grammar;
  std::vector<std::string> pass;
  std::vector<std::string> fail;
};

const Case kCases[] = {
    {"json",
     R"gbnf(# A JSON object, any whitespace after each value
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= ([ \t\n] ws)?
)gbnf",
     {R"({})", R"({"a": 1, "b": [true, null, -0.5e+3], "c": {"d": "x\u00e9\n"}})",
      "{ \"k\" :\n  \"v\" }\n"},
     {R"({"a": 01})", R"({"a": 1,})", R"([1, 2])", R"({"a": "\x"})", R"({"a": tru})",
      "{\"a\": \"tab\there\"}"}},
    {"json-arrays",
     R"gbnf(# A JSON array of objects, one per line
root   ::= arr
value  ::= object | array | string | number | ("true" | "false" | "null") ws
arr    ::= "[\n" ws ( value (",\n" ws value)* )? "]"
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws     ::= | " " | "\n" [ \t]{0,20}
)gbnf",
     {"[\n]", "[\n{\"a\": 1},\n{\"b\": [2, 3]}]", "[\n\"x\",\n 12]"},
     {"[]", "[\n{\"a\": 1}, {\"b\": 2}]", "[\n{\"a\": 1},\n]", "{\"a\": 1}"}},
    {"arithmetic",
     R"gbnf(root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)gbnf",
     {"1+2=3\n", "(a+b_1)*2 = c\n", "x=(1)\ny/4 = 2\n"},
     {"1+2=3", "1++2=3\n", "=3\n", "A+1=2\n", "(1+2=3\n"}},
    {"chess",
     R"gbnf(# Moves in algebraic notation, numbered
root    ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move    ::= (pawn | nonpawn | castle) [+#]?
pawn    ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle  ::= "O-O" "-O"?
)gbnf",
     {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n3. O-O-O Qxd8#\n",
      "1. e4 e5\n12. e8=Q+ Kxe8\n"},
     {"1. e4 e5\n", "1. e9 e5\n2. a1 a2\n", "1. e4 e5\n2. Zf3 Nc6\n", "1. e4 e5\n2. O-O-O-O a3\n",
      "1. e4\n2. e5 d4\n"}},
    {"list",
     R"gbnf(root ::= item+
# Excludes various line break characters
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\u2029]+ "\n"
)gbnf",
     {"- one\n", "- milk\n- eggs, 12\n- ☕ coffee\n"},
     {"", "- \n", "* one\n", "- one", "- one\r\n", "- a\u2028b\n"}},
    {"c",
     R"gbnf(root ::= (declaration)*
declaration ::= dataType identifier "(" parameter? ")" "{" statement* "}"
dataType  ::= "int" ws | "float" ws | "char" ws
identifier ::= [a-zA-Z_] [a-zA-Z_0-9]*
parameter ::= dataType identifier
statement ::=
    ( dataType identifier ws "=" ws expression ";" ) |
    ( identifier ws "=" ws expression ";" ) |
    ( identifier ws "(" argList? ")" ";" ) |
    ( "return" ws expression ";" ) |
    ( "while" "(" condition ")" "{" statement* "}" ) |
    ( "for" "(" forInit ";" ws condition ";" ws forUpdate ")" "{" statement* "}" ) |
    ( "if" "(" condition ")" "{" statement* "}" ("else" "{" statement* "}")? ) |
    ( singleLineComment ) |
    ( multiLineComment )
forInit ::= dataType identifier ws "=" ws expression | identifier ws "=" ws expression
forUpdate ::= identifier ws "=" ws expression
condition ::= expression relationOperator expression
relationOperator ::= ("<=" | "<" | "==" | "!=" | ">=" | ">")
expression ::= term (("+" | "-") term)*
term ::= factor(("*" | "/") factor)*
factor ::= identifier | number | unaryTerm | funcCall | parenExpression
unaryTerm ::= "-" factor
funcCall ::= identifier "(" argList? ")"
parenExpression ::= "(" ws expression ws ")"
argList ::= expression ("," ws expression)*
number ::= [0-9]+
singleLineComment ::= "//" [^\n]* "\n"
multiLineComment ::= "/*" ( [^*] | ("*" [^/]) )* "*/"
ws ::= ([ \t\n]+)
)gbnf",
     {"", "int main(){return 0;}", "int f(int x){int y = x*2;return y;}",
      "int g(){for(int i = 0; i<10; i = i+1){h (i);}//done\n}",
      "char c(){/* a * b */if(a==b){return 1;}else{return -2;}}"},
     {"int main(){return 0}", "int main(){return 0;", "void main(){}",
      "int f(){x = ;}", "int f(){/* open}"}},
    {"japanese",
     R"gbnf(# Japanese text: hiragana, katakana, CJK ideographs and Japanese punctuation
root        ::= jp-char+ ([ \t\n] jp-char+)*
jp-char     ::= hiragana | katakana | punctuation | cjk
hiragana    ::= [ぁ-ゟ]
katakana    ::= [ァ-ヿ]
punctuation ::= [、-〾]
cjk         ::= [一-鿿]
)gbnf",
     {"こんにちは", "日本語のテキスト。", "カタカナ ひらがな\n漢字"},
     {"", "hello", "こんにちは!", "日本  語", "こんにちは "}},
};

TEST(LlamaCppGrammars, DocumentedKindsCompileAndGiveTheRightVerdicts) {
  auto vocab = Vocabulary::Load("llama3");
  ASSERT_TRUE(vocab.ok()) << vocab.status().ToString();
  GrammarCompiler compiler(*vocab);
  for (const Case& c : kCases) {
    std::vector<std::string> warnings;
    auto g = compiler.CompileGrammar(c.grammar, {}, "gbnf", &warnings);
    ASSERT_TRUE(g.ok()) << c.name << ": " << g.status().ToString();
    EXPECT_TRUE(warnings.empty()) << c.name << ": " << (warnings.empty() ? "" : warnings.front());
    for (const std::string& s : c.pass) {
      Matcher m(*g);
      EXPECT_TRUE(m.AcceptString(s) && m.CanEnd()) << c.name << " must pass: " << s;
    }
    for (const std::string& s : c.fail) {
      Matcher m(*g);
      EXPECT_FALSE(m.AcceptString(s) && m.CanEnd()) << c.name << " must fail: " << s;
    }
  }
}

}  // namespace
}  // namespace lockstep
