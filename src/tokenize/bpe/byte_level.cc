#include "tokenize/bpe/byte_level.h"

#include <array>

#include "tokenize/utf8.h"

namespace kvroute::tokenize {
namespace {

// Bytes that are printable Latin-1 map to themselves; the others (controls, space, and a few
// Latin-1 gaps) map to 256, 257, ... in byte order (GPT-2's bytes_to_unicode).
struct Tables {
  std::array<char32_t, 256> to_unicode{};
  std::array<int, 512> to_byte{};  // every stand-in is < 512
  Tables() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_unicode[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_unicode[b]] = b;
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

char32_t ByteToUnicode(unsigned char byte) { return GetTables().to_unicode[byte]; }

std::optional<std::string> ByteLevelToBytes(std::string_view spelled) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(spelled.size());
  for (std::size_t i = 0; i < spelled.size();) {
    std::size_t len;
    const char32_t cp = utf8::Decode(spelled, i, &len);
    if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(t.to_byte[cp]));
    i += len;
  }
  return out;
}

std::string BytesToByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) utf8::Append(ByteToUnicode(b), &out);
  return out;
}

}  // namespace kvroute::tokenize
