#!/usr/bin/env python3
"""Builds schemas/grammars/json-malformed.jsonl, the corpus of invalid JSON documents the JSON
grammar and its oracle must reject, from the valid "data" values of the JSON-Schema-Test-Suite.

Deterministic (fixed seed, sorted inputs); python3 standard library only. Every document is
checked invalid before it is written: Python's json module (strict, NaN/Infinity refused) must
reject it, or it must contain a lone surrogate (a \\uD800-\\uDFFF escape not paired, which
Python accepts) - the only two ways a text can fail RFC 8259 here.

Output: one JSON object per line, {"kind": ..., "doc": ...}, or {"kind": ..., "hex": ...} for
documents that are not valid UTF-8.

Usage: make_malformed_json.py [--suite DIR] [--out FILE]
"""

import argparse
import glob
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
SEED = 20240611


def _reject_constant(name):
    raise ValueError("non-RFC constant " + name)


def _has_lone_surrogate(value):
    if isinstance(value, str):
        chars = value
        i = 0
        while i < len(chars):
            c = ord(chars[i])
            if 0xD800 <= c <= 0xDBFF:
                if i + 1 < len(chars) and 0xDC00 <= ord(chars[i + 1]) <= 0xDFFF:
                    i += 2
                    continue
                return True
            if 0xDC00 <= c <= 0xDFFF:
                return True
            i += 1
        return False
    if isinstance(value, list):
        return any(_has_lone_surrogate(v) for v in value)
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    return False


def is_valid_rfc8259(doc):
    """True iff `doc` (str or bytes) is an RFC 8259 JSON text with well-paired surrogates."""
    try:
        if isinstance(doc, bytes):
            text = doc.decode("utf-8")  # strict: invalid UTF-8 is not JSON text
        else:
            text = doc
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError):
        return False
    return not _has_lone_surrogate(value)


def load_suite(suite_dir):
    values = set()
    for path in sorted(glob.glob(os.path.join(suite_dir, "tests", "draft*", "**", "*.json"),
                                 recursive=True)):
        with open(path, encoding="utf-8") as f:
            for group in json.load(f):
                for test in group["tests"]:
                    values.add(json.dumps(test["data"], separators=(",", ":"),
                                          ensure_ascii=False))
    return sorted(values)


