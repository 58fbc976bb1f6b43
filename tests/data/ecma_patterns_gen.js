// Writes ecma_patterns.jsonl, the corpus of tests/grammar/regex/ecma_pattern_test.cc (and of the
// `format: regex` tests): one {"pattern": ..., "valid": ...} per line, the verdict being whether
// `new RegExp(pattern, "u")` throws. The verdicts come from V8 11.3.244.8-node.38 in Node v20.20.2
// (`node --version`: v20.20.2; its ICU 78.2, Unicode 17.0). CI has no Node, so the tests read the
// committed file. To regenerate (deterministic: the random parts use a fixed seed), from the
// repository root:
//
//   node tests/data/ecma_patterns_gen.js > tests/data/ecma_patterns.jsonl
//
// Parts: (a) hand-written cases for every rule of the Unicode-mode grammar and its early errors;
// (b) random patterns from a small regex generator, mutations of them, and random strings over an
// alphabet rich in syntax characters; (c) every General_Category, Script and binary property name
// of ICU 72 (Debian 12's, which lockstep builds with) as `\p{...}` in each form, plus near misses.
// The scripts of Unicode 16 and 17 (Garay, ..., Tolong_Siki) are left out: Node's ICU knows them
// and ICU 72 does not, so the verdict would depend on the build's ICU. The generator checks that
// Node still accepts them and says so on stderr.
'use strict';

function verdict(p) {
  try {
    new RegExp(p, 'u');
    return true;
  } catch (e) {
    return false;
  }
}

const seen = new Set();
const lines = [];
function add(p) {
  if (seen.has(p)) return;
  seen.add(p);
  lines.push(JSON.stringify({pattern: p, valid: verdict(p)}));
}

