// A block's extra keys: the one rule, in one place, for what besides its tokens names a KV
// block. It is vLLM's (`generate_block_hash_extra_keys`, vllm/v1/core/kv_cache_utils.py;
// shared/reference/vllm-protocol.md §2.1): for the block of tokens [start, end) of a request,
// the tuple, in this order, of
//   1. the LoRA adapter's name, on every block of a LoRA request;
//   2. one (identifier, offset − start) pair per multimodal item whose placeholder tokens
//      overlap the block (the offset may be negative: the item began in an earlier block);
//   3. the cache salt, on the first block only (start == 0), when non-empty;
// and nothing (vLLM's None) when the tuple would be empty. (vLLM's fourth part, a digest of
// prompt embeddings, is never produced by kvroute; an engine's event may carry it, and the
// index then keys that block apart from every request — see EventExtraKeys.)
//
// Every user takes its keys from here: the router's request path (gateway/), the index's event
// path (EventExtraKeys below, kv/index/index_apply.cc), the engine model behind `kvroute sim` and
// `kvroute simulate` (engine/request.cc), kvroute's block keys (kv/keys/block_key.h folds the tuple
// into the chained key) and vLLM's sha256_cbor hash (kv/keys/vllm_hash.h puts it in the CBOR input).
//
// Kept to C++20 (the event decoder includes it and builds with clang 14 for the fuzzer).
// Thread safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::kv {

// One element of a block's extra-keys tuple, as vLLM's events and CBOR hash input carry it.
struct ExtraKey {
  enum class Kind : std::uint8_t {
    kText,    // a string: LoRA name, cache salt (older vLLM: a bare multimodal hash)
    kInt,     // an integer: older vLLM's LoRA int id
    kBytes,   // raw bytes: a prompt-embeddings digest
    kMm,      // (identifier, offset relative to the block start): a multimodal item
    kOpaque,  // any other shape an event carried (raw msgpack bytes in `text`): never equal to
              // anything kvroute computes, so such a block is never credited to a request
  };
  Kind kind = Kind::kText;
  std::string text;         // kText, kBytes, kMm (identifier), kOpaque
  std::int64_t number = 0;  // kInt; kMm: the item's offset − block start
  bool operator==(const ExtraKey&) const = default;

  static ExtraKey Text(std::string_view s) { return {Kind::kText, std::string(s), 0}; }
  static ExtraKey Mm(std::string_view id, std::int64_t offset) {
    return {Kind::kMm, std::string(id), offset};
  }
};

// A block's tuple; empty means vLLM's None.
using BlockExtraKeys = std::vector<ExtraKey>;

// One multimodal item of a prompt (an image): its identifier (vLLM's mm_feature.identifier;
// kvroute sets it as the content part's `uuid`, see api/chat_request.h) and where its
// placeholder tokens lie in the prompt.
struct MmItem {
  std::string identifier;
  std::uint32_t offset = 0;  // index of its first placeholder token
  std::uint32_t length = 0;  // number of placeholder tokens
  bool operator==(const MmItem&) const = default;
};

// What a request contributes to its blocks' extra keys.
struct ExtraKeyInputs {
  std::string_view lora_name;        // empty: no adapter
  std::string_view cache_salt;       // empty: no salt (vLLM ignores an empty salt too)
  std::span<const MmItem> mm_items;  // sorted by offset, not overlapping
  bool empty() const { return lora_name.empty() && cache_salt.empty() && mm_items.empty(); }
};

// The rule: the extra keys of the block of tokens [start, end).
BlockExtraKeys BlockExtraKeysFor(const ExtraKeyInputs& in, std::size_t start, std::size_t end);

// The extra keys of every full block of a prompt of `num_tokens` tokens; an empty vector when
// `in` is empty (no block has any).
std::vector<BlockExtraKeys> PromptExtraKeys(const ExtraKeyInputs& in, std::size_t num_tokens,
                                            std::uint32_t block_size);

// Canonical CBOR of a block's tuple, as vLLM's sha256_cbor serialises the third element of
// its hash input: null when empty, otherwise an array of text / int / bytes / [text, int].
// kOpaque elements (never produced by kvroute) are written as a tagged byte string.
void AppendExtraKeysCbor(const BlockExtraKeys& keys, std::vector<std::uint8_t>* out);

// Canonical CBOR head (major type, shortest argument), shared with vllm_hash.cc.
void AppendCborHead(std::vector<std::uint8_t>* out, std::uint8_t major, std::uint64_t value);

// What a KV event says about its blocks' extra keys (see EventExtraKeys).
enum class EventExtras : std::uint8_t {
  kExact,      // the event carries extra_keys, one entry per block: taken as they are
  kLoraOnly,   // no extra_keys (vLLM before PR #33304, or a connector's event): only the LoRA
               // name (lora_name, or the old int lora_id) is known; salt and images are not
  kMalformed,  // extra_keys with a count other than the event's blocks
};

// The per-block extra keys of a BlockStored with `num_blocks` blocks, derived from what it
// carries. `carried` is the event's extra_keys (nullopt when absent or nil); `scratch` holds
// what must be built (kLoraOnly with an adapter). *out points into `carried` or `scratch`;
// an empty span means no block has any.
EventExtras EventExtraKeys(const std::optional<std::vector<BlockExtraKeys>>& carried,
                           const std::optional<std::string>& lora_name,
                           const std::optional<std::int64_t>& lora_id, std::size_t num_blocks,
                           std::vector<BlockExtraKeys>* scratch,
                           std::span<const BlockExtraKeys>* out);

}  // namespace kvroute::kv
