#!/usr/bin/env python3
"""Summarises scripts/policy-matrix/live.sh OUT: per router, the live runs' SLO attainment
(mean, median, range), TTFT p50 / p99 (medians) and cached fraction (mean), beside the same
cell in `kvroute simulate` over seeds 1-5. Usage: live_table.py OUT"""
import glob
import json
import os
import statistics as st
import sys


def slo(path):
    with open(path) as f:
        return json.load(f)["levels"][0]["slo_attainment"]


def main(out):
    live = {}
    for d in sorted(glob.glob(os.path.join(out, "*_r*"))):
        if not os.path.isfile(os.path.join(d, "compare.json")):
            continue
        with open(os.path.join(d, "compare.json")) as f:
            compare = json.load(f)
        for r in compare["routers"]:
            name = r["router"]
            per_router = os.path.join(d, name.replace(":", "_") + ".json")
            live.setdefault(name, []).append(
                (slo(per_router), r["ttft_s"]["p50"], r["ttft_s"]["p99"], r["cached_fraction"]))
    sim = {}
    for d in glob.glob(os.path.join(out, "simulate_*_seed*")):
        if not os.path.isdir(d):
            continue
        policy = os.path.basename(d)[len("simulate_"):].rsplit("_seed", 1)[0]
        with open(os.path.join(d, "simulate.json")) as f:
            level = json.load(f)["levels"][0]
        sim["kvroute:" + policy] = sim.get("kvroute:" + policy, []) + [
            (level["slo_attainment"], level["ttft_s"]["p50"], level["ttft_s"]["p99"],
             level["cache"]["client_cached_fraction"])]
    print("| router | live runs | live SLO mean (median; range) | live TTFT p50 / p99 | live cached "
          "| simulate seeds | simulate SLO mean (range) | simulate TTFT p50 / p99 | simulate cached |")
    print("|---|---|---|---|---|---|---|---|---|")
    order = sorted(live, key=lambda n: -st.mean(x[0] for x in live[n]))
    for name in order:
        v = live[name]
        s = [x[0] for x in v]
        row = (f"| {name} | {len(v)} | {st.mean(s):.3f} ({st.median(s):.3f}; {min(s):.3f}–{max(s):.3f}) "
               f"| {st.median(x[1] for x in v):.2f} / {st.median(x[2] for x in v):.2f} s "
               f"| {st.mean(x[3] for x in v):.3f} ")
        w = sim.get(name)
        if w:
            t = [x[0] for x in w]
            row += (f"| {len(w)} | {st.mean(t):.3f} ({min(t):.3f}–{max(t):.3f}) "
                    f"| {st.median(x[1] for x in w):.2f} / {st.median(x[2] for x in w):.2f} s "
                    f"| {st.mean(x[3] for x in w):.3f} |")
        else:
            row += "| — | — | — | — |"
        print(row)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
