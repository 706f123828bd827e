// Encoder of KV event batches to the msgpack bytes vLLM publishes (sans-I/O, pure).
//
// The bytes are exactly what msgspec produces for vLLM's structs
// (shared/reference/vllm-protocol.md §1.4–1.5), so `kvroute sim` is indistinguishable from a
// real engine on the wire:
//   - batch: [ts, events, data_parallel_rank] with ts always float64 (0xcb); ints in their
//     smallest msgpack form (uint64 hashes above 2^32 use 0xcf);
//   - array events (array_like=True): [tag, field1, ...], every field present, nil for None;
//   - map events (vLLM after PR #42892): {"type": tag, fields by name in declaration order},
//     omitting extra_keys / group_idx / kv_cache_spec_* when None (omit_defaults=True).
// Older generations are reproduced through EncodeOptions (fewer array fields, 2-element batch)
// so tests and the simulator can speak any of them.
//
// Thread safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_event.h"

namespace kvroute::kv {

// How each event is laid out.
enum class EventLayout : std::uint8_t {
  kArray,  // [tag, field1, ...]: vLLM up to PR #42892
  kMap,    // {"type": tag, name: value, ...}: vLLM main since 2026-06
};

// How the batch envelope is laid out.
enum class BatchLayout : std::uint8_t {
  kArray,        // [ts, events, data_parallel_rank]: every vLLM since v0.9.1
  kArrayNoRank,  // [ts, events]: vLLM <= v0.9.0
  kMap,          // {"ts", "events", "data_parallel_rank" (omitted when None)}: one main snapshot
};

// How block hashes are written.
enum class HashForm : std::uint8_t {
  kUnsigned,  // uint, smallest form: VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1 (default)
  kSigned,    // int64 two's complement: old builtin-hash releases (negative values possible)
  kBin8,      // 8-byte bin, big-endian: stands in for bytes mode (=0); decoders keep the last 8
};

// Number of BlockStored fields after the tag in each array generation (§1.4 "Field history").
inline constexpr int kStoredFieldsV090 = 5;       // ... lora_id
inline constexpr int kStoredFieldsMedium = 6;     // + medium (BlockRemoved gains medium)
inline constexpr int kStoredFieldsLoraName = 7;   // + lora_name
inline constexpr int kStoredFieldsExtraKeys = 8;  // + extra_keys
inline constexpr int kStoredFieldsGroupIdx = 9;   // + group_idx (BlockRemoved gains group_idx)
inline constexpr int kStoredFieldsAll = 11;       // + kv_cache_spec_kind, _sliding_window

struct EncodeOptions {
  // Default: vLLM main (map events inside an array batch).
  EventLayout events = EventLayout::kMap;
  BatchLayout batch = BatchLayout::kArray;
  HashForm hashes = HashForm::kUnsigned;
  // Array events only: BlockStored fields after the tag, kStoredFieldsV090..kStoredFieldsAll.
  // BlockRemoved carries the fields that existed in that generation. Clamped to the range.
  int array_stored_fields = kStoredFieldsAll;
  // For an event without extra keys (BlockStored::extra_keys nullopt): vLLM main sends one
  // nil per block (`[None] * n`); older code sent None (map events omit the key). An event
  // that carries its tuples always sends them.
  bool extra_keys_nil_per_block = true;
};

// Appends the msgpack bytes of `batch` to *out.
void AppendEventBatch(const KvEventBatch& batch, const EncodeOptions& options,
                      std::vector<std::uint8_t>* out);

// Returns the msgpack bytes of `batch`.
std::vector<std::uint8_t> EncodeEventBatch(const KvEventBatch& batch,
                                           const EncodeOptions& options = {});

}  // namespace kvroute::kv
