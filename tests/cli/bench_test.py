#!/usr/bin/env python3
"""End-to-end checks of `lockstep bench`: a bundled MaskBench file written here (canonical
tokens and traces, key order), a handful of JSONSchemaBench dev-set files from ../shared/data
when present (counts against the files, with and without --traces, --threads 2), and the errors
(missing path, malformed MaskBench file, malformed --traces lines).

usage: bench_test.py PATH/TO/lockstep
Environment: LOCKSTEP_SHARED_DATA_DIR (default: <source>/../shared/data), LOCKSTEP_TEST_SCALE."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

LOCKSTEP = None
HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("LOCKSTEP_SHARED_DATA_DIR",
                        os.path.join(HERE, "..", "..", "..", "shared", "data"))
MASKBENCH = os.path.join(SHARED, "jsonschemabench-dev", "maskbench")
TRACES = os.path.join(SHARED, "traces", "llama3-glaive-dev.jsonl")
SCALE = float(os.environ.get("LOCKSTEP_TEST_SCALE", "1"))

# Declared order: name, then age.
SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
    "additionalProperties": False,
}
TESTS = [
    {"valid": True, "data": {"name": "Ada", "age": 36}},
    {"valid": True, "data": {"age": 7, "name": "Bo"}},  # rendered in declared order
    {"valid": False, "data": {"name": "Cy"}},
    {"valid": False, "data": {"name": "Di", "age": -1}},
]


def run(*args):
    p = subprocess.run([LOCKSTEP, "bench", *args], capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def tokenize(text):
    p = subprocess.run([LOCKSTEP, "tokenize", "--no-prefix", text], capture_output=True,
                       text=True, timeout=120, check=True)
    return [int(x) for x in p.stdout.split()]


class Bench(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def write_two_files(self, sub=""):
        """a.json (SCHEMA) and b.json (an array of integers: two valid tests, one invalid)."""
        self.write(os.path.join(sub, "a.json"), json.dumps({"schema": SCHEMA, "tests": TESTS}))
        self.write(os.path.join(sub, "b.json"), json.dumps({
            "schema": {"type": "array", "items": {"type": "integer"}},
            "tests": [{"valid": True, "data": [1, 22, 333]}, {"valid": True, "data": []},
                      {"valid": False, "data": ["x"]}]}))

    def bench_json(self, *args):
        code, out, err = run("--json", *args)
        self.assertEqual(code, 0, err)
        return json.loads(out)

    def check_figures(self, r):
        for key in ("first_mask_us", "mask_us", "mask_all_us"):
            s = r[key]
            self.assertGreater(s["n"], 0, key)
            self.assertGreater(s["p50"], 0, key)
            self.assertLessEqual(s["p50"], s["p90"], key)
            self.assertLessEqual(s["p90"], s["p99"], key)
            self.assertLessEqual(s["p99"], s["max"], key)
        self.assertGreater(r["peak_rss_mb"], 0)

    def test_bundled_file(self):
        path = self.write("person.json", json.dumps({"schema": SCHEMA, "tests": TESTS}))
        r = self.bench_json("--maskbench", path)
        self.assertIsNone(r["traces"])
        self.assertEqual(r["threads"], 1)
        self.assertEqual(r["schemas"], {"total": 1, "compiled": 1, "failed": 0, "failures": [],
                                        "timeouts": 0, "timed_out": []})
        self.assertEqual((r["valid"]["total"], r["valid"]["accepted"], r["valid"]["rejected"]),
                         (2, 2, 0))
        self.assertEqual((r["invalid"]["total"], r["invalid"]["rejected"],
                          r["invalid"]["accepted"]), (2, 2, 0))
        self.check_figures(r)
        self.assertEqual(r["first_mask_us"]["n"], 1)
        # Every fill of the valid replays: one per token plus EOS.
        fills = sum(len(tokenize(t)) + 1
                    for t in ('{"name":"Ada","age":36}', '{"name":"Bo","age":7}'))
        self.assertEqual(r["mask_us"]["n"], fills)
        # The table names the same verdicts.
        code, out, err = run(path)
        self.assertEqual(code, 0, err)
        self.assertIn("2 accepted, 0 rejected", out)
        self.assertIn("2 rejected, 0 wrongly accepted", out)

    def test_bundled_traces_and_key_order(self):
        path = self.write("person.json", json.dumps({"schema": SCHEMA, "tests": TESTS}))
        lines = [
            {"file": "person.json", "test": 0, "ids": tokenize('{"name":"Ada","age":36}')},
            # The model wrote the keys in another order than the schema declares: rejected.
            {"file": "person.json", "test": 1, "ids": tokenize('{"age":7,"name":"Bo"}')},
            {"file": "elsewhere.json", "test": 0, "ids": [1, 2]},
        ]
        traces = self.write("t.jsonl", "".join(json.dumps(l) + "\n" for l in lines))
        for extra in ([], ["--interleave"], ["--threads", "2", "--check"], ["--no-share"],
                      ["--precompute"]):
            with self.subTest(extra=extra):
                r = self.bench_json("--maskbench", path, "--traces", traces, *extra)
                self.assertEqual(r["trace_lines"], {"used": 2, "unused": 1})
                v = r["valid"]
                self.assertEqual((v["total"], v["accepted"], v["rejected"]), (2, 1, 1))
                self.assertEqual(v["rejected_other_rendering"], 1)
                self.assertEqual(v["from_traces"], 2)
                self.assertEqual(r["invalid"]["accepted"], 0)
                self.assertEqual(r["interleave"], extra == ["--interleave"])
                self.assertEqual(r["share_positions"], extra != ["--no-share"])
                self.assertEqual(r["precompute"], extra == ["--precompute"])
                if "--threads" in extra:
                    self.assertEqual(r["batch"]["mismatched_masks"], 0)
                    self.assertGreater(r["batch"]["fill_us"]["n"], 0)

    def test_missing_path_exits_2(self):
        missing = os.path.join(self.dir.name, "nope")
        code, _, err = run("--maskbench", missing)
        self.assertEqual(code, 2)
        self.assertIn(missing, err)
        code, _, err = run()
        self.assertEqual(code, 2)
        self.assertIn("--maskbench", err)
        code, _, err = run("--maskbench", self.dir.name, "--threads", "0")
        self.assertEqual(code, 2)

    def test_malformed_file_is_a_failed_schema(self):
        self.write("a.json", json.dumps({"schema": SCHEMA, "tests": TESTS}))
        self.write("b.json", '{"schema": {"type": "object"}, "tests": [')
        self.write("c.json", json.dumps({"tests": []}))
        self.write("d.json", json.dumps({"schema": {"type": "integer"}, "tests": [{"data": 1}]}))
        self.write("notes.txt", "not a MaskBench file, not read")
        r = self.bench_json("--maskbench", self.dir.name)
        self.assertEqual((r["schemas"]["total"], r["schemas"]["compiled"], r["schemas"]["failed"]),
                         (4, 1, 3))
        errors = {os.path.basename(f["file"]): f["error"] for f in r["schemas"]["failures"]}
        self.assertIn("not JSON", errors["b.json"])
        self.assertIn("schema", errors["c.json"])
        self.assertIn("tests[0]", errors["d.json"])
        self.assertEqual(r["valid"]["accepted"], 2)

    def test_compile_timeout_makes_a_failed_schema_with_the_reason(self):
        slow = {"type": "object", "oneOf": [
            {"properties": {"p%d" % j: {"type": "integer", "minimum": i + j} for j in range(3)}}
            for i in range(12)]}
        self.write("slow.json", json.dumps({"schema": slow, "tests": [{"valid": True, "data": {}}]}))
        self.write("a.json", json.dumps({"schema": SCHEMA, "tests": TESTS}))
        r = self.bench_json("--maskbench", self.dir.name, "--compile-timeout", "1")
        self.assertEqual(r["schemas"]["total"], 2)
        errors = {os.path.basename(f["file"]): f["error"] for f in r["schemas"]["failures"]}
        self.assertIn("slow.json", errors)
        for error in errors.values():  # (the small schema may take more than 1 ms too)
            self.assertIn("compile deadline of 1 ms passed", error)

    def test_per_schema_and_per_mask_lines_agree_with_the_run(self):
        self.write_two_files()
        per_schema = os.path.join(self.dir.name, "schemas.jsonl")
        per_mask = os.path.join(self.dir.name, "masks.jsonl")
        r = self.bench_json("--maskbench", self.dir.name, "--per-schema", per_schema,
                            "--per-mask", per_mask)
        with open(per_schema) as f:
            schemas = {os.path.basename(x["file"]): x for x in map(json.loads, f)}
        with open(per_mask) as f:
            masks = [json.loads(line) for line in f]
        self.assertEqual(sorted(schemas), ["a.json", "b.json"])
        # One line per fill of a valid replay: the run's mask_us samples, schema by schema.
        self.assertEqual(len(masks), r["mask_us"]["n"])
        self.assertEqual(sum(x["mask_us"]["n"] for x in schemas.values()), len(masks))
        kinds = {"full walk", "parser walk", "region build", "region walk", "walk", "shared",
                 "tails", "restore", "union"}
        for name, rec in schemas.items():
            self.assertEqual(rec["status"], "compiled")
            # The compile's phases, each timed, within the compile they are part of.
            phases = rec["compile_phases_us"]
            self.assertEqual(sorted(phases), ["lowering", "source", "tables"])
            self.assertTrue(all(v > 0 for v in phases.values()), phases)
            self.assertLessEqual(sum(phases.values()), rec["compile_us"])
            mine = [m for m in masks if os.path.basename(m["file"]) == name]
            self.assertEqual(len(mine), rec["mask_us"]["n"], name)
            slowest = max(mine, key=lambda m: m["us"])
            self.assertAlmostEqual(slowest["us"], rec["slowest"]["us"], places=3)
            self.assertEqual((slowest["test"], slowest["step"]),
                             (rec["slowest"]["test"], rec["slowest"]["step"]))
            # Every valid test's fills, steps 0..n in order (n ids, then EOS).
            for test in {m["test"] for m in mine}:
                steps = [m["step"] for m in mine if m["test"] == test]
                self.assertEqual(steps, list(range(len(steps))), (name, test))
                self.assertIn(test, {0, 1}, (name, test))  # the valid tests of both files
            for m in mine:
                self.assertIn(m["trace"]["kind"], kinds)
                self.assertGreater(m["us"], 0)
        # Both valid tests of each file were replayed (b.json: [1, 22, 333] and []).
        for name in ("a.json", "b.json"):
            self.assertEqual({m["test"] for m in masks if m["file"].endswith(name)}, {0, 1})
        code, _, err = run("--maskbench", self.dir.name, "--per-mask", per_mask,
                           "--threads", "2")
        self.assertEqual(code, 2)
        self.assertIn("--per-mask", err)

    def test_probe_marks_the_fills_it_names_and_changes_nothing_else(self):
        data = os.path.join(self.dir.name, "data")
        os.mkdir(data)
        self.write_two_files("data")

        def masks(*probe):
            per_mask = os.path.join(self.dir.name, "masks.jsonl")
            r = self.bench_json("--maskbench", data, "--per-mask", per_mask,
                                "--no-background", *probe)
            with open(per_mask) as f:
                return r, [json.loads(line) for line in f]

        plain, lines = masks()
        self.assertFalse(any("probe" in m for m in lines))
        # TEST:STEP: that fill of every file (b.json's test 1, [], has steps 0 and 1 only).
        r, probed = masks("--probe", "0:2")
        self.assertEqual([(os.path.basename(m["file"]), m["test"], m["step"])
                          for m in probed if m.get("probe")],
                         [("a.json", 0, 2), ("b.json", 0, 2)])
        # A list of fills, as --per-mask wrote them: the slowest three of the plain run.
        wanted = sorted(lines, key=lambda m: -m["us"])[:3]
        listed = self.write("slow.jsonl", "".join(json.dumps(m) + "\n" for m in wanted))
        r2, probed2 = masks("--probe", listed)
        self.assertEqual(sorted((m["file"], m["test"], m["step"]) for m in probed2
                                if m.get("probe")),
                         sorted((m["file"], m["test"], m["step"]) for m in wanted))
        # The same replays, fill for fill, and the same verdicts.
        for run_r, run_lines in ((r, probed), (r2, probed2)):
            self.assertEqual([(m["file"], m["test"], m["step"]) for m in run_lines],
                             [(m["file"], m["test"], m["step"]) for m in lines])
            self.assertEqual(run_r["valid"], plain["valid"])
            self.assertEqual(run_r["invalid"], plain["invalid"])
        bad_line = self.write("bad.jsonl", json.dumps(wanted[0]) + "\n" +
                              json.dumps({"file": "a.json", "test": -1, "step": 2}) + "\n")
        for bad, words in (("0", "TEST:STEP"), ("a:1", "TEST:STEP"), ("1:", "TEST:STEP"),
                           ("-1:2", "TEST:STEP"), (bad_line, bad_line + ":2"),
                           (os.path.join(self.dir.name, "none.jsonl"), "none.jsonl")):
            with self.subTest(bad=bad):
                code, _, err = run("--maskbench", data, "--probe", bad)
                self.assertEqual(code, 2, err)
                self.assertIn("--probe", err)
                self.assertIn(words, err)
        code, _, err = run("--maskbench", data, "--probe", "0:2", "--threads", "2")
        self.assertEqual(code, 2)
        self.assertIn("--probe", err)

    def test_bad_traces_line_exits_2_with_location(self):
        path = self.write("person.json", json.dumps({"schema": SCHEMA, "tests": TESTS}))
        good = json.dumps({"file": "person.json", "test": 0, "ids": [5018]})
        cases = {
            "not json": "not a JSON object",
            json.dumps({"file": "person.json", "ids": [1]}): "test",
            json.dumps({"file": "person.json", "test": 0, "ids": [1, -3]}): "ids[1]",
            json.dumps({"file": "person.json", "test": 1, "ids": [10**9]}): "ids[0]",
            json.dumps({"file": "person.json", "test": 9, "ids": [1]}): "out of range",
            good: "second trace",
        }
        for bad, words in cases.items():
            with self.subTest(bad=bad):
                traces = self.write("t.jsonl", good + "\n\n" + bad + "\n")
                code, _, err = run("--maskbench", path, "--traces", traces)
                self.assertEqual(code, 2, err)
                self.assertIn(traces + ":3", err)
                self.assertIn(words, err)
        code, _, err = run("--maskbench", path, "--traces", os.path.join(self.dir.name, "none"))
        self.assertEqual(code, 2)
        self.assertIn("none", err)


class DevSet(unittest.TestCase):
    """A handful of JSONSchemaBench dev-set files (skipped when ../shared/data is absent)."""

    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(MASKBENCH) or not os.path.isfile(TRACES):
            raise unittest.SkipTest("shared data absent: " + MASKBENCH + " or " + TRACES)
        names = sorted(n for n in os.listdir(MASKBENCH) if n.endswith(".json"))
        want = max(3, round(8 * SCALE))
        cls.files, cls.valid, cls.invalid = [], 0, 0
        for n in names:  # the first files (by name) with both valid and invalid instances
            with open(os.path.join(MASKBENCH, n)) as f:
                tests = json.load(f)["tests"]
            v = sum(1 for t in tests if t["valid"])
            if v and len(tests) > v and len(cls.files) < want:
                cls.files.append(os.path.join(MASKBENCH, n))
                cls.valid += v
                cls.invalid += len(tests) - v
            if len(cls.files) == want:
                break

    def check(self, r, traces):
        self.assertEqual(r["schemas"]["total"], len(self.files))
        v, i = r["valid"], r["invalid"]
        self.assertEqual(v["total"] + v["skipped"], self.valid)
        self.assertEqual(i["total"] + i["skipped"], self.invalid)
        self.assertEqual(v["accepted"] + v["rejected"], v["total"])
        self.assertEqual(i["rejected"] + i["accepted"], i["total"])
        self.assertEqual(i["accepted"], 0)
        self.assertEqual(v["from_traces"], v["total"] if traces else 0)
        if not traces:  # the policy rendering of a valid instance is always accepted
            self.assertEqual(v["rejected"], 0)
        self.assertGreater(v["total"], 0)

    def test_counts_and_figures(self):
        results = {}
        for traces in (False, True):
            for threads in ("1", "2", "interleave"):
                with self.subTest(traces=traces, threads=threads):
                    args = ["--json", *self.files]
                    args += ["--interleave"] if threads == "interleave" else ["--threads", threads]
                    if traces:
                        args += ["--traces", TRACES]
                    code, out, err = run(*args)
                    self.assertEqual(code, 0, err)
                    r = json.loads(out)
                    self.check(r, traces)
                    for key in ("first_mask_us", "mask_us", "mask_all_us"):
                        s = r[key]
                        self.assertGreater(s["p50"], 0, key)
                        self.assertTrue(s["p50"] <= s["p90"] <= s["p99"] <= s["max"], key)
                    results[(traces, threads)] = r
        for traces in (False, True):
            a, b = results[(traces, "1")], results[(traces, "2")]
            for kind in ("valid", "invalid"):
                self.assertEqual(a[kind], b[kind], kind)
                self.assertEqual(a[kind], results[(traces, "interleave")][kind], kind)
            self.assertEqual(b["threads"], 2)
            self.assertIn("batch", b)


if __name__ == "__main__":
    LOCKSTEP = sys.argv.pop(1)
    unittest.main()
