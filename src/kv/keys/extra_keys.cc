#include "kv/keys/extra_keys.h"

namespace kvroute::kv {
namespace {

constexpr std::uint8_t kMajorUnsigned = 0, kMajorNegative = 1, kMajorBytes = 2, kMajorText = 3,
                       kMajorArray = 4, kMajorTag = 6;
constexpr std::uint8_t kCborNull = 0xf6;
// CBOR tag on kOpaque elements: any unassigned number would do; this one keeps them apart
// from every byte string vLLM could put in a tuple.
constexpr std::uint64_t kOpaqueTag = 0x6b76;  // "kv"

void AppendString(std::vector<std::uint8_t>* out, std::uint8_t major, std::string_view s) {
  AppendCborHead(out, major, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

void AppendInt(std::vector<std::uint8_t>* out, std::int64_t v) {
  if (v >= 0) {
    AppendCborHead(out, kMajorUnsigned, static_cast<std::uint64_t>(v));
  } else {
    // CBOR negative integers carry -1 - v.
    AppendCborHead(out, kMajorNegative, static_cast<std::uint64_t>(-(v + 1)));
  }
}

}  // namespace

void AppendCborHead(std::vector<std::uint8_t>* out, std::uint8_t major, std::uint64_t value) {
  const std::uint8_t mt = static_cast<std::uint8_t>(major << 5);
  if (value < 24) {
    out->push_back(mt | static_cast<std::uint8_t>(value));
    return;
  }
  int bytes;
  std::uint8_t info;
  if (value <= 0xff) {
    bytes = 1, info = 24;
  } else if (value <= 0xffff) {
    bytes = 2, info = 25;
  } else if (value <= 0xffffffffULL) {
    bytes = 4, info = 26;
  } else {
    bytes = 8, info = 27;
  }
  out->push_back(mt | info);
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

BlockExtraKeys BlockExtraKeysFor(const ExtraKeyInputs& in, std::size_t start, std::size_t end) {
  BlockExtraKeys keys;
  if (!in.lora_name.empty()) keys.push_back(ExtraKey::Text(in.lora_name));
  // vLLM walks the items from the block's first candidate on; for sorted, disjoint items that
  // is exactly every item overlapping [start, end), in order.
  for (const MmItem& item : in.mm_items) {
    const std::size_t item_end = std::size_t{item.offset} + item.length;
    if (item.offset >= end) break;
    if (item_end <= start) continue;
    keys.push_back(ExtraKey::Mm(item.identifier, static_cast<std::int64_t>(item.offset) -
                                                     static_cast<std::int64_t>(start)));
  }
  if (start == 0 && !in.cache_salt.empty()) keys.push_back(ExtraKey::Text(in.cache_salt));
  return keys;
}

std::vector<BlockExtraKeys> PromptExtraKeys(const ExtraKeyInputs& in, std::size_t num_tokens,
                                            std::uint32_t block_size) {
  std::vector<BlockExtraKeys> out;
  if (in.empty() || block_size == 0) return out;
  const std::size_t blocks = num_tokens / block_size;
  out.reserve(blocks);
  for (std::size_t b = 0; b < blocks; ++b) {
    out.push_back(BlockExtraKeysFor(in, b * block_size, (b + 1) * block_size));
  }
  return out;
}

void AppendExtraKeysCbor(const BlockExtraKeys& keys, std::vector<std::uint8_t>* out) {
  if (keys.empty()) {
    out->push_back(kCborNull);
    return;
  }
  AppendCborHead(out, kMajorArray, keys.size());
  for (const ExtraKey& k : keys) {
    switch (k.kind) {
      case ExtraKey::Kind::kText:
        AppendString(out, kMajorText, k.text);
        break;
      case ExtraKey::Kind::kInt:
        AppendInt(out, k.number);
        break;
      case ExtraKey::Kind::kBytes:
        AppendString(out, kMajorBytes, k.text);
        break;
      case ExtraKey::Kind::kMm:
        AppendCborHead(out, kMajorArray, 2);
        AppendString(out, kMajorText, k.text);
        AppendInt(out, k.number);
        break;
      case ExtraKey::Kind::kOpaque:
        AppendCborHead(out, kMajorTag, kOpaqueTag);
        AppendString(out, kMajorBytes, k.text);
        break;
    }
  }
}

EventExtras EventExtraKeys(const std::optional<std::vector<BlockExtraKeys>>& carried,
                           const std::optional<std::string>& lora_name,
                           const std::optional<std::int64_t>& lora_id, std::size_t num_blocks,
                           std::vector<BlockExtraKeys>* scratch,
                           std::span<const BlockExtraKeys>* out) {
  *out = {};
  if (carried.has_value()) {
    if (carried->size() != num_blocks) return EventExtras::kMalformed;
    *out = *carried;
    return EventExtras::kExact;
  }
  // Without extra_keys the adapter is still known: vLLM hashes the name (older releases its
  // int id, which no request of kvroute's can name, so those blocks are kept apart).
  ExtraKey adapter;
  if (lora_name.has_value() && !lora_name->empty()) {
    adapter = ExtraKey::Text(*lora_name);
  } else if (lora_id.has_value()) {
    adapter = ExtraKey{ExtraKey::Kind::kInt, {}, *lora_id};
  } else {
    return EventExtras::kLoraOnly;
  }
  scratch->assign(num_blocks, BlockExtraKeys{adapter});
  *out = *scratch;
  return EventExtras::kLoraOnly;
}

}  // namespace kvroute::kv
