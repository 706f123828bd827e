#!/usr/bin/env bash
# Issue 20 on other hardware (docs/bench/kv-tiers.md "Session 18"): fleet B at c=96 with the
# store's or the disk's bandwidth changed, the tier-aware default against dynamo_cost's fixed
# weights, seeds 1-3; then a table of tok/s/GPU (goodput at 30 tok/s/user).
# Usage: scripts/kv-tiers/hardware.sh KVROUTE OUT      (resumable: runs whose JSON exists are kept)
# Env:   SEEDS (default "1 2 3"), POLICIES (default "predicted_latency dynamo_cost"; a .yaml
#        path is a policy file, labelled by its base name)
set -euo pipefail
KVROUTE="$(realpath "$1")"
OUT="$(realpath -m "$2")"
SEEDS="${SEEDS:-1 2 3}"
POLICIES="${POLICIES:-predicted_latency dynamo_cost}"
mkdir -p "$OUT"
declare -A HW=(
  [store_12.5e9]=""                               # the engine model's defaults (100 Gb/s NIC)
  [store_3.125e9]="--kv-store-bandwidth 3.125e9"  # 25 GbE
  [store_1.25e9]="--kv-store-bandwidth 1.25e9"    # 10 GbE
  [disk_1.5e9]="--disk-read-bandwidth 1.5e9"      # a SATA-class SSD instead of PCIe 4 NVMe
)
for hw in "${!HW[@]}"; do
  for p in $POLICIES; do
    name="$p"; policy=(--policy "$p")
    if [[ "$p" == *.yaml ]]; then name="$(basename "$p" .yaml)"; policy=(--policy-file "$p"); fi
    for s in $SEEDS; do
      label="${hw}_${name}_s${s}"
      [[ -f "$OUT/$label.json" ]] && continue
      echo "hardware: $label" >&2
      # shellcheck disable=SC2086
      timeout 600 "$KVROUTE" simulate --workers 4 --num-gpu-blocks 6000 --concurrency 96 \
        --sessions 96 --seed "$s" --num-cpu-blocks 12000 --num-disk-blocks 24000 \
        --kv-store-gb 400 --async-tier-loads "${policy[@]}" ${HW[$hw]} --out "$OUT" \
        --label "$label" --no-plots --no-progress > "$OUT/$label.log" 2>&1 < /dev/null
    done
  done
done
python3 - "$OUT" "$SEEDS" "$POLICIES" <<'PY'
import json, os, sys
out, seeds = sys.argv[1], sys.argv[2].split()
policies = [os.path.basename(p)[:-5] if p.endswith(".yaml") else p for p in sys.argv[3].split()]
def tok(label):
    d = json.load(open(os.path.join(out, label + ".json")))
    return d["goodput"]["infera"][0]["tokens_per_s_per_gpu"]
print("| hardware | " + " | ".join(f"{p} (seeds {', '.join(seeds)}; mean)" for p in policies)
      + " | ratio of means |")
print("|---" * (len(policies) + 2) + "|")
for hw in ("store_12.5e9", "store_3.125e9", "store_1.25e9", "disk_1.5e9"):
    means, cells = [], []
    for p in policies:
        v = [tok(f"{hw}_{p}_s{s}") for s in seeds]
        means.append(sum(v) / len(v))
        cells.append(" / ".join(f"{x:,.0f}" for x in v) + f"; **{means[-1]:,.0f}**")
    ratio = f"{means[0] / means[1]:.2f}×" if len(means) > 1 else ""
    print(f"| {hw} | " + " | ".join(cells) + f" | {ratio} |")
PY
