#include "tokenize/image_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tokenize/simple_tokenizer.h"

namespace kvroute::tokenize {
namespace {

TEST(ImageTokensTest, EachPlaceholderBecomesItsImagesTokensInOrder) {
  SimpleTokenizer tok;
  ChatRequest chat;
  chat.messages.push_back({.role = "user", .content = "<image>\n<image>\nCompare these two."});
  auto ids = tok.EncodeChat(chat);
  ASSERT_TRUE(ids.has_value());
  const std::size_t before = ids->size();
  const std::vector<TokenId> marker = tok.Encode("<image>", false);
  ImageTokenOptions o{.tokens_per_image = 40};
  auto spans = ExpandImagePlaceholders(tok, o, 2, &*ids);
  ASSERT_TRUE(spans.has_value()) << spans.error();
  ASSERT_EQ(spans->size(), 2u);
  EXPECT_EQ(ids->size(), before + 2 * (40 - marker.size()));
  EXPECT_EQ((*spans)[1].offset, (*spans)[0].offset + 40 + 1);  // "\n" between the two
  for (const auto& s : *spans) {
    EXPECT_EQ(s.length, 40u);
    for (std::uint32_t i = 0; i < s.length; ++i) EXPECT_EQ((*ids)[s.offset + i], marker.back());
  }
}

TEST(ImageTokensTest, AMissingPlaceholderIsAnError) {
  SimpleTokenizer tok;
  std::vector<TokenId> ids = tok.Encode("no image here", false);
  auto spans = ExpandImagePlaceholders(tok, {}, 1, &ids);
  ASSERT_FALSE(spans.has_value());
  EXPECT_NE(spans.error().find("expected 1"), std::string::npos) << spans.error();
}

TEST(ImageTokensTest, TheModelConfigGivesTheCountAndTheTokenId) {
  const auto dir = std::filesystem::temp_directory_path() / "kvroute_image_tokens_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"image_token_index": 32000,
      "vision_config": {"image_size": 336, "patch_size": 14}})";
  ImageTokenOptions o = ImageTokensFromModelConfig(dir.string(), {});
  EXPECT_EQ(o.tokens_per_image, 576u);  // LLaVA-1.5: (336 / 14)^2
  EXPECT_EQ(o.token_id, 32000u);
  std::ofstream(dir / "config.json") << R"({"mm_tokens_per_image": 256, "image_token_id": 7})";
  o = ImageTokensFromModelConfig(dir.string(), {});
  EXPECT_EQ(o.tokens_per_image, 256u);  // Gemma 3
  EXPECT_EQ(o.token_id, 7u);
  // No config: the base options stay.
  o = ImageTokensFromModelConfig((dir / "missing").string(), {.tokens_per_image = 9});
  EXPECT_EQ(o.tokens_per_image, 9u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvroute::tokenize
