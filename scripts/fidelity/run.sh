#!/usr/bin/env bash
# Fidelity of `kvroute simulate` (issue 7): the same workloads, seed, profile, workers and
# policies run live (`kvroute bench compare`: 4 `kvroute sim` children at --speedup S behind
# `kvroute serve`) and simulated; scripts/fidelity/table.py prints TTFT p50, ITL p50,
# tokens/s/GPU and hit rate side by side (docs/simulation.md "Fidelity").
#
# Live runs are repeated at S/2 (HALF=1, the default) to check that the 2-core machine is not
# the bottleneck: the two must agree in model time.
#
# Usage: scripts/fidelity/run.sh [OUT]      (default OUT: fidelity-results)
# Env: KVROUTE (binary; default build/simfu/kvroute), KVROUTE_SIM (binary for simulate; default
#      KVROUTE), NICE (niceness of every run, 5), S (speedup, default 1), HALF (0/1), QUICK (0/1),
#      POLICIES (default "predicted_latency round_robin dynamo_cost"), WORKLOADS
#      (default "agentic shared-prefix"), SEED (1), LIMIT_S (timeout per command, 900).
# Bounded: every command runs under `timeout`; at the defaults the whole script takes ~7 min
# of wall time (the live runs at S=1 and S=0.5 dominate; simulations take < 1 s each).
# docs/simulation.md "Fidelity" was measured with `S=1 NICE=0 scripts/fidelity/run.sh`: at
# higher S or nice 5 on the loaded 2-core machine the live sims are descheduled long enough to
# fail the S vs S/2 check.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-fidelity-results}"
KVROUTE="${KVROUTE:-$ROOT/build/simfu/kvroute}"
KVROUTE_SIM="${KVROUTE_SIM:-$KVROUTE}"  # the binary for `simulate` (default: the same)
NICE="${NICE:-5}"
S="${S:-1}"
HALF="${HALF:-1}"
POLICIES="${POLICIES:-predicted_latency round_robin dynamo_cost}"
WORKLOADS="${WORKLOADS:-agentic shared-prefix}"
SEED="${SEED:-1}"
LIMIT_S="${LIMIT_S:-900}"
WORKERS=4
GPUS_PER_WORKER=2  # the default profile, qwen3-32b-tp2-h100, is tensor-parallel over 2 GPUs
PY=/usr/bin/python3

[[ -x "$KVROUTE" ]] || { echo "no kvroute binary at $KVROUTE (set KVROUTE)" >&2; exit 2; }
mkdir -p "$OUT"

# Workload shapes, small enough that a live run takes well under a minute at S=1 (model time
# is what both sides report). Shared-prefix: RATE is requests per MODEL second.
# QUICK=1: a few requests per workload, for the plumbing test (tests/integration/fidelity).
if [[ "${QUICK:-0}" == 1 ]]; then
  AGENTIC=(--workload agentic --concurrency 4 --sessions 4 --turns 2
           --common-prefix-tokens 256 --session-prefix-tokens 128
           --turn-input-tokens 64 --output-tokens 8)
  RATE=8
  SHARED=(--workload shared-prefix --groups 2 --prompts-per-group 4
          --system-prompt-tokens 256 --question-tokens 64 --output-tokens 8
          --requests-per-rate 8)
else
  AGENTIC=(--workload agentic --concurrency 16 --sessions 64 --turns 5
           --common-prefix-tokens 2000 --session-prefix-tokens 1000
           --turn-input-tokens 256 --output-tokens 64)
  RATE=12
  SHARED=(--workload shared-prefix --groups 32 --prompts-per-group 8
          --system-prompt-tokens 2000 --question-tokens 256 --output-tokens 64
          --requests-per-rate 256)
fi

# The live router's defaults are in wall time (scrape_interval_s 1, predicted_ttl_s 5); at
# speedup S they last S times longer in model time, so the simulation gets the same model-time
# values.
fmul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%g", a * b }'; }

live() {  # live WORKLOAD SPEEDUP DIR
  local wl="$1" sp="$2" dir="$3" routers=() p
  for p in $POLICIES; do routers+=("kvroute:$p"); done
  local flags=("${AGENTIC[@]}")
  # --rates are per model second on both sides (bench sends them at RATE x S per wall second).
  [[ "$wl" == shared-prefix ]] && flags=("${SHARED[@]}" --rates "$RATE")
  echo "== live $wl at speedup $sp -> $dir" >&2
  timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE" bench compare --workers "$WORKERS" \
    --gpus-per-worker "$GPUS_PER_WORKER" --speedup "$sp" --routers "${routers[@]}" \
    --seed "$SEED" --no-plots --no-progress --out "$dir" "${flags[@]}" > "$dir.log" 2>&1 ||
    { echo "live run failed, see $dir.log" >&2; tail -5 "$dir.log" >&2; exit 1; }
}

simulate() {  # simulate WORKLOAD DIR
  local wl="$1" dir="$2" p
  local flags=("${AGENTIC[@]}")
  [[ "$wl" == shared-prefix ]] && flags=("${SHARED[@]}" --rates "$RATE")
  for p in $POLICIES; do
    timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE_SIM" simulate --workers "$WORKERS" --policy "$p" \
      --seed "$SEED" --scrape-interval "$(fmul 1 "$S")s" --predicted-ttl "$(fmul 5 "$S")s" \
      --no-plots --no-progress --out "$dir" --label "kvroute_$p" "${flags[@]}" \
      > "$dir/kvroute_$p.log" 2>&1 ||
      { echo "simulation failed, see $dir/kvroute_$p.log" >&2; exit 1; }
  done
}

HALF_S="$(fmul "$S" 0.5)"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load.txt"
rows=()
for wl in $WORKLOADS; do
  live "$wl" "$S" "$OUT/live_${wl}_s$S"
  [[ "$HALF" == 1 ]] && live "$wl" "$HALF_S" "$OUT/live_${wl}_s$HALF_S"
  mkdir -p "$OUT/sim_$wl"
  simulate "$wl" "$OUT/sim_$wl"
  for p in $POLICIES; do
    lv="$OUT/live_${wl}_s$S/kvroute_$p.json"
    [[ "$HALF" == 1 ]] && lv="$lv,$OUT/live_${wl}_s$HALF_S/kvroute_$p.json"
    rows+=("$wl:$p:$lv:$OUT/sim_$wl/kvroute_$p.json")
  done
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt"
"$PY" "$ROOT/scripts/fidelity/table.py" "${rows[@]}" | tee "$OUT/table.md"
