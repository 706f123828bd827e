#!/usr/bin/env python3
"""Splits a closed-loop run's tok/s/GPU into the fleet's saturated rate and the tail.

Goodput at one concurrency is total tokens / makespan (first arrival to last completion). In a
closed loop whose sessions all start together, that number has two parts that a routing
policy can move differently:
  saturated  tokens of the requests completed from the first arrival until the end of
             session number n - floor(FULL * n) + 1 in order of ending (n sessions; FULL 0.9:
             the 11th of 96), per second of that phase and per GPU: what the fleet carries
             while it is (nearly) full;
  tail       the ideal makespan (all tokens at the saturated rate) / the measured makespan:
             1.0 when every session ends at once, lower when some finish early and the
             fleet runs part-empty while the rest catch up.
goodput = saturated * tail. The tail can read slightly above 1 when the phase's requests (early
turns, short contexts) are cheaper per token than the later ones.

Usage: saturation.py OUT LABEL [LABEL ...] [--full 0.9]
Reads OUT/<label>.json (gpus) and OUT/<label>_requests.csv (kvroute simulate or bench run),
first level only, without its warm-up requests (--warmup-step). Prints a markdown table.
"""
import argparse
import csv
import json
import os


def analyse(out, label, full):
    report = json.load(open(os.path.join(out, label + ".json")))
    gpus = report.get("gpus") or 1
    level = report["levels"][0]["name"]
    rows = [r for r in csv.DictReader(open(os.path.join(out, label + "_requests.csv")))
            if r["level"] == level and r["ok"] == "1" and r.get("warmup", "0") != "1"]
    if not rows:
        raise SystemExit(f"{label}: no successful requests in level {level}")
    session_end = {}
    first_start = min(float(r["start_s"]) for r in rows)
    done = []
    for r in rows:
        end = float(r["start_s"]) + float(r["e2e_s"])
        tokens = int(r["prompt_tokens"]) + int(r["output_tokens"])
        done.append((end, tokens))
        s = r["session"]
        session_end[s] = max(session_end.get(s, 0.0), end)
    ends = sorted(session_end.values())
    sessions = len(ends)
    # The phase ends with the (n - floor(FULL * n) + 1)-th session to end (module docstring).
    cut_index = sessions - int(full * sessions)
    phase_end = ends[cut_index] if cut_index < sessions else ends[-1]
    phase_tokens = sum(t for e, t in done if e <= phase_end)
    total_tokens = sum(t for _, t in done)
    makespan = ends[-1] - first_start
    phase = phase_end - first_start
    saturated = phase_tokens / phase / gpus if phase > 0 else 0.0
    ideal = total_tokens / (saturated * gpus) if saturated > 0 else 0.0
    return {
        "label": label,
        "goodput": total_tokens / makespan / gpus,
        "saturated": saturated,
        "phase": phase,
        "makespan": makespan,
        "tail": ideal / makespan if makespan > 0 else 0.0,
        "mean_end": sum(ends) / sessions - first_start,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("labels", nargs="+")
    ap.add_argument("--full", type=float, default=0.9,
                    help="share of sessions still running that counts as full (default 0.9)")
    args = ap.parse_args()
    if not 0 < args.full <= 1:
        raise SystemExit("--full must be in (0, 1]")
    print(f"| run | tok/s/GPU (makespan) | saturated tok/s/GPU (phase, s) | tail efficiency | "
          f"makespan / mean session end, s |")
    print("|---|---|---|---|---|")
    for label in args.labels:
        a = analyse(args.out, label, args.full)
        print(f"| {a['label']} | {a['goodput']:,.0f} | {a['saturated']:,.0f} ({a['phase']:.0f}) | "
              f"{a['tail']:.2f} | {a['makespan']:.0f} / {a['mean_end']:.0f} |")


if __name__ == "__main__":
    main()
