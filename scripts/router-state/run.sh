#!/usr/bin/env bash
# Issue 16's evidence (docs/bench/router-state.md): `kvroute simulate` runs whose results must
# not change when the router state moves. Writes each run's stdout, stderr and files into OUT;
# compare two OUTs with compare.sh.
#
# Usage: scripts/router-state/run.sh KVROUTE OUT
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KVROUTE="$1"
OUT="$2"
mkdir -p "$OUT"
SLO="--ttft-slo 1 --tpot-slo 0.05 --seed 1 --no-plots --no-progress --out $OUT"
run() {  # run LABEL ARGS...
  local label="$1"
  shift
  "$KVROUTE" simulate "$@" $SLO --label "$label" > "$OUT/$label.stdout" 2> "$OUT/$label.stderr" < /dev/null
}
# The agentic ladder (policy-matrix shape, 16 workers, four levels).
run agentic --workers 16 --concurrency 8 16 32 64 --sessions 192 --turns 10 \
  --common-prefix-tokens 4000 --session-prefix-tokens 2000 --turn-input-tokens 1500 \
  --output-tokens 200 --turn-jitter 3s
# The Mooncake trace at twice its rate, 8 workers, the default policy and two baselines.
for p in predicted_latency llmd_sticky dynamo_cost; do
  run "mooncake_$p" --workload trace --trace "$ROOT/data/mooncake/synthetic_trace.jsonl" \
    --trace-speedup 2 --workers 8 --policy "$p"
done
# Scale: 64 workers, eight replicas of the Mooncake trace.
run mooncake_w64 --workload trace --trace "$ROOT/data/mooncake/synthetic_trace.jsonl" \
  --trace-speedup 2 --trace-replicas 8 --workers 64
# The Azure conversation trace, 16 workers (two replicas).
run azure --workload trace --trace "$ROOT/data/azure-llm-2023/AzureLLMInferenceTrace_conv.csv" \
  --trace-speedup 4 --trace-replicas 2 --workers 16 --max-requests 8000
# Shared prefix, Poisson.
run shared_prefix --workload shared-prefix --rates 12 24 --requests-per-rate 1500 --workers 8
# Failures, a restart and added workers, a CPU tier, event delay and a router delay.
run fleet_changes --workers 8 --concurrency 16 --sessions 64 --turns 8 --turn-jitter 2s \
  --num-cpu-blocks 4000 --event-delay 20ms --router-delay 1ms --router-delay-per-1k-tokens 100us \
  --fail t=60s,worker=3 --restart t=90s,worker=5 --add t=100s,count=2
