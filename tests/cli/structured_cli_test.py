#!/usr/bin/env python3
"""End-to-end checks of `lockstep generate --tools FILE --format F`: every sample that ends with
EOS reports its calls, each naming a tool of the file with arguments that `lockstep validate`
accepts under that tool's schema; clear errors for an unknown format, a bad tools file and a
format whose special tokens the vocabulary lacks.

usage: structured_cli_test.py PATH/TO/lockstep"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None
HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS_DIR = os.path.join(HERE, "..", "..", "schemas", "tools")


def run(*args, stdin=None):
    p = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=600, input=stdin)
    return p.returncode, p.stdout, p.stderr


def tools():
    out = []
    for name in ("get_weather", "book_flight"):
        with open(os.path.join(TOOLS_DIR, name + ".json")) as f:
            out.append({"type": "function",
                        "function": {"name": name,
                                     "parameters": json.load(f)["properties"]["arguments"]}})
    return out


class StructuredCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        cls.tools = os.path.join(cls.dir, "tools.json")
        with open(cls.tools, "w") as f:
            json.dump(tools(), f)
        for t in tools():
            with open(os.path.join(cls.dir, t["function"]["name"] + ".schema.json"), "w") as f:
                json.dump(t["function"]["parameters"], f)

    def test_calls_validate(self):
        # Biases on the trigger, the end marker and EOS (ids of the family's vocabulary) stand
        # in for a chat model; they act only where the mask allows those tokens.
        for fmt, tok, bias in (("qwen", "qwen2.5", "151657:30,151658:30,151645:30,1:8,92:8"),
                               ("llama3", "llama3", "128010:30,128008:30,128009:30,1:8,92:8"),
                               ("mistral", "mistral", ""), ("think-json", "qwen2.5", ""),
                               ("llama3-function", "llama3", "")):
            with self.subTest(format=fmt):
                extra = ["--logit-bias", bias] if bias else []
                code, out, err = run("generate", "--tools", self.tools, "--format", fmt,
                                     "--tokenizer", tok, "--model", "uniform", "-n", "3",
                                     "--max-tokens", "400", "--json", "--seed", "5", *extra)
                self.assertEqual(code, 0, err)
                calls = sum(len(json.loads(l).get("calls", [])) for l in out.splitlines())
                if bias:
                    self.assertGreater(calls, 0, out)
                for line in out.splitlines():
                    r = json.loads(line)
                    if r["finish"] != "eos":
                        continue
                    self.assertIn("calls", r, r)
                    for call in r["calls"]:
                        schema = os.path.join(self.dir, call["name"] + ".schema.json")
                        self.assertTrue(os.path.exists(schema), call)
                        c, o, e = run("validate", "--schema", schema, "-",
                                      stdin=json.dumps(call["arguments"]))
                        self.assertEqual(c, 0, o + e)

    def test_per_tool_trigger_names_the_tool(self):
        # A per-tool-trigger format allowing only get_weather: every call is get_weather's.
        fmt = os.path.join(self.dir, "weather-only.json")
        with open(fmt, "w") as f:
            json.dump({"name": "weather-only", "trigger": {"text_template": "<function={name}>"},
                       "end": {"text": "</function>"}, "min_calls": 1, "max_calls": 2,
                       "free_text": {"max_bytes": 40}, "tools": ["get_weather"]}, f)
        code, out, err = run("generate", "--tools", self.tools, "--format", fmt,
                             "--tokenizer", "llama3", "--model", "uniform", "-n", "2",
                             "--max-tokens", "300", "--json", "--seed", "3",
                             "--logit-bias", "27:10,128009:20")
        self.assertEqual(code, 0, err)
        for line in out.splitlines():
            r = json.loads(line)
            if r["finish"] != "eos":
                continue
            self.assertIn("calls", r, r)
            self.assertGreater(len(r["calls"]), 0, r)
            for call in r["calls"]:
                self.assertEqual(call["name"], "get_weather", r)
        with open(fmt, "w") as f:
            json.dump({"name": "bad", "trigger": {"text_template": "<function={name}>"},
                       "end": {"text": "</function>"}, "tools": ["get_time"]}, f)
        code, _, err = run("generate", "--tools", self.tools, "--format", fmt,
                           "--tokenizer", "llama3")
        self.assertNotEqual(code, 0)
        self.assertIn("unknown tool name 'get_time'", err)
        self.assertIn("#/tools/0", err)

    def test_errors(self):
        code, _, err = run("generate", "--tools", self.tools, "--format", "chatml")
        self.assertNotEqual(code, 0)
        self.assertIn("known: qwen", err)
        bad = os.path.join(self.dir, "bad.json")
        with open(bad, "w") as f:
            json.dump([{"name": "a"}, {"name": "a"}], f)
        code, _, err = run("generate", "--tools", bad, "--format", "qwen", "--tokenizer", "qwen2.5")
        self.assertNotEqual(code, 0)
        self.assertIn("duplicate tool name", err)
        self.assertIn("/1/name", err)
        code, _, err = run("generate", "--tools", self.tools, "--format", "llama3",
                           "--tokenizer", "mistral")
        self.assertNotEqual(code, 0)
        self.assertIn("<|python_tag|>", err)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
