#!/usr/bin/env bash
# Issue 20 on Infera's own agentic sessions (docs/bench/kv-tiers.md "Session 19"): 20k shared
# prefix, 10k per-session prefix, 30 turns of 2,048 in / 900 out, 64 sessions at c=64 on
# 4 x qwen3-32b-tp2-h100 (the profile's 19,316 GPU blocks each = 1.24M tokens of fleet GPU KV;
# the sessions' unique KV at their mean depth ~3.5M tokens, about 2.8x). Tiers as fleet B
# (host 2x, disk 4x the GPU blocks per worker; a 1 TB store). Then the goodput and the
# saturated-rate / tail split (saturation.py) of each run.
# Usage: scripts/kv-tiers/infera_full.sh KVROUTE OUT   (resumable; ~7 min on 2 cores)
# Env:   SEED (default 1), POLICIES (tiered runs; default "predicted_latency dynamo_cost
#        llmd_sticky round_robin"), EXTRA (flags for every run, e.g. "--warmup-step
#        --early-stop --turn-jitter 3s": Infera's measurement procedure, sessions out of lockstep)
set -euo pipefail
KVROUTE="$(realpath "$1")"
OUT="$(realpath -m "$2")"
SEED="${SEED:-1}"
POLICIES="${POLICIES:-predicted_latency dynamo_cost llmd_sticky round_robin}"
mkdir -p "$OUT"
SHAPE=(--common-prefix-tokens 20000 --session-prefix-tokens 10000 --turns 30
       --turn-input-tokens 2048 --output-tokens 900 --max-model-len 131072)
TIERS=(--num-cpu-blocks 38632 --num-disk-blocks 77264 --kv-store-gb 1000 --async-tier-loads)
run() {  # label, then simulate flags
  local label="$1"; shift
  [[ -f "$OUT/$label.json" ]] && return 0
  echo "infera_full: $label" >&2
  # shellcheck disable=SC2086  # EXTRA is a list of flags
  timeout 900 "$KVROUTE" simulate --workers 4 --concurrency 64 --sessions 64 --seed "$SEED" \
    "${SHAPE[@]}" ${EXTRA:-} "$@" --out "$OUT" --label "$label" --no-plots --no-progress \
    > "$OUT/$label.log" 2>&1 < /dev/null
}
run "notiers_predicted_latency_s$SEED" --policy predicted_latency
labels=("notiers_predicted_latency_s$SEED")
for p in $POLICIES; do
  run "tiers_${p}_s$SEED" "${TIERS[@]}" --policy "$p"
  labels+=("tiers_${p}_s$SEED")
done
python3 "$(dirname "$0")/saturation.py" "$OUT" "${labels[@]}"
