#!/bin/bash
# Issue 15's live check, repeated: one overloaded cell (the conversation trace at 1.5x its pace,
# first 800 requests, 4 sims of the default profile at --speedup 10) through `kvroute bench
# compare`, REPS times for the top two presets with their order swapped every rep (so neither
# always runs first on a warm machine), then OTHER_REPS times for the rest. One run lasts about
# 40 s per router. Summarise with: python3 scripts/policy-matrix/live_table.py OUT
# Usage: scripts/policy-matrix/live.sh KVROUTE OUT [REPS=10] [OTHER_REPS=2]
# Timing figures: run it alone on a quiet machine (every real ms counts ten model ms).
set -euo pipefail
KVROUTE=${1:?usage: live.sh KVROUTE OUT [REPS] [OTHER_REPS]}
OUT=${2:?usage: live.sh KVROUTE OUT [REPS] [OTHER_REPS]}
REPS=${3:-10}
OTHER_REPS=${4:-2}
mkdir -p "$OUT"
CONV="$OUT/conversations.jsonl"
[[ -f "$CONV" ]] || "$KVROUTE" bench conversation-trace --out "$CONV" --seed 1 >/dev/null
TOP=(kvroute:predicted_latency,kvroute:llmd_sticky kvroute:llmd_sticky,kvroute:predicted_latency)
REST=(kvroute:dynamo_cost,kvroute:round_robin,nginx-rr nginx-rr,kvroute:round_robin,kvroute:dynamo_cost)

run() {  # run OUTDIR ROUTERS
  [[ -f "$1/compare.json" ]] && return 0  # done in an earlier call: resume, do not redo
  timeout 900 "$KVROUTE" bench compare --workers 4 --speedup 10 --routers "$2" \
    --workload trace --trace "$CONV" --trace-speedup 1.5 --max-requests 800 \
    --ttft-slo 1 --tpot-slo 0.05 --no-progress --no-plots --out "$1" </dev/null >"$1.log" 2>&1
  echo "$(date +%T) $1 done"
}
for ((r = 1; r <= REPS; ++r)); do run "$OUT/top_r$r" "${TOP[r % 2]}"; done
for ((r = 1; r <= OTHER_REPS; ++r)); do run "$OUT/rest_r$r" "${REST[r % 2]}"; done
for p in predicted_latency llmd_sticky dynamo_cost round_robin; do
  for s in 1 2 3 4 5; do
    d="$OUT/simulate_${p}_seed$s"
    [[ -f "$d/simulate.json" ]] || "$KVROUTE" simulate --workers 4 --policy "$p" --workload trace \
      --trace "$CONV" --trace-speedup 1.5 --max-requests 800 --ttft-slo 1 --tpot-slo 0.05 \
      --seed "$s" --no-progress --no-plots --out "$d" </dev/null >"$d.log" 2>&1
  done
done
