#!/usr/bin/env bash
# What no routing policy can exceed on fleet B at c=96 (docs/bench/kv-tiers.md "Session 19"):
# the same fleet and workload with every lower tier loading in no time (host, disk and store
# at 1e15 B/s, no store latency), beside the real tiers and no tiers, each split into the
# saturated rate and the tail (saturation.py).
# Usage: scripts/kv-tiers/ceiling.sh KVROUTE OUT   (resumable; 6 runs, ~1 min)
# Env:   SEED (default 1), POLICIES (default "predicted_latency dynamo_cost")
set -euo pipefail
KVROUTE="$(realpath "$1")"
OUT="$(realpath -m "$2")"
SEED="${SEED:-1}"
POLICIES="${POLICIES:-predicted_latency dynamo_cost}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
TIERS=(--num-cpu-blocks 12000 --num-disk-blocks 24000 --kv-store-gb 400 --async-tier-loads)
FREE=(--fleet "$HERE/free_loads.yaml" --disk-read-bandwidth 1e15 --kv-store-bandwidth 1e15
      --kv-store-latency 0)
run() {  # label, then simulate flags
  local label="$1"; shift
  [[ -f "$OUT/$label.json" ]] && return 0
  echo "ceiling: $label" >&2
  timeout 600 "$KVROUTE" simulate --num-gpu-blocks 6000 --concurrency 96 --sessions 96 \
    --seed "$SEED" "$@" --out "$OUT" --label "$label" --no-plots --no-progress \
    > "$OUT/$label.log" 2>&1 < /dev/null
}
run "notiers_s$SEED" --workers 4 --policy predicted_latency
labels=("notiers_s$SEED")
for p in $POLICIES; do
  run "tiers_${p}_s$SEED" --workers 4 "${TIERS[@]}" --policy "$p"
  run "free_${p}_s$SEED" "${FREE[@]}" "${TIERS[@]}" --policy "$p"
  labels+=("tiers_${p}_s$SEED" "free_${p}_s$SEED")
done
python3 "$HERE/saturation.py" "$OUT" "${labels[@]}"
