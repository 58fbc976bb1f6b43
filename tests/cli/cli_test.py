#!/usr/bin/env python3
"""End-to-end checks of the `lockstep` command, as a user would run it: tokenize/detokenize on
the bundled Llama-3 vocabulary, reproducible generation, regex-constrained generation with the
n-gram model ending in EOS with a full match (checked by Python's `re`, an independent oracle),
and clear errors with locations and non-zero exits on bad input.

usage: cli_test.py PATH/TO/lockstep"""
import json
import os
import re
import subprocess
import sys
import unittest

LOCKSTEP = None


def run(*args, stdin=None):
    p = subprocess.run([LOCKSTEP, *args], input=stdin, capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


class Tokenize(unittest.TestCase):
    def test_known_llama3_ids(self):
        # Llama-3's published tokenisation of "Hello world" (HF tokenizers): [9906, 1917].
        code, out, err = run("tokenize", "Hello world")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.split(), ["9906", "1917"])

    def test_round_trip(self):
        text = '{"name": "get_weather", "arguments": {"city": "Zürich", "days": 3}}'
        code, out, err = run("tokenize", "--tokenizer", "gpt2", text)
        self.assertEqual(code, 0, err)
        code, back, err = run("detokenize", "--tokenizer", "gpt2", *out.split())
        self.assertEqual(code, 0, err)
        self.assertEqual(back.rstrip("\n"), text)

    def test_detokenize_rejects_bad_ids(self):
        code, _, err = run("detokenize", "12", "abc")
        self.assertEqual(code, 2)
        self.assertIn("abc", err)
        code, _, err = run("detokenize", "99999999")
        self.assertNotEqual(code, 0)


TYPICAL = {
    "date": r"\d{4}-\d{2}-\d{2}",
    "uuid": r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    "email": r"[a-z0-9._]{1,20}@[a-z]{2,12}\.(com|org|net|io)",
    "phone": r"\(\d{3}\) \d{3}-\d{4}",
    "e164": r"\+[1-9]\d{7,13}",
    "enum": r"(low|medium|high|critical)",
    "time": r"([01]\d|2[0-3]):[0-5]\d",
}


class Generate(unittest.TestCase):
    def gen(self, regex, *extra):
        code, out, err = run("generate", "--regex", regex, "--json", *extra)
        self.assertEqual(code, 0, err)
        return [json.loads(line) for line in out.splitlines()]

    def test_same_seed_same_bytes(self):
        args = ("--regex", TYPICAL["email"], "-n", "5", "--seed", "11", "--json")
        a = run("generate", *args)
        b = run("generate", *args)
        self.assertEqual(a[0], 0, a[2])
        self.assertEqual(a[1], b[1])
        c = run("generate", "--regex", TYPICAL["email"], "-n", "5", "--seed", "12", "--json")
        self.assertNotEqual(a[1], c[1], "a different seed should give different samples")

    def test_typical_patterns_end_with_eos_and_match(self):
        for name, regex in TYPICAL.items():
            with self.subTest(pattern=name):
                rows = self.gen(regex, "-n", "20", "--model", "ngram", "--seed", "1")
                self.assertEqual(len(rows), 20)
                for r in rows:
                    self.assertEqual(r["finish"], "eos", r)
                    self.assertTrue(re.fullmatch(regex, r["text"]), r)
                    self.assertTrue(r["match"])
                    self.assertTrue(all(isinstance(t, int) for t in r["tokens"]))

    def test_sampler_flags_and_uniform_source(self):
        rows = self.gen(TYPICAL["date"], "-n", "3", "--model", "uniform", "--temperature", "0.7",
                        "--top-k", "40", "--top-p", "0.9", "--max-tokens", "64")
        for r in rows:
            self.assertTrue(re.fullmatch(TYPICAL["date"], r["text"]), r)
        greedy = self.gen(TYPICAL["enum"], "-n", "3", "--temperature", "0")
        self.assertEqual(len({r["text"] for r in greedy}), 1, "T=0 is deterministic argmax")

    def test_length_finish(self):
        rows = self.gen(r"[a-z]{50,60}", "--max-tokens", "2", "--model", "uniform")
        self.assertEqual(rows[0]["finish"], "length")
        self.assertFalse(rows[0]["match"])
        self.assertEqual(len(rows[0]["tokens"]), 2)

    def test_padded_logits_width_never_samples_padding(self):
        rows = self.gen(r"[a-z ]{5,40}", "--logits-width", "128512", "--model", "uniform", "-n", "5")
        for r in rows:
            self.assertTrue(all(t < 128256 for t in r["tokens"]), r)
        code, _, err = run("generate", "--regex", "a", "--logits-width", "1000")
        self.assertEqual(code, 2)
        self.assertIn("logits_width", err)

    def test_other_vocabularies(self):
        for tok in ("gpt2", "qwen2.5", "mistral"):
            with self.subTest(tokenizer=tok):
                rows = self.gen(TYPICAL["date"], "--tokenizer", tok, "-n", "2", "--model", "uniform")
                for r in rows:
                    self.assertTrue(re.fullmatch(TYPICAL["date"], r["text"]), r)


GRAMMARS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas", "grammars")