def scan(doc):
    """(string spans [(open_quote, close_quote)], positions of bytes outside strings)."""
    spans, outside = [], []
    i = 0
    while i < len(doc):
        if doc[i] == '"':
            j = i + 1
            while doc[j] != '"':
                j += 2 if doc[j] == "\\" else 1
            spans.append((i, j))
            i = j + 1
        else:
            outside.append(i)
            i += 1
    return spans, outside


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", default=os.path.join(ROOT, "..", "shared", "data",
                                                        "json-schema-test-suite"))
    parser.add_argument("--out", default=os.path.join(ROOT, "schemas", "grammars",
                                                      "json-malformed.jsonl"))
    args = parser.parse_args()

    rng = random.Random(SEED)
    valid = load_suite(args.suite)
    indented = [json.dumps(json.loads(v), indent=2, ensure_ascii=False) for v in valid]
    composite = [v for v in valid if v[0] in "[{" and len(v) > 2]
    with_strings = [v for v in valid if scan(v)[0]]
    with_arrays = [v for v in valid if any(v[i] == "]" for i in scan(v)[1])]
    with_objects = [v for v in valid if any(v[i] == "}" for i in scan(v)[1])]

    out = []  # (kind, str or bytes)
    seen = set()

    def add(kind, doc):
        if doc in seen or is_valid_rfc8259(doc):
            return False
        seen.add(doc)
        out.append((kind, doc))
        return True

    def string_in(doc_pool):
        doc = rng.choice(doc_pool)
        spans, _ = scan(doc)
        return doc, rng.choice(spans)

    # Truncations (a prefix that happens to be valid, like "12" of "123", is skipped by add()).
    add("truncation", "")
    for pool, count in ((valid, 90), (indented, 40)):
        made = 0
        while made < count:
            doc = rng.choice(pool)
            if len(doc) < 2:
                continue
            made += add("truncation", doc[: rng.randrange(1, len(doc))])

    # Trailing commas, and other misplaced commas.
    for closer, pool, kind in (("]", with_arrays, "trailing-comma-array"),
                               ("}", with_objects, "trailing-comma-object")):
        made = 0
        while made < 25:
            doc = rng.choice(pool)
            _, outside = scan(doc)
            spots = [i for i in outside if doc[i] == closer]
            i = rng.choice(spots)
            made += add(kind, doc[:i] + "," + doc[i:])
    for doc in ("[,]", "{,}", "[,1]", '{,"a":1}', "[1,,2]", '{"a":1,,"b":2}', "[1 2]",
                '{"a":1 "b":2}', "[1,]", '{"a":1,}', "[[],]", '{"a":{},}'):
        add("misplaced-comma", doc)

    # Bad escapes inside an existing string.
    bad_escapes = ["\\x41", "\\u12", "\\u12G4", "\\q", "\\U0001F600", "\\'", "\\a", "\\0",
                   "\\v", "\\u", "\\uZZZZ", "\\ ", "\\\n", "\\e", "\\u{41}", "\\u004"]
    made = 0
    while made < 45:
        doc, (a, b) = string_in(with_strings)
        pos = rng.randrange(a + 1, b + 1)
        made += add("bad-escape", doc[:pos] + rng.choice(bad_escapes) + doc[pos:])
    for esc in bad_escapes:
        add("bad-escape", '"' + esc + '"')

    # Lone surrogates in \u escapes (Python accepts these; the surrogate check does not).
    lone = ["\\uD83D", "\\uDE00", "\\ud800", "\\udbff", "\\udc00", "\\uDFFF", "\\uDE00\\uD83D",
            "\\uD83D\\uD83D", "\\uD83D\\u0041", "\\uD83Dx", "\\uD83D\\n", "\\uDBFF\\uE000",
            "\\uD83D\\uDBFF"]
    for esc in lone:
        kind = "lone-low-surrogate" if esc[3].lower() in "cdef" else "lone-high-surrogate"
        add(kind, '"' + esc + '"')
        add(kind, '{"' + esc + '":1}')
        add(kind, '["a' + esc + 'b"]')
    made = 0
    while made < 25:
        doc, (a, b) = string_in(with_strings)
        pos = rng.randrange(a + 1, b + 1)
        esc = rng.choice(lone[:6])
        kind = "lone-low-surrogate" if esc[3].lower() in "cdef" else "lone-high-surrogate"
        made += add(kind, doc[:pos] + esc + doc[pos:])

    # Unescaped control characters inside strings.
    made = 0
    while made < 32:
        doc, (a, b) = string_in(with_strings)
        pos = rng.randrange(a + 1, b + 1)
        made += add("control-char", doc[:pos] + chr(made) + doc[pos:])

    # Numbers and literals outside RFC 8259.
    for doc in ("01", "-01", "00", "+1", ".5", "1.", "-", "--1", "1.e5", "1e", "1e+", "1E-",
                "0x1F", "1_000", "Infinity", "-Infinity", "NaN", "1 2", "- 1", "1.5.2",
                "0.", "-.5", "[01]", "[1.]", '{"a":+1}', "[.5]", "[NaN]", "[Infinity]", "1e5.5",
                "True", "FALSE", "Null", "nul", "nulll", "tru", "truee", "undefined", "none",
                "[true false]", "[tru]", "1f", "1L", "١"):
        add("number-or-literal", doc)

    # Quotes, keys, colons, brackets, comments, several values.
    for doc in ("'a'", "['a']", "{'a':1}", '{"a\':1}', "{a:1}", "{1:1}", "{true:1}", '{"a" 1}',
                '{"a"1}', '{"a"::1}', '{"a":}', '{:1}', '{"a"}', '{"a",1}', '["a":1]', "[1}",
                "{]", "[", "]", "{", "}", "[[]", "[]]", "{}}", '{"a":1}}', "[1]]", "[1] [2]",
                "{} {}", '"a" "b"', "1 // c", "/* c */ 1", "[1,/* c */2]", "# c\n1", '"a',
                'a"', '"""', "\ufeff1", "\ufeff{}", "()", "<>", "[1;2]", '{"a"=1}',
                '{"a"=>1}', "[1,2", '{"a":[1,2}', '{"a":{"b":1}', "[[[[", "]]]]"):
        add("structure", doc)
    made = 0
    while made < 30:  # an unmatched bracket, or a bracket swapped for the other kind
        doc = rng.choice(composite)
        _, outside = scan(doc)
        spots = [i for i in outside if doc[i] in "[]{}"]
        i = rng.choice(spots)
        swap = {"[": "{", "{": "[", "]": "}", "}": "]"}[doc[i]]
        mutated = doc[:i] + rng.choice((swap, "")) + doc[i + 1:]
        made += add("structure", mutated)

    # Whitespace RFC 8259 does not allow between tokens.
    for ws in ("\f", "\v", "\u00a0", "\u2028", "\u3000", "\x00"):
        add("bad-whitespace", ws + "1")
        add("bad-whitespace", "[1," + ws + "2]")
        add("bad-whitespace", "{" + ws + '"a":1}')

    # Not UTF-8 (written as hex).
    for raw in (b'"\xff"', b'"\xc0\xaf"', b'"\xe2\x82"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"',
                b'"\x80"', b'["a\xfeb"]', b'{"\xc3":1}', b'"\xf0\x9f\x98"', b'"\xe0\x80\xaf"',
                b'\xff', b'[1,\xa0 2]'):
        add("invalid-utf8", raw)

    with open(args.out, "w", encoding="utf-8") as f:
        for kind, doc in out:
            if isinstance(doc, bytes):
                entry = {"kind": kind, "hex": doc.hex()}
            else:
                entry = {"kind": kind, "doc": doc}
            f.write(json.dumps(entry, ensure_ascii=True) + "\n")
    kinds = {}
    for kind, _ in out:
        kinds[kind] = kinds.get(kind, 0) + 1
    print(f"{len(out)} malformed documents from {len(valid)} valid values: {kinds}")


if __name__ == "__main__":
    main()
