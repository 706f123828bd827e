#!/usr/bin/python3
"""Policy study table (docs/simulation.md "Policy study") from scripts/study/run.sh's folder.

Reads OUT/runs.csv (one line per run: exit status, CPU seconds, peak RSS) and, for each run
that finished, OUT/<label>_levels.csv (one level), OUT/<label>_requests.csv and
OUT/<label>_decisions.csv, and prints one Markdown row per run:

  ok/sent, TTFT p50 and p99, ITL p50, engine hit rate, tokens/s/GPU (input + output),
  DistServe SLO attainment (trace), Infera goodput at 30 tok/s/user (agentic: the level's
  tokens/s/GPU when its ITL p50 <= 1/30 s, else 0), moves per session (agentic: follow-up
  turns routed to another worker than the session's previous turn, per session) and the run's
  CPU seconds. A run that did not finish gets a row saying so (rc 124: timed out).

Usage: table.py OUT [--csv FILE] [--expect-workers "8 64 256 512 1024"]
  --csv writes the rows as CSV too; --expect-workers adds a "not run" row for every worker
  count of that list that a policy of the agentic or trace study (one run at its smallest
  size) has no run for (a study cut short).
"""

import argparse
import csv
import os
import sys

WORKLOAD_ORDER = {"agentic": 0, "agentic_jitter": 1, "trace": 2}
COLUMNS = ["workload", "workers", "policy", "ok", "ttft_p50_s", "ttft_p99_s", "itl_p50_ms",
           "hit_rate", "tok_s_gpu", "slo_attainment", "goodput30", "moves_per_session",
           "cpu_s", "max_rss_mb", "status"]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def moves_per_session(out, label):
    """Follow-up turns on another worker than the session's previous turn, per session."""
    req_path = os.path.join(out, label + "_requests.csv")
    dec_path = os.path.join(out, label + "_decisions.csv")
    if not (os.path.exists(req_path) and os.path.exists(dec_path)):
        return None
    reqs = read_csv(req_path)
    # decisions.csv's `request` is the row of the level's requests in requests.csv (one level).
    worker_of = {int(d["request"]): d["worker"] for d in read_csv(dec_path)}
    turns = {}
    for i, r in enumerate(reqs):
        if int(r["session"]) < 0 or i not in worker_of:
            continue
        turns.setdefault(r["session"], []).append((int(r["turn"]), worker_of[i]))
    if not turns:
        return None
    moves = 0
    for ts in turns.values():
        ts.sort()
        moves += sum(1 for a, b in zip(ts, ts[1:]) if a[1] != b[1])
    return moves / len(turns)


def row_of(out, run, gpus_per_worker):
    label = run["label"]
    row = {"workload": run["workload"], "workers": int(run["workers"]),
           "policy": run["policy"], "cpu_s": float(run["cpu_s"] or 0),
           "max_rss_mb": int(run["max_rss_kb"] or 0) / 1024.0, "status": "ok"}
    levels_path = os.path.join(out, label + "_levels.csv")
    if run["rc"] != "0" or not os.path.exists(levels_path):
        row["status"] = ("timed out" if run["rc"] == "124" else f"failed (rc {run['rc']})")
        return row
    (lv,) = read_csv(levels_path)
    gpus = gpus_per_worker * row["workers"]
    tput = (float(lv["input_tokens_per_s"]) + float(lv["output_tokens_per_s"])) / gpus
    itl_p50 = float(lv["itl_p50_s"])
    row.update({
        "ok": f"{lv['ok']}/{lv['sent']}",
        "ttft_p50_s": float(lv["ttft_p50_s"]),
        "ttft_p99_s": float(lv["ttft_p99_s"]),
        "itl_p50_ms": itl_p50 * 1000.0,
        "hit_rate": float(lv["hit_rate"]),
        "tok_s_gpu": tput,
        "slo_attainment": float(lv["slo_attainment"]) if lv["slo_attainment"] else None,
    })
    if run["workload"].startswith("agentic"):
        row["goodput30"] = tput if itl_p50 <= 1.0 / 30.0 else 0.0
        row["moves_per_session"] = moves_per_session(out, label)
    return row


def fmt(v, spec):
    return "—" if v is None else format(v, spec)


def markdown(rows):
    lines = ["| workload | workers | policy | ok | TTFT p50 (s) | TTFT p99 (s) | ITL p50 (ms) | "
             "hit rate | tok/s/GPU | SLO attain. | goodput@30 | moves/session | CPU s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] == "not run":
            lines.append(f"| {r['workload']} | {r['workers']} | {r['policy']} | not run | "
                         "| | | | | | | | |")
            continue
        if r["status"] != "ok":
            lines.append(f"| {r['workload']} | {r['workers']} | {r['policy']} | "
                         f"{r['status']} after {r['cpu_s']:.0f} s CPU | | | | | | | | | |")
            continue
        lines.append(
            f"| {r['workload']} | {r['workers']} | {r['policy']} | {r['ok']} | "
            f"{r['ttft_p50_s']:.3f} | {r['ttft_p99_s']:.3f} | {r['itl_p50_ms']:.1f} | "
            f"{r['hit_rate']:.3f} | {r['tok_s_gpu']:.0f} | {fmt(r.get('slo_attainment'), '.3f')} | "
            f"{fmt(r.get('goodput30'), '.0f')} | {fmt(r.get('moves_per_session'), '.2f')} | "
            f"{r['cpu_s']:.3g} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--csv")
    ap.add_argument("--expect-workers", default="")
    ap.add_argument("--gpus-per-worker", type=int, default=2,
                    help="GPUs of one worker (the default profile is TP2)")
    args = ap.parse_args()
    runs_path = os.path.join(args.out, "runs.csv")
    if not os.path.exists(runs_path):
        sys.exit(f"no {runs_path}: run scripts/study/run.sh first")
    latest = {}
    for run in read_csv(runs_path):  # a rerun of a label replaces its earlier line
        latest[run["label"]] = run
    rows = [row_of(args.out, run, args.gpus_per_worker) for run in latest.values()]
    if args.expect_workers:
        have = {(r["workload"], r["workers"], r["policy"]) for r in rows}
        for wl in ("agentic", "trace"):  # the study proper; jitter runs are a side check
            # The study's policies: those run at its smallest size (side runs such as an A/B
            # variant at one size are shown, not expected everywhere).
            sizes = [r["workers"] for r in rows if r["workload"] == wl]
            policies = sorted({r["policy"] for r in rows
                               if r["workload"] == wl and r["workers"] == min(sizes, default=0)})
            for w in (int(x) for x in args.expect_workers.split()):
                missing = [p for p in policies if (wl, w, p) not in have]
                if len(missing) == len(policies) and len(policies) > 1:  # one row says it
                    missing = [f"all {len(policies)}"]
                for p in missing:
                    rows.append({"workload": wl, "workers": w, "policy": p, "cpu_s": 0.0,
                                 "max_rss_mb": 0.0, "status": "not run"})
    rows.sort(key=lambda r: (WORKLOAD_ORDER.get(r["workload"], 9), r["workers"], r["policy"]))
    print(markdown(rows))
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
