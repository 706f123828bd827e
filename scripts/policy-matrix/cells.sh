# Sourced by run.sh and heldout.sh: runs every (fleet size, workload, policy) cell of a matrix
# in `kvroute simulate` and checks the result with table.py. The caller defines
# workload_args WORKLOAD WORKERS (the simulate flags of one workload) and sets ROOT, OUT,
# KVROUTE, JOBS, LIMIT_S.
# Usage: run_cells TITLE SEED "FLEET SIZES" "WORKLOADS" "POLICIES"
# Policies are presets, or .yaml policy files labelled by base name. Every run is under
# `timeout`; runs whose JSON exists are skipped (resumable).
run_cells() {
  local title="$1" seed="$2" sizes="$3" workloads="$4" policies="$5"
  local jobs_file="$OUT/jobs.txt" w wl p label pol name
  : > "$jobs_file"
  for w in $sizes; do
    for wl in $workloads; do
      for p in $policies; do
        if [[ "$p" == *.yaml ]]; then label="$(basename "$p" .yaml)"; pol="--policy-file $p"; else label="$p"; pol="--policy $p"; fi
        name="${wl}_w${w}_${label}"
        [[ -f "$OUT/$name.json" ]] && continue
        echo "timeout $LIMIT_S $KVROUTE simulate $(workload_args "$wl" "$w") --workers $w $pol \
--ttft-slo 1 --tpot-slo 0.05 --seed $seed --out $OUT --label $name --no-plots --no-progress \
> $OUT/$name.log 2>&1 < /dev/null || echo \"$name failed (rc \$?)\"" >> "$jobs_file"
      done
    done
  done
  echo "$title: $(wc -l < "$jobs_file") runs, $JOBS at a time, into $OUT"
  xargs -P "$JOBS" -I{} -d '\n' bash -c '{} ; echo -n .' < "$jobs_file"
  echo
  python3 "$ROOT/scripts/policy-matrix/table.py" "$OUT"
}