class Grammars(unittest.TestCase):
    def test_compile_reports_the_automata(self):
        code, out, err = run("compile", "--grammar", os.path.join(GRAMMARS, "json.gbnf"), "--json")
        self.assertEqual(code, 0, err)
        j = json.loads(out)
        self.assertEqual(j["tokenizer"], "llama3")
        self.assertGreater(j["dfa_states"], 10)
        # At the start of a JSON text: values and whitespace only, never a letter-only token.
        self.assertGreater(j["first_mask_allowed"], 100)
        self.assertLess(j["first_mask_allowed"], 20000)

    def test_generate_json_parses_with_python(self):
        code, out, err = run("generate", "--grammar", os.path.join(GRAMMARS, "json.gbnf"),
                             "-n", "5", "--seed", "3", "--json", "--max-tokens", "400")
        self.assertEqual(code, 0, err)
        rows = [json.loads(l) for l in out.splitlines()]
        self.assertEqual(len(rows), 5)
        for r in rows:
            if r["finish"] == "eos":
                self.assertTrue(r["match"], r)
                json.loads(r["text"])  # an independent JSON parser accepts it

    def test_generate_arithmetic_is_well_formed(self):
        code, out, err = run("generate", "--grammar", os.path.join(GRAMMARS, "arithmetic.gbnf"),
                             "-n", "3", "--json", "--model", "uniform", "--max-tokens", "40")
        self.assertEqual(code, 0, err)
        for r in map(json.loads, out.splitlines()):
            self.assertTrue(re.fullmatch(r"[-0-9.+*/() ]+", r["text"]), r)

    def test_lark_syntax(self):
        path = os.path.join(self.tmp, "yes.lark")
        with open(path, "w") as f:
            f.write('start: "yes" | "no" | "maybe " NUM\nNUM: /[0-9]{1,3}/\n')
        code, out, err = run("generate", "--grammar", path, "-n", "4", "--json", "--model", "uniform")
        self.assertEqual(code, 0, err)
        for r in map(json.loads, out.splitlines()):
            if r["finish"] == "eos":
                self.assertTrue(re.fullmatch(r"yes|no|maybe [0-9]{1,3}", r["text"]), r)

    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp()

    def test_grammar_errors_name_file_line_column(self):
        path = os.path.join(self.tmp, "bad.gbnf")
        with open(path, "w") as f:
            f.write('root ::= "a" item\nitem ::= "b" | undefined-rule\n')
        code, _, err = run("compile", "--grammar", path)
        self.assertEqual(code, 2, err)
        self.assertIn(path + ":2:", err)
        self.assertIn("undefined-rule", err)
        code, _, err = run("generate", "--grammar", os.path.join(self.tmp, "missing.gbnf"))
        self.assertEqual(code, 2, err)
        self.assertIn("missing.gbnf", err)
        code, _, err = run("generate", "--grammar", path, "--regex", "a")
        self.assertEqual(code, 2, err)

    def test_unused_rules_are_warnings_with_file_line_column(self):
        path = os.path.join(self.tmp, "spare.gbnf")
        with open(path, "w") as f:
            f.write('root ::= "yes" | "no"\n\nspare ::= "maybe"\n')
        expected = path + ":3:1: rule 'spare' is never used (unreachable from 'root')"
        code, out, err = run("compile", "--grammar", path, "--json")
        self.assertEqual(code, 0, err)
        self.assertIn("lockstep: warning: " + expected, err)
        self.assertEqual(json.loads(out)["warnings"], [expected])
        code, out, err = run("generate", "--grammar", path, "-n", "3", "--json", "--seed", "1")
        self.assertEqual(code, 0, err)
        self.assertIn("lockstep: warning: " + expected, err)
        texts = [json.loads(line)["text"] for line in out.splitlines()]
        self.assertEqual(len(texts), 3)
        for t in texts:
            self.assertIn(t, ("yes", "no"))


class Errors(unittest.TestCase):
    def assert_clean_error(self, args, *needles):
        code, out, err = run(*args)
        self.assertEqual(code, 2, f"{args}: exit {code}, stderr {err!r}")
        first = err.splitlines()[0] if err else ""
        self.assertTrue(first.startswith("lockstep: "), err)
        for n in needles:
            self.assertIn(n, err)

    def test_bad_regexes_name_the_offset(self):
        self.assert_clean_error(["compile", "--regex", "ab(c"], "invalid regex", "offset")
        self.assert_clean_error(["generate", "--regex", "a(?=b)"], "invalid regex", "offset")
        self.assert_clean_error(["compile", "--regex", r"(.)\1"], "invalid regex", "offset")
        self.assert_clean_error(["compile", "--regex", "[z-a]"], "offset")

    def test_resource_limit(self):
        self.assert_clean_error(["compile", "--regex", "(a|b)*a(a|b){14}", "--max-states", "1000"],
                                "resource limit")

    def test_bad_flags_and_files(self):
        self.assert_clean_error(["generate", "--regex", "a", "--temperature", "hot"], "--temperature")
        self.assert_clean_error(["generate", "--regex", "a", "--bogus"], "--bogus")
        self.assert_clean_error(["generate", "--regex", "a", "--model", "gpt5"], "--model")
        self.assert_clean_error(["tokenize", "--tokenizer", "/nonexistent/tokenizer.json", "x"],
                                "/nonexistent/tokenizer.json")
        self.assert_clean_error(["frobnicate"], "frobnicate")

    def test_help_everywhere(self):
        for cmd in ([], ["tokenize"], ["detokenize"], ["compile"], ["generate"], ["train-ngram"]):
            code, out, err = run(*cmd, "--help")
            self.assertEqual(code, 0, (cmd, err))
            self.assertIn("usage", out)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main(verbosity=2)
