#!/usr/bin/env bash
# Dependencies point one way (issue 16): fails, naming file, line and rule, if a module
# includes a project header it must not. Rerun it any time: `scripts/deps/check.sh`
# (ctest runs it as `deps_one_way`; `deps_check_fails_on_violations` proves it can fail).
#
#   sched/     PURE scheduling core: only common/ and itself
#   engine/    of kv/, only the KV event and block-key vocabulary (kv_event, block_key,
#              extra_keys, vllm_hash): no index, no wire codec, no sockets
#   fleet/     the router state: common/, engine/, sched/ and itself; no Asio/Beast/ZeroMQ
#   simulate/  no gateway/ (the router state is fleet/) and no bench/ (workloads, traces and
#              the report schema are workload/)
#
# Usage: check.sh [ROOT]   (ROOT: a tree with src/, default the repository)
set -uo pipefail

ROOT="${1:-$(cd "$(dirname "$0")/../.." && pwd)}"
violations=0

# includes DIR -> "file:line:header" for every project include ("x/y.h") under ROOT/src/DIR.
includes() {
  local dir="$ROOT/src/$1"
  [[ -d "$dir" ]] || return 0
  grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"[^"]+"' "$dir" \
      --include='*.h' --include='*.cc' --include='*.inc' 2>/dev/null |
    sed -E 's|^'"$ROOT"'/||; s|^([^:]+):([0-9]+):.*#[[:space:]]*include[[:space:]]+"([^"]+)".*|\1:\2:\3|'
}

# system_includes DIR PATTERN -> "file:line:header" for <...> includes matching PATTERN.
system_includes() {
  local dir="$ROOT/src/$1"
  [[ -d "$dir" ]] || return 0
  grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]+<('"$2"')' "$dir" \
      --include='*.h' --include='*.cc' 2>/dev/null | sed -E 's|^'"$ROOT"'/||'
}

fail() {  # fail LOCATION RULE
  echo "deps: $1: $2"
  violations=$((violations + 1))
}

while IFS=: read -r file line header; do
  [[ -z "$file" ]] && continue
  case "$header" in
    common/*|sched/*) ;;
    *) fail "$file:$line" "sched/ may include only common/ and sched/ (includes $header)" ;;
  esac
done < <(includes sched)

while IFS=: read -r file line header; do
  [[ -z "$file" ]] && continue
  case "$header" in
    kv/kv_event.h|kv/keys/block_key.h|kv/keys/extra_keys.h|kv/keys/vllm_hash.h) ;;
    kv/*) fail "$file:$line" "engine/ may include only kv/'s event and block-key vocabulary (includes $header)" ;;
  esac
done < <(includes engine)

while IFS=: read -r file line header; do
  [[ -z "$file" ]] && continue
  case "$header" in
    common/*|engine/*|sched/*|fleet/*) ;;
    *) fail "$file:$line" "fleet/ may include only common/, engine/, sched/ and fleet/ (includes $header)" ;;
  esac
done < <(includes fleet)
while IFS= read -r hit; do
  [[ -n "$hit" ]] && fail "${hit%%:#*}" "fleet/ does no I/O: no Asio, Beast or ZeroMQ"
done < <(system_includes fleet 'boost/asio|boost/beast|zmq')

while IFS=: read -r file line header; do
  [[ -z "$file" ]] && continue
  case "$header" in
    gateway/*) fail "$file:$line" "simulate/ must not include gateway/ (router state: fleet/) (includes $header)" ;;
    bench/*) fail "$file:$line" "simulate/ must not include bench/ (workloads, traces, report: workload/) (includes $header)" ;;
  esac
done < <(includes simulate)

if ((violations > 0)); then
  echo "deps: $violations include(s) against the dependency rules (scripts/deps/check.sh)"
  exit 1
fi
echo "deps: sched/, engine/, fleet/ and simulate/ include only what they may"
