#!/usr/bin/env bash
# Compares two OUT folders of run.sh: every stdout, CSV and JSON must be identical, except
# what measures the machine (wall time, peak RSS, speed ratios) and the folder's own path,
# which are removed first. Exit 0 and "identical" when they match; the diffs otherwise.
#   compare.sh BEFORE AFTER     compare
#   compare.sh --sums OUT       sha256 of every file as compared (for the record)
set -uo pipefail

strip() {  # strip FILE DIR: the file without the machine's numbers and its folder's path
  sed -E 's#'"$2"'/##g;
          s/"(wall_s|peak_rss_bytes|peak_rss_mib|wall_time_s)": *[0-9.eE+-]+/"\1": X/g;
          s/wall [0-9.]+ s \([0-9.]+x\)/wall X/g; s/peak RSS [0-9]+ MiB/peak RSS X/g' "$1"
}

if [[ "${1:-}" == "--sums" ]]; then
  dir="$(cd "$2" && pwd)"
  for f in "$dir"/*; do
    printf '%s  %s\n' "$(strip "$f" "$dir" | sha256sum | cut -c1-16)" "$(basename "$f")"
  done
  exit 0
fi

A="$(cd "$1" && pwd)"
B="$(cd "$2" && pwd)"
status=0
n=0
for f in "$A"/*; do
  name="$(basename "$f")"
  if [[ ! -f "$B/$name" ]]; then
    echo "missing in $B: $name"
    status=1
    continue
  fi
  if ! diff -q <(strip "$f" "$A") <(strip "$B/$name" "$B") > /dev/null; then
    echo "differs: $name"
    diff <(strip "$f" "$A") <(strip "$B/$name" "$B") | head -20
    status=1
  fi
  n=$((n + 1))
done
for f in "$B"/*; do
  [[ -f "$A/$(basename "$f")" ]] || { echo "missing in $A: $(basename "$f")"; status=1; }
done
((status == 0)) && echo "identical: $n files (wall time, peak RSS and the folder path removed)"
exit $status
