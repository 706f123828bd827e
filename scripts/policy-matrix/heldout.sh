#!/usr/bin/env bash
# Held-out cells for the default policy (issue 15, docs/bench/policy-matrix.md): workloads
# and a fleet size that were NOT used to choose the default's options — a conversation trace
# of another seed at 1.7x and 2.5x its pace, the Mooncake trace at 1.5x, shared-prefix at
# rate 10, a heavier agentic mix — on 8 and 24 workers, simulate seed 2. table.py checks them.
#
# Usage: scripts/policy-matrix/heldout.sh [OUT]     (default OUT: policy-heldout-results)
# Env:  KVROUTE (default build/release/kvroute), POLICIES (default: the default, llmd_sticky,
#       round_robin, dynamo_cost), JOBS (2), LIMIT_S (900 per run).
# Bounded: every run is under `timeout`; runs whose JSON exists are skipped (resumable).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-policy-heldout-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
POLICIES="${POLICIES:-predicted_latency llmd_sticky round_robin dynamo_cost}"
JOBS="${JOBS:-2}"
LIMIT_S="${LIMIT_S:-900}"
mkdir -p "$OUT"
CONV="$OUT/conversations_seed2.jsonl"
[[ -f "$CONV" ]] || "$KVROUTE" bench conversation-trace --out "$CONV" --seed 2 >/dev/null

workload_args() {  # $1 workload, $2 workers
  local k=$(( $2 / 8 ))
  case "$1" in
    conv2_17) echo "--workload trace --trace $CONV --trace-speedup 1.7 --trace-replicas $k" ;;
    conv2_25) echo "--workload trace --trace $CONV --trace-speedup 2.5 --trace-replicas $k" ;;
    mooncake_15) echo "--workload trace --trace $ROOT/data/mooncake/synthetic_trace.jsonl \
--trace-speedup 1.5 --trace-replicas $k" ;;
    shared_prefix_10) echo "--workload shared-prefix --rates $((10 * k)) --requests-per-rate $((1500 * k))" ;;
    agentic_24) echo "--workload agentic --concurrency $((24 * k)) --sessions $((48 * k)) --turns 8 \
--common-prefix-tokens 6000 --session-prefix-tokens 1000 --turn-input-tokens 1000 \
--output-tokens 300 --turn-jitter 2s" ;;
    *) echo "unknown workload $1" >&2; return 1 ;;
  esac
}

source "$ROOT/scripts/policy-matrix/cells.sh"
run_cells "held-out cells" "${SEED:-2}" "8 24" "conv2_17 conv2_25 mooncake_15 shared_prefix_10 agentic_24" "$POLICIES"
