// Unicode Normalization Form C (canonical decomposition, then canonical composition), the
// "NFC" normalizer of Hugging Face tokenizer.json files (Qwen2/Qwen3 use it).
//
// The data tables are generated from Python's unicodedata (gen_unicode_nfc_tables.py; the
// version is UnicodeVersionOfNfc()). Characters assigned after that version are left as they
// are, which is what NFC does with unassigned code points too.
//
// A quick check runs first: text with no character that can change or combine (all ASCII,
// most CJK, most already-composed text) is returned without copying work beyond one pass.
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <string>
#include <string_view>

namespace kvroute::tokenize {

// True when `text` (valid UTF-8) contains no character that NFC could change; then
// NormalizeNfc(text) == text.
bool IsNfcQuick(std::string_view text);

// NFC of `text` (valid UTF-8).
std::string NormalizeNfc(std::string_view text);

const char* UnicodeVersionOfNfc();

}  // namespace kvroute::tokenize
