#!/bin/bash
# Issue 20 target benchmark (docs/bench/kv-tiers.md): one run of each configuration.
set -e
K=${K:-build/release/kvroute}
OUT=${OUT:-kv-tiers-results}
COMMON="--workers 4 --num-gpu-blocks 1500 --concurrency 8 16 24 32 48 --sessions 64 --no-progress --no-plots --seed 1 --out $OUT"
TIERS="--num-cpu-blocks 3000 --num-disk-blocks 6000 --kv-store-gb 200"
# ONLY_B=1: fleet B alone (skips fleet A's nine runs).
if [ "${ONLY_B:-0}" != 1 ]; then
$K simulate $COMMON --policy predicted_latency --label notiers_pl
$K simulate $COMMON $TIERS --policy predicted_latency --label tiers_pl
$K simulate $COMMON $TIERS --policy dynamo_cost --label tiers_dynamo
# Lower-tier loads overlapped with the batch (vLLM's async load), same fleet and workload.
$K simulate $COMMON $TIERS --async-tier-loads --policy predicted_latency --label tiers_pl_async
$K simulate $COMMON $TIERS --async-tier-loads --policy dynamo_cost --label tiers_dynamo_async
$K simulate $COMMON $TIERS --policy-file "$(dirname "$0")/dynamo_kvbm.yaml" --label tiers_dynamo_kvbm
$K simulate $COMMON $TIERS --policy llmd_sticky --label tiers_llmd
$K simulate $COMMON $TIERS --policy round_robin --label tiers_rr
$K simulate $COMMON --policy round_robin --label notiers_rr
fi

# Fleet B (docs/bench/kv-tiers.md "Fleet B"): GPUs that hold several sessions (6,000 blocks =
# 96k tokens each), 96 sessions: working set at c=96 ≈ 3.6× the fleet's GPU KV; tiers scaled
# alike. Only with FLEET_B=1 (about 10 minutes on 2 cores).
[ "${FLEET_B:-0}" = 1 ] || [ "${ONLY_B:-0}" = 1 ] || exit 0
COMMON_B="--workers 4 --num-gpu-blocks 6000 --concurrency 24 48 96 --sessions 96 --no-progress --no-plots --seed 1 --out $OUT"
TIERS_B="--num-cpu-blocks 12000 --num-disk-blocks 24000 --kv-store-gb 400"
$K simulate $COMMON_B --policy predicted_latency --label b_notiers_pl
$K simulate $COMMON_B --policy round_robin --label b_notiers_rr
$K simulate $COMMON_B $TIERS_B --policy predicted_latency --label b_tiers_pl
for p in predicted_latency dynamo_cost llmd_sticky round_robin; do
  $K simulate $COMMON_B $TIERS_B --async-tier-loads --policy $p --label b_tiers_async_$p
done
# Store leases off (docs/bench/kv-tiers.md "Session 16"): what the leases change.
$K simulate $COMMON_B $TIERS_B --async-tier-loads --no-store-leases --policy predicted_latency --label b_tiers_async_nolease_pl
$K simulate $COMMON_B $TIERS_B --async-tier-loads --no-store-leases --policy dynamo_cost --label b_tiers_async_nolease_dynamo
$K simulate $COMMON_B $TIERS_B --no-store-leases --policy predicted_latency --label b_tiers_nolease_pl