// (a) Hand-written cases, grouped by rule.
const hand = String.raw`
a
ab
a|b
|
a||b
^
$
^a$
^^$$
a^b
\b
\B
\ba\B
a*
a+
a?
a*?
a+?
a??
a{0}
a{1,}
a{1,2}
a{1,2}?
a{0,0}
a{00}
a{010,0100}
a{3,2}
a{2,3}
a{10,9}
a{9,10}
a{09,10}
a{10,09}
a{2147483647}
a{2147483647,2147483646}
a{2147483648,2147483647}
a{3000000000,2147483648}
a{99999999999999999999,99999999999999999998}
a{99999999999999999999}
a**
a*+
a+*
a???
a*??
a{1}??
a{1}?+
*
+
?
*a
a|*
a|+b
(*)
(?:*)
(|*)
^*
$+
\b*
\B?
(?=a)*
(?=a)?
(?!a){2}
(?<=a)+
(?<!a)*
a{
a{1
a{1,
a{1,2
a{,}
a{,5}
a{a}
a{1a}
a{1,a}
a{ 1}
{
}
]
a}
a]
{1}
a{1}{2}
a{1}*
a{1}?
x{2,1}?
(a)*
(?:a)+
(?<n>a){2}
.
.*
\d+
()
(a)
(?:)
(?:a)
(?=)
(?!)
(?<=)
(?<!)
(?<a>)
(?<a>b)
(
)
(()
())
(?
(?a)
(?i)
(?i:a)
(?-i:a)
(?<
(?<>a)
(?<a
(?<a>
(?<1>a)
(?<a1>a)
(?<_>a)
(?<$>a)
(?<$a_1>a)
(?<é>a)
(?<日本>a)
(?<a-b>a)
(?<a b>a)
(?<😀>a)
(?<a😀>a)
(?<𐐀>a)
(?<a·>a)
(?<·>a)
(?<\u0061>a)
(?<\u{61}>a)
(?<\u{0000061}>a)
(?<\u0031>a)
(?<a\u0031>a)
(?<\u0024>a)
(?<\u005f>a)
(?<\u0020>a)
(?<\ud835\udc00>a)
(?<\ud801\udc00>a)
(?<\u{10400}>a)
(?<\ud801>a)
(?<a\ud801>a)
(?<a\udc00>a)
(?<\ud801\u{dc00}>a)
(?<\u{d801}\u{dc00}>a)
(?<\ud801\ud801\udc00>a)
(?<\ud83d\ude00>a)
(?<a\u200c>a)
(?<a\u200d>a)
(?<\u200c>a)
(?<a\x41>a)
(?<a\>a)
(?<a\u>a)
(?<a\u{}>a)
(?<a\u{110000}>a)
(?<a\u{10FFFF}>a)
(?<a\u{E0100}>a)
(?<a\u{e0100}>a)
(?<\u{E0100}>a)
(?<a\u{1D7CE}>a)
(?<a>a)(?<a>b)
(?<a>a)|(?<a>b)
(?<a>a)(?<b>b)
(?<a>a)(?<A>b)
(?<a>a)(?<\u0061>b)
(?<a>(?<b>c))
(?<ab>a)(?<a>b)
(?<a>a)(?<ab>b)
\1
(a)\1
\1(a)
\2(a)
(a)(b)\2
(a)\2
\10
(a)\10
()()()()()()()()()()\10
()()()()()()()()()\10
\1(?:a)
\1(?=a)
\1(?<n>a)
(?<n>a)\1
(?<n>a)\2
\99999999999
(a)\01
\0
\00
\01
\0a
\08
\09
a\0
\0\0
\0{2}
[\0]
[\00]
[\01]
[\0a]
[\0-9]
\k
\k<
\k<a
\k<a>
(?<a>.)\k<a>
\k<a>(?<a>.)
(?<a>.)\k<b>
(?<a>.)\k
(?<a>.)\ka
(?<a>.)\k<>
(?<a>.)\k<a
(?<\u0061>.)\k<a>
(?<a>.)\k<\u{61}>
[\k<a>](?<a>.)
\k<a>*(?<a>.)
(?<a>\k<a>)
(?<a>)\k<a>\k<a>
(?<a>)(?<b>)\k<b>\k<a>
\k<a>\k<b>(?<a>)
\d\D\s\S\w\W
\f\n\r\t\v
\ca
\cZ
\c
\c0
\c_
\c-
\c\
\x41
\x4
\x
\xg1
\xFF
\xff
\u0041
\u004
\u
\u{41}
\u{}
\u{10FFFF}
\u{110000}
\u{0010FFFF}
\u{000000000000041}
\u{41
\u{g}
\u{-1}
\uD83D
\uDE00
\uD83D\uDE00
\uDE00\uD83D
\uD83D\u{DE00}
\uD83D*
\uD83D\uDE00{2}
\a
\e
\g
\h
\i
\j
\l
\m
\o
\q
\y
\z
\A
\Z
\-
\ 
\/
\^\$\\\.\*\+\?\(\)\[\]\{\}\|
\,
\:
\=
\!
\<
\>
\'
\"
\#
\%
\&
\é
\😀
\_
\
a\
\p
\pL
\p{
\p{L
\p{L}
\P{L}
\p{Lu}
\p{Letter}
\p{letter}
\p{LETTER}
\p{L }
\p{ L}
\p{L=}
\p{=L}
\p{}
\p{gc=L}
\p{gc=Lu}
\p{General_Category=Letter}
\p{general_category=Letter}
\p{GC=L}
\p{sc=Greek}
\p{sc=Grek}
\p{sc=greek}
\p{Script=Latin}
\p{Script=Latn}
\p{scx=Latn}
\p{Script_Extensions=Greek}
\p{Script=L}
\p{gc=Greek}
\p{Greek}
\p{sc}
\p{Script}
\p{Script=}
\p{Script==Latin}
\p{Script=Latin=Latin}
\p{Any}
\P{Any}
\p{ASCII}
\p{Assigned}
\p{any}
\p{gc=Any}
\p{Any=Y}
\p{ASCII_Hex_Digit}
\p{AHex}
\p{Alphabetic}
\p{Alpha}
\p{White_Space}
\p{WSpace}
\p{space}
\p{Emoji}
\p{Basic_Emoji}
\p{RGI_Emoji}
\p{Hyphen}
\p{Comp_Ex}
\p{Alpha=Y}
\p{Alphabetic=Yes}
\p{Lowercase_Letter}
\p{Script=Hrkt}
\p{Script=Zyyy}
\p{Script=Common}
\p{Script=Zinh}
\p{Script=Qaai}
\p{Script=Inherited}
\p{Script=Unknown}
\p{Script=Zzzz}
\p{L}+
\p{L}{2}
\p{Nd}
\p{digit}
\p{punct}
\p{cntrl}
\p{LC}
\p{L&}
\p{IsGreek}
\p{InGreek}
\p{Is_Greek}
\p{Block=Basic_Latin}
\p{blk=ASCII}
\p{Script=Latin}x
\p{L}\p{N}
\p{L}}
\p{L}{
\p{L-}
\p{Script-Latin}
\p{Script:Latin}
\p{Script=Latin }
[]
[^]
[a]
[^a]
[abc]
[a-z]
[z-a]
[a-a]
[-]
[--]
[---]
[----]
[-----]
[-a]
[a-]
[a-b-c]
[a-b-]
[--a]
[!--]
[.--]
[a--]
[a--b]
[!--a]
[^-]
[^-a]
[^a-]
[^^]
[a^]
[\-]
[a\-z]
[\d]
[\d-]
[-\d]
[\d-a]
[a-\d]
[\d-\w]
[\d--]
[\w-]
[\p{L}]
[\p{L}-]
[\p{L}-a]
[a-\p{L}]
[^\P{L}]
[\b]
[\b-\n]
[\n-\b]
[\B]
[\1]
[\k]
[\0-\x7F]
[\cA-\cZ]
[\cZ-\cA]
[\c]
[\c1]
[\c_]
[\x]
[\x4]
[\x41-\x5A]
[\u0041-\u005A]
[\u005A-\u0041]
[\u{41}-\u{10FFFF}]
[\u{10FFFF}-\u{41}]
[\u{10FFFE}-\u{10FFFF}]
[\u{10FFFF}-\u{10FFFE}]
[\u{110000}]
[\uD83D\uDE00]
[\uD83D\uDE00-\uD83D\uDE01]
[\uD83D\uDE01-\uD83D\uDE00]
[\uD83D-\uDE00]
[\uDE00-\uD83D]
[\uFFFF-\uD83D\uDE00]
[\uFFFF-\uD83D]
[\uD83D\uDE00-\uFFFF]
[😀-😁]
[😁-😀]
[é-😀]
[😀-é]
[\u{1F600}-\uD83D\uDE01]
[\u{1F601}-\uD83D\uDE00]
[\uD83D\uDE00-\u{1F600}]
[\uD83D\u0041]
[\uD83D\u0041-\u0040]
[\uD83D\uDBFF]
[\uD83D\uD83D\uDE00]
[\uD83D\u{DE00}]
[\u{D83D}\u{DE00}-\u{1F600}]
[\uD83D\x41]
[\uD83D\d]
[\uD83D-]
[a-\uD83D]
[a-\uD83D\uDE00]
[\uD800-\uDFFF]
[\uDFFF-\uD800]
[\uDBFF\uDFFF-\u{10FFFF}]
[\uDBFF\uDFFF-\u{10FFFE}]
[[]
[[]]
[a[]
[]]
[\]]
[\[]
[a
[
[^
[\
[a-
[{}]
[()]
[|]
[.*+?]
[$^]
[\^]
[\$]
[\.]
[\/]
[\a]
[\e]
[\z]
[\ ]
[\,]
[\_]
[z-\x41]
[A-\x41]
[\x41-A]
[\x41-@]
[\0-\0]
[\0-0]
[\01-2]
[\s-\S]
[a-z]{2}
[a-z]*?
[ab]\1(x)
[\q{a}]
[a&&b]
[\-a-\-]
[--\-]
[\--\-]
[\x2D--]
[\t-\r]
[\r-\t]
[\u{0}-\u{0}]
[\u{00000000000000}]
[é]
[^😀]
a[]b
[a]]
[a]{
`.split('\n').slice(1, -1);
for (const p of hand) add(p);
for (const p of ['\n', '\\\n', 'a\u2028b', '\t', '\\\t', '[\n]', '[\\\n]', '(?<a\n>)', ' ',
                 '\u00a0', '/', '\\u{1F600}', 'é+', '😀{2}', '😀😀', '(?<a>😀)']) {
  add(p);
}

