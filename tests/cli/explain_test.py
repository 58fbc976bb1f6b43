#!/usr/bin/env python3
"""End-to-end checks of `lockstep explain` on given logits: the per-stage JSON against the
golden figures of the Sampler issue (computed by hand, see sampler_golden_test.cc), the terminal
bars, seeded draws, sampler-flag errors, and a short explained generation under a regex.

usage: explain_test.py PATH/TO/lockstep"""
import json
import subprocess
import sys
import unittest

LOCKSTEP = None
LOGITS = "6,5,4.5,3.5,2,0"
LABELS = "mat,sofa,floor,bed,moon,banana"


def run(*args):
    p = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


def stages(*flags):
    code, out, err = run("explain", "--logits", LOGITS, "--labels", LABELS, "--json", *flags)
    assert code == 0, err
    doc = json.loads(out)
    return doc, {s["name"]: s for s in doc["stages"]}


class ExplainJson(unittest.TestCase):
    def assertProbs(self, got, want, tol=1.5e-3):
        self.assertEqual(len(got), 6)
        for g, w in zip(got, want + [0.0] * (6 - len(want))):
            self.assertAlmostEqual(g, w, delta=tol, msg=f"{got} vs {want}")

    def test_stage_names_in_order(self):
        doc, _ = stages()
        self.assertEqual([s["name"] for s in doc["stages"]],
                         ["logits", "logit_bias", "repetition", "frequency_presence", "mask",
                          "temperature", "top_k", "top_p", "min_p", "final"])
        self.assertEqual(doc["labels"], LABELS.split(","))

    def test_softmax_at_t1(self):
        _, s = stages()
        self.assertProbs(s["final"]["probs"], [.590, .217, .132, .048, .011, .001])

    def test_top_k_3(self):
        _, s = stages("--top-k", "3")
        self.assertProbs(s["top_k"]["probs"], [.628, .231, .141])
        self.assertTrue(s["top_k"]["enabled"])
        self.assertFalse(s["top_p"]["enabled"])

    def test_top_p_09_keeps_3(self):
        _, s = stages("--top-p", "0.9")
        kept = [p for p in s["top_p"]["probs"] if p > 0]
        self.assertEqual(len(kept), 3)
        self.assertAlmostEqual(s["top_p"]["kept_mass"], .590 + .217 + .132, delta=2e-3)
        self.assertAlmostEqual(s["top_p"]["cutoff"], .132, delta=1e-3)

    def test_min_p_01_keeps_3(self):
        _, s = stages("--min-p", "0.1")
        kept = [p for p in s["min_p"]["probs"] if p > 0]
        self.assertEqual(len(kept), 3)  # cut at 0.1 * .590 = .059

    def test_repetition_on_mat(self):
        _, s = stages("--repetition-penalty", "1.25", "--history", "mat")
        self.assertProbs(s["repetition"]["probs"][:3] + [0, 0, 0], [.303, .370, .224], tol=1e-3)

    def test_logit_bias_by_label_and_id(self):
        _, a = stages("--logit-bias", "banana:6")
        _, b = stages("--logit-bias", "5:3", "--logit-bias", "5:3")
        self.assertAlmostEqual(a["logit_bias"]["probs"][5], b["logit_bias"]["probs"][5], places=6)
        self.assertAlmostEqual(a["logit_bias"]["probs"][5], a["logit_bias"]["probs"][0], places=6)

    def test_samples_follow_the_final_distribution(self):
        doc, s = stages("--top-k", "3", "--samples", "20000", "--seed", "7")
        counts = doc["samples"]["counts"]
        self.assertEqual(sum(counts), 20000)
        self.assertEqual(counts[3:], [0, 0, 0])
        for c, p in zip(counts, s["final"]["probs"]):
            self.assertAlmostEqual(c / 20000, p, delta=0.015)
        doc2, _ = stages("--top-k", "3", "--samples", "20000", "--seed", "7")
        self.assertEqual(doc2["samples"]["counts"], counts)  # seeded: reproducible

    def test_preset(self):
        _, s = stages("--preset", "code")
        self.assertTrue(s["temperature"]["enabled"])
        self.assertAlmostEqual(s["temperature"]["probs"][0], 1.0, delta=0.01)  # T 0.2


class ExplainTerminal(unittest.TestCase):
    def test_bars(self):
        code, out, err = run("explain", "--logits", LOGITS, "--labels", LABELS, "--top-p", "0.9")
        self.assertEqual(code, 0, err)
        self.assertIn("top_p  cut-off 0.132", out)
        self.assertIn("█", out)
        self.assertIn("mat", out)

    def test_errors(self):
        for args, where in [(["--labels", "a,b"], "--labels"), (["--top-p", "2"], "--top-p"),
                            (["--logit-bias", "x"], "--logit-bias"),
                            (["--history", "cat"], "--history"),
                            (["--preset", "nope"], "--preset")]:
            code, _, err = run("explain", "--logits", LOGITS, *args)
            self.assertEqual(code, 2, args)
            self.assertIn(where, err)


class ExplainGeneration(unittest.TestCase):
    def test_regex_steps(self):
        code, out, err = run("explain", "--regex", "(low|medium|high)", "--json", "--seed", "1",
                             "--max-tokens", "4")
        self.assertEqual(code, 0, err)
        steps = [json.loads(line) for line in out.splitlines()]
        self.assertGreaterEqual(len(steps), 2)
        for st in steps:
            self.assertLessEqual(len(st["after_mask"]), 16)
            self.assertGreater(st["p"], 0)
            # Every token listed after the mask is allowed, and they sum to at most 1.
            self.assertLessEqual(sum(a["p"] for a in st["after_mask"]), 1 + 1e-6)
        self.assertIn(steps[0]["text"], ["low", "medium", "high", "l", "m", "h", "lo", "me", "hi"])

    def test_grammar_with_guidance_and_contrastive(self):
        import os
        grammar = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas",
                               "grammars", "arithmetic.gbnf")
        base = ["explain", "--grammar", grammar, "--json", "--seed", "4", "--max-tokens", "3",
                "--model", "uniform"]
        code, plain, err = run(*base)
        self.assertEqual(code, 0, err)
        # Guidance with gamma 1 is the plain distribution, exactly.
        code, guided, err = run(*base, "--guidance", "1", "--negative-prompt", "nothing")
        self.assertEqual(code, 0, err)
        self.assertEqual(plain, guided)
        # A real guidance weight changes the distribution, never the grammar.
        code, out, err = run(*base, "--guidance", "3", "--negative-prompt", "nothing")
        self.assertEqual(code, 0, err)
        for st in map(json.loads, out.splitlines()):
            self.assertRegex(st["text"], r"^[-0-9.+*/() ]+$")
        code, out, err = run(*base, "--contrastive-weak", "uniform", "--alpha", "0", "--beta", "0")
        self.assertEqual(code, 0, err)
        self.assertEqual(plain, out)
        code, _, err = run(*base, "--beam", "2")
        self.assertEqual(code, 2, err)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
