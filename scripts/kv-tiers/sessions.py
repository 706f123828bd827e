#!/usr/bin/env python3
"""Where a closed-loop run's sessions are: sessions per worker over time, and their moves.

A session is on the worker that served its latest turn started by then, from its first turn's
start to its last turn's end. A move is a turn routed to another worker than the session's
previous turn. Used to see how a policy's placement evolves (docs/bench/kv-tiers.md
"Session 20": the tail of a run is the workers that still hold many sessions once the others
have finished theirs).

Usage: sessions.py OUT LABEL [--at T ...]
Reads OUT/<label>_requests.csv and OUT/<label>_decisions.csv (kvroute simulate), first level
only: the decisions' `request` is the request's row in that level, checked by prompt size.
Prints the session count, the moves, the session-end quantiles and, per --at time (seconds
from the run's start), the sessions on each worker.
"""
import argparse
import csv
import os
import sys
from collections import defaultdict


def rows_of_first_level(path):
    rows = list(csv.DictReader(open(path)))
    if not rows:
        raise SystemExit(f"{path}: no rows")
    level = rows[0]["level"]
    return [r for r in rows if r["level"] == level]


def analyse(out, label):
    requests = rows_of_first_level(os.path.join(out, label + "_requests.csv"))
    decisions = rows_of_first_level(os.path.join(out, label + "_decisions.csv"))
    worker_of = {}
    for d in decisions:
        i = int(d["request"])
        if i >= len(requests) or int(d["prompt_tokens"]) != int(requests[i]["prompt_tokens"]):
            raise SystemExit(f"{label}: decision for request {i} does not match the requests CSV")
        worker_of[i] = int(d["worker"])
    if not worker_of:
        raise SystemExit(f"{label}: no routed requests in the first level")
    turns = defaultdict(list)  # session -> [(start, end, worker)]
    for i, r in enumerate(requests):
        if i not in worker_of:
            continue  # never routed (no worker could take it)
        start = float(r["start_s"])
        turns[r["session"]].append((start, start + float(r["e2e_s"]), worker_of[i]))
    for v in turns.values():
        v.sort()
    moves = sum(1 for v in turns.values() for a, b in zip(v, v[1:]) if a[2] != b[2])
    workers = 1 + max(worker_of.values())
    return {"sessions": turns, "moves": moves, "workers": workers}


def per_worker_at(result, t):
    counts = [0] * result["workers"]
    for v in result["sessions"].values():
        if v[0][0] <= t <= v[-1][1]:
            counts[[w for start, _, w in v if start <= t][-1]] += 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("label")
    ap.add_argument("--at", type=float, nargs="*", default=[], help="times, seconds")
    a = ap.parse_args()
    result = analyse(a.out, a.label)
    ends = sorted(v[-1][1] for v in result["sessions"].values())
    n = len(ends)
    print(f"{a.label}: {n} sessions, {result['moves']} moves; session ends: first {ends[0]:.0f} s,"
          f" 10 % {ends[n // 10]:.0f} s, median {ends[n // 2]:.0f} s, 90 % {ends[9 * n // 10]:.0f} s,"
          f" last {ends[-1]:.0f} s")
    for t in a.at:
        counts = per_worker_at(result, t)
        print(f"  t = {t:.0f} s: sessions per worker {' / '.join(map(str, counts))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