// (b) Random patterns. A fixed-seed generator (mulberry32), so the file is reproducible.
let seed = 0x5eed1234;
function rand() {
  seed = (seed + 0x6d2b79f5) | 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (a) => a[Math.floor(rand() * a.length)];
const chance = (p) => rand() < p;

const LITERALS = ['a', 'b', 'z', '0', '1', '9', 'é', '😀', ',', '<', '>', '=', '!', ':', '_', 'k', '-'];
const ESCAPES = String.raw`\d \D \w \W \s \S \n \t \0 \x41 \x7f \u0041 \uD83D \uDE00 \uD83D\uDE00
  \u{41} \u{1F600} \u{10FFFF} \cJ \ca \/ \\ \. \* \- \{ \} \p{L} \P{Lu} \p{Script=Greek}
  \p{sc=Latn} \p{ASCII} \p{Nd} \1 \2 \k<a> \k<b>`.split(/\s+/).filter((s) => s);
const CLASS_ATOMS = ['a', 'z', '0', '9', '-', '^', 'é', '😀', '[', ']', '\\]', '\\-', '\\d', '\\w',
                     '\\b', '\\x41', '\\u0041', '\\uD83D\\uDE00', '\\u{10FFFF}', '\\p{L}', '\\cA'];
const NAMES = ['a', 'b', 'ab', '$', '_x', 'é', '\\u0061', '\\u{62}', 'a1'];

function genClass() {
  let s = chance(0.3) ? '[^' : '[';
  const n = Math.floor(rand() * 4);
  for (let i = 0; i < n; i++) {
    s += pick(CLASS_ATOMS);
    if (chance(0.3)) s += '-' + pick(CLASS_ATOMS);
  }
  return s + ']';
}
function genAtom(depth) {
  const r = rand();
  if (r < 0.35) return pick(LITERALS);
  if (r < 0.45) return '.';
  if (r < 0.6) return pick(ESCAPES);
  if (r < 0.72) return genClass();
  if (depth > 2) return pick(LITERALS);
  const open = pick(['(', '(', '(?:', '(?=', '(?!', '(?<=', '(?<!', '(?<' + pick(NAMES) + '>']);
  return open + genDisjunction(depth + 1) + ')';
}
function genQuantifier() {
  const q = pick(['*', '+', '?', '{2}', '{1,}', '{1,3}', '{3,1}', '{0}', '{,2}', '{2,2}']);
  return chance(0.2) ? q + '?' : q;
}
function genTerm(depth) {
  if (chance(0.1)) return pick(['^', '$', '\\b', '\\B']);
  const a = genAtom(depth);
  return chance(0.3) ? a + genQuantifier() : a;
}
function genDisjunction(depth) {
  const alts = [];
  const n = chance(0.2) ? 2 : 1;
  for (let i = 0; i < n; i++) {
    let s = '';
    const m = Math.floor(rand() * 4);
    for (let j = 0; j < m; j++) s += genTerm(depth);
    alts.push(s);
  }
  return alts.join('|');
}

const ALPHABET = [...'abz0129\\()[]{},-^$.*+?|<>=!:kuxcpPdDwsbBn_$', 'é', '😀'];
function mutate(p) {
  const cs = [...p];
  const edits = 1 + Math.floor(rand() * 2);
  for (let e = 0; e < edits; e++) {
    const i = Math.floor(rand() * (cs.length + 1));
    const r = rand();
    if (r < 0.35) cs.splice(i, 0, pick(ALPHABET));
    else if (r < 0.65 && cs.length) cs.splice(Math.min(i, cs.length - 1), 1);
    else if (r < 0.9 && cs.length) cs[Math.min(i, cs.length - 1)] = pick(ALPHABET);
    else cs.length = Math.min(cs.length, i);
  }
  return cs.join('');
}

const generated = [];
while (generated.length < 2500) {
  const p = genDisjunction(0);
  if ([...p].length <= 40) generated.push(p);
}
for (const p of generated) add(p);
for (let i = 0; i < 3000; i++) add(mutate(pick(generated)));
for (let i = 0; i < 3000; i++) {
  const len = 1 + Math.floor(rand() * 10);
  let s = '';
  for (let j = 0; j < len; j++) s += pick(ALPHABET);
  add(s);
}

// (c) Property names: ICU 72's General_Category, Script and binary property names (those V8
// refuses included: unused script codes, properties outside ECMA-262's table), in every form.
const GC = `Cn Unassigned Lu Uppercase_Letter Ll Lowercase_Letter Lt Titlecase_Letter Lm
  Modifier_Letter Lo Other_Letter Mn Nonspacing_Mark Me Enclosing_Mark Mc Spacing_Mark Nd
  Decimal_Number digit Nl Letter_Number No Other_Number Zs Space_Separator Zl Line_Separator Zp
  Paragraph_Separator Cc Control cntrl Cf Format Co Private_Use Cs Surrogate Pd Dash_Punctuation Ps
  Open_Punctuation Pe Close_Punctuation Pc Connector_Punctuation Po Other_Punctuation Sm Math_Symbol
  Sc Currency_Symbol Sk Modifier_Symbol So Other_Symbol Pi Initial_Punctuation Pf
  Final_Punctuation L Letter LC Cased_Letter M Mark Combining_Mark N Number P Punctuation punct S
  Symbol Z Separator C Other`.split(/\s+/);
const SCRIPTS = `Zyyy Common Zinh Inherited Qaai Arab Arabic Armn Armenian Beng Bengali Bopo
  Bopomofo Cher Cherokee Copt Coptic Qaac Cyrl Cyrillic Dsrt Deseret Deva Devanagari Ethi Ethiopic
  Geor Georgian Goth Gothic Grek Greek Gujr Gujarati Guru Gurmukhi Hani Han Hang Hangul Hebr Hebrew
  Hira Hiragana Knda Kannada Kana Katakana Khmr Khmer Laoo Lao Latn Latin Mlym Malayalam Mong
  Mongolian Mymr Myanmar Ogam Ogham Ital Old_Italic Orya Oriya Runr Runic Sinh Sinhala Syrc Syriac
  Taml Tamil Telu Telugu Thaa Thaana Thai Tibt Tibetan Cans Canadian_Aboriginal Yiii Yi Tglg
  Tagalog Hano Hanunoo Buhd Buhid Tagb Tagbanwa Brai Braille Cprt Cypriot Limb Limbu Linb Linear_B
  Osma Osmanya Shaw Shavian Tale Tai_Le Ugar Ugaritic Hrkt Katakana_Or_Hiragana Bugi Buginese Glag
  Glagolitic Khar Kharoshthi Sylo Syloti_Nagri Talu New_Tai_Lue Tfng Tifinagh Xpeo Old_Persian
  Bali Balinese Batk Batak Blis Brah Brahmi Cham Cirt Cyrs Egyd Egyh Egyp Egyptian_Hieroglyphs Geok
  Hans Hant Hmng Pahawh_Hmong Hung Old_Hungarian Inds Java Javanese Kali Kayah_Li Latf Latg Lepc
  Lepcha Lina Linear_A Mand Mandaic Maya Mero Meroitic_Hieroglyphs Nkoo Nko Orkh Old_Turkic Perm
  Old_Permic Phag Phags_Pa Phnx Phoenician Plrd Miao Roro Sara Syre Syrj Syrn Teng Vaii Vai Visp
  Xsux Cuneiform Zxxx Zzzz Unknown Cari Carian Jpan Lana Tai_Tham Lyci Lycian Lydi Lydian Olck
  Ol_Chiki Rjng Rejang Saur Saurashtra Sgnw SignWriting Sund Sundanese Moon Mtei Meetei_Mayek Armi
  Imperial_Aramaic Avst Avestan Cakm Chakma Kore Kthi Kaithi Mani Manichaean Phli
  Inscriptional_Pahlavi Phlp Psalter_Pahlavi Phlv Prti Inscriptional_Parthian Samr Samaritan Tavt
  Tai_Viet Zmth Zsym Bamu Bamum Lisu Nkgb Sarb Old_South_Arabian Bass Bassa_Vah Dupl Duployan Elba
  Elbasan Gran Grantha Kpel Loma Mend Mende_Kikakui Merc Meroitic_Cursive Narb Old_North_Arabian
  Nbat Nabataean Palm Palmyrene Sind Khudawadi Wara Warang_Citi Afak Jurc Mroo Mro Nshu Nushu Shrd
  Sharada Sora Sora_Sompeng Takr Takri Tang Tangut Wole Hluw Anatolian_Hieroglyphs Khoj Khojki Tirh
  Tirhuta Aghb Caucasian_Albanian Mahj Mahajani Ahom Hatr Hatran Modi Mult Multani Pauc Pau_Cin_Hau
  Sidd Siddham Adlm Adlam Bhks Bhaiksuki Marc Marchen Newa Osge Osage Hanb Jamo Zsye Gonm
  Masaram_Gondi Soyo Soyombo Zanb Zanabazar_Square Dogr Dogra Gong Gunjala_Gondi Maka Makasar Medf
  Medefaidrin Rohg Hanifi_Rohingya Sogd Sogdian Sogo Old_Sogdian Elym Elymaic Hmnp
  Nyiakeng_Puachue_Hmong Nand Nandinagari Wcho Wancho Chrs Chorasmian Diak Dives_Akuru Kits
  Khitan_Small_Script Yezi Yezidi Cpmn Cypro_Minoan Ougr Old_Uyghur Tnsa Tangsa Toto Vith Vithkuqi
  Kawi Nagm Nag_Mundari`.split(/\s+/);
// Scripts ICU 72 does not know (Unicode 16: ICU 76; Unicode 17: ICU 78): not in the corpus.
const NEW_SCRIPTS = `Gara Garay Gukh Gurung_Khema Krai Kirat_Rai Onao Ol_Onal Sunu Sunuwar Todr
  Todhri Tutg Tulu_Tigalari Berf Beria_Erfe Sidt Sidetic Tayo Tai_Yo Tols Tolong_Siki`.split(/\s+/);
const accepted = NEW_SCRIPTS.filter((n) => verdict(`\\p{Script=${n}}`));
process.stderr.write(`Node accepts ${accepted.length} of ${NEW_SCRIPTS.length} script names ` +
                     `newer than ICU 72 (left out of the corpus)\n`);
const BINARY = `Alpha Alphabetic AHex ASCII_Hex_Digit Bidi_C Bidi_Control Bidi_M Bidi_Mirrored Dash
  DI Default_Ignorable_Code_Point Dep Deprecated Dia Diacritic Ext Extender Comp_Ex
  Full_Composition_Exclusion Gr_Base Grapheme_Base Gr_Ext Grapheme_Extend Gr_Link Grapheme_Link Hex
  Hex_Digit Hyphen IDC ID_Continue IDS ID_Start Ideo Ideographic IDSB IDS_Binary_Operator IDST
  IDS_Trinary_Operator Join_C Join_Control LOE Logical_Order_Exception Lower Lowercase Math NChar
  Noncharacter_Code_Point QMark Quotation_Mark Radical SD Soft_Dotted Term Terminal_Punctuation
  UIdeo Unified_Ideograph Upper Uppercase WSpace White_Space space XIDC XID_Continue XIDS XID_Start
  Sensitive Case_Sensitive STerm Sentence_Terminal VS Variation_Selector nfdinert NFD_Inert
  nfkdinert NFKD_Inert nfcinert NFC_Inert nfkcinert NFKC_Inert segstart Segment_Starter Pat_Syn
  Pattern_Syntax Pat_WS Pattern_White_Space alnum blank graph print xdigit Cased CI Case_Ignorable
  CWL Changes_When_Lowercased CWU Changes_When_Uppercased CWT Changes_When_Titlecased CWCF
  Changes_When_Casefolded CWCM Changes_When_Casemapped CWKCF Changes_When_NFKC_Casefolded Emoji
  EPres Emoji_Presentation EMod Emoji_Modifier EBase Emoji_Modifier_Base EComp Emoji_Component RI
  Regional_Indicator PCM Prepended_Concatenation_Mark ExtPict Extended_Pictographic Basic_Emoji
  Emoji_Keycap_Sequence RGI_Emoji_Modifier_Sequence RGI_Emoji_Flag_Sequence RGI_Emoji_Tag_Sequence
  RGI_Emoji_ZWJ_Sequence RGI_Emoji Any ASCII Assigned IDS_Unary_Operator ID_Compat_Math_Start
  ID_Compat_Math_Continue InCB Modifier_Combining_Mark MCM`.split(/\s+/);

function nearMisses(n) {
  const out = [n.toLowerCase(), n.toUpperCase(), n.slice(0, -1), n + 'x', 'Is' + n,
               n.replace(/_/g, ' '), n.replace(/_/g, '-'), n.replace(/_/g, '')];
  return out.filter((m) => m && m !== n);
}
const WITH_GC = ['gc=', 'General_Category='];
const WITH_SC = ['sc=', 'Script=', 'scx=', 'Script_Extensions='];
for (const n of GC) {
  for (const f of ['', ...WITH_GC]) add(`\\p{${f}${n}}`);
  add(`\\P{${n}}`);
  add(`[\\p{${n}}]`);
  add(`\\p{sc=${n}}`);
  for (const m of nearMisses(n)) add(`\\p{${m}}`);
  add(`\\p{gc=${n.toLowerCase()}}`);
}
for (const n of SCRIPTS) {
  for (const f of ['', 'gc=', ...WITH_SC]) add(`\\p{${f}${n}}`);
  add(`[^\\P{scx=${n}}]`);
  for (const m of nearMisses(n).slice(0, 4)) add(`\\p{Script=${m}}`);
}
for (const n of BINARY) {
  add(`\\p{${n}}`);
  add(`\\P{${n}}`);
  add(`[\\p{${n}}a]`);
  add(`\\p{${n}=Y}`);
  add(`\\p{gc=${n}}`);
  for (const m of nearMisses(n)) add(`\\p{${m}}`);
}
for (const f of ['gc', 'General_Category', 'sc', 'Script', 'scx', 'Script_Extensions']) {
  add(`\\p{${f}}`);
  add(`\\p{${f}=}`);
  for (const m of nearMisses(f)) add(`\\p{${m}=Latin}`);
}

process.stdout.write(lines.join('\n') + '\n');
