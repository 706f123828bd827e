// BpeModel: the byte-pair-encoding model of a Hugging Face tokenizer.json ("model": {"type":
// "BPE"}), working on raw bytes (byte-level spellings are translated once at load).
//
// Encoding one pre-tokenized word: start from one symbol per byte, then repeatedly apply the
// merge with the lowest rank, the leftmost one on ties — exactly the order of the Rust
// `tokenizers` crate and of tokenizers.js. With ignore_merges (Llama 3), a word that is itself
// in the vocabulary is emitted as that one token without merging.
//
// Ownership: owns its vocabulary and merge tables (~10-20 MB for 150k-token vocabularies).
// Thread safety: immutable after Build; Encode/Decode are safe to call concurrently.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/types.h"

namespace kvroute::tokenize {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;
  };

  // `vocab`: (raw bytes, id) pairs; `merges`: pairs of raw-byte tokens in rank order.
  // Errors when a single byte has no token, or a merge's parts or result are not in the
  // vocabulary.
  static std::expected<BpeModel, std::string> Build(
      std::vector<std::pair<std::string, TokenId>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // Appends the ids of one pre-tokenized word (raw bytes, non-empty).
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

  // The raw bytes of `id`, or nullptr when `id` is not in the model vocabulary.
  const std::string* TokenBytes(TokenId id) const {
    return id < id_to_bytes_.size() && has_id_[id] ? &id_to_bytes_[id] : nullptr;
  }
  // The id of a raw-byte token, if in the vocabulary.
  std::optional<TokenId> Lookup(std::string_view bytes) const;

  std::size_t VocabSize() const { return id_to_bytes_.size(); }

 private:
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct MergeSlot {
    std::uint64_t key = kEmpty;  // (left << 32) | right
    std::uint32_t rank = 0;
    TokenId merged = 0;
  };
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  static constexpr std::uint32_t kNoRank = ~std::uint32_t{0};

  // Rank and result of merging (left, right); rank kNoRank when they do not merge.
  std::pair<std::uint32_t, TokenId> FindMerge(TokenId left, TokenId right) const;
  void EncodeShort(std::string_view word, std::vector<TokenId>* out) const;
  void EncodeLong(std::string_view word, std::vector<TokenId>* out) const;

  Options options_;
  std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>> bytes_to_id_;
  std::vector<std::string> id_to_bytes_;
  std::vector<bool> has_id_;
  TokenId byte_ids_[256] = {};
  // Open-addressing hash table (linear probing, power-of-two size, load <= 0.5): the merge
  // lookup is the innermost operation of encode.
  std::vector<MergeSlot> merge_table_;
  std::uint64_t merge_mask_ = 0;
};

}  // namespace kvroute::tokenize
