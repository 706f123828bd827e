#!/usr/bin/env bash
# Infera's experiment in `kvroute simulate` (issue 19; docs/bench/pd-disaggregation.md):
# aggregated 1 x TP8 against 1 x TP4 prefill + 4 x TP2 decode (Kimi-K2.6 MXFP4 on MI355X
# profiles), Infera's agentic sessions (20k shared prefix, 10k per session, 30 turns of 2,048
# in / 900 out), one level per concurrency with as many sessions as concurrent users, and on
# the P/D fleet three split rules: kvroute's cost, Dynamo's token cap, llm-d's nonCachedTokens.
# Writes each run's stdout/stderr/files into OUT; summarize.py prints the table.
#
# Usage: scripts/pd/infera.sh KVROUTE OUT [CONCURRENCY...]   (default 4 8 16 32 48 64 96)
#   CONFIGS="pd_cost pd_dynamo" limits the runs (default: all four); EXTRA="--pd-stall 1"
#   adds flags to the P/D runs; TURNS=4 shortens every session (the live check's shape,
#   infera_live.sh), default 30; PD_FLEET=FILE another P/D fleet (infera-pd-small.yaml);
#   PROCEDURE="--warmup-step --early-stop" measures as Infera's run_sweep.sh does (vLLM's
#   multi-turn tool with its warm-up step and default early stop), on every run.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
KVROUTE="$1"
OUT="$2"
shift 2
LEVELS=("$@")
((${#LEVELS[@]} > 0)) || LEVELS=(4 8 16 32 48 64 96)
mkdir -p "$OUT"
TURNS="${TURNS:-30}"
SHAPE="--workload agentic --turns $TURNS --common-prefix-tokens 20000 --session-prefix-tokens 10000
  --turn-input-tokens 2048 --output-tokens 900 --turn-jitter 3s --max-model-len 131072
  --itl-target-tps 30,50 --seed 1 --no-plots --no-progress --out $OUT ${PROCEDURE:-}"
run() {  # run LABEL C ARGS...
  local label="$1" c="$2"
  shift 2
  # shellcheck disable=SC2086
  timeout 900 "$KVROUTE" simulate "$@" $SHAPE --concurrency "$c" --sessions "$c" \
    --label "${label}_c$c" > "$OUT/${label}_c$c.stdout" 2> "$OUT/${label}_c$c.stderr" < /dev/null
}
CONFIGS="${CONFIGS:-agg_tp8 pd_cost pd_dynamo pd_llmd}"
EXTRA="${EXTRA:-}"
PD="${PD_FLEET:-$HERE/infera-pd.yaml}"
for c in "${LEVELS[@]}"; do
  for cfg in $CONFIGS; do
    # shellcheck disable=SC2086
    case "$cfg" in
      agg_tp8) run agg_tp8 "$c" --fleet "$HERE/infera-aggregated.yaml" ;;
      pd_cost) run pd_cost "$c" --fleet "$PD" --pd-rule cost $EXTRA ;;
      pd_dynamo) run pd_dynamo "$c" --fleet "$PD" --pd-rule dynamo_token_cap --pd-token-cap 5000 $EXTRA ;;
      pd_llmd) run pd_llmd "$c" --fleet "$PD" --pd-rule llmd_non_cached --pd-non-cached-tokens 512 $EXTRA ;;
      *) echo "unknown config $cfg" >&2; exit 2 ;;
    esac
  done
done
