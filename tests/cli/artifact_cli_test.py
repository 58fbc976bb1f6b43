#!/usr/bin/env python3
"""End-to-end checks of compiled artifacts in the CLI: `compile ... -o FILE.lsg` (precomputed and
--lazy), `generate --artifact` giving exactly the outputs of `generate --schema/--regex` for the
same seed (and outputs that `lockstep validate` accepts), the errors for a foreign, truncated,
corrupted or other-vocabulary file (exit 2, the file and the byte named), and
`compile --batch DIR -o OUTDIR` (one artifact per input, failures listed with their reason).

usage: artifact_cli_test.py PATH/TO/lockstep"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "schemas")

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 16},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}


def run(*args, timeout=600, stdin=None):
    p = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=timeout,
                       input=stdin)
    return p.returncode, p.stdout, p.stderr


class ArtifactCli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.schema = self.path("weather.json")
        with open(self.schema, "w") as f:
            json.dump(SCHEMA, f)

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def generate(self, *constraint):
        code, out, err = run("generate", *constraint, "--seed", "5", "-n", "4", "--json",
                             "--max-tokens", "96")
        self.assertEqual(code, 0, err)
        return [json.loads(line) for line in out.splitlines()]

    def test_schema_artifact_generates_what_the_schema_does(self):
        for lazy in ([], ["--lazy"]):
            art = self.path("w%s.lsg" % len(lazy))
            code, out, err = run("compile", "--schema", self.schema, "-o", art, "--json", *lazy)
            self.assertEqual(code, 0, err)
            info = json.loads(out)
            self.assertEqual(info["bytes"], os.path.getsize(art))
            self.assertEqual(info["precomputed"], not lazy)
            if not lazy:
                self.assertGreater(info["positions"], 10)
            with open(art, "rb") as f:
                self.assertEqual(f.read(4), b"\x89LSG")
            fresh = self.generate("--schema", self.schema)
            loaded = self.generate("--artifact", art)
            self.assertEqual(fresh, loaded)
            texts = "\n".join(r["text"] for r in loaded if r["finish"] == "eos") + "\n"
            self.assertTrue(texts.strip())
            code, out, err = run("validate", "--schema", self.schema, "--ndjson", "-", stdin=texts)
            self.assertEqual(code, 0, out + err)

    def test_regex_and_grammar_artifacts(self):
        art = self.path("date.lsg")
        code, _, err = run("compile", "--regex", r"\d{4}-\d{2}-\d{2}", "-o", art)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.generate("--regex", r"\d{4}-\d{2}-\d{2}"),
                         self.generate("--artifact", art))
        gbnf = os.path.join(SOURCE, "grammars", "tool_calls.gbnf")
        art = self.path("tools.lsg")
        code, _, err = run("compile", "--grammar", gbnf, "-o", art)
        self.assertEqual(code, 0, err)
        self.assertEqual(self.generate("--grammar", gbnf), self.generate("--artifact", art))

    def test_bad_artifacts_are_clear_errors(self):
        art = self.path("w.lsg")
        self.assertEqual(run("compile", "--schema", self.schema, "-o", art)[0], 0)
        with open(art, "rb") as f:
            good = f.read()
        cases = {
            "foreign.lsg": (json.dumps(SCHEMA).encode(), "not a lockstep artifact"),
            "trunc.lsg": (good[: len(good) // 2], "truncated"),
            "flip.lsg": (good[:200] + bytes([good[200] ^ 1]) + good[201:], "checksum"),
        }
        for name, (data, needle) in cases.items():
            p = self.path(name)
            with open(p, "wb") as f:
                f.write(data)
            code, out, err = run("generate", "--artifact", p)
            self.assertEqual(code, 2, name + ": " + err)
            self.assertIn("invalid artifact", err, name)
            self.assertIn(p, err, name)
            self.assertIn("byte ", err, name)
            self.assertIn(needle, err, name)
            self.assertEqual(out, "", name)
        code, _, err = run("generate", "--artifact", art, "--tokenizer", "gpt2")
        self.assertEqual(code, 2, err)
        self.assertIn("another vocabulary", err)
        code, _, err = run("generate", "--artifact", self.path("missing.lsg"))
        self.assertEqual(code, 2, err)
        self.assertIn("missing.lsg", err)
        code, _, err = run("generate", "--artifact", art, "--schema", self.schema)
        self.assertEqual(code, 2, err)
        self.assertIn("not several", err)

    def test_batch(self):
        src = self.path("in")
        os.makedirs(src)
        with open(os.path.join(src, "a_weather.json"), "w") as f:
            json.dump(SCHEMA, f)
        with open(os.path.join(src, "b_maskbench.json"), "w") as f:
            json.dump({"schema": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
                       "tests": [{"valid": True, "data": [1]}]}, f)
        with open(os.path.join(src, "c_bad.json"), "w") as f:
            json.dump({"type": "object", "properties": {"t": {"type": "array", "items": {
                "type": "number", "maximum": 10}, "uniqueItems": True}}}, f)
        with open(os.path.join(src, "d_calls.gbnf"), "w") as f:
            with open(os.path.join(SOURCE, "grammars", "tool_calls.gbnf")) as g:
                f.write(g.read())
        with open(os.path.join(src, "notes.txt"), "w") as f:
            f.write("ignored")
        out_dir = self.path("out")
        code, out, err = run("compile", "--batch", src, "-o", out_dir, "--json")
        self.assertEqual(code, 1, err)  # one input failed
        summary = json.loads(out)
        self.assertEqual(summary["inputs"], 4)
        self.assertEqual(summary["compiled"], 3)
        self.assertEqual(summary["failed"], 1)
        self.assertEqual(summary["failures"][0]["file"], "c_bad.json")
        self.assertIn("uniqueItems", summary["failures"][0]["error"])
        self.assertEqual(sorted(os.listdir(out_dir)),
                         ["a_weather.lsg", "b_maskbench.lsg", "d_calls.lsg"])
        self.assertLessEqual(summary["compile_ms"]["p50"], summary["compile_ms"]["max"])
        # The text summary names the failure too.
        code, out, err = run("compile", "--batch", src, "-o", self.path("out2"), "--lazy")
        self.assertEqual(code, 1, err)
        self.assertIn("c_bad.json", out)
        self.assertIn("p99", out)
        # A batch artifact is usable.
        code, out, err = run("generate", "--artifact", os.path.join(out_dir, "b_maskbench.lsg"),
                             "--json", "--seed", "1")
        self.assertEqual(code, 0, err)
        value = json.loads(json.loads(out)["text"])
        self.assertTrue(isinstance(value, list) and len(value) <= 3)
        self.assertTrue(all(isinstance(x, int) for x in value))
        code, _, err = run("compile", "--batch", self.path("nope"), "-o", out_dir)
        self.assertEqual(code, 2, err)
        self.assertIn("nope", err)
        code, _, err = run("compile", "--batch", src)
        self.assertEqual(code, 2, err)
        self.assertIn("-o", err)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main(verbosity=2)
