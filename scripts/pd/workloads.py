#!/usr/bin/env python3
"""Tables of scripts/pd/workloads.sh's runs: per workload, fleet and split rule, each level's
tokens/s per GPU, median ITL, TTFT p50/p99 and requests served; then goodput per GPU at 30
tokens/s/user (tokens/s per GPU of the highest level whose median ITL <= 1/30 s with every
request served; a prompt the engine refuses as longer than the context is the workload's, the
same under every rule, and does not count as a failure) and the cost rule / the best preset.

Usage: scripts/pd/workloads.py OUT
"""
import glob
import json
import os
import re
import sys

TARGET_ITL = 1 / 30
out = sys.argv[1]
groups = {}  # (workload, fleet) -> rule -> [(order, level dict)]
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)[:-5]
    m = re.match(r"(sp|tr)_(.+)_(cost|dynamo|llmd)(?:_x([\d.]+))?$", name)
    if not m:
        continue
    kind, fleet, rule, speed = m.groups()
    with open(path) as f:
        run = json.load(f)
    for i, lv in enumerate(run["levels"]):
        t = lv["throughput"]
        order = float(speed) if speed else (lv.get("rate_per_s") or i)
        groups.setdefault((kind, fleet), {}).setdefault(rule, []).append((order, {
            "name": ("x%s" % speed) if speed else lv["name"],
            "tps_gpu": (t["input_tokens_per_s"] + t["output_tokens_per_s"]) / run["gpus"],
            "itl_p50": lv["itl_s"]["p50"], "ttft_p50": lv["ttft_s"]["p50"],
            "ttft_p99": lv["ttft_s"]["p99"], "ok": lv["requests"]["ok"],
            "sent": lv["requests"]["sent"], "hit": lv["cache"]["hit_rate"],
            # refused by the engine (a prompt longer than the context): the workload's, the
            # same under every rule, not a request the fleet failed to serve
            "refused": lv["requests"].get("errors", {}).get("http_4xx", 0)}))

def goodput(levels):
    best = None
    for _, lv in sorted(levels, key=lambda x: x[0]):
        if lv["itl_p50"] is not None and lv["itl_p50"] <= TARGET_ITL and lv["ok"] + lv["refused"] == lv["sent"]:
            best = lv
    return best

for (kind, fleet), rules in sorted(groups.items()):
    print("\n### %s on %s\n" % ({"sp": "shared-prefix", "tr": "trace"}[kind], fleet))
    print("| rule | level | tok/s/GPU | ITL p50 (ms) | TTFT p50 / p99 (s) | hit rate | ok/sent |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for rule in sorted(rules):
        for _, lv in sorted(rules[rule], key=lambda x: x[0]):
            print("| %s | %s | %.0f | %.1f | %.2f / %.2f | %.3f | %d/%d |" % (
                rule, lv["name"], lv["tps_gpu"], 1000 * (lv["itl_p50"] or 0), lv["ttft_p50"] or 0,
                lv["ttft_p99"] or 0, lv["hit"], lv["ok"], lv["sent"]))
    g = {rule: goodput(levels) for rule, levels in rules.items()}
    for rule in sorted(g):
        print("goodput/GPU @30 %s: %s" % (rule, "%.0f (%s)" % (g[rule]["tps_gpu"], g[rule]["name"])
                                         if g[rule] else "none"))
    presets = [g[r]["tps_gpu"] for r in ("dynamo", "llmd") if g.get(r)]
    if g.get("cost") and presets:
        print("cost / best preset @30: %.3fx" % (g["cost"]["tps_gpu"] / max(presets)))
