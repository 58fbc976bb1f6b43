"""Tests of the `lockstep` Python module (python/lockstep_module.cc), run by CTest with Debian's
python3 and python3-numpy: same tokens as the C++ API for the same seeds and logits, generated
text valid under the schema, zero-copy mask fills equal to fresh matchers' and to batch fills,
clean Python exceptions on bad input, the LogitsProcessor under greedy decoding, and the
SchemaValidator.

Environment (set by tests/python/CMakeLists.txt): PYTHONPATH (the module), LOCKSTEP_DATA_DIR,
LOCKSTEP_PY_REFERENCE_GEN (the C++ generator, py_reference_gen.cc), LOCKSTEP_SCHEMA_DIR.
"""

import json
import os
import subprocess
import tempfile
import threading
import unittest

import numpy as np

import lockstep

SCHEMA_DIR = os.environ.get(
    "LOCKSTEP_SCHEMA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "schemas"))
SCHEMA_PATH = os.path.join(SCHEMA_DIR, "tools", "book_flight.json")
REFERENCE_GEN = os.environ.get("LOCKSTEP_PY_REFERENCE_GEN")

# The C ABI tests' settings (tests/capi/capi_test_support.h).
MODEL_SEED = 11
SAMPLER_SEED = 42
TEMPERATURE = 0.8
TOP_P = 0.95
MAX_TOKENS = 400

MASK64 = (1 << 64) - 1


def mix64_int(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def mix64_array(z):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def token_bias(b):
    """TokenBias of capi_test_support.c: favours '"', ',' and '}', disfavours whitespace runs."""
    bias = 0.0
    for c in b:
        if c in (0x0A, 0x09, 0x0D) or (c == 0x20 and len(b) > 1):
            return -6.0
        if c in (0x22, 0x2C, 0x7D):
            bias = 8.0
    return bias


class HashModel:
    """capi_test_logits (tests/capi/capi_test_support.c) in NumPy: logits[i] = 4 * u(seed,
    context length, last id, i) + bias[i], computed in float32 exactly as the C code does."""

    def __init__(self, vocab, seed):
        self.width = vocab.logits_width
        self.seed = seed
        bias = np.zeros(self.width, dtype=np.float32)
        for i in range(vocab.size):
            bias[i] = token_bias(vocab.token_bytes(i))
        self.bias = bias
        self.ids = np.arange(self.width, dtype=np.uint64)
        self.calls = 0

    def __call__(self, context):
        self.calls += 1
        n = len(context)
        last = (int(context[-1]) & 0xFFFFFFFF) if n > 0 else 0xFFFFFFFF
        key = mix64_int(self.seed ^ mix64_int(((n << 32) & MASK64) ^ last))
        with np.errstate(over="ignore"):
            h = mix64_array(np.uint64(key) + self.ids)
        u = (h >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)
        return np.float32(4.0) * u + self.bias


_VOCAB = None
_MODEL = None
_GRAMMAR = None


def vocab():
    global _VOCAB
    if _VOCAB is None:
        _VOCAB = lockstep.Vocabulary.load("llama3")
    return _VOCAB


def model():
    global _MODEL
    if _MODEL is None:
        _MODEL = HashModel(vocab(), MODEL_SEED)
    return _MODEL


def schema_text():
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return f.read()


def grammar():
    global _GRAMMAR
    if _GRAMMAR is None:
        _GRAMMAR = lockstep.compile_schema(vocab(), schema_text())
    return _GRAMMAR


def sampler():
    return lockstep.Sampler(temperature=TEMPERATURE, top_p=TOP_P, seed=SAMPLER_SEED)


def reference_ids(jump_forward):
    """The C++ API's ids (py_reference_gen.cc) for the same schema, seeds and logits."""
    if not REFERENCE_GEN:
        raise unittest.SkipTest("LOCKSTEP_PY_REFERENCE_GEN is not set")
    out = subprocess.run(
        [REFERENCE_GEN, SCHEMA_PATH, str(MODEL_SEED), str(SAMPLER_SEED), str(MAX_TOKENS),
         "1" if jump_forward else "0"],
        check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout)


def mask_bits(row, width):
    """Allowed ids of a mask row, as a boolean array of `width`."""
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")
    return bits[:width].astype(bool)


class AcceptanceTest(unittest.TestCase):
    """Python gives exactly the C++ API's tokens, and the text validates."""

    def test_generate_matches_cpp(self):
        for jump in (False, True):
            with self.subTest(jump_forward=jump):
                ref = reference_ids(jump)
                ids, text, finish = lockstep.generate(
                    grammar(), sampler(), model(), max_tokens=MAX_TOKENS, jump_forward=jump)
                self.assertEqual(finish, "eos")
                self.assertEqual(ref["finish"], "eos")
                self.assertEqual(ids, ref["ids"])
                self.assertEqual(text, vocab().decode(ids))

    def test_step_by_step_loop_matches_cpp(self):
        """The loop written in Python (Matcher, NumPy mask, Sampler) gives the same ids."""
        ref = reference_ids(False)["ids"]
        g = grammar()
        m = lockstep.Matcher(g)
        s = sampler()
        mask = lockstep.allocate_token_bitmask(1, g)
        ids = []
        step = 0
        while not m.is_terminated() and len(ids) < MAX_TOKENS:
            m.fill_next_token_bitmask(mask)
            logits = model()(np.asarray(ids, dtype=np.int32))
            before = logits.copy()
            t = s.sample(logits, mask=mask[0], history=ids, sequence_id=0, step=step)
            np.testing.assert_array_equal(logits, before)  # sample() does not touch the input
            self.assertTrue(m.accept_token(t))
            step += 1
            if m.is_terminated():
                break
            ids.append(t)
        self.assertTrue(m.is_terminated())
        self.assertEqual(ids, ref)

    def test_generated_text_validates(self):
        for jump in (False, True):
            ids, text, finish = lockstep.generate(
                grammar(), sampler(), model(), max_tokens=MAX_TOKENS, jump_forward=jump)
            self.assertEqual(finish, "eos")
            ok, errors = lockstep.validate(schema_text(), text, format_assertion=True)
            self.assertTrue(ok, (text, errors))
            doc = json.loads(text)
            self.assertEqual(doc["name"], "book_flight")
        # And the validator does reject.
        ok, errors = lockstep.validate(json.loads(schema_text()), '{"name": "x"}')
        self.assertFalse(ok)
        self.assertTrue(any(e[1].startswith("/") for e in errors), errors)
        ok, errors = lockstep.validate(schema_text(), "{not json")
        self.assertFalse(ok)

    def test_generate_on_threads(self):
        """generate releases the GIL and takes it back for logits_fn, from any thread."""
        from concurrent.futures import ThreadPoolExecutor
        ref = reference_ids(True)["ids"]

        def run(seq):
            return lockstep.generate(grammar(), sampler(), model(), max_tokens=MAX_TOKENS,
                                     sequence_id=seq)[0]

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(run, [0, 1, 0, 1]))
        self.assertEqual(results[0], ref)
        self.assertEqual(results[2], ref)
        self.assertEqual(results[1], results[3])
        self.assertEqual(results[1], run(1))

    def test_generate_from_a_matcher_and_a_prompt(self):
        ids, _, _ = lockstep.generate(grammar(), sampler(), model(), max_tokens=MAX_TOKENS)
        m = lockstep.Matcher(grammar())
        for t in ids[:5]:
            self.assertTrue(m.accept_token(t))
        rest, _, finish = lockstep.generate(m, sampler(), model(), max_tokens=MAX_TOKENS,
                                            prompt=ids[:5])
        self.assertEqual(finish, "eos")
        self.assertTrue(m.is_terminated())
        self.assertEqual(vocab().decode(ids[:5] + rest)[:1], b"{")
        _, _, finish = lockstep.generate(grammar(), sampler(), model(), max_tokens=3)
        self.assertEqual(finish, "length")


class ArtifactTest(unittest.TestCase):
    """Compiled artifacts: a saved / serialised grammar loads without compiling and generates
    the C++ API's tokens; bad artifacts raise lockstep.Error with the byte."""

    def test_round_trip_generates_the_same_ids(self):
        ref = reference_ids(False)["ids"]
        g = lockstep.compile_schema(vocab(), schema_text())
        g.precompute()
        self.assertGreater(g.stats()["positions"], 10)
        data = g.to_bytes()
        self.assertEqual(data[:4], b"\x89LSG")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "book_flight.lsg")
            g.save(path)
            for source in (path, data):
                loaded = lockstep.load_artifact(vocab(), source)
                self.assertEqual(loaded.stats()["positions"], g.stats()["positions"])
                ids, _, finish = lockstep.generate(loaded, sampler(), model(),
                                                   max_tokens=MAX_TOKENS, jump_forward=False)
                self.assertEqual(finish, "eos")
                self.assertEqual(ids, ref)

    def test_stats_say_where_the_compile_went(self):
        g = lockstep.compile_schema(vocab(), schema_text())
        s = g.stats()
        for phase in ("source_ms", "compile_ms", "tables_ms"):
            self.assertGreater(s[phase], 0, phase)
        # An artifact is not compiled: it has no phases of its own.
        loaded = lockstep.load_artifact(vocab(), g.to_bytes())
        self.assertEqual(loaded.stats()["source_ms"], 0)

    def test_bad_artifacts_raise(self):
        data = lockstep.compile_regex(vocab(), "[0-9]{3}").to_bytes()
        for bad, needle in ((data[: len(data) // 2], "truncated"),
                            (b"not an artifact", "not a lockstep artifact"),
                            (data[:100] + bytes([data[100] ^ 4]) + data[101:], "checksum")):
            with self.assertRaises(lockstep.Error) as e:
                lockstep.load_artifact(vocab(), bad)
            self.assertEqual(e.exception.code, "invalid artifact")
            self.assertIn(needle, str(e.exception))
            self.assertTrue(e.exception.location.startswith("byte "), e.exception.location)
        with self.assertRaises(lockstep.Error) as e:
            lockstep.load_artifact(lockstep.Vocabulary.load("gpt2"), data)
        self.assertIn("another vocabulary", str(e.exception))
        with self.assertRaises(lockstep.Error) as e:
            lockstep.load_artifact(vocab(), "/nonexistent/x.lsg")
        self.assertEqual(e.exception.code, "i/o error")


class MaskTest(unittest.TestCase):
    """Zero-copy fills into NumPy rows equal fresh matchers' masks and batch fills."""

    @classmethod
    def setUpClass(cls):
        cls.ids, _, _ = lockstep.generate(grammar(), sampler(), model(), max_tokens=MAX_TOKENS,
                                          jump_forward=False)

    def fresh_mask(self, prefix):
        m = lockstep.Matcher(grammar())
        for t in prefix:
            self.assertTrue(m.accept_token(t))
        row = np.zeros(grammar().bitmask_words, dtype=np.int32)
        m.fill_next_token_bitmask(row)
        return row

    def test_fill_into_a_row_in_place(self):
        g = grammar()
        m = lockstep.Matcher(g)
        arr = np.full((3, g.bitmask_words), -7, dtype=np.int32)
        ptr = arr.__array_interface__["data"][0]
        for step, t in enumerate(self.ids[:25]):
            self.assertTrue(m.fill_next_token_bitmask(arr, 1))
            self.assertEqual(arr.__array_interface__["data"][0], ptr)
            np.testing.assert_array_equal(arr[1], self.fresh_mask(self.ids[:step]))
            self.assertTrue(mask_bits(arr[1], g.logits_width)[t])
            self.assertTrue((arr[0] == -7).all() and (arr[2] == -7).all())
            self.assertTrue(m.accept_token(t))
        self.assertEqual(m.num_steps, 25)
        # uint32 arrays and 1-D rows work too.
        u = np.zeros(g.bitmask_words + 5, dtype=np.uint32)
        self.assertTrue(m.fill_next_token_bitmask(u))
        np.testing.assert_array_equal(u[:g.bitmask_words].view(np.int32),
                                      self.fresh_mask(self.ids[:25]))

    def test_batch_fill_equals_single_fills(self):
        g = grammar()
        matchers = []
        for k in range(8):
            m = lockstep.Matcher(g)
            for t in self.ids[:k * 3]:
                self.assertTrue(m.accept_token(t))
            matchers.append(m)
        batch = lockstep.allocate_token_bitmask(8, g)
        self.assertEqual(batch.dtype, np.int32)
        self.assertEqual(batch.shape, (8, g.bitmask_words))
        ptr = batch.__array_interface__["data"][0]
        lockstep.fill_next_token_bitmask_batch(matchers, batch, num_threads=2)
        self.assertEqual(batch.__array_interface__["data"][0], ptr)
        for k, m in enumerate(matchers):
            single = np.zeros(g.bitmask_words, dtype=np.int32)
            m.fill_next_token_bitmask(single)
            np.testing.assert_array_equal(batch[k], single)
        self.assertEqual(len({batch[k].tobytes() for k in range(8)}) > 1, True)

    def test_matcher_operations(self):
        g = grammar()
        m = lockstep.Matcher(g)
        n = m.validate_draft(self.ids[:10])
        self.assertEqual(n, 10)
        self.assertEqual(m.num_steps, 0)
        f = m.fork()
        for t in self.ids[:10]:
            f.accept_token(t)
        self.assertEqual(f.num_steps, 10)
        self.assertTrue(f.rollback(4))
        self.assertEqual(f.num_steps, 6)
        self.assertFalse(f.rollback(7))
        f.reset()
        self.assertEqual(f.num_steps, 0)
        self.assertTrue(m.accept_string('{"name": "book_flight"'))
        for t in m.forced_tokens():
            self.assertTrue(m.accept_token(t))
        self.assertFalse(m.can_end())
        self.assertFalse(m.accept_token(vocab().eos_ids[0]))

    def test_regex_grammar_and_from_tokens(self):
        v = vocab()
        g = lockstep.compile_regex(v, r"[0-9]{3}")
        m = lockstep.Matcher(g)
        self.assertTrue(m.accept_string("12"))
        self.assertFalse(m.accept_string("x"))
        self.assertTrue(m.accept_string(b"3"))
        self.assertTrue(m.can_end())
        self.assertTrue(m.accept_token(v.eos_ids[0]))
        self.assertTrue(m.is_terminated())
        row = np.ones(g.bitmask_words, dtype=np.int32)
        self.assertFalse(m.fill_next_token_bitmask(row))
        self.assertFalse(row.any())
        fg = lockstep.Matcher(lockstep.compile_regex(v, r"prefix-[0-9]{3}"))
        self.assertEqual(fg.forced_bytes(), b"prefix-")
        forced = fg.forced_tokens()
        self.assertTrue(b"prefix-".startswith(v.decode(forced)))
        for t in forced:
            self.assertTrue(fg.accept_token(t))
        gg = lockstep.compile_grammar(v, 'root ::= "yes" | "no"')
        self.assertTrue(gg.is_grammar)
        self.assertEqual(gg.warnings, [])
        # A rule the root never reaches: compiled, listed in .warnings with its line:column.
        spare = lockstep.compile_grammar(v, 'root ::= "yes" | "no"\nspare ::= "maybe"\n')
        self.assertEqual(spare.warnings,
                         ["2:1: rule 'spare' is never used (unreachable from 'root')"])
        self.assertFalse(lockstep.Matcher(spare).accept_string("maybe"))
        self.assertTrue(lockstep.Matcher(spare).accept_string("no"))
        # The parse-work budget per byte: a left-recursive list's byte takes a few items, under a
        # budget of 3 it is refused; zero is not a budget.
        leftrec = 'root ::= list\nlist ::= list "," [a-z] | [a-z]'
        self.assertTrue(lockstep.Matcher(lockstep.compile_grammar(v, leftrec)).accept_string("a,b"))
        tight = lockstep.compile_grammar(v, leftrec, max_earley_items_per_byte=3)
        self.assertFalse(lockstep.Matcher(tight).accept_string("a,b"))
        with self.assertRaises(lockstep.Error):
            lockstep.compile_grammar(v, leftrec, max_earley_items_per_byte=0)
        # The automaton budgets: max_dfa_states per automaton, max_program_states for the rule
        # automata together; each names itself when it runs out.
        many = "root ::= " + " | ".join("r%d" % i for i in range(40)) + "\n" + "".join(
            'r%d ::= "(" r%d ")" | "k%d_abcdefghijklmnopqrstuvwxyz_0123456789"\n' % (i, i, i)
            for i in range(40))
        roomy = lockstep.compile_grammar(v, many, max_dfa_states=200)
        self.assertTrue(lockstep.Matcher(roomy).accept_string("((k39_abcdefghijklmnopqrstuvwxyz_0123456789))"))
        with self.assertRaises(lockstep.Error) as e:
            lockstep.compile_grammar(v, many, max_program_states=300)
        self.assertIn("max_program_states (300 states", str(e.exception))
        with self.assertRaises(lockstep.Error) as e:
            lockstep.compile_schema(v, '{"type": "string", "pattern": "^[ab]*a[ab]{12}$"}',
                                    max_dfa_states=1000)
        self.assertIn("max_dfa_states", str(e.exception))
        with self.assertRaises(lockstep.Error):
            lockstep.compile_schema(v, '{"type": "string"}', max_program_states=0)
        small = lockstep.Vocabulary.from_tokens(
            [b"a", b"b", b"ab", b"</s>"], types=["normal", "normal", "normal", "special"],
            eos_ids=[3])
        self.assertEqual((small.size, small.eos_ids, small.bitmask_words), (4, [3], 1))
        sg = lockstep.compile_regex(small, "(ab)+")
        sm = lockstep.Matcher(sg)
        row = lockstep.allocate_token_bitmask(1, small)
        sm.fill_next_token_bitmask(row)
        self.assertEqual(list(mask_bits(row[0], 4)), [True, False, True, False])
        self.assertEqual(small.encode("abab"), [2, 2])
        relaxed = {"type": "array", "items": {"type": "number", "maximum": 10},
                   "uniqueItems": True}
        w = lockstep.compile_schema(v, relaxed, lenient=True).warnings
        self.assertEqual(len(w), 1)
        self.assertTrue(w[0].startswith("/uniqueItems"), w)
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(v, relaxed)
        self.assertEqual((cm.exception.code, cm.exception.location),
                         ("unsupported", "/uniqueItems"))

    def test_unknown_formats_warn_and_openapi_formats_are_enforced(self):
        v = vocab()
        schema = {"type": "integer", "format": "int32"}
        g = lockstep.compile_schema(v, schema)
        self.assertEqual(len(g.warnings), 1)
        self.assertTrue(g.warnings[0].startswith('/format: format "int32" is unknown'), g.warnings)
        self.assertTrue(lockstep.Matcher(g).accept_string("2147483648"))
        strict = lockstep.compile_schema(v, schema, openapi_formats=True)
        self.assertEqual(strict.warnings, [])
        validator = lockstep.SchemaValidator(schema, openapi_formats=True)
        for text, valid in (("2147483647", True), ("2147483648", False), ("-2147483648", True),
                            ("-2147483649", False), ("7.5", False)):
            m = lockstep.Matcher(strict)
            accepted = m.accept_string(text) and m.can_end()
            self.assertEqual(accepted, valid, text)
            self.assertEqual(bool(validator.validate(text)), valid, text)

    def test_member_order(self):
        # Declared order by default; member_order="any" takes the members in any order, each
        # declared property at most once, the required ones present.
        v = vocab()
        schema = {"type": "object", "required": ["name"], "additionalProperties": False,
                  "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}
        declared = lockstep.compile_schema(v, schema)
        anyorder = lockstep.compile_schema(v, schema, member_order="any")
        validator = lockstep.SchemaValidator(schema)
        for text, in_declared in (('{"name": "a", "age": 1}', True),
                                  ('{"age": 1, "name": "a"}', False),
                                  ('{"age": 1}', False),
                                  ('{"age": 1, "name": "a", "age": 2}', False)):
            for g, want in ((declared, in_declared),
                            (anyorder, "age\": 2" not in text and bool(validator.validate(text)))):
                m = lockstep.Matcher(g)
                self.assertEqual(m.accept_string(text) and m.can_end(), want, text)
        with self.assertRaises(ValueError):
            lockstep.compile_schema(v, schema, member_order="sorted")
        big = {"type": "object", "properties": {"p%d" % i: {} for i in range(11)}}
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(v, big, member_order="any")
        self.assertEqual((cm.exception.code, cm.exception.location),
                         ("resource limit", "/properties"))
        relaxed = lockstep.compile_schema(v, big, member_order="any", lenient=True)
        self.assertEqual(len(relaxed.warnings), 1, relaxed.warnings)
        raised = lockstep.compile_schema(v, big, member_order="any", any_order_max_properties=11)
        self.assertTrue(lockstep.Matcher(raised).accept_string('{"p10": 1, "p0": 2}'))

    def test_combinator_budgets(self):
        # Two budgets of the schema compiler, raisable: a oneOf branch's overlaps (not provably
        # disjoint branches) and the negated additionalProperties / patternProperties /
        # propertyNames on one object. Past them, a resource limit naming the option.
        v = vocab()
        one_of = {"oneOf": [{"type": "string", "pattern": c} for c in "abc"]}
        some = {"type": "object", "allOf": [
            {"not": {"patternProperties": {"^" + c: {"type": "integer"}}}} for c in "ab"]}
        for schema, kwargs, name in ((one_of, {"max_oneof_overlaps": 1}, "max_oneof_overlaps"),
                                     (some, {"max_some_member_requirements": 1},
                                      "max_some_member_requirements")):
            with self.assertRaises(lockstep.Error) as cm:
                lockstep.compile_schema(v, schema, **kwargs)
            self.assertEqual(cm.exception.code, "resource limit")
            self.assertIn(name, cm.exception.message)
        g = lockstep.compile_schema(v, one_of)
        validator = lockstep.SchemaValidator(one_of)
        for text in ('"aa"', '"ab"', '"zz"', '"cab"', '"c"'):
            m = lockstep.Matcher(g)
            self.assertEqual(m.accept_string(text) and m.can_end(), bool(validator.validate(text)),
                             text)
        with self.assertRaises(ValueError):
            lockstep.compile_schema(v, some, max_some_member_requirements=17)
        with self.assertRaises(ValueError):
            lockstep.compile_schema(v, one_of, max_oneof_overlaps=-1)
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(v, one_of, max_exprs=10)
        self.assertEqual(cm.exception.code, "resource limit")
        self.assertIn("schema_max_exprs", cm.exception.message)

    def test_unique_search_budget(self):
        # The searches for a new item of a uniqueItems list of closed objects: with 3 bytes,
        # the comma that asks for a fourth item of {"k": x|y, "f"?: boolean} is out of the mask
        # and refused; with the default budget it is in and taken.
        v = vocab()
        schema = {"type": "array", "uniqueItems": True, "items": {
            "type": "object", "additionalProperties": False, "required": ["k"],
            "properties": {"k": {"enum": ["x", "y"]}, "f": {"type": "boolean"}}}}
        prefix = '[{"k":"y"},{"k":"x","f":true},{"k":"x","f":false}'
        comma = v.encode(",")
        self.assertEqual(len(comma), 1)
        for budget, allowed in ((None, True), (3, False)):
            kwargs = {} if budget is None else {"max_unique_search_bytes": budget}
            g = lockstep.compile_schema(v, schema, **kwargs)
            m = lockstep.Matcher(g)
            self.assertTrue(m.accept_string(prefix))
            mask = np.zeros(g.bitmask_words, dtype=np.int32)
            m.fill_next_token_bitmask(mask)
            word = int(mask[comma[0] >> 5]) & 0xFFFFFFFF
            self.assertEqual(bool((word >> (comma[0] & 31)) & 1), allowed, budget)
            self.assertEqual(m.accept_token(comma[0]), allowed, budget)
            if allowed:
                self.assertIsNone(m.last_error)
            else:
                # Refused for the budget, not as invalid: last_error says which.
                self.assertIsInstance(m.last_error, lockstep.Error)
                self.assertEqual(m.last_error.code, "resource limit")
                self.assertIn("max_unique_search_bytes", m.last_error.message)
        # A plain rejection (a repeat of the first item) leaves no error.
        m = lockstep.Matcher(lockstep.compile_schema(v, schema))
        self.assertFalse(m.accept_string('[{"k":"x"},{"k":"x"}'))
        self.assertIsNone(m.last_error)
        with self.assertRaises(ValueError):
            lockstep.compile_schema(v, schema, max_unique_search_bytes=-1)

    def test_default_draft(self):
        # Draft-04's boolean exclusiveMaximum: malformed in 2020-12 (the default), exclusive in
        # draft-04; the grammar and the validator agree on it.
        v = vocab()
        schema = {"type": "integer", "maximum": 5, "exclusiveMaximum": True}
        with self.assertRaises(lockstep.Error):
            lockstep.compile_schema(v, schema)
        g = lockstep.compile_schema(v, schema, default_draft="draft-04")
        validator = lockstep.SchemaValidator(schema, default_draft="4")
        for text, valid in (("4", True), ("5", False), ("4.0", False)):
            m = lockstep.Matcher(g)
            self.assertEqual(m.accept_string(text) and m.can_end(), valid, text)
            self.assertEqual(bool(validator.validate(text)), valid, text)
        with self.assertRaises(ValueError):
            lockstep.compile_schema(v, schema, default_draft="draft-05")


class BadInputTest(unittest.TestCase):
    """Every misuse is a Python exception with a clear message, never a crash."""

    def setUp(self):
        self.g = grammar()
        self.m = lockstep.Matcher(self.g)
        self.words = self.g.bitmask_words

    def test_bitmask_arrays(self):
        with self.assertRaisesRegex(TypeError, "int32"):
            self.m.fill_next_token_bitmask(np.zeros(self.words, dtype=np.float64))
        with self.assertRaisesRegex(TypeError, "int32"):
            self.m.fill_next_token_bitmask(np.zeros(self.words, dtype=np.int64))
        with self.assertRaisesRegex(TypeError, "numpy"):
            self.m.fill_next_token_bitmask([0] * self.words)
        with self.assertRaisesRegex(ValueError, "words per row"):
            self.m.fill_next_token_bitmask(np.zeros(self.words - 1, dtype=np.int32))
        wide = np.zeros((2, 2 * self.words), dtype=np.int32)
        with self.assertRaisesRegex(ValueError, "C-contiguous"):
            self.m.fill_next_token_bitmask(wide[:, ::2])
        with self.assertRaisesRegex(ValueError, "row index"):
            self.m.fill_next_token_bitmask(np.zeros((2, self.words), dtype=np.int32), 2)
        with self.assertRaisesRegex(ValueError, "row index"):
            self.m.fill_next_token_bitmask(np.zeros((2, self.words), dtype=np.int32), -1)
        ro = np.zeros(self.words, dtype=np.int32)
        ro.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "read-only"):
            self.m.fill_next_token_bitmask(ro)
        with self.assertRaises(ValueError):
            self.m.fill_next_token_bitmask(np.zeros((1, 1, self.words), dtype=np.int32))
        with self.assertRaises(ValueError):
            lockstep.fill_next_token_bitmask_batch([self.m, self.m],
                                                   lockstep.allocate_token_bitmask(2, self.g))
        with self.assertRaises(ValueError):
            lockstep.fill_next_token_bitmask_batch([self.m],
                                                   lockstep.allocate_token_bitmask(0, self.g))
        with self.assertRaises(TypeError):
            lockstep.fill_next_token_bitmask_batch([self.m, "x"],
                                                   lockstep.allocate_token_bitmask(2, self.g))

    def test_invalid_schema_names_the_pointer(self):
        bad = {"type": "object", "properties": {"when": {"type": "string", "minLength": -1}}}
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(vocab(), bad)
        e = cm.exception
        self.assertIsInstance(e, ValueError)
        self.assertIn("/properties/when", str(e))
        self.assertTrue(e.location.startswith("/properties/when"), e.location)
        self.assertEqual(e.code, "invalid schema")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(vocab(), "{")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_regex(vocab(), "a(b")
        self.assertEqual(cm.exception.code, "invalid regex")
        self.assertIn("offset", str(cm.exception))
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_grammar(vocab(), "root ::= undefined_rule")
        self.assertEqual(cm.exception.code, "invalid grammar")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.Vocabulary.load("/nonexistent/tokenizer.json")
        with self.assertRaises(lockstep.Error):
            lockstep.validate("{", "{}")

    def test_token_ids_out_of_range(self):
        v = vocab()
        for bad in (-1, v.logits_width, 10**6):
            with self.assertRaises(lockstep.Error):
                self.m.accept_token(bad)
        with self.assertRaises((OverflowError, TypeError)):
            self.m.accept_token(2**40)
        with self.assertRaises(lockstep.Error):
            v.token_bytes(-5)
        with self.assertRaises(lockstep.Error):
            v.decode([1, 999999])
        with self.assertRaises(lockstep.Error):
            self.m.validate_draft([0, -3])
        with self.assertRaises(lockstep.Error):
            lockstep.generate(self.g, sampler(), model(), prompt=[v.logits_width])
        self.assertEqual(self.m.num_steps, 0)

    def test_logits_fn_errors_propagate(self):
        class Boom(RuntimeError):
            pass

        calls = []

        def raising(context):
            calls.append(len(context))
            if len(calls) == 3:
                raise Boom("model failed")
            return model()(context)

        m = lockstep.Matcher(self.g)
        with self.assertRaisesRegex(Boom, "model failed"):
            lockstep.generate(m, sampler(), raising, max_tokens=100, jump_forward=False)
        self.assertEqual(len(calls), 3)
        self.assertEqual(m.num_steps, 2)  # stopped at once, the matcher left consistent
        with self.assertRaisesRegex(ValueError, "shape"):
            lockstep.generate(self.g, sampler(), lambda c: np.zeros(5, dtype=np.float32))
        with self.assertRaisesRegex(ValueError, "shape"):
            lockstep.generate(self.g, sampler(),
                              lambda c: np.zeros((1, self.g.logits_width), dtype=np.float32))
        with self.assertRaises(TypeError):
            lockstep.generate(self.g, sampler(), lambda c: "not logits")
        with self.assertRaisesRegex(ValueError, "NaN"):
            lockstep.generate(self.g, sampler(),
                              lambda c: np.full(self.g.logits_width, np.nan, dtype=np.float32))
        # float64 results are converted.
        _, _, finish = lockstep.generate(self.g, sampler(),
                                         lambda c: model()(c).astype(np.float64), max_tokens=3)
        self.assertEqual(finish, "length")

    def test_sampler_inputs(self):
        s = lockstep.Sampler(temperature=0)
        self.assertEqual(s.sample(np.array([0, 3, 1], dtype=np.float32)), 1)
        self.assertEqual(s.sample(np.array([0, 3, 1], dtype=np.float32),
                                  mask=np.array([0b101], dtype=np.int32)), 2)
        with self.assertRaises(lockstep.Error):
            s.sample(np.array([0, 3, 1], dtype=np.float32), mask=np.array([0], dtype=np.int32))
        with self.assertRaises(ValueError):
            s.sample(np.array([0, np.nan], dtype=np.float32))
        with self.assertRaises(ValueError):
            s.sample(np.zeros((2, 2), dtype=np.float32))
        with self.assertRaises(ValueError):
            s.sample(np.zeros(100, dtype=np.float32), mask=np.zeros(1, dtype=np.int32))
        with self.assertRaises(TypeError):
            s.sample(np.zeros(3, dtype=np.float32), mask=np.zeros(1, dtype=np.float32))


def slow_schema():
    """A oneOf of twelve object branches that are not provably disjoint: each branch is compiled
    with the negation of the eleven others, so the compile takes many seconds."""
    branches = [{"properties": {"p%d" % j: {"type": "integer", "minimum": i + j} for j in range(3)}}
                for i in range(12)]
    return {"type": "object", "oneOf": branches}


class CompileBudgetTest(unittest.TestCase):
    """timeout_ms and cancel= on every compile_*: a compile past its budget or cancelled from
    another Python thread raises lockstep.Error (code 'resource limit') naming the budget."""

    def test_deadline(self):
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_schema(vocab(), slow_schema(), timeout_ms=1)
        e = cm.exception
        self.assertEqual(e.code, "resource limit")
        self.assertEqual(e.message, "compile deadline of 1 ms passed")
        self.assertTrue(e.location == "" or e.location.startswith("/oneOf"), e.location)
        with self.assertRaises(ValueError):
            lockstep.compile_regex(vocab(), "a", timeout_ms=-1)
        # 0: no deadline; the default is 10 s.
        g = lockstep.compile_regex(vocab(), "[a-z]{3}", timeout_ms=0)
        self.assertEqual(g.logits_width, vocab().logits_width)

    def test_cancel_from_another_thread(self):
        token = lockstep.CancelToken()
        self.assertFalse(token.cancelled)
        timer = threading.Timer(0.05, token.cancel)
        timer.start()
        try:
            with self.assertRaises(lockstep.Error) as cm:
                lockstep.compile_schema(vocab(), slow_schema(), timeout_ms=0, cancel=token)
        finally:
            timer.join()
        self.assertEqual(cm.exception.code, "resource limit")
        self.assertEqual(cm.exception.message, "compile cancelled")
        self.assertTrue(token.cancelled)
        # A cancelled token stops the other compiles at once; reset lets them run.
        with self.assertRaises(lockstep.Error):
            lockstep.compile_grammar(vocab(), 'root ::= "a"+', cancel=token)
        with self.assertRaises(lockstep.Error):
            lockstep.compile_regex(vocab(), "[a-z]+", cancel=token)
        token.reset()
        self.assertFalse(token.cancelled)
        lockstep.compile_grammar(vocab(), 'root ::= "a"+', cancel=token)


class LogitsProcessorTest(unittest.TestCase):
    """Greedy argmax through the processor only ever picks allowed tokens."""

    def greedy(self, g, logits_for_step, steps):
        proc = lockstep.LogitsProcessor(g)
        check = lockstep.Matcher(g)
        eos = set(g.vocabulary.eos_ids)
        ids = []
        for step in range(steps):
            scores = logits_for_step(step, ids)
            ptr = scores.__array_interface__["data"][0]
            out = proc(np.asarray(ids, dtype=np.int64), scores)
            self.assertIs(out, scores)
            self.assertEqual(scores.__array_interface__["data"][0], ptr)
            t = int(np.argmax(scores))
            self.assertTrue(np.isfinite(scores[t]))
            self.assertTrue(check.accept_token(t), (step, t))
            if t in eos:
                return ids, True
            ids.append(t)
        return ids, False

    def test_random_logits_twenty_steps(self):
        rng = np.random.default_rng(0)
        width = grammar().logits_width

        def random_logits(step, ids):
            return rng.standard_normal(width).astype(np.float32)

        ids, _ = self.greedy(grammar(), random_logits, 20)
        self.assertGreater(len(ids), 0)
        # A small compact schema ends within 20 steps even under random logits.
        small = {"type": "object", "properties": {"ok": {"type": "boolean"}},
                 "required": ["ok"], "additionalProperties": False}
        g = lockstep.compile_schema(vocab(), small, compact=True)
        ids, ended = self.greedy(g, random_logits, 20)
        self.assertTrue(ended)
        ok, errors = lockstep.validate(small, vocab().decode(ids))
        self.assertTrue(ok, errors)

    def test_greedy_to_eos_validates(self):
        ids, ended = self.greedy(grammar(), lambda step, ids: model()(ids), MAX_TOKENS)
        self.assertTrue(ended)
        text = vocab().decode(ids)
        ok, errors = lockstep.validate(schema_text(), text, format_assertion=True)
        self.assertTrue(ok, (text, errors))

    def test_batch_rows_and_errors(self):
        g = grammar()
        proc = lockstep.LogitsProcessor(g, batch_size=2)
        scores = np.zeros((2, g.logits_width), dtype=np.float32)
        proc(np.zeros((2, 0), dtype=np.int64), scores)
        first = lockstep.Matcher(g)
        row = np.zeros(g.bitmask_words, dtype=np.int32)
        first.fill_next_token_bitmask(row)
        allowed = mask_bits(row, g.logits_width)
        for r in range(2):
            np.testing.assert_array_equal(np.isfinite(scores[r]), allowed)
        with self.assertRaises(ValueError):
            proc(np.zeros((2, 0), dtype=np.int64), np.zeros((3, g.logits_width), np.float32))
        with self.assertRaises(ValueError):
            proc(np.zeros((2, 0), dtype=np.int64), np.zeros((2, 7), np.float32))
        with self.assertRaises(TypeError):
            proc(np.zeros((2, 0), dtype=np.int64), np.zeros((2, g.logits_width), np.float64))
        bad = int(np.flatnonzero(~allowed)[0])
        with self.assertRaises(lockstep.Error):
            proc(np.array([[bad], [bad]]), np.zeros((2, g.logits_width), np.float32))
        proc.reset()
        proc(np.zeros((2, 0), dtype=np.int64), scores)


class RequestTest(unittest.TestCase):
    """lockstep.compile_request (lockstep/request.h): a chat-completions body on the Llama-3
    vocabulary (format llama3 from its family); the calls read back; malformed parts located."""

    TOOLS = [{"type": "function", "function": {
        "name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}},
                                      "required": ["a"], "additionalProperties": False}}}]

    def test_named_function_call_reads_back(self):
        body = {"model": "m", "messages": [], "tools": self.TOOLS,
                "tool_choice": {"type": "function", "function": {"name": "add"}}}
        g = lockstep.compile_request(vocab(), body)
        self.assertEqual(g.request_kind, "tools")
        m = lockstep.Matcher(g)
        self.assertFalse(m.accept_string("Sure"))  # no free text before the call
        python_tag = vocab().find_token("<|reserved_special_token_5|>")
        eom = vocab().find_token("<|reserved_special_token_4|>")
        ids = [python_tag] + vocab().encode('{"name": "add", "parameters": {"a": 4}}',
                                            add_dummy_prefix=False) + [eom]
        for i in ids:
            self.assertTrue(m.accept_token(i), i)
        self.assertTrue(m.can_end())
        self.assertEqual(g.parse_calls(ids), [{"name": "add", "arguments": {"a": 4}}])

    def test_response_formats(self):
        body = json.dumps({"response_format": {"type": "json_object"}})
        g = lockstep.compile_request(vocab(), body)
        self.assertEqual(g.request_kind, "json")
        self.assertFalse(lockstep.Matcher(g).accept_string("[1]"))
        self.assertTrue(lockstep.Matcher(g).accept_string('{"k": [1]}'))
        self.assertEqual(lockstep.compile_request(vocab(), {}).request_kind, "text")
        with self.assertRaises(lockstep.Error):
            lockstep.compile_request(vocab(), {}).parse_calls([1])
        self.assertIsNone(lockstep.compile_regex(vocab(), "a").request_kind)

    def test_malformed_parts_are_located(self):
        for body, pointer in (({"response_format": {"type": "xml"}}, "/response_format/type"),
                              ({"tools": self.TOOLS, "tool_choice": "maybe"}, "/tool_choice"),
                              ({"tools": [{"type": "function", "function": {}}]},
                               "/tools/0/function/name")):
            with self.assertRaises(lockstep.Error) as cm:
                lockstep.compile_request(vocab(), body)
            self.assertEqual(cm.exception.location, pointer)
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.compile_request(vocab(), {"tools": self.TOOLS}, format="nope")
        self.assertIn("unknown format", str(cm.exception))


class SchemaValidatorTest(unittest.TestCase):
    """lockstep.SchemaValidator (lockstep/validator.h): a schema loaded once, verdicts with errors
    located by JSON Pointers, the options of `lockstep validate`, failures as lockstep.Error, and
    the same answers as lockstep.validate and as itself on several threads."""

    SCHEMA = {"type": "object", "required": ["name"],
              "properties": {"name": {"type": "string", "minLength": 1},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "when": {"format": "date"}}}

    def test_verdicts_and_errors(self):
        v = lockstep.SchemaValidator(self.SCHEMA)
        self.assertEqual(v.draft, "2020-12")
        ok = v.validate('{"name": "a", "tags": ["x"]}')
        self.assertTrue(ok.valid)
        self.assertTrue(ok)
        self.assertEqual(ok.errors, [])
        bad = v.validate({"name": "", "tags": ["x", 3]})  # a dict is serialised with json.dumps
        self.assertFalse(bad)
        pairs = [(e.instance_pointer, e.schema_pointer) for e in bad.errors]
        self.assertEqual(pairs, [("/name", "/properties/name/minLength"),
                                 ("/tags/1", "/properties/tags/items/type")])
        self.assertTrue(all(e.message for e in bad.errors))
        self.assertIn("valid=False errors=2", repr(bad))
        self.assertIn("/tags/1", repr(bad.errors[1]))
        self.assertTrue(v.validate(b'{"name": "b"}'))  # bytes are JSON text too

    def test_same_answers_as_validate(self):
        text = schema_text()
        v = lockstep.SchemaValidator(text, format_assertion=True)
        doc = json.loads(lockstep.generate(grammar(), sampler(), model(),
                                           max_tokens=MAX_TOKENS)[1])
        instances = [json.dumps(doc), '{"name": "x"}', "[]", "3",
                     json.dumps(dict(doc, arguments={})), json.dumps(dict(doc, extra=True))]
        for inst in instances:
            ok, errors = lockstep.validate(text, inst, format_assertion=True)
            r = v.validate(inst)
            self.assertEqual(r.valid, ok, inst)
            self.assertEqual([(e.instance_pointer, e.schema_pointer, e.message) for e in r.errors],
                             errors, inst)
        self.assertTrue(v.validate(json.dumps(doc)))

    def test_failures_raise_lockstep_error(self):
        v = lockstep.SchemaValidator(self.SCHEMA)
        with self.assertRaises(lockstep.Error) as cm:
            v.validate('{"name": [1, 2,]}')
        self.assertEqual(cm.exception.code, "invalid argument")
        self.assertEqual(cm.exception.location, "byte 15")
        with self.assertRaises(lockstep.Error) as cm:
            v.validate("[" * 2000 + "]" * 2000)
        self.assertEqual(cm.exception.code, "resource limit")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.SchemaValidator({"properties": {"a": {"$ref": "http://x.test/s.json"}}})
        self.assertEqual(cm.exception.code, "invalid schema")
        self.assertEqual(cm.exception.location, "/properties/a/$ref")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.SchemaValidator('{"pattern": "a(?=b)"}')
        self.assertEqual(cm.exception.code, "unsupported")
        self.assertEqual(cm.exception.location, "/pattern")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.SchemaValidator("{")
        self.assertEqual(cm.exception.code, "invalid schema")
        with self.assertRaises(lockstep.Error) as cm:
            lockstep.SchemaValidator({"$ref": "#"}).validate("1")
        self.assertEqual(cm.exception.code, "resource limit")
        with self.assertRaises(ValueError):
            lockstep.SchemaValidator(self.SCHEMA, default_draft="draft-05")
        with self.assertRaises(ValueError):
            lockstep.SchemaValidator(self.SCHEMA, max_errors=-1)
        with self.assertRaises(lockstep.Error):
            lockstep.SchemaValidator(self.SCHEMA, max_depth=0)
        with self.assertRaises(TypeError):
            lockstep.SchemaValidator(self.SCHEMA, remotes=["not", "a", "dict"])

    def test_draft04_integers(self):
        # Draft-04: 12345.0 is not an integer; from draft-06 on it is.
        schema = {"type": "integer"}
        d4 = lockstep.SchemaValidator(schema, default_draft="draft-04")
        self.assertEqual(d4.draft, "draft-04")
        self.assertFalse(d4.validate("12345.0"))
        self.assertTrue(d4.validate("12345"))
        for name in ("draft-06", "draft-07", "2019-09", "2020-12"):
            self.assertTrue(lockstep.SchemaValidator(schema, default_draft=name).validate("12345.0"))
        named = lockstep.SchemaValidator(
            {"$schema": "http://json-schema.org/draft-04/schema#", "type": "integer"})
        self.assertEqual(named.draft, "draft-04")

    def test_options(self):
        # `dependencies` is a draft-07 keyword, an unknown one (an annotation) in 2020-12.
        deps = {"dependencies": {"a": ["b"]}}
        d7 = lockstep.SchemaValidator(deps, default_draft="draft-07")
        self.assertEqual(d7.draft, "draft-07")
        self.assertFalse(d7.validate({"a": 1}))
        self.assertTrue(d7.validate({"a": 1, "b": 2}))
        d2020 = lockstep.SchemaValidator(deps)
        self.assertEqual(d2020.draft, "2020-12")
        self.assertTrue(d2020.validate({"a": 1}))
        self.assertIn("draft-07", repr(d7))
        self.assertTrue(lockstep.SchemaValidator(self.SCHEMA).validate(
            {"name": "a", "when": "2024-02-30"}))
        formats = lockstep.SchemaValidator(self.SCHEMA, format_assertion=True)
        r = formats.validate({"name": "a", "when": "2024-02-30"})
        self.assertFalse(r)
        self.assertEqual(r.errors[0].schema_pointer, "/properties/when/format")
        quiet = lockstep.SchemaValidator({"items": {"type": "string"}}, max_errors=0)
        r = quiet.validate("[1, 2, 3]")
        self.assertFalse(r.valid)
        self.assertEqual(r.errors, [])
        self.assertEqual(len(lockstep.SchemaValidator(
            {"items": {"type": "string"}}, max_errors=2).validate("[1, 2, 3]").errors), 2)

    def test_remote_documents(self):
        schema = {"properties": {"n": {"$ref": "http://example.test/sub/int.json"}}}
        v = lockstep.SchemaValidator(
            schema, remotes={"http://example.test/sub/int.json": {"type": "integer"}})
        self.assertTrue(v.validate({"n": 3}))
        r = v.validate({"n": 3.5})
        self.assertEqual(r.errors[0].schema_pointer, "http://example.test/sub/int.json#/type")
        with tempfile.TemporaryDirectory() as d:
            os.mkdir(os.path.join(d, "sub"))
            with open(os.path.join(d, "sub", "int.json"), "w") as f:
                f.write('{"type": "integer"}')
            v = lockstep.SchemaValidator(schema, remote_dirs={"http://example.test/": d})
            self.assertTrue(v.validate({"n": 3}))
            self.assertFalse(v.validate({"n": "3"}))
            with self.assertRaises(lockstep.Error) as cm:
                lockstep.SchemaValidator(
                    schema, remote_dirs={"http://example.test/": os.path.join(d, "absent")})
            self.assertEqual(cm.exception.code, "i/o error")

    def test_threads_share_one_validator(self):
        """validate releases the GIL; one validator on several threads gives the serial answers."""
        from concurrent.futures import ThreadPoolExecutor
        v = lockstep.SchemaValidator(self.SCHEMA, format_assertion=True)
        instances = [json.dumps({"name": "n" * (i % 3), "tags": ["a", i][: i % 3],
                                 "when": "2024-02-%02d" % (i % 31 + 1)}) for i in range(60)]

        def answers(batch):
            return [(r.valid, [(e.instance_pointer, e.schema_pointer) for e in r.errors])
                    for r in map(v.validate, batch)]

        serial = answers(instances)
        self.assertIn(True, [a[0] for a in serial])
        self.assertIn(False, [a[0] for a in serial])
        with ThreadPoolExecutor(max_workers=4) as pool:
            for got in pool.map(lambda _: answers(instances), range(8)):
                self.assertEqual(got, serial)


if __name__ == "__main__":
    unittest.main()
