#!/usr/bin/env python3
"""Table of scripts/policy-matrix/run.sh's output folder, one block per (workload, fleet) cell.

For each preset: SLO attainment (TTFT <= 1 s and TPOT <= 50 ms, failed requests count as
missed), TTFT p50/p99 over served requests, the fraction of prompt tokens served from cache
(what clients saw in usage.cached_tokens), and failures. Then the check issue 15 states: the
default (predicted_latency, or DEFAULT=label) is within 5 % of the best preset on SLO
attainment and on TTFT p99, and never below round robin on either. Exit status 1 when a
cell fails the check.

Usage: table.py OUT [--markdown]
"""
import glob
import json
import os
import re
import sys


def main():
    out = sys.argv[1]
    markdown = "--markdown" in sys.argv
    default = os.environ.get("DEFAULT", "predicted_latency")
    cells = {}
    for path in sorted(glob.glob(os.path.join(out, "*.json"))):
        m = re.match(r"(.+)_w(\d+)_(.+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            doc = json.load(f)
        lv = doc["levels"][0]
        cells.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = {
            "slo": lv.get("slo_attainment") or 0.0,
            "p50": lv["ttft_s"]["p50"] or 0.0,
            "p99": lv["ttft_s"]["p99"] or 0.0,
            "cached": lv["cache"].get("client_cached_fraction") or 0.0,
            "ok": lv["requests"]["ok"],
            "failed": lv["requests"]["failed"],
        }
    failures = 0
    for (wl, w), rows in sorted(cells.items()):
        best_slo = max(r["slo"] for r in rows.values())
        best_p99 = min(r["p99"] for r in rows.values())
        if markdown:
            print(f"\n**{wl}, {w} workers**\n")
            print("| preset | SLO attainment | TTFT p50 (s) | TTFT p99 (s) | cached | ok / failed |")
            print("|---|---:|---:|---:|---:|---:|")
        else:
            print(f"\n{wl}, {w} workers")
        for name, r in sorted(rows.items(), key=lambda kv: -kv[1]["slo"]):
            mark = " *" if name == default else ""
            if markdown:
                print(f"| {name}{mark} | {r['slo']:.3f} | {r['p50']:.3f} | {r['p99']:.3f} | "
                      f"{r['cached']:.3f} | {r['ok']} / {r['failed']} |")
            else:
                print(f"  {name + mark:24s} slo {r['slo']:.3f}  ttft p50 {r['p50']:8.3f}  "
                      f"p99 {r['p99']:8.3f}  cached {r['cached']:.3f}  ok {r['ok']} failed {r['failed']}")
        d = rows.get(default)
        rr = rows.get("round_robin")
        if d is None:
            print(f"  check: no {default} run")
            continue
        problems = []
        if d["slo"] < 0.95 * best_slo:
            problems.append(f"SLO {d['slo']:.3f} < 95% of best {best_slo:.3f}")
        if d["p99"] > 1.05 * best_p99:
            problems.append(f"TTFT p99 {d['p99']:.3f} > 105% of best {best_p99:.3f}")
        if rr is not None and d["slo"] < rr["slo"]:
            problems.append("SLO below round_robin")
        if rr is not None and d["p99"] > rr["p99"]:
            problems.append("TTFT p99 above round_robin")
        failures += bool(problems)
        verdict = "FAIL: " + "; ".join(problems) if problems else "ok"
        print(f"{'' if markdown else '  '}check ({default}): {verdict}")
    print(f"\n{len(cells)} cells, {failures} failing the check")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
