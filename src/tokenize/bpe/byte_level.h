// GPT-2 style byte-level alphabet: every byte 0..255 has a printable stand-in code point, so
// tokenizer.json vocabularies can spell arbitrary bytes as text ("Ġ" is the space byte).
//
// kvroute works on raw bytes internally: vocabulary entries are translated back to bytes once
// at load time, which makes encode a pure byte operation with no per-request remapping.
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kvroute::tokenize {

// The stand-in code point of `byte`.
char32_t ByteToUnicode(unsigned char byte);

// Translates a byte-level spelled token ("Ġhello") to its raw bytes (" hello"). Returns
// nullopt when a character is not in the byte-level alphabet.
std::optional<std::string> ByteLevelToBytes(std::string_view spelled);

// The byte-level spelling of raw bytes (inverse of ByteLevelToBytes).
std::string BytesToByteLevel(std::string_view bytes);

}  // namespace kvroute::tokenize
