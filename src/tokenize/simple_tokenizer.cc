#include "tokenize/simple_tokenizer.h"

#include <array>
#include <cctype>

namespace kvroute::tokenize {
namespace {

struct Special {
  std::string_view text;
  TokenId id;
};
constexpr std::array<Special, 4> kSpecials = {{{"<|bos|>", SimpleTokenizer::kBos},
                                               {"<|eos|>", SimpleTokenizer::kEos},
                                               {"<|im_start|>", SimpleTokenizer::kImStart},
                                               {"<|im_end|>", SimpleTokenizer::kImEnd}}};

bool IsSpace(unsigned char c) { return std::isspace(c) != 0; }

TokenId ChunkId(std::string_view chunk) {
  std::uint32_t v = static_cast<std::uint32_t>(chunk.size()) << 24;
  for (std::size_t i = 0; i < chunk.size(); ++i) {
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(chunk[i])) << (16 - 8 * i);
  }
  return SimpleTokenizer::kBase + v;
}

// Encodes text that contains no special token.
void EncodePlain(std::string_view text, std::vector<TokenId>* out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const bool space = IsSpace(static_cast<unsigned char>(text[i]));
    std::size_t j = i;
    while (j < text.size() && IsSpace(static_cast<unsigned char>(text[j])) == space) ++j;
    for (std::size_t k = i; k < j; k += 3)
      out->push_back(ChunkId(text.substr(k, std::min<std::size_t>(3, j - k))));
    i = j;
  }
}

}  // namespace

std::vector<TokenId> SimpleTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special_tokens) ids.push_back(kBos);
  std::size_t start = 0;
  std::size_t pos = 0;
  while ((pos = text.find("<|", pos)) != std::string_view::npos) {
    const Special* hit = nullptr;
    for (const auto& s : kSpecials) {
      if (text.substr(pos, s.text.size()) == s.text) hit = &s;
    }
    if (hit == nullptr) {
      pos += 2;
      continue;
    }
    EncodePlain(text.substr(start, pos - start), &ids);
    ids.push_back(hit->id);
    pos += hit->text.size();
    start = pos;
  }
  EncodePlain(text.substr(start), &ids);
  return ids;
}

std::expected<std::string, std::string> SimpleTokenizer::Decode(
    const std::vector<TokenId>& ids) const {
  std::string text;
  text.reserve(ids.size() * 3);
  for (TokenId id : ids) {
    if (id < kBase) {
      bool found = false;
      for (const auto& s : kSpecials) {
        if (s.id == id) text.append(s.text), found = true;
      }
      if (!found)
        return std::unexpected("token id " + std::to_string(id) + " is not in the vocabulary");
      continue;
    }
    const std::uint32_t v = id - kBase;
    const std::uint32_t len = v >> 24;
    if (len < 1 || len > 3) {
      return std::unexpected("token id " + std::to_string(id) + " is not in the vocabulary");
    }
    for (std::uint32_t i = 0; i < len; ++i)
      text.push_back(static_cast<char>((v >> (16 - 8 * i)) & 0xff));
  }
  return text;
}

std::expected<std::string, std::string> SimpleTokenizer::RenderChat(
    const ChatRequest& request) const {
  std::string out;
  for (const auto& m : request.messages) {
    out += "<|im_start|>";
    out += m.role;
    out += "\n";
    out += m.content;
    for (const auto& call : m.tool_calls) {
      out += "\n<tool_call>{\"name\": \"" + call.name +
             "\", \"arguments\": " + call.arguments_json + "}</tool_call>";
    }
    const bool open_end = request.continue_final_message && &m == &request.messages.back();
    if (!open_end) out += "<|im_end|>\n";
  }
  if (request.add_generation_prompt && !request.continue_final_message)
    out += "<|im_start|>assistant\n";
  return out;
}

std::expected<std::vector<TokenId>, std::string> SimpleTokenizer::EncodeChat(
    const ChatRequest& request) const {
  auto text = RenderChat(request);
  if (!text) return std::unexpected(text.error());
  return Encode(*text, /*add_special_tokens=*/false);
}

}  // namespace kvroute::tokenize
