#!/usr/bin/env python3
"""Runs `lockstep bench` over each subset of the real-world JSONSchemaBench sample
(../shared/data/jsonschemabench-wild, traces llama3-wild.jsonl), one process per subset, and
prints one markdown table against the targets of issue 21 (bench/RESULTS.md "Real-world
schemas"), plus the causes of the misses from --per-schema.

usage: bench/wild_subsets.py [--lockstep build/cli/lockstep] [--data ../shared/data]
                             [--out DIR] [--subsets A,B] [--per-mask]
                             [-- EXTRA BENCH FLAGS...]

Every subset runs in a fresh process (its first schemas pay the process's one-off costs, as a
server's first requests do). Per subset: compiled / failed / timed out, first mask and per-mask
p50/p99/max, peak RSS, valid accepted / rejected (key order apart), invalid accepted. A figure
over its target is marked with "!". --per-mask also keeps every fill of the valid replays, one
line each (`lockstep bench --per-mask`), in OUT/<subset>.per-mask.jsonl, and prints the fills
over 50 µs by what they did.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

# The targets on real-world schemas (per subset). µs, except RSS (MiB).
TARGETS = {"mask_p50": 1.0, "mask_p99": 50.0, "mask_max": 2000.0, "first_p50": 2000.0,
           "first_p99": 50000.0, "first_max": 1e6, "rss": 1024.0}


def subset_of(name):
    return re.sub(r"(---.*|_\d+\.json)$", "", name)


def mark(value, target, fmt):
    if value is None:
        return "-"
    return fmt.format(value) + (" !" if value > target else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lockstep", default="build/cli/lockstep")
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--out", default=None, help="keeps each subset's JSON and per-schema lines")
    ap.add_argument("--subsets", default=None)
    ap.add_argument("--per-mask", action="store_true",
                    help="keeps every fill in OUT/<subset>.per-mask.jsonl")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    wild = os.path.join(a.data, "jsonschemabench-wild", "maskbench")
    traces = os.path.join(a.data, "traces", "llama3-wild.jsonl")
    if not os.path.isdir(wild):
        sys.exit(f"no {wild}: the real-world sample is in ../shared/data")
    files = collections.defaultdict(list)
    for f in sorted(os.listdir(wild)):
        if f.endswith(".json"):
            files[subset_of(f)].append(f)
    wanted = a.subsets.split(",") if a.subsets else sorted(files)
    out = a.out or tempfile.mkdtemp(prefix="wild-")
    os.makedirs(out, exist_ok=True)
    rows, causes = [], []
    for sub in wanted:
        d = os.path.join(out, sub)
        os.makedirs(d, exist_ok=True)
        for f in files[sub]:
            link = os.path.join(d, f)
            if not os.path.exists(link):
                os.symlink(os.path.abspath(os.path.join(wild, f)), link)
        per = os.path.join(out, sub + ".per-schema.jsonl")
        cmd = [a.lockstep, "bench", "--maskbench", d, "--traces", traces, "--json",
               "--per-schema", per] + a.extra
        per_mask = os.path.join(out, sub + ".per-mask.jsonl")
        if a.per_mask:
            cmd += ["--per-mask", per_mask]
        t0 = time.time()
        print(f"{sub}: {len(files[sub])} files ...", file=sys.stderr, flush=True)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"{sub}: exit {r.returncode}: {r.stderr.strip()}")
        j = json.loads(r.stdout)
        with open(os.path.join(out, sub + ".json"), "w") as fh:
            json.dump(j, fh, indent=1)
        fm, m = j["first_mask_us"], j["mask_us"]
        rows.append((sub, j, time.time() - t0))
        # Causes of the per-mask misses: the slowest fills over the max target, by kind.
        kinds = collections.Counter()
        for line in open(per):
            p = json.loads(line)
            s = p.get("slowest")
            if s and s["us"] > TARGETS["mask_max"]:
                kinds[s["trace"]["kind"]] += 1
        if kinds:
            causes.append(f"{sub}: schemas whose slowest fill is over 2 ms, by what it did: " +
                          ", ".join(f"{k} {n}" for k, n in kinds.most_common()))
        if a.per_mask:
            # Every fill over the p99 target, by what it did: how many, their time in ms.
            over, spent, total = collections.Counter(), collections.Counter(), 0.0
            for line in open(per_mask):
                f = json.loads(line)
                total += f["us"]
                if f["us"] > TARGETS["mask_p99"]:
                    over[f["trace"]["kind"]] += 1
                    spent[f["trace"]["kind"]] += f["us"] / 1000.0
            causes.append(f"{sub}: fills over 50 µs by what they did (count, ms; {total / 1000:.0f} "
                          "ms in all fills): " + ", ".join(
                              f"{k} {n} ({spent[k]:.0f} ms)" for k, n in over.most_common()))
    print("| subset | schemas: compiled / failed / timed out | first mask p50 / p99 / max (ms) "
          "| per mask p50 / p99 / max (µs) | peak RSS (MiB) | valid accepted / rejected (key order) "
          "| invalid accepted |")
    print("|---|---|---|---|---|---|---|")
    for sub, j, secs in rows:
        s, fm, m, v, inv = j["schemas"], j["first_mask_us"], j["mask_us"], j["valid"], j["invalid"]
        ms = lambda x: None if x is None else x / 1000.0
        first = " / ".join([mark(ms(fm["p50"]), TARGETS["first_p50"] / 1000, "{:.2f}"),
                            mark(ms(fm["p99"]), TARGETS["first_p99"] / 1000, "{:.1f}"),
                            mark(ms(fm["max"]), TARGETS["first_max"] / 1000, "{:.0f}")])
        mask = " / ".join([mark(m["p50"], TARGETS["mask_p50"], "{:.2f}"),
                           mark(m["p99"], TARGETS["mask_p99"], "{:.1f}"),
                           mark(m["max"], TARGETS["mask_max"], "{:.0f}")])
        print(f"| {sub} | {s['compiled']} / {s['failed']} / {s['timeouts']} | {first} | {mask} "
              f"| {mark(j['peak_rss_mb'], TARGETS['rss'], '{:.0f}')} "
              f"| {v['accepted']} / {v['rejected']} ({v['rejected_other_rendering']}) "
              f"| {inv['accepted']} |")
    for c in causes:
        print("\n" + c)
    print(f"\n(outputs in {out})", file=sys.stderr)


if __name__ == "__main__":
    main()
