"""Issue 21's benchmark (docs/bench/replicas.md): one, two and three kvroute serve replicas
behind nginx round robin, in front of the same number of fresh sims, with the same workload:

  goodput     `kvroute bench run` (agentic, closed loop): SLO-meeting requests per model
              second = requests_per_s × slo_attainment of its one level
  follow-up   multi-turn conversations through nginx during the bench level (each turn
              carries the whole history): the fraction of follow-up turns served by the worker that served the turn
              before (the one holding the conversation's blocks), from x-kvroute-worker

Every replica subscribes to every sim's KV events. The one-replica run goes through nginx too,
so every run pays the same extra hop. Prints a table with ratios against one replica and
writes <out>/summary.json. Bounded: each bench level runs --duration wall seconds.

--deltas on: every replica lists every replica in replicas.warm_from, so they share in-flight
bookings and predicted blocks (docs/replicas.md); off: the same list with
replicas.share_bookings false (each sees only its own); none (the default, as before the
delta stream): no sibling list at all.

Usage: bench.py <kvroute binary> <out dir> [--duration S] [--replicas 1,2,3]
                [--deltas none|on|off] [--delta-flush-ms MS]"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration", "replicas"))
from replica_cluster import (ReplicaSet, conversation_start, follow_up_fraction,  # noqa: E402
                             run_conversation)

SPEEDUP = 20
SIMS = 4
TTFT_SLO, TPOT_SLO = 0.3, 0.05  # model seconds: near the one-replica TTFT p90
CONCURRENCY = 24  # agentic sessions at once over the 4 sims: queues form, SLOs are at stake


def bench_args(binary, target, sims, out, label, duration):
    args = [binary, "bench", "run", "--target", target, "--speedup", str(SPEEDUP),
            "--workload", "agentic", "--concurrency", str(CONCURRENCY), "--sessions", "2000",
            "--turns", "6", "--common-prefix-tokens", "2000", "--session-prefix-tokens", "3000",
            "--turn-input-tokens", "400", "--output-tokens", "128", "--turn-jitter", "2s",
            "--duration", str(duration), "--ttft-slo", str(TTFT_SLO), "--tpot-slo",
            str(TPOT_SLO), "--stop-mean-itl", "0", "--seed", "1", "--label", label, "--out", out,
            "--no-plots", "--no-progress"]
    for s in sims:
        args += ["--metrics-url", s.url + "/metrics"]
    return args


def conversations(port, n=24, turns=6, threads=6):
    results = [None] * n
    lock = threading.Lock()
    queue = list(range(n))

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                i = queue.pop(0)
            results[i] = run_conversation(port, conversation_start(i, "bench conversation"),
                                          turns)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=300)
    return [r for r in results if r]


def one_run(binary, out, replicas, duration, deltas="none", flush_ms=None):
    label = "replicas%d" % replicas
    workdir = os.path.join(out, label)
    os.makedirs(workdir, exist_ok=True)
    with ReplicaSet(binary, workdir, sims=SIMS, replicas=replicas, speedup=SPEEDUP,
                    warm=deltas != "none",
                    replicas_yaml=(", share_bookings: false" if deltas == "off" else
                                   ", delta_flush_ms: %g" % flush_ms if flush_ms else "")) as rs:
        time.sleep(1.0)  # first scrapes and health rounds
        target = "http://127.0.0.1:%d" % rs.port
        cmd = bench_args(binary, target, rs.sims, workdir, label, duration)
        # The conversations run during the bench level, so their follow-ups compete with it.
        convs = []
        talker = threading.Thread(target=lambda: (time.sleep(2.0),
                                                  convs.extend(conversations(rs.port))))
        talker.start()
        with open(os.path.join(workdir, "bench.log"), "wb") as log:
            subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True,
                           timeout=duration * 4 + 120)
        talker.join(timeout=300)
        with open(os.path.join(workdir, label + ".json")) as f:
            doc = json.load(f)
        level = doc["levels"][0]
        rps = level["throughput"]["requests_per_s"]
        attain = level["slo_attainment"]
        fraction, follow = follow_up_fraction(convs)
        failed = sum(1 for c in convs for s, _ in c if s != 200)
    return {"replicas": replicas, "deltas": deltas, "requests_per_s": rps,
            "slo_attainment": attain,
            "goodput_rps": rps * attain if attain is not None else None,
            "ttft_p50_s": level["ttft_s"].get("p50"), "hit_rate": level["cache"]["hit_rate"],
            "requests_ok": level["requests"]["ok"], "requests_failed": level["requests"]["failed"],
            "follow_up_same_worker": fraction, "follow_ups": follow,
            "conversation_failures": failed, "command": " ".join(cmd)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out")
    ap.add_argument("--duration", type=int, default=40)
    ap.add_argument("--replicas", default="1,2,3")
    ap.add_argument("--deltas", choices=["none", "on", "off"], default="none")
    ap.add_argument("--delta-flush-ms", type=float, default=None,
                    help="with --deltas on: replicas.delta_flush_ms (default: the config's)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = [one_run(a.binary, a.out, int(n), a.duration, a.deltas, a.delta_flush_ms)
            for n in a.replicas.split(",")]
    base = rows[0]
    for r in rows:
        g, f = r["goodput_rps"], r["follow_up_same_worker"]
        r["goodput_vs_one"] = g / base["goodput_rps"] if g and base["goodput_rps"] else None
        r["follow_up_vs_one"] = (f / base["follow_up_same_worker"]
                                 if f is not None and base["follow_up_same_worker"] else None)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(rows, f, indent=2)
    fmt = lambda v, p=3: "-" if v is None else ("%.*f" % (p, v))  # noqa: E731
    print("| replicas | req/s | SLO attainment | goodput req/s | ×1 | TTFT p50 s | hit rate | "
          "failed | follow-up on holder | ×1 | follow-ups |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | %d |" % (
            r["replicas"], fmt(r["requests_per_s"]), fmt(r["slo_attainment"]),
            fmt(r["goodput_rps"]), fmt(r["goodput_vs_one"]), fmt(r["ttft_p50_s"]),
            fmt(r["hit_rate"]), r["requests_failed"] + r["conversation_failures"],
            fmt(r["follow_up_same_worker"]), fmt(r["follow_up_vs_one"]), r["follow_ups"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
