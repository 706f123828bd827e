#!/usr/bin/python3
"""Runs `kvroute bench compare --topology` on two tiny fleets (an aggregated TP4 sim; a TP2
prefill sim + two TP2 decode sims, NixlConnector, sped up) and checks what the report claims:
every run completed; goodput is per GPU of its own fleet (goodput x GPUs = the level's
input + output tokens/s in its levels CSV); the ratio is against the first topology; the P/D
fleet moved KV (bytes and pull times from the decode sims' NIXL histograms, a share of TTFT
between 0 and 1) and the aggregated one reports no transfer; serve was told the roles, TP,
GPUs and link; nginx is refused on a P/D fleet; afterwards no process of ours is left.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from procs import processes_holding  # noqa: E402

AGG = "fleet:\n  - {count: 1, profile: qwen3-32b-tp4-h100, tp: 4}\n"
PD = ("fleet:\n"
      "  - {count: 1, profile: qwen3-32b-tp2-h100, role: prefill, tp: 2, link: ib-400g}\n"
      "  - {count: 2, profile: qwen3-32b-tp2-h100, role: decode, tp: 2, link: ib-400g}\n")
WORKLOAD = ["--speedup", "20", "--concurrency", "2", "--turns", "2", "--common-prefix-tokens",
            "2000", "--session-prefix-tokens", "500", "--turn-input-tokens", "200",
            "--output-tokens", "16", "--max-requests", "6", "--duration", "20", "--no-plots"]


def run(cmd, timeout):
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    print(proc.stdout)
    print(proc.stderr[-4000:], file=sys.stderr)
    return proc


def check(kvroute, out):
    agg, pd = os.path.join(out, "agg.yaml"), os.path.join(out, "pd.yaml")
    with open(agg, "w") as f:
        f.write(AGG)
    with open(pd, "w") as f:
        f.write(PD)
    refused = run([kvroute, "bench", "compare", "--topology", pd, "--routers", "nginx-rr",
                   "--out", os.path.join(out, "refused")] + WORKLOAD, 30)
    assert refused.returncode == 2 and "cannot route pd" in refused.stderr, refused.returncode
    # Dynamo's rule with cap 0 splits every turn D would prefill anything of: the check is
    # about the transfer accounting, not about when splitting pays.
    res = os.path.join(out, "res")
    proc = run([kvroute, "bench", "compare", "--topology", agg + "," + pd, "--pd-rule",
                "dynamo_token_cap", "--pd-token-cap", "0", "--out", res] + WORKLOAD, 50)
    assert proc.returncode == 0, f"exit {proc.returncode}"
    with open(os.path.join(res, "topology.json")) as f:
        rows = {r["topology"]: r for r in json.load(f)["rows"]}
    assert set(rows) == {"agg", "pd"}, rows.keys()
    assert rows["agg"]["gpus"] == 4 and rows["pd"]["gpus"] == 6, rows
    for name, r in rows.items():
        assert r["router"] == "kvroute:predicted_latency", r
        assert r["requests"]["ok"] > 0 and r["requests"]["failed"] == 0, (name, r["requests"])
        with open(os.path.join(res, name + "_kvroute_predicted_latency_levels.csv")) as f:
            level = next(csv.DictReader(f))
        tokens_per_s = float(level["input_tokens_per_s"]) + float(level["output_tokens_per_s"])
        per_gpu = r["goodput"][0]["tokens_per_s_per_gpu"]
        assert abs(per_gpu * r["gpus"] - tokens_per_s) <= 1e-3 * tokens_per_s, (name, per_gpu,
                                                                                tokens_per_s)
    a30, p30 = (rows[n]["goodput"][0] for n in ("agg", "pd"))
    assert a30["ratio_vs_first_topology"] == 1.0, a30
    assert abs(p30["ratio_vs_first_topology"] -
               p30["tokens_per_s_per_gpu"] / a30["tokens_per_s_per_gpu"]) < 1e-9, p30
    assert rows["agg"]["transfer"] is None, rows["agg"]
    x = rows["pd"]["transfer"]
    assert x["pulls"] > 0 and x["bytes"] > 0 and x["time_sum_s"] > 0, x
    assert 0 < x["time_p50_s"] <= x["time_p99_s"], x
    assert 0 < x["share_of_ttft"] < 1, x
    with open(os.path.join(res, "cluster", "pd", "kvroute_predicted_latency", "serve.yaml")) as f:
        serve = f.read()
    assert "role: prefill\n    tp: 2\n    gpus: 2\n" in serve, serve
    assert serve.count('role: decode\n    tp: 2\n    gpus: 2\n    link: "ib-400g"') == 2, serve
    assert "pd: {rule: dynamo_token_cap, token_cap: 0}" in serve, serve
    assert "xfer/TTFT" in proc.stdout and "pd / kvroute:predicted_latency" in proc.stdout


def main():
    kvroute = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="kvroute_topology_") as out:
        try:
            check(kvroute, out)
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
