#!/usr/bin/env python3
"""Per-run table of a kv-tiers results folder (scripts/kv-tiers/run.sh, learn.sh):
(input + output) tok/s/GPU per level, Infera goodput at 30 tok/s/user, TTFT p50/p99 and hit
rate at the last level. Usage: table.py OUT [label ...] (default: every <label>.json)."""
import glob
import json
import os
import sys


def main():
    out = sys.argv[1]
    labels = sys.argv[2:] or sorted(
        os.path.basename(p)[:-5] for p in glob.glob(os.path.join(out, "*.json")))
    print("| run | tok/s/GPU per level | goodput@30 (at c) | TTFT p50 / p99 last level | hit rate last level |")
    print("|---|---|---|---|---|")
    for label in labels:
        path = os.path.join(out, label + ".json")
        if not os.path.exists(path):
            continue
        r = json.load(open(path))
        gpus = r.get("gpus") or 1
        per = []
        for lv in r["levels"]:
            t = lv["throughput"]
            per.append("%.0f" % ((t["input_tokens_per_s"] + t["output_tokens_per_s"]) / gpus))
        good = "-"
        for g in (r.get("goodput") or {}).get("infera") or []:
            if g.get("target_tokens_per_s_per_user") == 30 and g.get("tokens_per_s_per_gpu") is not None:
                good = "%.0f (c=%s)" % (g["tokens_per_s_per_gpu"], g.get("at_concurrency"))
        last = r["levels"][-1]
        ttft = last.get("ttft_s") or {}
        hit = (last.get("cache") or {}).get("hit_rate")
        print("| %s | %s | %s | %.2f s / %.2f s | %s |" % (
            label, " / ".join(per), good, ttft.get("p50") or 0, ttft.get("p99") or 0,
            "%.3f" % hit if hit is not None else "-"))


if __name__ == "__main__":
    main()
