#include "tokenize/bpe/bpe_model.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

// A vocabulary with every byte (ids 0..255) plus the merged tokens listed after them.
BpeModel MakeModel(const std::vector<std::pair<std::string, std::string>>& merges,
                   bool ignore_merges = false, const std::vector<std::string>& extra_tokens = {}) {
  std::vector<std::pair<std::string, TokenId>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(std::string(1, static_cast<char>(b)), b);
  TokenId next = 256;
  for (const auto& [a, b] : merges) vocab.emplace_back(a + b, next++);
  for (const auto& t : extra_tokens) vocab.emplace_back(t, next++);
  auto m = BpeModel::Build(vocab, merges, {.ignore_merges = ignore_merges});
  EXPECT_TRUE(m.has_value()) << m.error();
  return std::move(*m);
}

std::vector<TokenId> Encode(const BpeModel& m, std::string_view word) {
  std::vector<TokenId> out;
  m.EncodeWord(word, &out);
  return out;
}

TEST(BpeModelTest, UnmergeableBytesStaySingleTokens) {
  BpeModel m = MakeModel({});
  EXPECT_EQ(Encode(m, "ab"), (std::vector<TokenId>{'a', 'b'}));
}

TEST(BpeModelTest, LowestRankMergeAppliesFirst) {
  // "bc" (rank 0) beats "ab" (rank 1): abc -> a + bc, never ab + c.
  BpeModel m = MakeModel({{"b", "c"}, {"a", "b"}});
  EXPECT_EQ(Encode(m, "abc"), (std::vector<TokenId>{'a', 256}));
}

TEST(BpeModelTest, TiesGoToTheLeftmostPair) {
  // "aaa": both pairs are (a, a); the left one merges, leaving aa + a.
  BpeModel m = MakeModel({{"a", "a"}});
  EXPECT_EQ(Encode(m, "aaa"), (std::vector<TokenId>{256, 'a'}));
}

TEST(BpeModelTest, MergesChainIntoLongerTokens) {
  BpeModel m = MakeModel({{"a", "b"}, {"ab", "c"}, {"abc", "d"}});
  EXPECT_EQ(Encode(m, "abcd"), (std::vector<TokenId>{258}));
}

TEST(BpeModelTest, LongWordsMatchTheShortWordAlgorithm) {
  // Words above the quadratic-scan threshold take the heap path; both must agree.
  BpeModel m = MakeModel({{"a", "b"}, {"b", "a"}, {"ab", "ab"}, {"ba", "b"}, {"abab", "a"}});
  std::string word;
  for (int i = 0; i < 200; ++i) word += (i * 7919 % 3 == 0) ? 'b' : 'a';
  std::vector<TokenId> expected;
  // Brute force: apply merges by rank, leftmost first, on a vector of strings.
  std::vector<std::string> syms;
  for (char c : word) syms.emplace_back(1, c);
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"a", "b"}, {"b", "a"}, {"ab", "ab"}, {"ba", "b"}, {"abab", "a"}};
  while (true) {
    std::size_t best_rank = merges.size(), best_pos = 0;
    for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
      for (std::size_t r = 0; r < best_rank; ++r) {
        if (syms[i] == merges[r].first && syms[i + 1] == merges[r].second) {
          best_rank = r;
          best_pos = i;
          break;
        }
      }
    }
    if (best_rank == merges.size()) break;
    syms[best_pos] += syms[best_pos + 1];
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
  const std::vector<std::string> names = {"ab", "ba", "abab", "bab", "ababa"};
  for (const auto& s : syms) {
    if (s.size() == 1) {
      expected.push_back(static_cast<unsigned char>(s[0]));
    } else {
      expected.push_back(
          256 + static_cast<TokenId>(std::find(names.begin(), names.end(), s) - names.begin()));
    }
  }
  EXPECT_EQ(Encode(m, word), expected);
}

TEST(BpeModelTest, IgnoreMergesEmitsWholeWordsFromTheVocabulary) {
  // "abc" is in the vocabulary but no merge sequence reaches it.
  BpeModel with = MakeModel({{"a", "b"}}, /*ignore_merges=*/true, {"abc"});
  BpeModel without = MakeModel({{"a", "b"}}, /*ignore_merges=*/false, {"abc"});
  EXPECT_EQ(Encode(with, "abc"), (std::vector<TokenId>{257}));
  EXPECT_EQ(Encode(without, "abc"), (std::vector<TokenId>{256, 'c'}));
}

TEST(BpeModelTest, BuildRejectsMergeOutsideVocabulary) {
  std::vector<std::pair<std::string, TokenId>> vocab;
  for (int b = 0; b < 256; ++b) vocab.emplace_back(std::string(1, static_cast<char>(b)), b);
  auto m = BpeModel::Build(vocab, {{"a", "b"}}, {});  // "ab" is not in the vocabulary
  EXPECT_FALSE(m.has_value());
}

TEST(BpeModelTest, BuildRejectsVocabularyWithoutEveryByte) {
  std::vector<std::pair<std::string, TokenId>> vocab = {{"a", 0}};
  EXPECT_FALSE(BpeModel::Build(vocab, {}, {}).has_value());
}

}  // namespace
}  // namespace kvroute::tokenize
