#!/bin/bash
# Issue 20 target benchmark (docs/bench/kv-tiers.md): one run of each configuration.
set -e
K=${K:-build/release/kvroute}
OUT=${OUT:-kv-tiers-results}
COMMON="--workers 4 --num-gpu-blocks 1500 --concurrency 8 16 24 32 48 --sessions 64 --no-progress --no-plots --seed 1 --out $OUT"
TIERS="--num-cpu-blocks 3000 --num-disk-blocks 6000 --kv-store-gb 200"
$K simulate $COMMON --policy predicted_latency --label notiers_pl
$K simulate $COMMON $TIERS --policy predicted_latency --label tiers_pl
$K simulate $COMMON $TIERS --policy dynamo_cost --label tiers_dynamo
$K simulate $COMMON $TIERS --policy-file "$(dirname "$0")/dynamo_kvbm.yaml" --label tiers_dynamo_kvbm
$K simulate $COMMON $TIERS --policy llmd_sticky --label tiers_llmd
$K simulate $COMMON $TIERS --policy round_robin --label tiers_rr
$K simulate $COMMON --policy round_robin --label notiers_rr
