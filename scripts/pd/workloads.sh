#!/usr/bin/env bash
# The split rules on workloads other than Infera's agentic sessions (issue 19's "never below
# 1.0 on the shared-prefix and trace workloads"; docs/bench/pd-disaggregation.md): on each P/D
# fleet (FLEETS, default infera-pd.yaml = 1 x TP4 + 4 x TP2 and infera-pd-small.yaml =
# 1 x TP4 + 2 x TP2) and each rule (kvroute's cost, Dynamo's 5,000-token cap, llm-d's 512
# nonCachedTokens) run
#   shared-prefix: Poisson rates RATES (default 4 8 16 32 req/s), 400 requests each, 150 groups
#                  of 5 prompts on a 6,000-token group prompt, 1,200-token questions, 300 out;
#   trace:         the Mooncake FAST'25 synthetic trace (TRACE), first 600 requests, at each
#                  speedup in SPEEDUPS (default 1 2 3 4), one run per speedup.
# workloads.py prints per run and level tok/s/GPU, ITL and TTFT, and goodput per GPU at 30
# tokens/s/user (the highest level whose median ITL <= 1/30 s with every request served).
#
# Usage: scripts/pd/workloads.sh KVROUTE OUT   (EXTRA="..." adds flags to every run)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
KVROUTE="$1"
OUT="$2"
mkdir -p "$OUT"
FLEETS="${FLEETS:-infera-pd infera-pd-small}"
RATES="${RATES:-4 8 16 32}"
SPEEDUPS="${SPEEDUPS:-1 2 3 4}"
TRACE="${TRACE:-/work/shared/data/mooncake/synthetic_trace.jsonl}"
EXTRA="${EXTRA:-}"
COMMON="--max-model-len 131072 --itl-target-tps 30 --seed 1 --no-plots --no-progress --out $OUT"
RULES=("cost:--pd-rule cost" "dynamo:--pd-rule dynamo_token_cap --pd-token-cap 5000"
       "llmd:--pd-rule llmd_non_cached --pd-non-cached-tokens 512")
run() {  # run LABEL ARGS...
  local label="$1"
  shift
  # shellcheck disable=SC2086
  timeout 900 "$KVROUTE" simulate "$@" $COMMON $EXTRA --label "$label" \
    > "$OUT/$label.stdout" 2> "$OUT/$label.stderr" < /dev/null
}
for fleet in $FLEETS; do
  for rule in "${RULES[@]}"; do
    name="${rule%%:*}"
    # shellcheck disable=SC2206
    flags=(${rule#*:})
    # shellcheck disable=SC2086
    run "sp_${fleet}_${name}" --fleet "$HERE/$fleet.yaml" "${flags[@]}" --workload shared-prefix \
      --rates $RATES --requests-per-rate 400 --groups 150 --prompts-per-group 5 \
      --system-prompt-tokens 6000 --question-tokens 1200 --output-tokens 300
    for s in $SPEEDUPS; do
      run "tr_${fleet}_${name}_x$s" --fleet "$HERE/$fleet.yaml" "${flags[@]}" --workload trace \
        --trace "$TRACE" --trace-speedup "$s" --max-requests 600
    done
  done
done
