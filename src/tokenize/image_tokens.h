// Image placeholder tokens: how many prompt tokens one image occupies, and where.
//
// A multimodal engine's processor expands each image's placeholder token into as many copies
// as the image has embeddings (LLaVA: 576 × <image>; Gemma 3: 256). kvroute does the same to
// the ids its tokenizer produced for a prompt whose chat content holds one `placeholder` per
// image (api/chat_request.h): the k-th occurrence of the placeholder's token sequence becomes
// `tokens_per_image` copies of the image token, and its span is the k-th image's position —
// what enters the blocks' extra keys (kv::MmItem) and what the engine model prefills. The
// count comes from the model's config.json when kvroute has it (ImageTokensFromModelConfig),
// else from configuration. Serve and `kvroute sim` run this same code, so both count alike.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "tokenize/tokenizer.h"

namespace kvroute::tokenize {

inline constexpr std::uint32_t kDefaultTokensPerImage = 64;

struct ImageTokenOptions {
  std::string placeholder = "<image>";  // the text standing for one image in the content
  std::uint32_t tokens_per_image = kDefaultTokensPerImage;
  // The id each image token gets; nullopt: the last id of the placeholder's own tokens.
  std::optional<TokenId> token_id;
};

struct ImageSpan {
  std::uint32_t offset = 0;  // first placeholder token in the expanded prompt
  std::uint32_t length = 0;
};

// Expands `count` images in *tokens (see above) and returns their spans, in order. Error when
// the placeholder's tokens do not occur `count` times.
std::expected<std::vector<ImageSpan>, std::string> ExpandImagePlaceholders(
    const Tokenizer& tokenizer, const ImageTokenOptions& options, std::size_t count,
    std::vector<TokenId>* tokens);

// Reads a Hugging Face config.json in `model_dir`: the tokens per image (mm_tokens_per_image,
// image_seq_length, num_image_tokens; or (vision_config.image_size / patch_size)^2) and the
// image token id (image_token_id, image_token_index). Fields it does not find keep `base`'s.
ImageTokenOptions ImageTokensFromModelConfig(std::string_view model_dir, ImageTokenOptions base);

}  // namespace kvroute::tokenize
