#include "sim/sim_tokenizer.h"

#include <gtest/gtest.h>

#include "tokenize/hf_tokenizer.h"
#include "tokenize/simple_tokenizer.h"

namespace kvroute::sim {
namespace {

TEST(LoadSimTokenizerTest, EmptySpecGivesTheSimpleTokenizer) {
  auto t = LoadSimTokenizer("");
  ASSERT_TRUE(t.has_value()) << t.error();
  EXPECT_NE(dynamic_cast<const tokenize::SimpleTokenizer*>(t->get()), nullptr);
}

TEST(LoadSimTokenizerTest, UnknownNameIsAnErrorListingTheShippedModels) {
  auto t = LoadSimTokenizer("no-such-model-or-dir");
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().find("--tokenizer"), std::string::npos);
  EXPECT_NE(t.error().find("qwen3"), std::string::npos);
}

TEST(LoadSimTokenizerTest, DirectoryWithoutTokenizerFilesIsAnError) {
  auto t = LoadSimTokenizer(::testing::TempDir());
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.error().find("--tokenizer"), std::string::npos);
}

TEST(LoadSimTokenizerTest, ShippedNameAndItsDirectoryGiveTheSameIds) {
  auto dir = tokenize::FindShippedModelDir("qwen3");
  if (!dir) GTEST_FAIL() << "shipped models not installed (make setup installs them): " << dir.error();
  auto by_name = LoadSimTokenizer("qwen3");
  auto by_dir = LoadSimTokenizer(*dir);
  ASSERT_TRUE(by_name.has_value()) << by_name.error();
  ASSERT_TRUE(by_dir.has_value()) << by_dir.error();
  EXPECT_NE(dynamic_cast<const tokenize::HfTokenizer*>(by_name->get()), nullptr);
  const std::string text = "Hello, world! The router keeps KV caches warm.";
  EXPECT_EQ((*by_name)->Encode(text, false), (*by_dir)->Encode(text, false));
}

}  // namespace
}  // namespace kvroute::sim
