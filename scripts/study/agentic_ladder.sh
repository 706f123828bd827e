#!/usr/bin/env bash
# Issue 6's agentic comparison in virtual time (docs/results/s5-policy/README.md): the live
# `kvroute bench compare` setup of docs/benchmarks.md (4 x qwen3-32b-tp2-h100, 2 GPUs each,
# max_model_len 131072, Infera's session shape: 20k common + 10k session prefix, 30 turns of
# 2,048 new tokens, 900 output tokens; a 300-model-second level per concurrency 1..64,
# fresh cluster per level) in `kvroute simulate`, for each router policy, with the host KV
# tier of the session-3/4 live runs (40,000 CPU blocks per worker) and without one (vLLM's
# default: no offload unless --kv-offloading-size is set; what Infera's
# examples/kimi_agentic_bench launches). scripts/study/ladder_table.py applies Infera's stop
# rule and prints goodput@30/@50, the ratio to round_robin, latencies and hit rates.
#
# Usage: scripts/study/agentic_ladder.sh [OUT]     (default ladder-results)
# Env:  KVROUTE   binary (default build/release/kvroute)
#       POLICIES  presets or policy .yaml files (label = base name); default: round_robin
#                 least_load dynamo_cost llmd_sticky and the default preset with the ITL guard at
#                 the 33 ms target bench compare writes (predicted_latency_slo33.yaml)
#       TIERS     CPU blocks per worker, one run set each (default "40000 0")
#       JITTER    seeded turn jitter (default 100ms: breaks the lockstep of sessions that start
#                 together, as client and network delays do live; docs/simulation.md Fidelity)
#       LEVELS    concurrency ladder (default "1 2 4 8 16 32 64")
#       LIMIT_S   timeout per run (default 600), NICE (default 5)
# Every run is under `timeout`; runs whose JSON exists are skipped (resumable).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/scripts/study"
OUT="${1:-ladder-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
POLICIES="${POLICIES:-round_robin least_load dynamo_cost llmd_sticky $HERE/predicted_latency_slo33.yaml}"
TIERS="${TIERS:-40000 0}"
JITTER="${JITTER:-100ms}"
LEVELS="${LEVELS:-1 2 4 8 16 32 64}"
LIMIT_S="${LIMIT_S:-600}"
NICE="${NICE:-5}"

[[ -x "$KVROUTE" ]] || { echo "no kvroute binary at $KVROUTE (set KVROUTE)" >&2; exit 2; }
mkdir -p "$OUT"
# Infera's contexts reach ~90k tokens in a level: the default profile with max_model_len
# 131072, as bench compare's --sim-max-model-len 131072.
sed 's/^max_model_len: .*/max_model_len: 131072/' "$ROOT/profiles/qwen3-32b-tp2-h100.yaml" \
  > "$OUT/qwen131k.yaml"

for cpu in $TIERS; do
  for p in $POLICIES; do
    pol=(--policy "$p") name="$p"
    if [[ "$p" == *.yaml ]]; then pol=(--policy-file "$p"); name="$(basename "$p" .yaml)"; fi
    label="ladder_cpu${cpu}_$name"
    [[ -s "$OUT/$label.json" ]] && { echo "skip $label (done)" >&2; continue; }
    echo "== $label ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
    # Live bench compare at --speedup 10: --duration 30 (wall) = 300 model seconds, the
    # router's 1 s scrape and 5 s predicted-entry lifetime = 10 s and 50 s of model time.
    # shellcheck disable=SC2086  # LEVELS is a word list
    timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE" simulate --no-plots --no-progress \
      --out "$OUT" --label "$label" "${pol[@]}" --workers 4 --profile "$OUT/qwen131k.yaml" \
      --num-cpu-blocks "$cpu" --workload agentic --concurrency $LEVELS --sessions 64 \
      --common-prefix-tokens 20000 --session-prefix-tokens 10000 --turns 30 \
      --turn-input-tokens 2048 --output-tokens 900 \
      --duration 300s --turn-jitter "$JITTER" --scrape-interval 10s --predicted-ttl 50s \
      > "$OUT/$label.log" 2>&1 || echo "   $label: rc $?" >&2
  done
done
echo "done: $OUT (table: scripts/study/ladder_table.py $OUT)" >&2
