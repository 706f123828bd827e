#!/usr/bin/env bash
# The policy matrix's workloads on a tiered fleet (docs/bench/kv-tiers.md "Session 16"): the
# default and dynamo_cost on 8 workers with host, disk and a 50 GB store, async loads, store
# leases on and off — workloads the leases were not written for.
# Usage: scripts/kv-tiers/matrix.sh KVROUTE OUT   (OUT/on and OUT/off; resumable)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KVROUTE="$(realpath "$1")"
OUT="$(realpath -m "$2")"
TIERS="--num-cpu-blocks 8000 --num-disk-blocks 16000 --kv-store-gb 50 --async-tier-loads"
mkdir -p "$OUT"
for mode in on off; do
  extra=""
  [[ "$mode" == off ]] && extra="--no-store-leases"
  # run.sh calls KVROUTE for `simulate` and for `bench conversation-trace`: the tier flags go
  # to simulate only.
  wrapper="$OUT/kvroute-$mode.sh"
  printf '#!/bin/bash\nif [ "$1" = simulate ]; then exec %q "$@" %s %s; fi\nexec %q "$@"\n' \
    "$KVROUTE" "$TIERS" "$extra" "$KVROUTE" > "$wrapper"
  chmod +x "$wrapper"
  KVROUTE="$wrapper" W=8 POLICIES="predicted_latency dynamo_cost" JOBS="${JOBS:-1}" \
    "$ROOT/scripts/policy-matrix/run.sh" "$OUT/$mode"
done
# Shared-store credit not found, per run (the line simulate prints per level).
for f in "$OUT"/on/*.log "$OUT"/off/*.log; do
  line="$(grep -h 'shared-store credit' "$f" | tail -1 || true)"
  [[ -n "$line" ]] && echo "$(basename "$(dirname "$f")")/$(basename "$f" .log): ${line#*: }"
done
