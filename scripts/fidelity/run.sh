#!/usr/bin/env bash
# Fidelity of `kvroute simulate` (issue 7): the same workloads, seed, profile, workers and
# policies run live (`kvroute bench compare`: 4 `kvroute sim` children at --speedup S behind
# `kvroute serve`) and simulated; scripts/fidelity/table.py prints TTFT p50, ITL p50,
# tokens/s/GPU and hit rate side by side, with the gaps, ** marks and per-workload verdicts
# (docs/simulation.md "Fidelity").
#
# Both sides get the same model of what is not the engine:
#   - agentic client pause: --think-time THINK --turn-jitter JITTER on both `bench compare` and
#     `simulate` (one function, bench::AgenticTurnPause: same seed, session, turn -> same pause);
#     it breaks the lockstep of sessions that start together.
#   - router/proxy delay: measured live first (ROUTER_DELAY=measure, the default): `kvroute
#     bench overhead` at concurrency 1 against sims so fast (--speedup 10000) that the model's
#     own time is negligible, at two prompt sizes, per policy: the client-observed TTFT there is
#     the client + proxy (parse, template, tokenize, route, forward) + sim HTTP path, fitted
#     as FIXED + PER1K x prompt/1000, and given to `simulate --router-delay FIXED
#     --router-delay-per-1k-tokens PER1K` (times S: the live run counts wall x S as model time).
#
# Live runs are repeated at S/2 (HALF=1, the default) to check that the 2-core machine is not
# the bottleneck: the two must agree in model time.
#
# Usage: scripts/fidelity/run.sh [OUT]      (default OUT: fidelity-results)
# Env: KVROUTE (binary; default build/release/kvroute), KVROUTE_SIM (binary for simulate;
#      default KVROUTE), NICE (niceness of every run, 5), S (speedup, default 1), HALF (0/1),
#      QUICK (0/1), POLICIES (default: the five below), WORKLOADS (default "agentic
#      shared-prefix"), SEED (1), LIMIT_S (timeout per command, 900), THINK (agentic think time,
#      model time, default 0), JITTER (agentic turn jitter, model time, default 100ms),
#      ROUTER_DELAY (measure | none | FIXED:PER1K in model time, e.g. 1.5ms:0.2ms; default
#      measure).
# Bounded: every command runs under `timeout`. At the defaults (S=1, HALF=1, five policies)
# the whole script takes ~15 min of wall time on a quiet machine (live runs at S=1 and S=0.5
# dominate; the overhead measurement ~1-2 min; simulations take < 1 s each).
# docs/simulation.md "Fidelity" is measured with `S=1 NICE=0 scripts/fidelity/run.sh OUT`: at
# higher S or nice 5 on a loaded 2-core machine the live sims are descheduled long enough to
# fail the S vs S/2 check.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-fidelity-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
KVROUTE_SIM="${KVROUTE_SIM:-$KVROUTE}"  # the binary for `simulate` (default: the same)
NICE="${NICE:-5}"
S="${S:-1}"
HALF="${HALF:-1}"
POLICIES="${POLICIES:-predicted_latency dynamo_cost llmd_sticky least_load round_robin}"
WORKLOADS="${WORKLOADS:-agentic shared-prefix}"
SEED="${SEED:-1}"
LIMIT_S="${LIMIT_S:-900}"
THINK="${THINK:-0}"
JITTER="${JITTER:-100ms}"
ROUTER_DELAY="${ROUTER_DELAY:-measure}"
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
  DELAY_REQUESTS=20
else
  AGENTIC=(--workload agentic --concurrency 16 --sessions 64 --turns 5
           --common-prefix-tokens 2000 --session-prefix-tokens 1000
           --turn-input-tokens 256 --output-tokens 64)
  RATE=12
  SHARED=(--workload shared-prefix --groups 32 --prompts-per-group 8
          --system-prompt-tokens 2000 --question-tokens 256 --output-tokens 64
          --requests-per-rate 256)
  DELAY_REQUESTS=200
fi
# The agentic client's pause, identical on both sides (model time).
AGENTIC+=(--think-time "$THINK" --turn-jitter "$JITTER")

# The live router's defaults are in wall time (scrape_interval_s 1, predicted_ttl_s 5); at
# speedup S they last S times longer in model time, so the simulation gets the same model-time
# values.
fmul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%g", a * b }'; }

