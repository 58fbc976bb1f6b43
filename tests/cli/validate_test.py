#!/usr/bin/env python3
"""End-to-end checks of `lockstep validate`: exit codes (0 all valid, 1 some invalid, 2 unusable
schema or usage), single documents, NDJSON files and stdin, --json output with instance and
schema JSON Pointers, draft-07 schemas, --draft (draft-04 integers and exclusive bounds) and
unsupported patterns.

usage: validate_test.py PATH/TO/lockstep"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
    },
    "required": ["name"],
    "unevaluatedProperties": False,
}


def run(*args, stdin=None):
    p = subprocess.run([LOCKSTEP, "validate", *args], input=stdin, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


class Validate(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.schema = self.write("schema.json", json.dumps(SCHEMA))

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_all_valid_exits_0(self):
        doc = self.write("ok.json", json.dumps({"name": "a", "tags": ["x", "y"]}, indent=2))
        code, out, err = run("--schema", self.schema, doc)
        self.assertEqual(code, 0, err)
        self.assertIn("valid", out)

    def test_invalid_exits_1_with_pointers(self):
        doc = self.write("bad.json", json.dumps({"name": "", "tags": ["x", 3]}))
        code, out, _ = run("--schema", self.schema, "--json", doc)
        self.assertEqual(code, 1)
        r = json.loads(out)
        self.assertFalse(r["valid"])
        pairs = {(e["instance"], e["schema"]) for e in r["errors"]}
        self.assertIn(("/name", "/properties/name/minLength"), pairs)
        self.assertIn(("/tags/1", "/properties/tags/items/type"), pairs)

    def test_ndjson_file_and_stdin(self):
        lines = [{"name": "a"}, {"name": "b", "extra": 1}, {"name": "c"}]
        text = "\n".join(json.dumps(l) for l in lines) + "\n"
        path = self.write("many.ndjson", text)
        for args, stdin in (([path], None), (["-"], text), ([], text)):
            with self.subTest(args=args):
                code, out, err = run("--schema", self.schema, "--json", *args, stdin=stdin)
                self.assertEqual(code, 1, err)
                rows = [json.loads(l) for l in out.splitlines()]
                self.assertEqual([r["valid"] for r in rows], [True, False, True])
                self.assertEqual([r["line"] for r in rows], [1, 2, 3])
                self.assertEqual(rows[1]["errors"][0]["instance"], "/extra")
                self.assertEqual(rows[1]["errors"][0]["schema"], "/unevaluatedProperties")

    def test_ndjson_all_valid_exits_0(self):
        code, _, err = run("--schema", self.schema, "-", stdin='{"name":"a"}\n\n{"name":"b"}\n')
        self.assertEqual(code, 0, err)

    def test_not_json_instance_is_invalid(self):
        code, out, _ = run("--schema", self.schema, "--json", "-", stdin='{"name": "a"}\n{oops\n')
        self.assertEqual(code, 1)
        rows = [json.loads(l) for l in out.splitlines()]
        self.assertEqual([r["valid"] for r in rows], [True, False])
        self.assertIn("not valid JSON", rows[1]["errors"][0]["message"])

    def test_unusable_schema_exits_2(self):
        bad_ref = self.write("ref.json", json.dumps({"properties": {"a": {"$ref": "http://x.test/s.json"}}}))
        code, _, err = run("--schema", bad_ref, "-", stdin="{}")
        self.assertEqual(code, 2)
        self.assertIn("/properties/a/$ref", err)
        not_json = self.write("broken.json", '{\n  "type": "object",\n  "x": tru\n}')
        code, _, err = run("--schema", not_json, "-", stdin="{}")
        self.assertEqual(code, 2)
        # Where the file stops being JSON: line 3.
        self.assertRegex(err, r"broken\.json: .*3:\d+.*not valid JSON")
        lookahead = self.write("look.json", json.dumps({"pattern": "a(?=b)"}))
        code, _, err = run("--schema", lookahead, "-", stdin='"a"')
        self.assertEqual(code, 2)
        self.assertIn("/pattern", err)

    def test_usage_errors_exit_2(self):
        self.assertEqual(run("-", stdin="{}")[0], 2)  # no --schema
        self.assertEqual(run("--schema", os.path.join(self.dir.name, "missing.json"))[0], 2)
        self.assertEqual(run("--schema", self.schema, "--bogus")[0], 2)
        self.assertEqual(run("--schema", self.schema, os.path.join(self.dir.name, "nope.json"))[0], 2)
        code, out, _ = run("--help")
        self.assertEqual(code, 0)
        self.assertIn("usage: lockstep validate", out)

    def test_draft7_and_formats(self):
        d7 = self.write("d7.json", json.dumps({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "items": [{"type": "integer"}], "additionalItems": False,
            "properties": {"when": {"format": "date"}}}))
        self.assertEqual(run("--schema", d7, "-", stdin="[1]")[0], 0)
        self.assertEqual(run("--schema", d7, "-", stdin="[1, 2]")[0], 1)
        self.assertEqual(run("--schema", d7, "-", stdin='{"when": "2024-02-30"}')[0], 0)
        self.assertEqual(run("--schema", d7, "--formats", "-", stdin='{"when": "2024-02-30"}')[0], 1)

    def test_draft_flag(self):
        # Draft-04: 12345.0 is not an integer; from draft-06 on it is. A known $schema wins.
        s = self.write("int.json", json.dumps({"type": "integer"}))
        self.assertEqual(run("--schema", s, "-", stdin="12345.0")[0], 0)
        for d4 in ("4", "draft-04", "draft4", "http://json-schema.org/draft-04/schema#"):
            code, out, err = run("--schema", s, "--draft", d4, "-", stdin="12345.0")
            self.assertEqual(code, 1, d4 + ": " + out + err)
        for other in ("6", "draft-07", "2019-09", "2020-12"):
            self.assertEqual(run("--schema", s, "--draft", other, "-", stdin="12345.0")[0], 0, other)
        named = self.write("named.json", json.dumps(
            {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"}))
        self.assertEqual(run("--schema", named, "--draft", "2020-12", "-", stdin="1.0")[0], 1)
        # Draft-04's boolean exclusiveMaximum; 2019-09's $recursiveRef.
        ex = self.write("ex.json", json.dumps({"maximum": 5, "exclusiveMaximum": True}))
        self.assertEqual(run("--schema", ex, "--draft", "4", "-", stdin="5")[0], 1)
        self.assertEqual(run("--schema", ex, "--draft", "4", "-", stdin="4.5")[0], 0)
        self.assertEqual(run("--schema", ex, "-", stdin="4")[0], 2)  # not a 2020-12 schema
        # An unknown draft is a usage error naming the flag.
        code, _, err = run("--schema", s, "--draft", "5", "-", stdin="1")
        self.assertEqual(code, 2)
        self.assertIn("--draft 5", err)
        self.assertIn("unknown JSON Schema draft", err)
        self.assertIn("--draft D", run("--help")[1])

    def test_remote_directory(self):
        remote_dir = os.path.join(self.dir.name, "remote")
        os.mkdir(remote_dir)
        self.write("remote/int.json", json.dumps({"type": "integer"}))
        s = self.write("r.json", json.dumps({"$ref": "http://example.test/int.json"}))
        self.assertEqual(run("--schema", s, "--remote", "http://example.test/=" + remote_dir,
                             "-", stdin="3")[0], 0)
        self.assertEqual(run("--schema", s, "--remote", "http://example.test/=" + remote_dir,
                             "-", stdin="3.5")[0], 1)
        # The base URI without its trailing '/' serves the same files.
        s2 = self.write("r2.json", json.dumps({"$ref": "http://example.test/v1/int.json"}))
        self.assertEqual(run("--schema", s2, "--remote", "http://example.test/v1=" + remote_dir,
                             "-", stdin="3")[0], 0)
        self.assertEqual(run("--schema", s2, "--remote", "http://example.test/v1=" + remote_dir,
                             "-", stdin="3.5")[0], 1)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
