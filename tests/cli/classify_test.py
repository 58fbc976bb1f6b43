#!/usr/bin/env python3
"""End-to-end checks of `lockstep classify` and of the decoding flags of `lockstep generate`
(--beam, --draft, --guidance, --contrastive-weak): label distributions that sum to 1 (or report
the mass left under the floor / by the budget), agree with sampled frequencies (chi-square),
batch soft labels, identity settings of the combinators, and clear errors.

usage: classify_test.py PATH/TO/lockstep"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None
CHOICES = ["positive", "negative", "neutral"]


def run(*args):
    p = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def total(r):
    return sum(l["probability"] for l in r["labels"]) + r["floor_mass"] + r["budget_mass"] + r["other_mass"]


class Classify(unittest.TestCase):
    def classify_json(self, *args):
        code, out, err = run("classify", "--json", *args)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def test_choices_sum_to_one(self):
        for model in ("uniform", "ngram"):
            with self.subTest(model=model):
                r = self.classify_json("--choices", ",".join(CHOICES), "--model", model,
                                       "--prompt", "The review was great. Sentiment:", "--floor", "0")
                self.assertEqual([l["label"] for l in r["labels"]], CHOICES)
                self.assertAlmostEqual(sum(l["probability"] for l in r["labels"]), 1.0, delta=1e-6)
                self.assertTrue(all(l["tokenizations"] >= 1 for l in r["labels"]))

    def test_text_output_has_every_label_and_a_bar(self):
        code, out, err = run("classify", "--choices", ",".join(CHOICES), "--model", "uniform")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        for c in CHOICES:
            self.assertTrue(any(l.startswith(c) and "\u2588" in l for l in lines), out)
        probs = [float(l.split()[1]) for l in lines if l.split() and l.split()[0] in CHOICES]
        self.assertAlmostEqual(sum(probs), 1.0, delta=1e-4)

    def test_floor_and_budget_mass_are_reported(self):
        r = self.classify_json("--regex", "[ab]{1,4}", "--model", "uniform", "--floor", "0.01")
        self.assertGreater(r["floor_mass"], 0)
        self.assertAlmostEqual(total(r), 1.0, delta=1e-6)
        r = self.classify_json("--regex", "a+", "--model", "uniform", "--max-nodes", "40")
        self.assertGreater(r["budget_mass"], 0)
        self.assertEqual(r["nodes"], 40)
        self.assertAlmostEqual(total(r), 1.0, delta=1e-6)

    def test_matches_sampled_frequencies(self):
        # The same seed gives the same uniform model; generate draws sequence 0..n-1 from it.
        regex = "(yes|no|maybe|unsure)"
        r = self.classify_json("--regex", regex, "--model", "uniform", "--seed", "5", "--floor", "0")
        expected = {l["label"]: l["probability"] for l in r["labels"]}
        # 4,000 draws; at a reduced LOCKSTEP_TEST_SCALE (the sanitizer run) 400, still ~100
        # expected per label, enough for the chi-square approximation.
        scale = float(os.environ.get("LOCKSTEP_TEST_SCALE", "1") or 1)
        n = 4000 if scale >= 1 or scale <= 0 else max(400, int(4000 * scale))
        code, out, err = run("generate", "--regex", regex, "--model", "uniform", "--seed", "5",
                             "-n", str(n), "--json")
        self.assertEqual(code, 0, err)
        counts = {}
        for line in out.splitlines():
            t = json.loads(line)["text"]
            counts[t] = counts.get(t, 0) + 1
        self.assertLessEqual(set(counts), set(expected))
        chi2 = sum((counts.get(k, 0) - n * p) ** 2 / (n * p) for k, p in expected.items())
        # Upper 0.1% points of chi-square for 1..3 degrees of freedom.
        critical = {1: 10.83, 2: 13.82, 3: 16.27}[len(expected) - 1]
        print(f"[classify vs generate] chi2 {chi2:.2f} over {n} draws, {len(expected) - 1} dof",
              file=sys.stderr)
        self.assertLess(chi2, critical, (counts, expected))

    def test_batch_writes_soft_labels_per_line(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "in.jsonl")
            with open(path, "w") as f:
                f.write(json.dumps({"id": 1, "prompt": "I loved it. {\"label\": \""}) + "\n\n")
                f.write(json.dumps({"id": 2, "prompt": "Terrible, broke in a day. Label:"}) + "\n")
                f.write(json.dumps({"id": 3, "prompt": ""}) + "\n")
            # (The shipped n-gram model has never seen these labels after any context, so its
            # constrained distribution barely depends on the prompt: use the uniform source.)
            code, out, err = run("classify", "--choices", ",".join(CHOICES), "--batch", path,
                                 "--model", "uniform")
            self.assertEqual(code, 0, err)
            rows = [json.loads(l) for l in out.splitlines()]
            self.assertEqual([r["id"] for r in rows], [1, 2, 3])
            for r in rows:
                self.assertEqual(list(r["distribution"]), CHOICES)
                self.assertAlmostEqual(sum(r["distribution"].values()) + r["unassigned_mass"], 1.0,
                                       delta=1e-6)
            self.assertNotEqual(rows[0]["distribution"], rows[1]["distribution"])
            with open(path, "a") as f:
                f.write('{"prompt": 3}\n')
            code, _, err = run("classify", "--choices", "a,b", "--batch", path)
            self.assertEqual(code, 2)
            self.assertIn("in.jsonl:5", err)

    def test_errors(self):
        for args, where in [(("--choices", "a,b", "--regex", "a"), "exactly one"),
                            (("--choices", "a,,b"), "choice 1"),
                            ((), "exactly one"),
                            (("--choices", "a,b", "--model", "nope"), "--model"),
                            (("--regex", "a(", "--model", "uniform"), "offset"),
                            (("--choices", "a", "--batch", "/nonexistent.jsonl"), "nonexistent")]:
            with self.subTest(args=args):
                code, _, err = run("classify", *args)
                self.assertEqual(code, 2, err)
                self.assertIn(where, err)


REGEX = r'\{"date": "20[0-9]{2}-(0[1-9]|1[0-2])", "ok": (true|false)\}'


class GenerateDecodingFlags(unittest.TestCase):
    def gen(self, *args):
        code, out, err = run("generate", "--regex", REGEX, "--json", *args)
        self.assertEqual(code, 0, err)
        return [json.loads(l) for l in out.splitlines()], err

    def test_beam_is_deterministic_ranked_and_matches(self):
        rows, _ = self.gen("--beam", "3", "-n", "3", "--length-penalty", "0.5")
        self.assertEqual(len(rows), 3)
        for r in rows:
            self.assertTrue(re.fullmatch(REGEX, r["text"]), r)
            self.assertEqual(r["finish"], "eos")
        scores = [r["score"] for r in rows]
        self.assertEqual(scores, sorted(scores, reverse=True))
        again, _ = self.gen("--beam", "3", "-n", "3", "--length-penalty", "0.5", "--seed", "9")
        self.assertEqual(rows, again)

    def test_speculative_reports_acceptance(self):
        for draft in ("ngram2", "uniform"):
            with self.subTest(draft=draft):
                rows, err = self.gen("--draft", draft, "--gamma", "3", "-n", "5", "--seed", "2")
                self.assertEqual(len(rows), 5)
                for r in rows:
                    self.assertTrue(re.fullmatch(REGEX, r["text"]), r)
                    self.assertGreaterEqual(r["acceptance_rate"], 0)
                    self.assertGreaterEqual(r["tokens_per_target_call"], 1)
                self.assertIn("tokens per target call", err)

    def test_identity_combinators_reproduce_plain_sampling(self):
        plain, _ = self.gen("-n", "5", "--seed", "4")
        g1, _ = self.gen("-n", "5", "--seed", "4", "--guidance", "1", "--negative-prompt", "x")
        c0, _ = self.gen("-n", "5", "--seed", "4", "--contrastive-weak", "uniform", "--alpha", "0",
                         "--beta", "0")
        self.assertEqual(plain, g1)
        self.assertEqual(plain, c0)
        g, _ = self.gen("-n", "5", "--seed", "4", "--guidance", "3", "--negative-prompt", "no")
        c, _ = self.gen("-n", "5", "--seed", "4", "--contrastive-weak", "ngram2", "--alpha", "0.5")
        for r in g + c:
            self.assertTrue(re.fullmatch(REGEX, r["text"]), r)

    def test_bad_combinations(self):
        for args, flag in [(("--beam", "2", "--draft", "uniform"), "--draft"),
                           (("--gamma", "2",), "--gamma"),
                           (("--alpha", "2",), "--alpha"),
                           (("--beam", "0",), "--beam"),
                           (("--draft", "nomodel"), "--draft")]:
            with self.subTest(args=args):
                code, _, err = run("generate", "--regex", "a", *args)
                self.assertEqual(code, 2, err)
                self.assertIn(flag, err)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main(verbosity=2)
