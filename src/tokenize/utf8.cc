#include "tokenize/utf8.h"

#include <cstring>

namespace kvroute::tokenize::utf8 {

char32_t Decode(std::string_view s, std::size_t i, std::size_t* len) {
  constexpr char32_t kInvalid = 0xFFFFFFFF;
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const std::size_t n = s.size() - i;
  const unsigned char c0 = b(0);
  if (c0 < 0x80) {
    *len = 1;
    return c0;
  }
  // Ranges of the second byte per lead byte (Unicode Table 3-7, well-formed sequences).
  unsigned char lo = 0x80, hi = 0xBF;
  std::size_t need;
  char32_t cp;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    need = 2;
    cp = c0 & 0x1F;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    need = 3;
    cp = c0 & 0x0F;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    need = 4;
    cp = c0 & 0x07;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    *len = 1;
    return kInvalid;
  }
  for (std::size_t k = 1; k < need; ++k) {
    if (k >= n) {
      *len = k;
      return kInvalid;
    }
    const unsigned char c = b(k);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      *len = k;
      return kInvalid;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *len = need;
  return cp;
}

void Append(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValid(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    if (i + 8 <= s.size()) {
      std::uint64_t word;
      std::memcpy(&word, s.data() + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    if (Decode(s, i, &len) == 0xFFFFFFFF) return false;
    i += len;
  }
  return true;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t len;
    const char32_t cp = Decode(s, i, &len);
    if (cp == 0xFFFFFFFF) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  return out;
}

}  // namespace kvroute::tokenize::utf8
