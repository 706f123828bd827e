#!/usr/bin/python3
"""Tables for the issue-6 section from a `kvroute bench compare` output folder."""
import json, glob, os, sys

out = sys.argv[1]
order = ["nginx-rr", "nginx-lc", "kvroute:round_robin", "kvroute:random", "kvroute:least_load",
         "kvroute:approx_prefix", "kvroute:dynamo_cost", "kvroute:llmd_sticky",
         "kvroute:predicted_latency"]
runs = {}
for f in glob.glob(os.path.join(out, "*.json")):
    if f.endswith("compare.json"):
        continue
    j = json.load(open(f))
    runs[j["label"]] = j
gpus = None

def tot(l, g):
    return (l["throughput"]["input_tokens_per_s"] + l["throughput"]["output_tokens_per_s"]) / g

def best(j, ok):
    g = j["gpus"]
    cands = [l for l in j["levels"] if l["requests"]["ok"] > 0 and ok(l)]
    if not cands:
        return None, None
    l = max(cands, key=lambda l: l["concurrency"])
    return tot(l, g), l

def f(v, n=0):
    return "-" if v is None else f"{v:,.{n}f}"

crit = {
    "infera30": lambda l: l["itl_s"]["p50"] <= 1 / 30,
    "infera50": lambda l: l["itl_s"]["p50"] <= 1 / 50,
    "p99_200": lambda l: l["itl_s"]["p99"] <= 0.200,
    "tpot_p90_33": lambda l: l["tpot_s"]["p90"] <= 1 / 30,
    "tpot_p50_33": lambda l: l["tpot_s"]["p50"] <= 1 / 30,
}
base = {k: best(runs["nginx-rr"], c)[0] if "nginx-rr" in runs else None for k, c in crit.items()}
print("| router | ok | failed | goodput@30 tok/s/GPU | ratio | at c | stopped after (mean ITL) | goodput@50 | ratio | at c | TTFT p50 s | TTFT p99 s | ITL p50 ms | ITL p99 ms | GPU hit | CPU hit |")
print("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in order:
    if r not in runs:
        continue
    j = runs[r]
    ok = sum(l["requests"]["ok"] for l in j["levels"])
    failed = sum(l["requests"]["failed"] for l in j["levels"])
    g30, l30 = best(j, crit["infera30"])
    g50, l50 = best(j, crit["infera50"])
    ratio = lambda g, k: None if g is None or not base[k] else g / base[k]
    sw = j.get("sweep", {})
    stop = "-" if not sw.get("stopped_after") else f'{sw["stopped_after"]} ({sw["mean_itl_s"]*1e3:.1f} ms)'
    L = l30
    hits = [l["cache"]["hit_rate"] for l in j["levels"] if l["cache"]["hit_rate"] is not None]
    ext = [l["cache"]["external_hit_rate"] for l in j["levels"] if l["cache"]["external_hit_rate"] is not None]
    print(f'| {r} | {ok} | {failed} | {f(g30)} | {f(ratio(g30,"infera30"),2)} | {L["concurrency"] if L else "-"} | {stop} | {f(g50)} | {f(ratio(g50,"infera50"),2)} | {l50["concurrency"] if l50 else "-"} | '
          + (f'{L["ttft_s"]["p50"]:.2f} | {L["ttft_s"]["p99"]:.2f} | {L["itl_s"]["p50"]*1e3:.1f} | {L["itl_s"]["p99"]*1e3:.0f} | {L["cache"]["hit_rate"]:.3f} | {f(L["cache"]["external_hit_rate"],3) if L["cache"]["external_hit_rate"] is not None else "-"} |' if L else '- | - | - | - | - | - |'))
print()
print("Latency and hit columns are those of the level where goodput@30 is taken.")
print()
print("| router | c | ok | total tok/s/GPU | out tok/s | TTFT p50 s | TTFT p99 s | ITL p50 ms | ITL mean ms | ITL p99 ms | TPOT p50 ms | TPOT p90 ms | GPU hit | CPU hit |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in order:
    if r not in runs:
        continue
    j = runs[r]
    for l in j["levels"]:
        e = l["cache"]["external_hit_rate"]
        h = l["cache"]["hit_rate"]
        print(f'| {r} | {l["concurrency"]} | {l["requests"]["ok"]} | {tot(l, j["gpus"]):,.0f} | {l["throughput"]["output_tokens_per_s"]:.0f} | {l["ttft_s"]["p50"]:.2f} | {l["ttft_s"]["p99"]:.2f} | {l["itl_s"]["p50"]*1e3:.1f} | {l["itl_s"]["mean"]*1e3:.1f} | {l["itl_s"]["p99"]*1e3:.0f} | {l["tpot_s"]["p50"]*1e3:.1f} | {l["tpot_s"]["p90"]*1e3:.1f} | {"-" if h is None else f"{h:.3f}"} | {"-" if e is None else f"{e:.3f}"} |')
print()
print("Supplementary criteria (not Infera's), each the highest level that meets it: median per-request TPOT <= 33 ms; ITL p99 <= 200 ms; TPOT p90 <= 33 ms (>= 90 % of requests at >= 30 tok/s/user, DistServe-style)")
print()
print("| router | TPOT p50<=33ms: tok/s/GPU | at c | ratio | ITL p99<=200ms: tok/s/GPU | at c | ratio | TPOT p90<=33ms: tok/s/GPU | at c | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in order:
    if r not in runs:
        continue
    j = runs[r]
    a, la = best(j, crit["p99_200"])
    b, lb = best(j, crit["tpot_p90_33"])
    m, lm = best(j, crit["tpot_p50_33"])
    rm = None if m is None or not base["tpot_p50_33"] else m / base["tpot_p50_33"]
    ra = None if a is None or not base["p99_200"] else a / base["p99_200"]
    rb = None if b is None or not base["tpot_p90_33"] else b / base["tpot_p90_33"]
    print(f'| {r} | {f(m)} | {lm["concurrency"] if lm else "-"} | {f(rm,2)} | {f(a)} | {la["concurrency"] if la else "-"} | {f(ra,2)} | {f(b)} | {lb["concurrency"] if lb else "-"} | {f(rb,2)} |')
