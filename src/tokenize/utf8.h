// UTF-8 helpers shared by the tokenizer pieces: decoding one code point, encoding one, and
// making arbitrary bytes valid UTF-8 (maximal invalid subparts become U+FFFD, as WHATWG's
// TextDecoder and Rust's String::from_utf8_lossy do, so decoded text matches the reference).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvroute::tokenize::utf8 {

// Decodes the code point starting at s[i] and sets *len to its byte length. Returns
// 0xFFFFFFFF with *len = length of the maximal invalid subpart (>= 1) when s[i..] is not
// well-formed UTF-8.
char32_t Decode(std::string_view s, std::size_t i, std::size_t* len);

// Appends the UTF-8 encoding of `cp` (a valid scalar value) to *out.
void Append(char32_t cp, std::string* out);

// True when `s` is well-formed UTF-8.
bool IsValid(std::string_view s);

// `s` with every maximal invalid subpart replaced by U+FFFD.
std::string Sanitize(std::string_view s);

// Byte length of the UTF-8 sequence whose lead byte is `lead` (1 for invalid lead bytes).
inline std::size_t SequenceLength(unsigned char lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace kvroute::tokenize::utf8
