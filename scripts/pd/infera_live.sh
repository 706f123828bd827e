#!/usr/bin/env bash
# Infera's experiment live on sims (issue 19; docs/bench/pd-disaggregation.md): `kvroute bench
# compare --topology infera` (the aggregated TP8 fleet and the 1 x TP4 prefill + 4 x TP2 decode
# fleet of infera-aggregated.yaml / infera-pd.yaml, cold sims per run, sped up) with Infera's
# agentic sessions (20k shared prefix, 10k per session, 2,048 in / 900 out, 3 s jitter, seed
# 1), Infera's stop rule (mean ITL 40 ms) and goodput per GPU at 30 and 50 tok/s/user.
# TURNS (default 4, not Infera's 30) bounds the wall time: TURNS=30 at c = 4 16 32 64 took
# 9.5 min on 2 quiet cores (docs/bench/pd-disaggregation.md "Infera's 30 turns live");
# scripts/pd/infera.sh with the same TURNS runs the same shape in `kvroute simulate`.
#
# Usage: scripts/pd/infera_live.sh KVROUTE OUT [CONCURRENCY...]   (default 8 16 32)
#   SPEEDUP (default 10), ROUTERS (default kvroute:predicted_latency), PD_RULE (default cost),
#   PD_TOKEN_CAP / PD_NON_CACHED (the presets' thresholds; default: serve's 5000 / 0).
set -euo pipefail
KVROUTE="$1"
OUT="$2"
shift 2
LEVELS=("$@")
((${#LEVELS[@]} > 0)) || LEVELS=(8 16 32)
CONC="$(IFS=,; echo "${LEVELS[*]}")"
mkdir -p "$OUT"
timeout 1200 "$KVROUTE" bench compare --topology infera --routers "${ROUTERS:-kvroute:predicted_latency}" \
  --pd-rule "${PD_RULE:-cost}" ${PD_TOKEN_CAP:+--pd-token-cap "$PD_TOKEN_CAP"} \
  ${PD_NON_CACHED:+--pd-non-cached-tokens "$PD_NON_CACHED"} --speedup "${SPEEDUP:-10}" --sim-max-model-len 131072 \
  --workload agentic --turns "${TURNS:-4}" --common-prefix-tokens 20000 \
  --session-prefix-tokens 10000 --turn-input-tokens 2048 --output-tokens 900 --turn-jitter 3s \
  --itl-target-tps 30,50 --seed 1 --concurrency "$CONC" --request-timeout 600 \
  --no-plots --no-progress --out "$OUT" > "$OUT/stdout" 2> "$OUT/stderr" < /dev/null
cat "$OUT/stdout"
