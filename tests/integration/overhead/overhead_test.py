#!/usr/bin/python3
"""Runs `kvroute bench overhead` with 2 sims, a tiny streamed load at one concurrency and a
tiny non-streamed one, and checks the plumbing: exit 0; direct, nginx-rr,
kvroute:predicted_latency and kvroute:round_robin each produced a row with ok requests and
zero errors; JSON and CSV written; the table printed; each kvroute serve config carries the
sims' speedup; afterwards no process of ours is left
("ours" = every process holding a file open under the output folder: each child writes its
log there). The ratios themselves are not checked: they depend on the machine.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import processes_holding  # noqa: E402

TARGETS = {"direct", "nginx-rr", "kvroute:predicted_latency", "kvroute:round_robin"}


def run_overhead(kvroute, out, extra):
    cmd = [kvroute, "bench", "overhead", "--workers", "2", "--concurrency", "2",
           "--requests", "12", "--warmup", "4", "--duration", "8", "--prompt-tokens", "32",
           "--output-tokens", "4", "--no-progress", "--out", out] + extra
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=50)
    print(proc.stdout)
    print(proc.stderr[-4000:], file=sys.stderr)
    assert proc.returncode == 0, f"exit {proc.returncode}"
    return proc


def check(out, label, proc, stream):
    with open(os.path.join(out, label + ".json")) as f:
        doc = json.load(f)
    levels = {l["target"]: l for l in doc["levels"]}
    assert set(levels) == TARGETS, levels.keys()
    for name, level in levels.items():
        assert level["concurrency"] == 2, (name, level)
        assert level["ok"] > 0 and level["errors"] == 0, (name, level)
        if stream:
            assert level["chunks"] > 0, (name, level)
        if name != "direct":
            assert "added_vs_direct_ms" in level, (name, level)
    assert doc["config"]["latency_metric"] == ("ttft" if stream else "e2e"), doc["config"]
    assert len(doc["verdicts"]) == 2, doc["verdicts"]
    with open(os.path.join(out, label + ".csv")) as f:
        rows = list(csv.DictReader(f))
    assert {r["target"] for r in rows} == TARGETS, rows
    for name in TARGETS:
        assert name in proc.stdout, name
    assert ("TTFT" if stream else "E2E") in proc.stdout
    # Every kvroute serve config tells the router the sims' pace (--speedup, 1000 by
    # default), so its rate seeds are not 1000x too slow.
    configs = [os.path.join(d, f) for d, _, fs in os.walk(out) for f in fs if f == "serve.yaml"]
    assert configs, "no serve.yaml written"
    for path in configs:
        with open(path) as f:
            assert "profile_speedup: 1000" in f.read(), path


def main():
    kvroute = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kvroute_overhead_") as out:
        try:
            proc = run_overhead(kvroute, out, ["--label", "streamed"])
            check(out, "streamed", proc, stream=True)
            proc = run_overhead(kvroute, out, ["--label", "buffered", "--no-stream"])
            check(out, "buffered", proc, stream=False)
        finally:
            left = processes_holding(out)
            for pid in left:  # only processes holding our own logs: ours
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
        assert not left, f"processes left running: {left}"
    print("ok")


if __name__ == "__main__":
    main()
