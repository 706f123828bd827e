#!/usr/bin/env bash
# Builds and runs the KV event decoder fuzzer for a bounded time.
#
#   src/kv/wire/fuzz/run_fuzz.sh [SECONDS] [WORKDIR]     (default 60 s, WORKDIR a temp folder)
#
# Compiled directly with clang++ 14 (not CMake: the project's compiler is GCC), with
# -fsanitize=fuzzer,address,undefined, against the system libmpack. The corpus is seeded with
# the golden payloads of shared/reference/vllm-protocol.md §7 plus the other generations.
# Exit status: 0 when no crash was found.
set -euo pipefail

seconds="${1:-60}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd "$here/../../.." && pwd)"       # include root (src/)
work="${2:-$(mktemp -d /tmp/kvroute-fuzz.XXXXXX)}"
mkdir -p "$work/corpus"
CXX="${CXX:-clang++}"

"$CXX" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$src" \
  "$here/event_decode_fuzz.cc" "$src/kv/wire/event_decode.cc" "$src/kv/wire/event_encode.cc" \
  "$src/kv/kv_event.cc" \
  -lmpack -o "$work/event_decode_fuzz"

# Seeds: §7 goldens, an old 2-element batch, a map batch, bin hashes and bigram tokens.
seed() { printf '%b' "$(sed 's/../\\x&/g' <<< "$2")" > "$work/corpus/$1"; }
seed golden_array_stored 93cb41d954fc402000009197ab426c6f636b53746f72656491cf2ceabcfae6d332eac0dc00100102030405060708090a0b0c0d0e0f1010c0a347505500
seed golden_map_stored 93cb41d954fc40200000918ba474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cf2ceabcfae6d332eab1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f696473dc00100102030405060708090a0b0c0d0e0f10aa626c6f636b5f73697a6510a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0aa65787472615f6b65797391c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00
seed golden_array_removed 93cb41d954fc404000009193ac426c6f636b52656d6f76656491cf2ceabcfae6d332eaa347505500
seed golden_map_removed 93cb41d954fc404000009184a474797065ac426c6f636b52656d6f766564ac626c6f636b5f68617368657391cf2ceabcfae6d332eaa66d656469756da3475055a967726f75705f6964780000
seed golden_array_cleared 93cb41d954fc408000009191b0416c6c426c6f636b73436c656172656400
seed golden_map_cleared 93cb41d954fc408000009181a474797065b0416c6c426c6f636b73436c656172656400
# [1.5, [[BlockStored, [d3 -2], nil, [[1,2],[2,3]], 2, nil]]]
seed v090_signed_bigram 92cb3ff80000000000009196ab426c6f636b53746f72656491d3fffffffffffffffec09292010292020302c0
# {"ts": 2.0, "events": [[BlockRemoved, [bin8]]], "data_parallel_rank": 1}
seed map_batch_bin_hash 83a27473cb4000000000000000a66576656e74739192ac426c6f636b52656d6f76656491c4080102030405060708b2646174615f706172616c6c656c5f72616e6b01

echo "fuzzing for ${seconds}s in $work"
"$work/event_decode_fuzz" -max_total_time="$seconds" -max_len=4096 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus"
