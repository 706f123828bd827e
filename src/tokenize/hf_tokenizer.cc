#include "tokenize/hf_tokenizer.h"

#include <algorithm>

#include "tokenize/chat_template.h"
#include "tokenize/bpe/segment_cache.h"
#include "tokenize/unicode_nfc.h"
#include "tokenize/utf8.h"

namespace kvroute::tokenize {
namespace {

// Segments shorter than this are encoded directly: a cache round trip costs about as much.
constexpr std::size_t kMinCachedSegment = 64;
// Default bound of the segment cache, in token ids (4 bytes each): 16 MiB of ids.
constexpr std::size_t kSegmentCacheTokens = 4u << 20;

// transformers' clean_up_tokenization (also tokenizers.js's): drops the space before
// punctuation and English contractions.
std::string CleanUpTokenization(std::string s) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    std::string out;
    out.reserve(s.size());
    std::size_t pos = 0;
    while (true) {
      const std::size_t hit = s.find(from, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      out.append(to);
      pos = hit + from.size();
    }
    out.append(s, pos);
    s = std::move(out);
  }
  return s;
}

}  // namespace

std::expected<std::shared_ptr<HfTokenizer>, std::string> HfTokenizer::Create(Parts parts) {
  std::unique_ptr<ChatTemplate> chat_template;
  if (!parts.chat_template.empty()) {
    auto t = ChatTemplate::Create(parts.chat_template, {.bos = parts.bos_token,
                                                        .eos = parts.eos_token,
                                                        .pad = parts.pad_token,
                                                        .unk = parts.unk_token});
    if (!t) return std::unexpected(t.error());
    chat_template = std::move(*t);
  }
  auto tok = std::shared_ptr<HfTokenizer>(new HfTokenizer(std::move(parts)));
  tok->template_ = std::move(chat_template);
  return tok;
}

HfTokenizer::HfTokenizer(Parts parts)
    : parts_(std::move(parts)),
      raw_matcher_(parts_.added_raw),
      normalized_matcher_(parts_.added_normalized),
      cache_(std::make_unique<SegmentCache>(kSegmentCacheTokens)) {
  vocab_size_ = parts_.bpe.VocabSize();
  for (const auto* list : {&parts_.added_raw, &parts_.added_normalized}) {
    for (const auto& [content, id] : *list) {
      added_content_[id] = content;
      vocab_size_ = std::max<std::size_t>(vocab_size_, id + 1);
    }
  }
  for (const auto& [content, id] : parts_.verbatim_vocab) {
    added_content_.emplace(id, content);  // an added token with the same id wins
    vocab_size_ = std::max<std::size_t>(vocab_size_, id + 1);
  }
  eos_id_ = parts_.eos_id.value_or(0);
  std::sort(parts_.special_ids.begin(), parts_.special_ids.end());
}

HfTokenizer::~HfTokenizer() = default;

SegmentCache::Stats HfTokenizer::SegmentCacheStats() const { return cache_->GetStats(); }

bool HfTokenizer::IsSpecial(TokenId id) const {
  return std::binary_search(parts_.special_ids.begin(), parts_.special_ids.end(), id);
}

void HfTokenizer::EncodeSegment(std::string_view text, std::vector<TokenId>* out) const {
  thread_local std::vector<std::string_view> words;
  words.clear();
  parts_.pre_tokenizer.Split(text, &words);
  for (std::string_view w : words) parts_.bpe.EncodeWord(w, out);
}

void HfTokenizer::EncodeRawPiece(std::string_view text, std::vector<TokenId>* out) const {
  // Requests arrive as JSON strings (valid UTF-8); raw bytes are decoded lossily, as a Python
  // caller's bytes.decode(errors="replace") would before tokenizing. Sanitizing piece by
  // piece equals sanitizing the whole text: added tokens are valid UTF-8 and start with a
  // lead byte, so no invalid sequence spans a cut.
  std::string sanitized;
  if (!utf8::IsValid(text)) {
    sanitized = utf8::Sanitize(text);
    text = sanitized;
  }
  std::string normalized;
  std::string_view view = text;
  if (parts_.normalizer == Normalizer::kNfc && !IsNfcQuick(view)) {
    normalized = NormalizeNfc(view);
    view = normalized;
  }
  if (normalized_matcher_.empty()) {
    EncodeSegment(view, out);
    return;
  }
  std::vector<TextPiece> sub;
  normalized_matcher_.Split(view, &sub);
  for (const TextPiece& s : sub) {
    if (s.token) {
      out->push_back(*s.token);
    } else {
      EncodeSegment(s.text, out);
    }
  }
}

void HfTokenizer::EncodePieces(std::string_view text, bool use_cache,
                               std::vector<TokenId>* out) const {
  std::vector<TextPiece> pieces;
  raw_matcher_.Split(text, &pieces);
  for (const TextPiece& piece : pieces) {
    if (piece.token) {
      out->push_back(*piece.token);
      continue;
    }
    // The cache is keyed by the raw piece: its ids are a pure function of its bytes
    // (normalization included), so a hit skips normalization too.
    if (!use_cache || piece.text.size() < kMinCachedSegment) {
      EncodeRawPiece(piece.text, out);
      continue;
    }
    if (cache_->Lookup(piece.text, out)) continue;
    const std::size_t before = out->size();
    EncodeRawPiece(piece.text, out);
    cache_->Insert(piece.text, out->data() + before, out->size() - before);
  }
}

void HfTokenizer::EncodeNoSpecial(std::string_view text, bool use_cache,
                                  std::vector<TokenId>* out) const {
  EncodePieces(text, use_cache, out);
}

std::vector<TokenId> HfTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 4);
  if (add_special_tokens) ids = parts_.prefix_ids;
  EncodeNoSpecial(text, /*use_cache=*/false, &ids);
  if (add_special_tokens) ids.insert(ids.end(), parts_.suffix_ids.begin(), parts_.suffix_ids.end());
  return ids;
}

std::expected<std::string, std::string> HfTokenizer::Decode(const std::vector<TokenId>& ids) const {
  // Consecutive model tokens are joined as bytes and decoded as one UTF-8 run (a character can
  // span tokens); added tokens are inserted verbatim, as the ByteLevel decoder does.
  std::string out, bytes;
  for (TokenId id : ids) {
    if (auto it = added_content_.find(id); it != added_content_.end()) {
      out += utf8::Sanitize(bytes);
      bytes.clear();
      out += it->second;
    } else if (const std::string* b = parts_.bpe.TokenBytes(id)) {
      bytes += *b;
    } else {
      return std::unexpected("token id " + std::to_string(id) + " is not in the vocabulary");
    }
  }
  out += utf8::Sanitize(bytes);
  if (parts_.clean_up_tokenization_spaces) out = CleanUpTokenization(std::move(out));
  return out;
}

std::expected<std::string, std::string> HfTokenizer::RenderChat(const ChatRequest& request) const {
  if (!template_) return std::unexpected("the model has no chat_template");
  return template_->Render(request);
}

std::expected<std::vector<TokenId>, std::string> HfTokenizer::EncodeChat(
    const ChatRequest& request) const {
  auto text = RenderChat(request);
  if (!text) return std::unexpected(text.error());
  std::vector<TokenId> ids;
  ids.reserve(text->size() / 3 + 4);
  EncodeNoSpecial(*text, /*use_cache=*/true, &ids);
  return ids;
}

}  // namespace kvroute::tokenize
