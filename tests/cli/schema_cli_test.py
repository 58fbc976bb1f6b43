#!/usr/bin/env python3
"""End-to-end checks of the JSON Schema constraint in the CLI: `compile --schema` (exit 2 with
the keyword's JSON Pointer for what cannot be enforced or past --compile-timeout, --lenient
warnings, --emit-grammar, --stats), `generate --schema` whose every output `lockstep validate --schema` accepts, and the
one-constraint rule.

usage: schema_cli_test.py PATH/TO/lockstep"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 12},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "role": {"enum": ["admin", "user", "guest"]},
        "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "uniqueItems": True,
                 "maxItems": 3},
        "manager": {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}

UNSUPPORTED = {
    "type": "object",
    "properties": {"tags": {"type": "array", "items": {"type": "number", "maximum": 10},
                            "uniqueItems": True}},
}


def run(*args, timeout=600):
    p = subprocess.run([LOCKSTEP, *args], capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


class SchemaCli(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.schema = self.write("schema.json", json.dumps(SCHEMA, indent=2))
        self.unsupported = self.write("unsupported.json", json.dumps(UNSUPPORTED))

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_compile_reports_stats(self):
        code, out, err = run("compile", "--schema", self.schema, "--json")
        self.assertEqual(code, 0, err)
        stats = json.loads(out)
        self.assertEqual(stats["schema"], self.schema)
        self.assertGreater(stats["rules"], 0)
        self.assertGreater(stats["first_mask_allowed"], 0)

    def test_unsupported_keyword_exits_2_with_its_pointer(self):
        code, _, err = run("compile", "--schema", self.unsupported)
        self.assertEqual(code, 2)
        self.assertIn("unsupported", err)
        self.assertIn("#/properties/tags/uniqueItems", err)

    def test_invalid_schema_exits_2_with_its_pointer(self):
        bad = self.write("bad.json", json.dumps({"properties": {"a": {"type": "nope"}}}))
        code, _, err = run("compile", "--schema", bad)
        self.assertEqual(code, 2)
        self.assertIn("#/properties/a/type", err)

    def test_schema_that_is_not_json_exits_2_with_its_line_and_column(self):
        bad = self.write("notjson.json", '{\n  "type": "object",\n  "properties": {,}\n}')
        code, _, err = run("compile", "--schema", bad)
        self.assertEqual(code, 2)
        self.assertRegex(err, re.escape(bad) + r":3:\d+")
        self.assertIn("not valid JSON", err)

    def test_compile_timeout_exits_2_naming_the_deadline(self):
        # A oneOf of twelve object branches that are not provably disjoint: many seconds.
        slow = {"type": "object", "oneOf": [
            {"properties": {"p%d" % j: {"type": "integer", "minimum": i + j} for j in range(3)}}
            for i in range(12)]}
        path = self.write("slow.json", json.dumps(slow))
        code, _, err = run("compile", "--schema", path, "--compile-timeout", "1")
        self.assertEqual(code, 2, err)
        self.assertIn("resource limit at " + path + "#", err)
        self.assertIn("compile deadline of 1 ms passed", err)
        code, _, err = run("compile", "--schema", path, "--compile-timeout", "-1")
        self.assertEqual(code, 2)
        self.assertIn("--compile-timeout", err)

    def test_missing_schema_file_exits_2(self):
        code, _, err = run("compile", "--schema", os.path.join(self.dir.name, "none.json"))
        self.assertEqual(code, 2)
        self.assertIn("none.json", err)

    def test_lenient_warns_and_compiles(self):
        code, _, err = run("compile", "--schema", self.unsupported, "--lenient")
        self.assertEqual(code, 0, err)
        self.assertIn("warning", err)
        self.assertIn("/properties/tags/uniqueItems", err)

    def test_unknown_formats_warn_and_openapi_formats_hold_in_generate_and_validate(self):
        schema = {"type": "object", "additionalProperties": False, "required": ["n", "b", "v"],
                  "properties": {"n": {"type": "integer", "format": "int32"},
                                 "b": {"type": "string", "format": "byte", "maxLength": 16},
                                 "v": {"type": "string", "format": "semver", "maxLength": 8}}}
        path = self.write("openapi.json", json.dumps(schema))
        # Strict mode compiles; each unknown format is one warning at its pointer.
        code, out, err = run("compile", "--schema", path, "--json")
        self.assertEqual(code, 0, err)
        self.assertIn("lockstep: warning: " + path + '#/properties/v/format: format "semver" '
                      "is unknown: an annotation, not enforced", err)
        self.assertEqual(len(json.loads(out)["warnings"]), 3, out)
        code, out, err = run("compile", "--schema", path, "--json", "--openapi-formats")
        self.assertEqual(code, 0, err)
        self.assertEqual([w.split(":")[0] for w in json.loads(out)["warnings"]],
                         ["/properties/v/format"])
        # What generate writes with --openapi-formats, validate --openapi-formats accepts.
        code, out, err = run("generate", "--schema", path, "--openapi-formats", "--model",
                             "uniform", "--seed", "5", "-n", "6", "--max-tokens", "200", "--json")
        self.assertEqual(code, 0, err)
        done = [json.loads(l)["text"] for l in out.splitlines() if l.strip()]
        done = [t for t, l in zip(done, out.splitlines()) if json.loads(l)["finish"] == "eos"]
        self.assertGreater(len(done), 0)
        for i, text in enumerate(done):
            doc = self.write("oa%d.json" % i, text)
            p = subprocess.run([LOCKSTEP, "validate", "--schema", path, "--openapi-formats", doc],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, text + p.stdout)
        # The validator's verdicts: out of range and not base64 are errors at the format keyword.
        bad = self.write("bad.json", '{"n": 2147483648, "b": "QQ=", "v": "x"}')
        p = subprocess.run([LOCKSTEP, "validate", "--schema", path, "--openapi-formats", "--json",
                            bad], capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        errors = json.loads(p.stdout)["errors"]
        self.assertEqual(sorted(e["schema"] for e in errors),
                         ["/properties/b/format", "/properties/n/format"])
        p = subprocess.run([LOCKSTEP, "validate", "--schema", path, bad],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)

    def test_any_order(self):
        # generate --any-order writes members in whatever order the model picks; every finished
        # output validates, and some are not in declared order.
        schema = {"type": "object", "required": ["a", "b"], "additionalProperties": False,
                  "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                                 "b": {"type": "boolean"}, "c": {"enum": ["x", "y"]}}}
        path = self.write("anyorder.json", json.dumps(schema))
        code, out, err = run("generate", "--schema", path, "--any-order", "--model", "uniform",
                             "--seed", "3", "-n", "12", "--max-tokens", "120", "--compact",
                             "--json")
        self.assertEqual(code, 0, err)
        done = [json.loads(l)["text"] for l in out.splitlines()
                if l.strip() and json.loads(l)["finish"] == "eos"]
        self.assertGreater(len(done), 3, out)
        firsts = set()
        for i, text in enumerate(done):
            doc = self.write("any%d.json" % i, text)
            p = subprocess.run([LOCKSTEP, "validate", "--schema", path, doc],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, text + p.stdout)
            firsts.add(text[2])
        self.assertGreater(len(firsts), 1, done)  # (some output starts with another key)
        # Past the member-set budget: exit 2, naming it and the object.
        big = self.write("big.json", json.dumps(
            {"type": "object", "properties": {"p%d" % i: {} for i in range(11)}}))
        code, _, err = run("compile", "--schema", big, "--any-order")
        self.assertEqual(code, 2, err)
        self.assertIn("resource limit at " + big + "#/properties: member_order any", err)
        self.assertIn("any_order_max_properties (10", err)
        code, _, err = run("compile", "--schema", big, "--any-order",
                           "--any-order-max-properties", "11")
        self.assertEqual(code, 0, err)
        code, _, err = run("compile", "--schema", big, "--any-order",
                           "--any-order-max-properties", "x")
        self.assertEqual(code, 2, err)
        self.assertIn("--any-order-max-properties", err)
        code, _, err = run("compile", "--schema", big)
        self.assertEqual(code, 0, err)

    def test_combinator_budgets(self):
        # --max-oneof-overlaps, --max-some-member-requirements and --max-exprs: past them,
        # exit 2 naming the budget and where; raised, the schema compiles.
        one_of = self.write("oneof.json", json.dumps(
            {"properties": {"x": {"oneOf": [{"type": "string", "pattern": c} for c in "abc"]}}}))
        code, _, err = run("compile", "--schema", one_of, "--max-oneof-overlaps", "1")
        self.assertEqual(code, 2, err)
        self.assertIn("resource limit at " + one_of + "#/properties/x/oneOf", err)
        self.assertIn("max_oneof_overlaps (1", err)
        code, _, err = run("compile", "--schema", one_of)
        self.assertEqual(code, 0, err)
        some = self.write("some.json", json.dumps({"type": "object", "allOf": [
            {"not": {"patternProperties": {"^" + c: {"type": "integer"}}}} for c in "abcd"]}))
        code, _, err = run("compile", "--schema", some)
        self.assertEqual(code, 2, err)
        self.assertIn("max_some_member_requirements (3", err)
        code, _, err = run("compile", "--schema", some, "--max-some-member-requirements", "4")
        self.assertEqual(code, 0, err)
        code, _, err = run("compile", "--schema", some, "--max-some-member-requirements", "4",
                           "--max-exprs", "50")
        self.assertEqual(code, 2, err)
        self.assertIn("schema_max_exprs, lockstep --max-exprs", err)
        for flag, value in (("--max-some-member-requirements", "17"),
                            ("--max-oneof-overlaps", "-1"), ("--max-exprs", "0")):
            code, _, err = run("compile", "--schema", one_of, flag, value)
            self.assertEqual(code, 2, err)
            self.assertIn(flag, err)

    def test_schema_draft(self):
        # Draft-04's boolean exclusiveMaximum is malformed in 2020-12 (the default): exit 2.
        d4 = self.write("d4.json", json.dumps({"type": "integer", "maximum": 5,
                                               "exclusiveMaximum": True}))
        code, _, err = run("compile", "--schema", d4)
        self.assertEqual(code, 2, err)
        self.assertIn("exclusiveMaximum", err)
        for name in ("4", "draft-04"):
            code, out, err = run("compile", "--schema", d4, "--schema-draft", name,
                                 "--emit-grammar")
            self.assertEqual(code, 0, err)
            self.assertIn("root ::=", out)
        # ... and in draft-06, where exclusiveMaximum is a number.
        self.assertEqual(run("compile", "--schema", d4, "--schema-draft", "6")[0], 2)
        # A $schema naming draft-04 wins over the option.
        named = self.write("named.json", json.dumps(
            {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer",
             "maximum": 5, "exclusiveMaximum": True}))
        self.assertEqual(run("compile", "--schema", named, "--schema-draft", "2020-12")[0], 0)
        for cmd in (["compile"], ["generate", "--max-tokens", "4"], ["explain"], ["classify"]):
            code, _, err = run(*cmd, "--schema", d4, "--schema-draft", "5")
            self.assertEqual(code, 2, " ".join(cmd) + ": " + err)
            self.assertIn("unknown JSON Schema draft", err, cmd)
        for cmd in ("compile", "generate", "explain", "classify", "bench"):
            self.assertIn("--schema-draft", run(cmd, "--help")[1], cmd)

    def test_emit_grammar_prints_gbnf(self):
        code, out, err = run("compile", "--schema", self.schema, "--emit-grammar", "--compact")
        self.assertEqual(code, 0, err)
        self.assertIn("root ::=", out)
        self.assertIn('\\"name\\":', out)

    def test_one_constraint_only(self):
        code, _, err = run("compile", "--schema", self.schema, "--regex", "a")
        self.assertEqual(code, 2)
        code, _, err = run("generate", "--schema", self.schema, "--regex", "a", "--model", "uniform")
        self.assertEqual(code, 2)

    def test_generated_instances_validate(self):
        complete = 0
        for extra in ([], ["--compact"]):
            code, out, err = run("generate", "--schema", self.schema, "--model", "uniform",
                                 "--seed", "3", "-n", "4", "--max-tokens", "600", "--json",
                                 *extra)
            self.assertEqual(code, 0, err)
            lines = [json.loads(l) for l in out.splitlines() if l.strip()]
            self.assertEqual(len(lines), 4)
            for i, rec in enumerate(lines):
                if rec["finish"] != "eos":
                    continue  # cut by the token budget: not a complete document
                complete += 1
                doc = self.write("gen%d.json" % i, rec["text"])
                vcode = subprocess.run([LOCKSTEP, "validate", "--schema", self.schema, doc],
                                       capture_output=True, text=True, timeout=120).returncode
                self.assertEqual(vcode, 0, "generated instance does not validate: " + rec["text"])
        self.assertGreater(complete, 0, "no generation finished within the token budget")


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
