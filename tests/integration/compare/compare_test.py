#!/usr/bin/python3
"""Runs `kvroute bench compare` (2 sims, nginx-rr + kvroute:predicted_latency, a tiny agentic
run) or `kvroute demo --quick` and checks the plumbing: exit 0, both routers ran with no failed
request, compare.json holds both with ratio 1.0 for nginx-rr, the demo's table fits 100
columns and its cache command shows cache-aware routing on the cluster it leaves running
until Ctrl-C, and afterwards no process of ours is left.

"Ours" = every process holding a file open under the output folder: each child (sim, nginx,
kvroute serve) writes its stdout/stderr to a log file there, so a leftover child shows up as
an open descriptor into that folder, whatever its parent became.
"""
import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import processes_holding  # noqa: E402


def run(cmd, timeout):
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    print(proc.stdout)
    print(proc.stderr[-4000:], file=sys.stderr)
    return proc


def check_compare(kvroute, out):
    proc = run([kvroute, "bench", "compare", "--workers", "2", "--speedup", "20",
                "--routers", "nginx-rr,kvroute:predicted_latency", "--concurrency", "2",
                "--turns", "2", "--common-prefix-tokens", "256", "--session-prefix-tokens",
                "64", "--turn-input-tokens", "64", "--output-tokens", "16",
                "--max-requests", "6", "--duration", "20", "--no-plots",
                "--sim-profile", "qwen3-32b-tp2-h100", "--sim-num-cpu-blocks", "64",
                "--out", out], 150)
    assert proc.returncode == 0, f"exit {proc.returncode}"
    with open(os.path.join(out, "compare.json")) as f:
        doc = json.load(f)
    routers = {r["router"]: r for r in doc["routers"]}
    assert set(routers) == {"nginx-rr", "kvroute:predicted_latency"}, routers.keys()
    for name, r in routers.items():
        assert r["requests"]["ok"] > 0, (name, r["requests"])
        assert r["requests"]["failed"] == 0, (name, r["requests"])
    assert routers["nginx-rr"]["throughput_ratio"] == 1.0, routers["nginx-rr"]
    assert routers["kvroute:predicted_latency"]["throughput_ratio"] is not None
    for name in ("nginx-rr", "kvroute_predicted_latency"):
        assert os.path.exists(os.path.join(out, name + ".json")), name
    assert "nginx-rr" in proc.stdout and "kvroute:predicted_latency" in proc.stdout
    # The report is in model time: the sims' speedup is recorded and the header says so.
    assert doc["speedup"] == 20 and "model time = wall x 20" in doc["time_base"], doc
    with open(os.path.join(out, "nginx-rr.json")) as f:
        run_doc = json.load(f)
    assert run_doc["time_base"]["speedup"] == 20, run_doc["time_base"]
    assert "model time = wall x 20" in proc.stdout
    # Infera's stop rule is on by default for the agentic workload (one level: nothing to stop).
    assert run_doc["sweep"]["stop_mean_itl_s"] == 0.04, run_doc["sweep"]
    assert run_doc["sweep"]["stopped_after"] is None, run_doc["sweep"]
    # The CPU tier reaches the sims (their connector counters are scraped, so the CPU-tier hit
    # rate is a number, not null) and kvroute serve is told the sims' profile.
    assert routers["nginx-rr"]["external_hit_rate"] is not None, routers["nginx-rr"]
    with open(os.path.join(out, "cluster", "kvroute_predicted_latency",
                           "kvroute_predicted_latency", "serve.yaml")) as f:
        assert 'profile: "qwen3-32b-tp2-h100"' in f.read()


def check_demo(kvroute, out):
    """As a person runs it (without --no-wait): the comparison, then the cluster left up; the
    printed cache command pasted into a shell must show the same worker twice and cached
    tokens only the second time; Ctrl-C stops everything."""
    proc = subprocess.Popen([kvroute, "demo", "--quick", "--workers", "2", "--out", out],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines, errors = queue.Queue(), []
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout] + [lines.put(None)],
                     daemon=True).start()
    threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True).start()
    stdout, deadline = [], time.time() + 150
    try:
        while not stdout or "Press Ctrl-C" not in stdout[-1]:
            line = lines.get(timeout=max(1, deadline - time.time()))
            assert line is not None, "demo exited early:\n" + "".join(stdout + errors[-40:])
            stdout.append(line)
        text = "".join(stdout)
        print(text)
        assert "nginx-rr" in text and "kvroute:predicted_latency" in text
        assert "model time = wall x 10" in text  # the demo reports in model time
        # Everything up to the commands fits 100 columns.
        head = text[:text.index("kvroute is running at")]
        wide = [l for l in head.splitlines() if len(l) > 100]
        assert not wide, wide
        assert "curl -N http://127.0.0.1:" in text and "/v1/chat/completions" in text
        probe = next(l.strip() for l in stdout if l.strip().startswith("for i in 1 2; do curl"))
        shown = subprocess.run(["bash", "-c", probe], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL).stdout
        print(shown)
        workers = re.findall(r"(?im)^x-kvroute-worker: (\S+)$", shown)
        cached = [int(n) for n in re.findall(r'"cached_tokens":(\d+)', shown)]
        assert len(workers) == 2 and workers[0] == workers[1], shown
        assert len(cached) == 2 and cached[0] == 0 and cached[1] >= 512, shown
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"exit {proc.returncode}: {''.join(errors[-40:])}"
    with open(os.path.join(out, "compare.json")) as f:
        assert len(json.load(f)["routers"]) == 2


def main():
    kvroute, which = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="kvroute_compare_") as out:
        try:
            (check_compare if which == "compare" else check_demo)(kvroute, out)
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
