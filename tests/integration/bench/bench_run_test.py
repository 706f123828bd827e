#!/usr/bin/python3
"""kvroute bench run against a real `kvroute sim` (port 0, --speedup 50).

Runs a tiny agentic sweep (concurrency 1,2; 3 turns) and a tiny Mooncake trace replay, then
checks the outputs: files exist, JSON and CSV agree on counts, no request failed, cached
tokens grow over the turns of each session, and the engine's hit rate was scraped.
Every wait is bounded; only the processes started here are stopped, by pid.
"""
import argparse
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def start_sim(kvroute):
    proc = subprocess.Popen(
        [kvroute, "sim", "--host", "127.0.0.1", "--port", "0", "--speedup", "50", "--no-kv-events",
         "--log-level", "warn"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 30
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            return proc, m.group(1).rstrip("/")
    proc.kill()
    fail("kvroute sim did not print its ready line")


def run_bench(kvroute, args, timeout=120):
    cmd = [kvroute, "bench", "run", "--no-progress"] + args
    print("+ " + " ".join(cmd), flush=True)
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print(res.stdout)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr)
        fail("bench run exited %d" % res.returncode)
    return res


def load(out, label):
    with open(os.path.join(out, label + ".json")) as f:
        doc = json.load(f)
    with open(os.path.join(out, label + "_levels.csv")) as f:
        levels = list(csv.DictReader(f))
    with open(os.path.join(out, label + "_requests.csv")) as f:
        requests = list(csv.DictReader(f))
    return doc, levels, requests


def check_common(doc, levels, requests, expected_levels):
    if doc["schema"] != "kvroute.bench.run/1":
        fail("schema " + doc["schema"])
    names = [l["name"] for l in doc["levels"]]
    if names != expected_levels:
        fail("levels %r, expected %r" % (names, expected_levels))
    if [r["level"] for r in levels] != expected_levels:
        fail("levels CSV rows do not match the JSON")
    for l, row in zip(doc["levels"], levels):
        req = l["requests"]
        if req["failed"] != 0 or req["errors"]:
            fail("level %s had failures: %r" % (l["name"], req))
        if req["ok"] == 0 or req["ok"] != req["sent"]:
            fail("level %s: ok %d of %d" % (l["name"], req["ok"], req["sent"]))
        if int(row["ok"]) != req["ok"]:
            fail("CSV ok %s != JSON ok %d" % (row["ok"], req["ok"]))
        n = sum(1 for r in requests if r["level"] == l["name"])
        if n != req["sent"]:
            fail("requests CSV has %d rows for %s, JSON says %d" % (n, l["name"], req["sent"]))
        if not (l["ttft_s"]["count"] == req["ok"] and l["ttft_s"]["p50"] > 0):
            fail("TTFT summary of %s: %r" % (l["name"], l["ttft_s"]))
        if l["throughput"]["output_tokens_per_s"] <= 0:
            fail("no output throughput in " + l["name"])
        if l["cache"]["hit_rate"] is None:
            fail("no engine hit rate scraped for " + l["name"])
    for r in requests:
        if r["ok"] != "1" or int(r["output_tokens"]) <= 0:
            fail("bad request row %r" % r)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kvroute", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)
    out = os.path.join(a.workdir, "out")
    proc, url = start_sim(a.kvroute)
    try:
        # Agentic: 2 levels, 3 turns per session, small sizes; prompts span several blocks.
        run_bench(a.kvroute, [
            "--target", url, "--workload", "agentic", "--label", "agentic-sim",
            "--out", out, "--concurrency", "1,2", "--turns", "3",
            "--common-prefix-tokens", "256", "--session-prefix-tokens", "128",
            "--turn-input-tokens", "64", "--output-tokens", "16", "--max-requests", "50"])
        doc, levels, requests = load(out, "agentic-sim")
        check_common(doc, levels, requests, ["c=1", "c=2"])
        for l in doc["levels"]:
            if l["requests"]["sent"] != 3 * l["concurrency"]:
                fail("level %s sent %d, expected %d" % (
                    l["name"], l["requests"]["sent"], 3 * l["concurrency"]))
        sessions = {}
        for r in requests:
            sessions.setdefault((r["level"], r["session"]), []).append(r)
        for key, rows in sessions.items():
            rows.sort(key=lambda r: int(r["turn"]))
            cached = [int(r["cached_tokens"]) for r in rows]
            prompts = [int(r["prompt_tokens"]) for r in rows]
            if prompts != sorted(prompts) or len(set(prompts)) != len(prompts):
                fail("prompt tokens do not grow over the turns of %r: %r" % (key, prompts))
            if not all(cached[i] < cached[i + 1] for i in range(len(cached) - 1)):
                fail("cached tokens do not grow over the turns of %r: %r" % (key, cached))
        if len(doc["goodput"]["infera"]) != 2:
            fail("expected Infera goodput at two targets")
        for ext in ("png", "svg"):
            p = os.path.join(out, "agentic-sim_ttft_cdf." + ext)
            if not os.path.exists(p) or os.path.getsize(p) == 0:
                fail("missing plot " + p)

        # Trace: 8 Mooncake requests of 2 blocks (128 tokens each at multiplier 0.25); all share
        # the first block, the second is unique to each request.
        trace = os.path.join(a.workdir, "tiny.jsonl")
        with open(trace, "w") as f:
            for i in range(8):
                f.write(json.dumps({"timestamp": i * 200, "input_length": 1024,
                                    "output_length": 8, "hash_ids": [7, 100 + i]}) + "\n")
        run_bench(a.kvroute, [
            "--target", url, "--workload", "trace", "--trace", trace, "--label", "trace-sim",
            "--out", out, "--trace-speedup", "10", "--prefix-multiplier", "0.25"])
        doc, levels, requests = load(out, "trace-sim")
        check_common(doc, levels, requests, ["trace"])
        if doc["levels"][0]["requests"]["sent"] != 8:
            fail("trace replay sent %d of 8" % doc["levels"][0]["requests"]["sent"])
        later = [int(r["cached_tokens"]) for r in requests[1:]]
        if max(later) <= 0:
            fail("no request after the first hit the shared trace block: %r" % later)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("OK")


if __name__ == "__main__":
    main()
