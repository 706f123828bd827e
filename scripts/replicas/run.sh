#!/usr/bin/env bash
# Issue 21's replica benchmark (docs/bench/replicas.md): 1, 2 and 3 kvroute serve replicas
# behind nginx round robin, 4 fresh sims each, the same agentic workload and conversations.
# About 1 minute per replica count with the default 40 s level.
#
# Usage: scripts/replicas/run.sh KVROUTE OUT [--duration S] [--replicas 1,2,3] [--deltas none|on|off]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KVROUTE="$1"
OUT="$2"
shift 2
exec python3 "$ROOT/scripts/replicas/bench.py" "$KVROUTE" "$OUT" "$@" < /dev/null
