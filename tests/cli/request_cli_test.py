#!/usr/bin/env python3
"""End-to-end checks of `lockstep generate --request FILE`: an OpenAI-style chat-completions
body, in the llama3, qwen and mistral formats on their vocabularies. json_schema samples
validate (`lockstep validate`), json_object samples are JSON objects; every call of a sample
names a tool of the request with arguments that validate under its schema; `required` always
calls, `none` never does, a named function is the only one called, parallel_tool_calls false
gives at most one call; malformed bodies exit 2 naming FILE#/pointer.

usage: request_cli_test.py PATH/TO/lockstep"""
import json
import os
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the import below
import structured_cli_test as structured  # noqa: E402 (run() and the bundled tools)

run = structured.run
tools = structured.tools

# (format, vocabulary, logit biases on the trigger, the end marker and EOS of the family's
# vocabulary, standing in for a chat model (the mistral trigger is text, spelt by several
# tokens: only EOS is biased, and `auto` may never call), the trigger's text when it is text,
# its id when it is a special token.
FORMATS = (("qwen", "qwen2.5", "151657:30,151658:30,151645:30,1:8,92:8", "<tool_call>", None),
           ("llama3", "llama3", "128010:30,128008:30,128009:30,1:8,92:8", None, 128010),
           ("mistral", "mistral", "2:6", "[TOOL_CALLS]", None))

ANSWER_SCHEMA = {"type": "object",
                 "properties": {"city": {"type": "string", "maxLength": 12},
                                "celsius": {"type": "integer", "minimum": -50, "maximum": 50}},
                 "required": ["city", "celsius"], "additionalProperties": False}


def body(**keys):
    b = {"model": "any", "messages": [{"role": "user", "content": "Weather in Oslo?"}],
         "temperature": 0.7}
    b.update(keys)
    return b


class RequestCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp()
        for t in tools():
            cls.write(t["function"]["name"] + ".schema.json", t["function"]["parameters"])
        cls.answer_schema = cls.write("answer.schema.json", ANSWER_SCHEMA)

    @classmethod
    def write(cls, name, obj):
        path = os.path.join(cls.dir, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def generate(self, name, req, tokenizer, bias="", *extra):
        path = self.write(name + ".json", req)
        bias_args = ["--logit-bias", bias] if bias else []
        code, out, err = run("generate", "--request", path, "--tokenizer", tokenizer, "--model",
                             "uniform", "-n", "5", "--max-tokens", "300", "--json", "--seed",
                             "7", *bias_args, *extra)
        self.assertEqual(code, 0, err)
        samples = [json.loads(line) for line in out.splitlines()]
        self.assertEqual(len(samples), 5, out)
        done = [s for s in samples if s["finish"] == "eos"]
        self.assertGreater(len(done), 0, out)
        return done

    def validate(self, schema_path, instance):
        code, out, err = run("validate", "--schema", schema_path, "-", stdin=json.dumps(instance))
        self.assertEqual(code, 0, out + err)

    def check_calls(self, sample, allowed):
        self.assertIn("calls", sample, sample)
        for call in sample["calls"]:
            self.assertIn(call["name"], allowed, sample)
            self.validate(os.path.join(self.dir, call["name"] + ".schema.json"),
                          call["arguments"])
        return sample["calls"]

    def test_response_formats(self):
        for fmt, tok, _, _, _ in FORMATS:
            with self.subTest(tokenizer=tok):
                rf = {"type": "json_schema",
                      "json_schema": {"name": "answer", "strict": True, "schema": ANSWER_SCHEMA}}
                for s in self.generate("schema", body(response_format=rf), tok, "92:5"):
                    self.validate(self.answer_schema, json.loads(s["text"]))
                    self.assertNotIn("calls", s)
                for s in self.generate("object", body(response_format={"type": "json_object"}),
                                       tok, "92:5"):
                    self.assertIsInstance(json.loads(s["text"]), dict, s)
                # text: anything, the sampler stops at EOS (biased) or the budget.
                eos = {"qwen2.5": "151645:12", "llama3": "128009:12", "mistral": "2:12"}[tok]
                self.generate("text", body(response_format={"type": "text"}), tok, eos)

    def test_tool_choices(self):
        names = [t["function"]["name"] for t in tools()]
        for fmt, tok, bias, trigger_text, trigger_id in FORMATS:
            with self.subTest(format=fmt):
                called = 0
                for s in self.generate("auto", body(tools=tools()), tok, bias):
                    called += len(self.check_calls(s, names))
                if fmt != "mistral":
                    self.assertGreater(called, 0)
                for s in self.generate("required", body(tools=tools(), tool_choice="required"),
                                       tok, bias):
                    self.assertGreater(len(self.check_calls(s, names)), 0, s)
                for s in self.generate("none", body(tools=tools(), tool_choice="none"), tok,
                                       bias):
                    self.assertEqual(s["calls"], [], s)
                    if trigger_text:
                        self.assertNotIn(trigger_text, s["text"])
                    if trigger_id is not None:
                        self.assertNotIn(trigger_id, s["tokens"])
                named = {"type": "function", "function": {"name": "book_flight"}}
                for s in self.generate("named", body(tools=tools(), tool_choice=named), tok, bias):
                    self.assertGreater(len(self.check_calls(s, ["book_flight"])), 0, s)
                one = body(tools=tools(), tool_choice="required", parallel_tool_calls=False)
                for s in self.generate("one", one, tok, bias):
                    self.assertEqual(len(self.check_calls(s, names)), 1, s)

    def test_format_flag_and_stdin(self):
        # --format overrides the vocabulary's family; "-" reads the body from stdin.
        req = json.dumps(body(tools=tools(), tool_choice="required"))
        code, out, err = run("generate", "--request", "-", "--format", "hermes", "--tokenizer",
                             "qwen2.5", "--model", "uniform", "-n", "2", "--json", "--seed", "3",
                             "--max-tokens", "300", "--logit-bias", FORMATS[0][2], stdin=req)
        self.assertEqual(code, 0, err)
        for line in out.splitlines():
            s = json.loads(line)
            if s["finish"] == "eos":
                self.assertTrue(s["text"].startswith("<tool_call>"), s)
                self.assertGreater(len(s["calls"]), 0, s)

    def test_malformed_requests(self):
        cases = (
            (body(response_format={"type": "yaml"}), "#/response_format/type"),
            (body(response_format={"type": "json_schema"}), "#/response_format/json_schema"),
            (body(response_format={"type": "json_schema",
                                   "json_schema": {"name": "a", "schema": {"type": "objekt"}}}),
             "#/response_format/json_schema/schema/type"),
            (body(tools=tools(), tool_choice="sometimes"), "#/tool_choice"),
            (body(tools=tools(), tool_choice={"type": "function", "function": {"name": "nope"}}),
             "#/tool_choice/function/name"),
            (body(tools=[{"type": "function", "function": {"parameters": {}}}]),
             "#/tools/0/function/name"),
            (body(tools=tools(), parallel_tool_calls="no"), "#/parallel_tool_calls"),
            (body(tools=tools(), response_format={"type": "json_object"}), "#/response_format"),
        )
        for i, (req, pointer) in enumerate(cases):
            with self.subTest(pointer=pointer):
                path = self.write("bad%d.json" % i, req)
                code, out, err = run("generate", "--request", path, "--tokenizer", "qwen2.5")
                self.assertEqual(code, 2, err)
                self.assertIn("lockstep: ", err)
                self.assertIn(path + pointer, err)
        path = self.write("gpt2.json", body(tools=tools()))
        code, _, err = run("generate", "--request", path, "--tokenizer", "gpt2")
        self.assertEqual(code, 2, err)
        self.assertIn(path + "#/lockstep_format", err)
        code, _, err = run("generate", "--request", path, "--regex", "a")
        self.assertEqual(code, 2, err)
        self.assertIn("not several", err)


if __name__ == "__main__":
    structured.LOCKSTEP = sys.argv.pop(1)
    unittest.main()
