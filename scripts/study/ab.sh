#!/usr/bin/env bash
# A/B of the default preset's prefix_affinity filter (docs/simulation.md "Policy study"):
# `predicted_latency` (with the filter) against predicted_latency_noaff.yaml (the same preset
# without it), llmd_sticky as the reference, in `kvroute simulate`:
#   infera_j3s  Infera's agentic shape (20k common + 10k session prefix, 30 turns of 2,048 new
#               tokens) at 4 workers, c = 8/16/32 of 32 sessions, 3 s turn jitter: the run in
#               which the default's session-move cascade was reproduced (docs/benchmarks.md)
#   agentic_j   the study's agentic shape at 8 workers, 30 ms turn jitter
#   shared      shared-prefix at 8 workers, 8/16/24 req/s, 750 requests each
#   trace       the Mooncake trace at 8 workers, first 480 requests, arrivals x2
# Usage: scripts/study/ab.sh [OUT]   (default ab-results); env KVROUTE, TRACE, NICE (5),
#        LIMIT_S (600 per run), CASES (default "infera_j3s agentic_j shared trace"),
#        POLICIES (default "predicted_latency noaff llmd_sticky"; a path ending in .yaml is a
#        policy file labelled by its base name; session 5's decode-slowdown A/B:
#        POLICIES="predicted_latency scripts/study/predicted_latency_s4.yaml").
# Then: scripts/study/table_levels.py OUT (one row per run and level).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
HERE="$ROOT/scripts/study"
OUT="${1:-ab-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
TRACE="${TRACE:-$ROOT/data/mooncake/synthetic_trace.jsonl}"
NICE="${NICE:-5}"
LIMIT_S="${LIMIT_S:-600}"
CASES="${CASES:-infera_j3s agentic_j shared trace}"
POLICIES="${POLICIES:-predicted_latency noaff llmd_sticky}"

[[ -x "$KVROUTE" ]] || { echo "no kvroute binary at $KVROUTE (set KVROUTE)" >&2; exit 2; }
mkdir -p "$OUT"
# Infera's contexts reach ~90k tokens: the default profile with max_model_len 131072.
sed 's/^max_model_len: .*/max_model_len: 131072/' "$ROOT/profiles/qwen3-32b-tp2-h100.yaml" \
  > "$OUT/qwen131k.yaml"

# Infera's session shape, spelled out: simulate's own default session is smaller (it fits the
# default profile's 40,960-token context).
INFERA_SHAPE="--common-prefix-tokens 20000 --session-prefix-tokens 10000 --turns 30 \
--turn-input-tokens 2048 --output-tokens 900"

case_flags() {
  case "$1" in
    infera_j3s) echo --workers 4 --profile "$OUT/qwen131k.yaml" --concurrency 8 16 32 \
                  --sessions 32 --turn-jitter 3s $INFERA_SHAPE ;;
    agentic_j) echo --workers 8 --num-gpu-blocks 8192 --workload agentic --concurrency 32 \
                 --sessions 32 --common-prefix-tokens 2000 --session-prefix-tokens 1000 \
                 --turns 5 --turn-input-tokens 256 --output-tokens 64 --turn-jitter 30ms ;;
    shared) echo --workers 8 --workload shared-prefix --rates 8 16 24 --requests-per-rate 750 ;;
    trace) echo --workers 8 --workload trace --trace "$TRACE" --trace-speedup 2 \
             --max-requests 480 --ttft-slo 1 --tpot-slo 0.05 ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}

for c in $CASES; do
  for p in $POLICIES; do
    pol=(--policy "$p")
    [[ "$p" == noaff ]] && pol=(--policy-file "$HERE/predicted_latency_noaff.yaml")
    if [[ "$p" == *.yaml ]]; then pol=(--policy-file "$p"); p="$(basename "$p" .yaml)"; fi
    label="ab_${c}_$p"
    [[ -s "$OUT/$label.json" ]] && continue
    echo "== $label ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
    # shellcheck disable=SC2046  # case_flags is a word list
    /usr/bin/time -v -o "$OUT/$label.time" timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE" \
      simulate --no-plots --no-progress --out "$OUT" --label "$label" "${pol[@]}" \
      $(case_flags "$c") > "$OUT/$label.log" 2>&1 || echo "   $label: rc $?" >&2
  done
done
