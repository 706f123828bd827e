#!/usr/bin/env bash
# Policy matrix (issue 15, docs/bench/policy-matrix.md): every built-in preset on six
# workloads x two fleet sizes in `kvroute simulate`; table.py turns OUT into the doc's table
# and checks the default against the best preset and round robin in every cell.
#
# Usage: scripts/policy-matrix/run.sh [OUT]      (default OUT: policy-matrix-results)
# Env:  KVROUTE   binary (default build/release/kvroute; better a copy, note its commit)
#       W         fleet sizes (default "8 16")
#       POLICIES  presets, or .yaml policy files labelled by base name (default: all seven)
#       WORKLOADS (default "agentic shared_prefix conv_low conv_high mooncake azure")
#       SEED      workload seed (default 1)
#       JOBS      runs side by side (default 2), LIMIT_S timeout per run (default 900)
# The conversation workloads replay a trace written by `kvroute bench conversation-trace`
# (seed 1, defaults) into OUT/conversations.jsonl. Fleet size scales the offered load:
# W/8 replicas of each trace, W/8 x the agentic concurrency and shared-prefix rate.
# Bounded: every run is under `timeout`; runs whose JSON exists are skipped (resumable).
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-policy-matrix-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
W="${W:-8 16}"
POLICIES="${POLICIES:-round_robin random least_load approx_prefix dynamo_cost llmd_sticky predicted_latency}"
WORKLOADS="${WORKLOADS:-agentic shared_prefix conv_low conv_high mooncake azure}"
JOBS="${JOBS:-2}"
LIMIT_S="${LIMIT_S:-900}"
mkdir -p "$OUT"
CONV="$OUT/conversations.jsonl"
[[ -f "$CONV" ]] || "$KVROUTE" bench conversation-trace --out "$CONV" --seed 1 >/dev/null

workload_args() {  # $1 workload, $2 workers
  local k=$(( $2 / 8 ))
  case "$1" in
    agentic) echo "--workload agentic --concurrency $((16 * k)) --sessions $((48 * k)) --turns 10 \
--common-prefix-tokens 4000 --session-prefix-tokens 2000 --turn-input-tokens 1500 \
--output-tokens 200 --turn-jitter 3s" ;;
    shared_prefix) echo "--workload shared-prefix --rates $((12 * k)) --requests-per-rate $((1500 * k))" ;;
    conv_low) echo "--workload trace --trace $CONV --trace-speedup 1.4 --trace-replicas $k" ;;
    conv_high) echo "--workload trace --trace $CONV --trace-speedup 2 --trace-replicas $k" ;;
    mooncake) echo "--workload trace --trace $ROOT/data/mooncake/synthetic_trace.jsonl \
--trace-speedup 2 --trace-replicas $k" ;;
    azure) echo "--workload trace --trace $ROOT/data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv \
--trace-speedup 4 --trace-replicas $k --max-requests $((4000 * k))" ;;
    *) echo "unknown workload $1" >&2; return 1 ;;
  esac
}

source "$ROOT/scripts/policy-matrix/cells.sh"
run_cells "policy matrix" "${SEED:-1}" "$W" "$WORKLOADS" "$POLICIES"
