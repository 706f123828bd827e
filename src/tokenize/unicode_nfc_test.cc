#include "tokenize/unicode_nfc.h"

#include <gtest/gtest.h>

namespace kvroute::tokenize {
namespace {

TEST(UnicodeNfcTest, AsciiIsUnchangedAndQuick) {
  EXPECT_TRUE(IsNfcQuick("plain ascii text"));
  EXPECT_EQ(NormalizeNfc("plain ascii text"), "plain ascii text");
}

TEST(UnicodeNfcTest, ComposesBaseAndCombiningMark) {
  EXPECT_FALSE(IsNfcQuick("e\xCC\x81"));
  EXPECT_EQ(NormalizeNfc("e\xCC\x81"), "\xC3\xA9");  // e + U+0301 -> é
}

TEST(UnicodeNfcTest, ReordersMarksByCombiningClass) {
  // a + U+0302 (ccc 230) + U+0323 (ccc 220) -> ậ (U+1EAD), marks sorted before composing.
  EXPECT_EQ(NormalizeNfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD");
}

TEST(UnicodeNfcTest, SingletonDecompositionsAreReplaced) {
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xAB"), "\xC3\x85");  // Angstrom sign -> Å
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xA6"), "\xCE\xA9");  // Ohm sign -> Ω
}

TEST(UnicodeNfcTest, ComposesHangulJamoAlgorithmically) {
  // U+1100 U+1161 U+11A8 -> 각 (U+AC01)
  EXPECT_EQ(NormalizeNfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");
}

TEST(UnicodeNfcTest, BlockedMarksDoNotCompose) {
  // A + U+0316 (ccc 220) + U+0300 (ccc 230): U+0300 is not blocked (220 < 230) -> À + U+0316.
  EXPECT_EQ(NormalizeNfc("A\xCC\x96\xCC\x80"), "\xC3\x80\xCC\x96");
}

TEST(UnicodeNfcTest, PrecomposedTextIsQuick) {
  EXPECT_TRUE(IsNfcQuick("Größe 日本語 한국어 🙂"));
}

}  // namespace
}  // namespace kvroute::tokenize
