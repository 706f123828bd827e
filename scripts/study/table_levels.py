#!/usr/bin/python3
"""One Markdown row per run and level of a folder of `kvroute simulate` outputs (scripts/study/ab.sh).

Per level: ok/sent, TTFT p50 and p99, ITL p50, engine hit rate, tokens/s/GPU (input + output),
DistServe SLO attainment when set, engine preemptions (summed over workers, _workers.csv),
moves per session (closed-loop workloads: follow-up turns routed to another worker than the
session's previous turn, from _requests.csv joined with _decisions.csv) and the run's CPU
seconds (from <label>.time, GNU time -v).

Usage: table_levels.py OUT [LABEL_PREFIX]
"""

import collections
import csv
import glob
import os
import sys


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def moves_by_level(stem):
    reqs, decs = stem + "_requests.csv", stem + "_decisions.csv"
    if not (os.path.exists(reqs) and os.path.exists(decs)):
        return {}
    rows_by_level = collections.defaultdict(list)
    for r in read_csv(reqs):
        rows_by_level[r["level"]].append(r)
    worker = {(d["level"], int(d["request"])): d["worker"] for d in read_csv(decs)}
    out = {}
    for level, rows in rows_by_level.items():
        turns = collections.defaultdict(list)
        for i, r in enumerate(rows):  # decisions' `request` = row of the level in requests.csv
            if int(r["session"]) >= 0 and (level, i) in worker:
                turns[r["session"]].append((int(r["turn"]), worker[(level, i)]))
        if turns:
            moves = sum(sum(1 for a, b in zip(sorted(t), sorted(t)[1:]) if a[1] != b[1])
                        for t in turns.values())
            out[level] = moves / len(turns)
    return out


def preemptions_by_level(stem):
    path = stem + "_workers.csv"
    out = collections.Counter()
    if os.path.exists(path):
        for r in read_csv(path):
            out[r["level"]] += int(r["preemptions"])
    return out


def cpu_seconds(stem):
    path = stem + ".time"
    if not os.path.exists(path):
        return None
    user = system = 0.0
    with open(path) as f:
        for line in f:
            if "User time" in line:
                user = float(line.split(":")[-1])
            elif "System time" in line:
                system = float(line.split(":")[-1])
    return user + system


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out, prefix = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
    print("| run | level | ok | TTFT p50 (s) | TTFT p99 (s) | ITL p50 (ms) | hit rate | "
          "tok/s/GPU | SLO attain. | preemptions | moves/session | CPU s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for levels_path in sorted(glob.glob(os.path.join(out, prefix + "*_levels.csv"))):
        stem = levels_path[: -len("_levels.csv")]
        gpus = 1
        json_path = stem + ".json"
        if os.path.exists(json_path):
            import json
            with open(json_path) as f:
                gpus = json.load(f).get("gpus") or 1
        moves, pre, cpu = moves_by_level(stem), preemptions_by_level(stem), cpu_seconds(stem)
        for lv in read_csv(levels_path):
            tput = (float(lv["input_tokens_per_s"]) + float(lv["output_tokens_per_s"])) / gpus
            slo = f"{float(lv['slo_attainment']):.3f}" if lv["slo_attainment"] else "—"
            mv = f"{moves[lv['level']]:.2f}" if lv["level"] in moves else "—"
            print(f"| {os.path.basename(stem)} | {lv['level']} | {lv['ok']}/{lv['sent']} | "
                  f"{float(lv['ttft_p50_s']):.3f} | {float(lv['ttft_p99_s']):.3f} | "
                  f"{float(lv['itl_p50_s']) * 1000:.1f} | {float(lv['hit_rate']):.3f} | "
                  f"{tput:.0f} | {slo} | {pre[lv['level']]} | {mv} | "
                  f"{'—' if cpu is None else f'{cpu:.1f}'} |")


if __name__ == "__main__":
    main()
