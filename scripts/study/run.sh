#!/usr/bin/env bash
# Policy study (issue 7, docs/simulation.md "Policy study"): every built-in policy on the
# agentic workload and on the Mooncake synthetic trace scaled up, from 8 to 1,024 workers,
# in `kvroute simulate`. scripts/study/table.py turns the output folder into the doc's table.
#
# Usage: scripts/study/run.sh [OUT]              (default OUT: study-results)
# Env:  KVROUTE   binary (default build/release/kvroute, what `make build` makes; better a copy, so that rebuilds of
#                 the tree during a long study do not change it; note its commit)
#       W         worker counts (default "8 64 256 512 1024")
#       POLICIES  (default: all seven built-ins; a path ending in .yaml is a policy file,
#                 labelled by its base name)
#       WORKLOADS (default "agentic trace"; "agentic_jitter" adds agentic with --turn-jitter)
#       JITTER    turn jitter of agentic_jitter (default 30ms)
#       TRACE     Mooncake JSONL (default data/mooncake/synthetic_trace.jsonl)
#       LIMIT_S   timeout per run (default 900), NICE (default 5), RETRY=1 reruns timed-out runs
# Bounded: every run is under `timeout`; a run that times out or fails is recorded in
# OUT/runs.csv (rc 124 = timed out) and the table says so. Runs whose JSON already exists are
# skipped, so the script can be resumed or extended (e.g. W=1024 alone).
# Each run is under /usr/bin/time -v: OUT/runs.csv has its CPU seconds and peak RSS.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="${1:-study-results}"
KVROUTE="${KVROUTE:-$ROOT/build/release/kvroute}"
W="${W:-8 64 256 512 1024}"
POLICIES="${POLICIES:-round_robin random least_load approx_prefix dynamo_cost llmd_sticky predicted_latency}"
WORKLOADS="${WORKLOADS:-agentic trace}"
JITTER="${JITTER:-30ms}"
TRACE="${TRACE:-$ROOT/data/mooncake/synthetic_trace.jsonl}"
LIMIT_S="${LIMIT_S:-900}"
NICE="${NICE:-5}"

[[ -x "$KVROUTE" ]] || { echo "no kvroute binary at $KVROUTE (set KVROUTE)" >&2; exit 2; }
mkdir -p "$OUT"
RUNS="$OUT/runs.csv"
[[ -s "$RUNS" ]] || echo "label,workload,workers,policy,rc,cpu_s,max_rss_kb,wall_s,load1" > "$RUNS"

# The agentic shape: Infera's scaled down 10x (2k common + 1k session prefix, 5 turns of 256
# new tokens, 64 output tokens), 4 sessions per worker all starting at t = 0.
agentic_flags() {  # agentic_flags WORKERS
  echo --num-gpu-blocks 8192 --workload agentic --concurrency $((4 * $1)) \
    --sessions $((4 * $1)) --common-prefix-tokens 2000 --session-prefix-tokens 1000 \
    --turns 5 --turn-input-tokens 256 --output-tokens 64
}
# The trace: full-size prompts, arrivals x2, N/8 disjoint replicas (other tenants' traffic),
# the first 60 N requests; DistServe SLO TTFT <= 1 s, TPOT <= 50 ms.
trace_flags() {  # trace_flags WORKERS
  echo --workload trace --trace "$TRACE" --trace-replicas $(($1 / 8)) --trace-speedup 2 \
    --max-requests $((60 * $1)) --ttft-slo 1 --tpot-slo 0.05
}

run_one() {  # run_one WORKLOAD WORKERS POLICY (a preset name, or a policy YAML file)
  local wl="$1" w="$2" p="$3" label flags pol=(--policy "$3")
  if [[ "$p" == *.yaml ]]; then pol=(--policy-file "$p"); p="$(basename "$p" .yaml)"; fi
  case "$wl" in
    agentic) label="agentic_${p}_$w"; flags="$(agentic_flags "$w")" ;;
    agentic_jitter) label="agenticj${JITTER}_${p}_$w"
                    flags="$(agentic_flags "$w") --turn-jitter $JITTER" ;;
    trace) label="trace_${p}_$w"; flags="$(trace_flags "$w")" ;;
    *) echo "unknown workload $wl" >&2; exit 2 ;;
  esac
  [[ -s "$OUT/$label.json" ]] && { echo "skip $label (done)" >&2; return 0; }
  if [[ "${RETRY:-0}" != 1 ]] && grep -q "^$label,.*,124," "$RUNS"; then
    echo "skip $label (timed out before; RETRY=1 runs it again)" >&2; return 0
  fi
  echo "== $label ($(date -u +%H:%M:%S), load $(cut -d' ' -f1 /proc/loadavg))" >&2
  local rc=0 load
  load="$(cut -d' ' -f1 /proc/loadavg)"
  # shellcheck disable=SC2086  # flags is a word list built above
  /usr/bin/time -v -o "$OUT/$label.time" timeout "$LIMIT_S" nice -n "$NICE" "$KVROUTE" \
    simulate --no-plots --no-progress --out "$OUT" --label "$label" "${pol[@]}" \
    --workers "$w" $flags > "$OUT/$label.log" 2>&1 || rc=$?
  # GNU time exits with its command's status: timeout's 124 when the run was cut.
  local cpu rss wall
  cpu="$(awk -F': ' '/User time/ {u=$2} /System time/ {s=$2} END {printf "%.2f", u + s}' "$OUT/$label.time")"
  rss="$(awk -F': ' '/Maximum resident/ {print $2}' "$OUT/$label.time")"
  wall="$(awk -F': ' '/Elapsed/ {n=split($2, a, ":"); t=0; for (i=1;i<=n;i++) t=t*60+a[i]; printf "%.1f", t}' "$OUT/$label.time")"
  echo "$label,${wl},$w,$p,$rc,$cpu,$rss,$wall,$load" >> "$RUNS"
  [[ $rc -eq 0 ]] || echo "   $label: rc $rc (124 = timed out after ${LIMIT_S}s)" >&2
}

for w in $W; do
  for wl in $WORKLOADS; do
    for p in $POLICIES; do run_one "$wl" "$w" "$p"; done
  done
done
echo "done: $OUT (table: scripts/study/table.py $OUT)" >&2
