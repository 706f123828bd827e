#!/usr/bin/python3
"""Issue 6's comparison table from scripts/study/agentic_ladder.sh's folder (simulate runs).

For each run ladder_cpu<N>_<policy>: Infera's stop rule (after a level whose mean ITL exceeds
--stop-mean-itl ms, 40 by default as Infera's run_sweep.sh, the higher levels do not count),
then goodput at each per-user target T (30, 50 tok/s): total (input + output) tokens/s per GPU
at the highest level that counts whose ITL p50 <= 1/T, and its ratio to round_robin of the same
tier. Latencies and hit rates (GPU and host tier, over prompt tokens) are those of the level
where goodput@30 is taken. --levels adds one row per run and level.

Usage: ladder_table.py OUT [--levels] [--stop-mean-itl MS] [--baseline POLICY]
"""

import argparse
import csv
import glob
import os
import re


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_run(stem):
    levels = read_csv(stem + "_levels.csv")
    gpus, cpu_hits, queries = {}, {}, {}
    for w in read_csv(stem + "_workers.csv"):
        lv = w["level"]
        gpus[lv] = gpus.get(lv, 0) + int(w["gpus"])
        cpu_hits[lv] = cpu_hits.get(lv, 0) + int(w["cpu_cache_hits"])
        queries[lv] = queries.get(lv, 0) + int(w["prefix_cache_queries"])
    rows = []
    for r in levels:
        lv = r["level"]
        tok = (float(r["input_tokens_per_s"]) + float(r["output_tokens_per_s"])) / gpus[lv]
        cpu = cpu_hits[lv] / queries[lv] if queries[lv] else 0.0
        rows.append({
            "c": int(r["concurrency"]), "ok": int(r["ok"]), "tok_gpu": tok,
            "ttft_p50": float(r["ttft_p50_s"]), "ttft_p99": float(r["ttft_p99_s"]),
            "itl_p50": float(r["itl_p50_s"]) * 1e3, "itl_p99": float(r["itl_p99_s"]) * 1e3,
            "itl_mean": float(r["itl_mean_s"]) * 1e3,
            "gpu_hit": float(r["hit_rate"]) - cpu, "cpu_hit": cpu,
        })
    return sorted(rows, key=lambda x: x["c"])


def counted(rows, stop_ms):
    """Levels that count under the stop rule, and the level after which the sweep stopped."""
    out = []
    for r in rows:
        out.append(r)
        if stop_ms > 0 and r["itl_mean"] > stop_ms:
            return out, r
    return out, None


def goodput(rows, target_tps):
    best = None
    for r in rows:  # highest counted level meeting the target
        if r["itl_p50"] <= 1e3 / target_tps:
            best = r
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--levels", action="store_true")
    ap.add_argument("--stop-mean-itl", type=float, default=40.0)
    ap.add_argument("--baseline", default="round_robin")
    a = ap.parse_args()
    runs = {}
    for path in sorted(glob.glob(os.path.join(a.out, "ladder_cpu*_levels.csv"))):
        stem = path[: -len("_levels.csv")]
        m = re.match(r"ladder_cpu(\d+)_(.+)$", os.path.basename(stem))
        runs[(int(m.group(1)), m.group(2))] = load_run(stem)
    for tier in sorted({t for t, _ in runs}, reverse=True):
        print(f"\n#### Host tier: {tier:,} CPU blocks per worker" if tier else
              "\n#### No host tier (vLLM's default)")
        print("\n| policy | goodput@30 tok/s/GPU | ratio | at c | stopped after (mean ITL) | "
              "goodput@50 | ratio | at c | TTFT p50 s | TTFT p99 s | ITL p50 ms | ITL p99 ms | "
              "GPU hit | CPU hit |")
        print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        base = runs.get((tier, a.baseline))
        base30 = base50 = None
        if base:
            bc, _ = counted(base, a.stop_mean_itl)
            base30, base50 = goodput(bc, 30), goodput(bc, 50)
        for (t, pol), rows in sorted(runs.items(), key=lambda kv: (kv[0][1] != a.baseline, kv[0][1])):
            if t != tier:
                continue
            cnt, stop = counted(rows, a.stop_mean_itl)
            g30, g50 = goodput(cnt, 30), goodput(cnt, 50)

            def cell(g, b):
                if not g:
                    return "0 | - | -"
                ratio = f"{g['tok_gpu'] / b['tok_gpu']:.2f}" if b else "-"
                return f"{g['tok_gpu']:,.0f} | {ratio} | {g['c']}"
            stop_s = f"c={stop['c']} ({stop['itl_mean']:.1f} ms)" if stop else "-"
            at = g30 or cnt[-1]
            print(f"| {pol} | {cell(g30, base30)} | {stop_s} | {cell(g50, base50)} | "
                  f"{at['ttft_p50']:.2f} | {at['ttft_p99']:.2f} | {at['itl_p50']:.1f} | "
                  f"{at['itl_p99']:.0f} | {at['gpu_hit']:.3f} | {at['cpu_hit']:.3f} |")
        if a.levels:
            print("\n| policy | c | ok | tok/s/GPU | TTFT p50 s | TTFT p99 s | ITL p50 ms | "
                  "ITL mean ms | ITL p99 ms | GPU hit | CPU hit |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
            for (t, pol), rows in sorted(runs.items()):
                if t != tier:
                    continue
                for r in rows:
                    print(f"| {pol} | {r['c']} | {r['ok']} | {r['tok_gpu']:,.0f} | "
                          f"{r['ttft_p50']:.2f} | {r['ttft_p99']:.2f} | {r['itl_p50']:.1f} | "
                          f"{r['itl_mean']:.1f} | {r['itl_p99']:.0f} | {r['gpu_hit']:.3f} | "
                          f"{r['cpu_hit']:.3f} |")


if __name__ == "__main__":
    main()
