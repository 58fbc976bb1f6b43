#!/usr/bin/env python3
"""Builds the n-gram training corpus under schemas/corpus/ from the JSONSchemaBench traces.

Offers the three JSONL files (one {"text": ...} document per line) that NgramModel::TrainFromCorpus
reads: json.jsonl (compact JSON instances), values.jsonl (their leaf values, deduplicated) and
toolcalls.jsonl (the instances wrapped as tool calls). Python 3 standard library only.

Usage: make_corpus.py [TRACES_JSONL] [OUT_DIR]
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TRACES = os.path.join(HERE, "..", "..", "..", "shared", "data", "traces",
                              "llama3-glaive-dev.jsonl")


def tool_name(file_field):
    # "Glaiveai2K---analyze_health_data_4ad104b4.json" -> "analyze_health_data"
    stem = file_field.rsplit("/", 1)[-1]
    stem = stem.split("---", 1)[-1]
    stem = re.sub(r"\.json$", "", stem)
    stem = re.sub(r"_[0-9a-f]{8}$", "", stem)
    return stem


def leaves(value, out):
    if isinstance(value, dict):
        for v in value.values():
            leaves(v, out)
    elif isinstance(value, list):
        for v in value:
            leaves(v, out)
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, str):
        out.append(value)
    elif isinstance(value, (int, float)):
        out.append(None)  # numbers are taken as written, from the raw text (see below)




def raw_numbers(text):
    # Numbers exactly as written in the compact JSON text, outside of strings.
    out, in_str, esc = [], False, False
    outside = []
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            outside.append(" ")
        else:
            if ch == '"':
                in_str = True
                outside.append(" ")
            else:
                outside.append(ch)
    for m in re.finditer(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", "".join(outside)):
        out.append(m.group(0))
    return out


def dump(docs, path):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for text in docs:
            f.write(json.dumps({"text": text}, ensure_ascii=False) + "\n")


def main():
    traces = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_TRACES
    out_dir = sys.argv[2] if len(sys.argv) > 2 else HERE
    json_docs, value_docs, tool_docs = [], [], []
    seen_values = set()
    with open(traces, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            rec = json.loads(line)
            text = rec["text"]
            json_docs.append(text)
            vals = []
            leaves(json.loads(text), vals)
            vals = [v for v in vals if v is not None] + raw_numbers(text)
            for v in vals:
                if v and v not in seen_values:
                    seen_values.add(v)
                    value_docs.append(v)
            name = tool_name(rec["file"])
            tool_docs.append(
                '<tool_call>{"name": "%s", "arguments": %s}</tool_call>' % (name, text))
            tool_docs.append('{"name":"%s","parameters":%s}' % (name, text))
    dump(json_docs, os.path.join(out_dir, "json.jsonl"))
    dump(value_docs, os.path.join(out_dir, "values.jsonl"))
    dump(tool_docs, os.path.join(out_dir, "toolcalls.jsonl"))
    print("json: %d docs, values: %d docs, toolcalls: %d docs"
          % (len(json_docs), len(value_docs), len(tool_docs)))


if __name__ == "__main__":
    main()
