#!/usr/bin/env python3
"""Tables of scripts/pd/infera.sh's runs: per topology and router, per concurrency level the
throughput per GPU, median ITL, TTFT and ITL p50/p99 and the P/D transfer line; then Infera's
goodput per GPU at each per-user speed target (the tokens/s/GPU of the highest concurrency
whose median ITL is at most 1/target) and the ratios the issue asks for.

Usage: scripts/pd/summarize.py OUT
"""
import glob
import json
import os
import re
import sys

out = sys.argv[1]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*_c*.json"))):
    name = os.path.basename(path)[:-5]
    m = re.match(r"(.+)_c(\d+)$", name)
    if not m:
        continue
    label, c = m.group(1), int(m.group(2))
    with open(path) as f:
        run = json.load(f)
    level = run["levels"][0]
    points = run["goodput"]["infera"][0]["points"] if run["goodput"]["infera"] else []
    tps_gpu = points[0]["tokens_per_s_per_gpu"] if points else None
    pd_line = ""
    err = os.path.join(out, name + ".stderr")
    if os.path.exists(err):
        for line in open(err):
            if "P/D split" in line:
                pd_line = line.split(": ", 1)[1].strip()
    runs.setdefault(label, {})[c] = {
        "gpus": run["gpus"],
        "tps_gpu": tps_gpu,
        "itl_p50": level["itl_s"]["p50"],
        "itl_p99": level["itl_s"]["p99"],
        "ttft_p50": level["ttft_s"]["p50"],
        "ttft_p99": level["ttft_s"]["p99"],
        "ok": level["requests"]["ok"],
        "sent": level["requests"]["sent"],
        "hit": level["cache"]["hit_rate"],
        "pd": pd_line,
    }

def ms(x):
    return "%.1f" % (1000 * x)

print("| run | c | GPUs | ok/sent | tok/s/GPU | ITL p50 / p99 (ms) | TTFT p50 / p99 (s) | hit rate | P/D |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
for label in sorted(runs):
    for c in sorted(runs[label]):
        r = runs[label][c]
        print("| %s | %d | %d | %d/%d | %s | %s / %s | %.2f / %.2f | %.3f | %s |" % (
            label, c, r["gpus"], r["ok"], r["sent"],
            "%.0f" % r["tps_gpu"] if r["tps_gpu"] is not None else "-",
            ms(r["itl_p50"]), ms(r["itl_p99"]), r["ttft_p50"], r["ttft_p99"], r["hit"], r["pd"]))

def goodput(label, target):
    best = None
    for c in sorted(runs.get(label, {})):
        r = runs[label][c]
        if r["tps_gpu"] is not None and r["itl_p50"] <= 1.0 / target and r["ok"] == r["sent"]:
            best = (c, r["tps_gpu"])
    return best

print()
print("| run | goodput/GPU @30 tok/s/user (c) | @50 (c) |")
print("|---|---:|---:|")
g = {}
for label in sorted(runs):
    cells = []
    for t in (30, 50):
        b = goodput(label, t)
        g[(label, t)] = b
        cells.append("%.0f (c=%d)" % (b[1], b[0]) if b else "none")
    print("| %s | %s | %s |" % (label, cells[0], cells[1]))
print()
for t in (30, 50):
    base = g.get(("agg_tp8", t))
    for label in sorted(runs):
        if label == "agg_tp8":
            continue
        b = g.get((label, t))
        if base and b:
            print("%s / agg_tp8 @%d: %.2fx" % (label, t, b[1] / base[1]))
        else:
            print("%s / agg_tp8 @%d: n/a (%s)" % (label, t, "no level met it" if base else "baseline met none"))
    cost = g.get(("pd_cost", t))
    presets = [g.get((l, t)) for l in ("pd_dynamo", "pd_llmd") if g.get((l, t))]
    if cost and presets:
        best = max(p[1] for p in presets)
        print("pd_cost / best preset @%d: %.2fx" % (t, cost[1] / best))
