#!/usr/bin/env python3
"""kvroute simulate writes the kvroute bench report format.

Runs a tiny agentic sweep (concurrency 2,4 on 3 workers, with a failure, a restart and an
added worker) and a short Mooncake trace replay, then checks the run JSON (schema
kvroute.bench.run/1), the levels and requests CSVs, and the simulator's workers/decisions
CSVs against each other. Every run is bounded by a subprocess timeout.
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys


def run(cmd, timeout):
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        print(p.stdout, p.stderr, sep="\n", file=sys.stderr)
        raise SystemExit(f"exit status {p.returncode}")
    return p


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def check(cond, msg):
    if not cond:
        raise SystemExit("FAIL: " + msg)


def check_run(out, label, levels, workers):
    stem = os.path.join(out, label)
    with open(stem + ".json") as f:
        doc = json.load(f)
    check(doc["schema"] == "kvroute.bench.run/1", "schema")
    check(doc["label"] == label, "label")
    check([l["name"] for l in doc["levels"]] == levels, f"levels {doc['levels']}")
    level_rows = read_csv(stem + "_levels.csv")
    check(len(level_rows) == len(levels), "one levels.csv row per level")
    requests = read_csv(stem + "_requests.csv")
    decisions = read_csv(stem + "_decisions.csv")
    worker_rows = read_csv(stem + "_workers.csv")
    total_sent = 0
    for level in doc["levels"]:
        sent = level["requests"]["sent"]
        ok = level["requests"]["ok"]
        total_sent += sent
        check(sent > 0 and ok > 0, f"level {level['name']} ran requests")
        check(level["ttft_s"]["count"] == ok, "TTFT summary counts the ok requests")
        check(level["ttft_s"]["p50"] > 0, "TTFT is positive")
        check(level["cache"]["hit_rate"] is not None, "engine hit rate reported")
        check(len([w for w in worker_rows if w["level"] == level["name"]]) == workers,
              f"one workers.csv row per worker in {level['name']}")
        routed = sum(int(w["routed"]) for w in worker_rows if w["level"] == level["name"])
        check(routed == sent, f"routed {routed} == sent {sent}")
    check(len(requests) == total_sent, f"requests.csv rows {len(requests)} == {total_sent}")
    check(len(decisions) == total_sent, "one decision per request")
    # The TTFT parts are parts: each is non-negative and together they fit in the TTFT
    # (%g prints 6 significant digits, hence the tolerance).
    for d in decisions:
        if d["ok"] != "1" or d["split"] == "1":
            continue
        check(d["engine_wait_s"] != "", f"request {d['request']} has its engine wait")
        parts = [float(d[k]) for k in ("engine_wait_s", "tier_path_queue_s", "tier_transfer_s")]
        ttft = float(d["ttft_s"])
        check(min(parts) >= 0, f"request {d['request']}: negative TTFT part {parts}")
        check(sum(parts) <= ttft * (1 + 1e-5) + 1e-6,
              f"request {d['request']}: parts {parts} exceed TTFT {ttft}")
    return doc, worker_rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvroute", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    out = os.path.join(a.workdir, "out")

    common = [a.kvroute, "simulate", "--out", out, "--no-progress", "--no-plots",
              "--num-gpu-blocks", "4096"]
    run(common + ["--label", "agentic", "--workload", "agentic", "--workers", "3",
                  "--concurrency", "2,4", "--turns", "3", "--common-prefix-tokens", "512",
                  "--session-prefix-tokens", "256", "--turn-input-tokens", "128",
                  "--output-tokens", "32", "--event-delay", "20ms",
                  "--fail", "t=0.5s,worker=1", "--restart", "t=1s,worker=1",
                  "--add", "t=0.2s,count=1"], timeout=60)
    doc, workers = check_run(out, "agentic", ["c=2", "c=4"], 4)
    check(all(l["concurrency"] in (2, 4) for l in doc["levels"]), "closed-loop levels")
    check(any(w["restarts"] == "1" for w in workers), "the restart is reported")

    # --turn-jitter breaks the lockstep of sessions that start together: without it the
    # sessions batched on one worker start their next turn at the same instant; with it every
    # follow-up turn starts at its own time.
    lockstep = [a.kvroute, "simulate", "--out", out, "--no-progress", "--no-plots",
                "--num-gpu-blocks", "4096", "--workload", "agentic", "--workers", "2",
                "--concurrency", "4", "--turns", "3", "--common-prefix-tokens", "512",
                "--session-prefix-tokens", "256", "--turn-input-tokens", "128",
                "--output-tokens", "16"]
    run(lockstep + ["--label", "lockstep"], timeout=60)
    run(lockstep + ["--label", "jitter", "--turn-jitter", "200ms"], timeout=60)
    jitter_doc = json.load(open(os.path.join(out, "jitter.json")))
    check(jitter_doc["config"].get("turn_jitter_s") == 0.2, "turn_jitter_s in the config")

    def follow_up_starts(label):
        rows = read_csv(os.path.join(out, label + "_requests.csv"))
        starts = [r["start_s"] for r in rows if r["turn"] == "1"]
        return len(starts), len(set(starts))
    turns, distinct = follow_up_starts("lockstep")
    check(turns > 0 and distinct < turns, "without jitter some turn-1 requests start together")
    turns, distinct = follow_up_starts("jitter")
    check(turns > 0 and distinct == turns, "with jitter every turn-1 request starts apart")

    # Defaults work together: with no workload flags every request is served and nothing is
    # reported failed. Infera's session shape on the default profile (40,960 tokens) outgrows
    # the context: the run must say so loudly, on stderr and under its table.
    p = subprocess.run([a.kvroute, "simulate", "--out", out, "--no-progress", "--no-plots",
                        "--label", "defaults"], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    check(p.returncode == 0, "simulate with defaults exits 0: " + p.stderr[-500:])
    doc, _ = check_run(out, "defaults", ["c=8"], 8)
    sent = sum(l["requests"]["sent"] for l in doc["levels"])
    ok = sum(l["requests"]["ok"] for l in doc["levels"])
    check(sent > 0 and ok == sent, f"defaults: {ok} of {sent} ok")
    check("WARNING" not in p.stdout + p.stderr and "failed (" not in p.stdout,
          "defaults: no failure note: " + p.stdout[-300:])
    p = subprocess.run([a.kvroute, "simulate", "--out", out, "--no-progress", "--no-plots",
                        "--label", "infera40k", "--sessions", "8", "--common-prefix-tokens",
                        "20000", "--session-prefix-tokens", "10000", "--turns", "30",
                        "--turn-input-tokens", "2048", "--output-tokens", "900"],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    for stream, text in (("stdout", p.stdout), ("stderr", p.stderr)):
        line = next((l for l in text.splitlines() if "WARNING" in l), "")
        check(re.search(r"WARNING: \d+ of 240 requests failed \(http_4xx \d+\)", line) and
              "max_model_len 40960" in line, f"{stream} warns about max_model_len: {text[-600:]}")

    # The trace ships with the project (data/); a missing file is a broken checkout, not a skip.
    check(os.path.exists(a.trace), "trace file %s exists" % a.trace)
    run(common + ["--label", "trace", "--workload", "trace", "--trace", a.trace,
                  "--workers", "4", "--max-requests", "200", "--trace-speedup", "4",
                  "--prefix-multiplier", "0.0625", "--policy", "dynamo_cost",
                  "--ttft-slo", "2", "--tpot-slo", "0.1"], timeout=60)
    doc, _ = check_run(out, "trace", ["trace"], 4)
    check(doc["levels"][0]["rate_per_s"] > 0, "trace level has an offered rate")
    # The plotting path under a pseudo-terminal, as a person runs it (make demo shares it):
    # gnuplot given the terminal as its input paged its terminal list and waited for Enter,
    # freezing the run for minutes behind output nobody saw. `script` gives the command a
    # pty for stdin and stdout; it must finish by itself, charts written.
    import shlex
    plotted = [a.kvroute, "simulate", "--out", out, "--num-gpu-blocks", "4096", "--label",
               "pty", "--workload", "agentic", "--workers", "2", "--concurrency", "2",
               "--turns", "2", "--common-prefix-tokens", "256", "--session-prefix-tokens",
               "128", "--turn-input-tokens", "64", "--output-tokens", "8"]
    p = subprocess.run(["script", "-qfec", " ".join(shlex.quote(x) for x in plotted), "/dev/null"],
                       capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "simulate under a pty exits 0: " + p.stdout[-500:] + p.stderr[-500:])
    if shutil.which("gnuplot"):
        check(os.path.exists(os.path.join(out, "pty_ttft_cdf.png")) or
              any(f.startswith("pty_") and f.endswith(".png") for f in os.listdir(out)),
              "charts rendered under a pty")
    print("OK")


if __name__ == "__main__":
    main()
