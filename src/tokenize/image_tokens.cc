#include "tokenize/image_tokens.h"

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kvroute::tokenize {

std::expected<std::vector<ImageSpan>, std::string> ExpandImagePlaceholders(
    const Tokenizer& tokenizer, const ImageTokenOptions& options, std::size_t count,
    std::vector<TokenId>* tokens) {
  std::vector<ImageSpan> spans;
  if (count == 0) return spans;
  const std::vector<TokenId> marker = tokenizer.Encode(options.placeholder, false);
  if (marker.empty()) return std::unexpected("the image placeholder has no tokens");
  const TokenId image_token = options.token_id.value_or(marker.back());
  std::vector<TokenId> out;
  out.reserve(tokens->size() + count * options.tokens_per_image);
  auto it = tokens->begin();
  while (spans.size() < count) {
    auto found = std::search(it, tokens->end(), marker.begin(), marker.end());
    if (found == tokens->end()) break;
    out.insert(out.end(), it, found);
    spans.push_back({static_cast<std::uint32_t>(out.size()), options.tokens_per_image});
    out.insert(out.end(), options.tokens_per_image, image_token);
    it = found + static_cast<std::ptrdiff_t>(marker.size());
  }
  if (spans.size() != count) {
    return std::unexpected("found " + std::to_string(spans.size()) + " image placeholder(s) '" +
                           options.placeholder + "' in the rendered prompt, expected " +
                           std::to_string(count));
  }
  out.insert(out.end(), it, tokens->end());
  *tokens = std::move(out);
  return spans;
}

ImageTokenOptions ImageTokensFromModelConfig(std::string_view model_dir, ImageTokenOptions base) {
  std::ifstream in(std::filesystem::path(model_dir) / "config.json");
  if (!in) return base;
  std::stringstream ss;
  ss << in.rdbuf();
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(ss.str(), ec);
  if (ec || !v.is_object()) return base;
  const boost::json::object& c = v.as_object();
  auto number = [](const boost::json::object& o,
                   std::string_view key) -> std::optional<std::int64_t> {
    const boost::json::value* x = o.if_contains(key);
    if (x == nullptr || !(x->is_int64() || x->is_uint64())) return std::nullopt;
    const std::int64_t n = x->to_number<std::int64_t>();
    return n > 0 ? std::optional(n) : std::nullopt;
  };
  for (std::string_view key : {"mm_tokens_per_image", "image_seq_length", "num_image_tokens"}) {
    if (auto n = number(c, key)) {
      base.tokens_per_image = static_cast<std::uint32_t>(*n);
      break;
    }
    if (key == "num_image_tokens") {
      const boost::json::value* vision = c.if_contains("vision_config");
      if (vision != nullptr && vision->is_object()) {
        auto size = number(vision->get_object(), "image_size");
        auto patch = number(vision->get_object(), "patch_size");
        if (size && patch && *size >= *patch) {
          base.tokens_per_image = static_cast<std::uint32_t>((*size / *patch) * (*size / *patch));
        }
      }
    }
  }
  for (std::string_view key : {"image_token_id", "image_token_index"}) {
    if (auto n = number(c, key)) {
      base.token_id = static_cast<TokenId>(*n);
      break;
    }
  }
  return base;
}

}  // namespace kvroute::tokenize
