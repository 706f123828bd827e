#!/usr/bin/python3
"""Fidelity table: `kvroute simulate` against live `kvroute bench compare` runs.

Reads run JSON files (schema kvroute.bench.run/1, one level each) and prints a Markdown table
of TTFT p50, ITL p50, throughput (input + output tokens/s per GPU) and engine hit rate, live
next to simulated, with the relative gap. A gap above --tolerance is marked with "**".

Usage:
  table.py --tolerance 0.10 ROW...
  ROW = workload:policy:LIVE_JSON[,LIVE_JSON_AT_HALF_SPEED]:SIM_JSON

Time base: a run JSON with "time_base" is already in model time (bench/time_base.h). An older
one without it is converted here: times x speedup, rates / speedup (speedup from its config).
"""

import argparse
import csv
import json
import os
import sys


def level_metrics(path):
    with open(path) as f:
        doc = json.load(f)
    if len(doc["levels"]) != 1:
        sys.exit(f"{path}: expected one level, found {len(doc['levels'])}")
    lv = doc["levels"][0]
    speedup = 1.0
    if "time_base" not in doc:  # wall-clock report: convert to model time
        speedup = float(dict(doc.get("config", {})).get("speedup", 1.0))
    gpus = doc.get("gpus") or 1
    # Offered rate in model time from the send times (<stem>_requests.csv beside the JSON):
    # checks that the live open-loop arrivals were converted to the simulated rate.
    starts = []
    csv_path = os.path.splitext(path)[0] + "_requests.csv"
    if os.path.exists(csv_path):
        with open(csv_path) as f:
            starts = sorted(float(r["start_s"]) * speedup for r in csv.DictReader(f))
    send_rate = (len(starts) - 1) / (starts[-1] - starts[0]) if len(starts) > 1 and starts[-1] > starts[0] else None
    tp = lv["throughput"]
    return {
        "ok": lv["requests"]["ok"],
        "failed": lv["requests"]["failed"],
        "ttft": lv["ttft_s"]["p50"] * speedup,
        "itl": lv["itl_s"]["p50"] * speedup,
        "tput": (tp["input_tokens_per_s"] + tp["output_tokens_per_s"]) / speedup / gpus,
        "hit": lv["cache"]["hit_rate"],
        "send_rate": send_rate,
        "gpus": gpus,
        "speedup": float(doc.get("time_base", {}).get("speedup", speedup)),
    }


def gap(live, sim):
    if live is None or sim is None or live == 0:
        return None
    return (sim - live) / live


def cell(live, sim, fmt, tol):
    g = gap(live, sim)
    if live is None or sim is None:
        return "–"
    text = f"{fmt(live)} / {fmt(sim)} ({g:+.0%})" if g is not None else f"{fmt(live)} / {fmt(sim)}"
    return f"**{text}**" if g is not None and abs(g) > tol else text


METRICS = [
    ("ttft", "TTFT p50 (ms)", lambda v: f"{v * 1000:.0f}"),
    ("itl", "ITL p50 (ms)", lambda v: f"{v * 1000:.1f}"),
    ("tput", "tok/s/GPU", lambda v: f"{v:.0f}"),
    ("hit", "hit rate", lambda v: f"{v:.3f}"),
]
# Shown, not judged: requests sent per model second (first to last send).
EXTRA = [("send_rate", "sends/s", lambda v: f"{v:.2f}")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tolerance", type=float, default=0.10)
    ap.add_argument("rows", nargs="+")
    a = ap.parse_args()

    out = []
    head = "| workload | policy | ok live / sim | " + " | ".join(
        f"{title} live / sim" for _, title, _ in METRICS + EXTRA) + " |"
    out.append(head)
    out.append("|" + "---|" * (3 + len(METRICS) + len(EXTRA)))
    checks = []
    outside = 0
    within_all = {}  # workload -> [policies within tolerance on every judged metric]
    workloads = {}  # workload -> [policies]
    within_by_metric = {key: 0 for key, _, _ in METRICS}
    for row in a.rows:
        workload, policy, live_spec, sim_path = row.split(":", 3)
        lives = [level_metrics(p) for p in live_spec.split(",")]
        live, sim = lives[0], level_metrics(sim_path)
        if live["gpus"] != sim["gpus"]:
            sys.exit(f"{row}: live counts {live['gpus']} GPUs, the simulation {sim['gpus']}")
        cells = []
        row_ok = True
        for key, _, fmt in METRICS:
            cells.append(cell(live[key], sim[key], fmt, a.tolerance))
            g = gap(live[key], sim[key])
            if g is not None and abs(g) > a.tolerance:
                outside += 1
            if g is None or abs(g) > a.tolerance:
                row_ok = False
            else:
                within_by_metric[key] += 1
        workloads.setdefault(workload, []).append(policy)
        if row_ok:
            within_all.setdefault(workload, []).append(policy)
        for key, _, fmt in EXTRA:
            cells.append(cell(live[key], sim[key], fmt, float("inf")))
        out.append(f"| {workload} | {policy} | {live['ok']} / {sim['ok']} | " +
                   " | ".join(cells) + " |")
        if len(lives) > 1:
            slow = lives[1]
            checks.append(
                f"| {workload} | {policy} | {live['speedup']:g} / {slow['speedup']:g} | " +
                " | ".join(cell(live[k], slow[k], f, a.tolerance) for k, _, f in METRICS) + " |")
    print("\n".join(out))
    print(f"\n{outside} of {len(a.rows) * len(METRICS)} values outside ±{a.tolerance:.0%} "
          "(marked **; the gap is (sim − live) / live). Within it, by metric: " +
          ", ".join(f"{title} {within_by_metric[key]} of {len(a.rows)}"
                    for key, title, _ in METRICS) + ".")
    # Issue 7's criterion: per workload, at least three policies with every metric within.
    for workload, policies in workloads.items():
        ok = within_all.get(workload, [])
        verdict = "met" if len(ok) >= 3 else "not met"
        print(f"\n{workload}: {len(ok)} of {len(policies)} policies within ±{a.tolerance:.0%} on "
              f"all {len(METRICS)} metrics ({', '.join(ok) if ok else 'none'}): "
              f"target (≥ 3 policies) {verdict}.")
    if checks:
        print("\nLive at speedup S against S/2 (model time; S / S/2 in each cell):\n")
        print("| workload | policy | speedups | " + " | ".join(t for _, t, _ in METRICS) + " |")
        print("|" + "---|" * (3 + len(METRICS)))
        print("\n".join(checks))


if __name__ == "__main__":
    main()
