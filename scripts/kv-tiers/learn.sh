#!/bin/bash
# Issue 20, learned tier bandwidths (docs/bench/kv-tiers.md "Session 11"): fleet B
# with async loads and the default policy, the router seeded with the engine's tier
# bandwidths (scale 1), 4x too fast (4) and 4x too slow (0.25), each with learning on and off;
# the no-tier default in the same run as the baseline. About 2 minutes on 2 cores.
set -e
K=${K:-build/release/kvroute}
OUT=${OUT:-kv-tiers-learn}
LEVELS=${LEVELS:-24 48 96}
SEED=${SEED:-1}  # the workload's seed (docs/bench/kv-tiers.md runs 1, 2 and 3)
COMMON_B="--workers 4 --num-gpu-blocks 6000 --concurrency $LEVELS --sessions 96 --no-progress --no-plots --seed $SEED --out $OUT"
TIERS_B="--num-cpu-blocks 12000 --num-disk-blocks 24000 --kv-store-gb 400 --async-tier-loads"
$K simulate $COMMON_B --policy predicted_latency --label notiers
for scale in 1 4 0.25; do
  $K simulate $COMMON_B $TIERS_B --router-tier-bandwidth-scale $scale --label "scale${scale}_learn"
  $K simulate $COMMON_B $TIERS_B --router-tier-bandwidth-scale $scale --no-tier-learning \
    --label "scale${scale}_fixed"
done