# Router delay per policy, model time: "FIXED_S PER1K_S" in $OUT/router_delay/<policy>.txt.
measure_router_delay() {
  local dir="$OUT/router_delay" targets=() p size
  mkdir -p "$dir"
  for p in $POLICIES; do targets+=("kvroute:$p"); done
  for size in 512 4096; do
    echo "== router delay: bench overhead, prompt $size tokens -> $dir/p$size.json" >&2
    timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE" bench overhead --workers "$WORKERS" \
      --speedup 10000 --concurrency 1 --requests "$DELAY_REQUESTS" --warmup 20 \
      --prompt-tokens "$size" --output-tokens 4 --seed "$SEED" --targets "${targets[@]}" \
      --out "$dir" --label "p$size" --no-progress > "$dir/p$size.log" 2>&1 ||
      { echo "overhead run failed, see $dir/p$size.log" >&2; tail -5 "$dir/p$size.log" >&2; exit 1; }
  done
  "$PY" - "$dir" "$S" $POLICIES <<'EOF'
import json, sys
d, s, policies = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def p50_s(size, policy):
    doc = json.load(open(f"{d}/p{size}.json"))
    for lv in doc["levels"]:
        if lv["target"] == f"kvroute:{policy}" and lv["concurrency"] == 1:
            return lv["latency"]["p50_ms"] / 1000
    sys.exit(f"{d}/p{size}.json: no kvroute:{policy} level at concurrency 1")
for p in policies:
    small, large = p50_s(512, p), p50_s(4096, p)
    per1k = max(0.0, (large - small) / (4.096 - 0.512))
    fixed = max(0.0, small - per1k * 0.512)
    # Wall seconds of the live path count S times over as model time at speedup S.
    with open(f"{d}/{p}.txt", "w") as f:
        f.write(f"{fixed * s:.6f} {per1k * s:.6f}\n")
    print(f"router delay {p}: {fixed * 1e3:.3f} ms + {per1k * 1e3:.3f} ms per 1k prompt tokens "
          f"(wall; TTFT p50 {small * 1e3:.3f} ms at 512 tokens, {large * 1e3:.3f} ms at 4096)",
          file=sys.stderr)
EOF
}

router_delay_flags() {  # router_delay_flags POLICY -> simulate flags on stdout
  local fixed per1k
  case "$ROUTER_DELAY" in
    none|0) return ;;
    measure) read -r fixed per1k < "$OUT/router_delay/$1.txt"
             echo "--router-delay ${fixed}s --router-delay-per-1k-tokens ${per1k}s" ;;
    *) echo "--router-delay ${ROUTER_DELAY%%:*} --router-delay-per-1k-tokens ${ROUTER_DELAY#*:}" ;;
  esac
}

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
  local wl="$1" dir="$2" p delay
  local flags=("${AGENTIC[@]}")
  [[ "$wl" == shared-prefix ]] && flags=("${SHARED[@]}" --rates "$RATE")
  for p in $POLICIES; do
    read -r -a delay <<< "$(router_delay_flags "$p")"
    timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE_SIM" simulate --workers "$WORKERS" --policy "$p" \
      --seed "$SEED" --scrape-interval "$(fmul 1 "$S")s" --predicted-ttl "$(fmul 5 "$S")s" \
      "${delay[@]}" --no-plots --no-progress --out "$dir" --label "kvroute_$p" "${flags[@]}" \
      > "$dir/kvroute_$p.log" 2>&1 ||
      { echo "simulation failed, see $dir/kvroute_$p.log" >&2; exit 1; }
  done
}

HALF_S="$(fmul "$S" 0.5)"
started=$(date +%s)
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%FT%TZ))" | tee "$OUT/load.txt"
[[ "$ROUTER_DELAY" == measure ]] && measure_router_delay
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
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg) ($(date -u +%FT%TZ), $(( $(date +%s) - started )) s)" |
  tee -a "$OUT/load.txt"
{
  echo "Setup: S=$S, seed $SEED, $WORKERS workers x $GPUS_PER_WORKER GPUs; agentic think time" \
       "$THINK + jitter [0, $JITTER) model time on both sides; router delay: $ROUTER_DELAY."
  if [[ "$ROUTER_DELAY" == measure ]]; then
    for p in $POLICIES; do
      read -r fixed per1k < "$OUT/router_delay/$p.txt"
      echo "- router delay $p (model time): $(fmul "$fixed" 1000) ms + $(fmul "$per1k" 1000) ms per 1k prompt tokens"
    done
  fi
  sed 's/^/- /' "$OUT/load.txt"
  echo
  "$PY" "$ROOT/scripts/fidelity/table.py" "${rows[@]}"
} | tee "$OUT/table.md"
