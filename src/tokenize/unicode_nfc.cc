#include "tokenize/unicode_nfc.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "tokenize/utf8.h"

namespace kvroute::tokenize {
namespace {

struct CccEntry {
  char32_t cp;
  std::uint8_t ccc;
};
struct DecompEntry {
  char32_t cp;
  std::uint32_t offset;
  std::uint32_t length;
};
struct ComposeEntry {
  char32_t first;
  char32_t second;
  char32_t composite;
};
struct RangeEntry {
  char32_t lo;
  char32_t hi;
};

#include "tokenize/unicode_nfc_tables.inc"

// Hangul syllables compose and decompose algorithmically (Unicode 3.12).
constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28;
constexpr char32_t kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

bool IsUnsafe(char32_t cp) {
  if (cp < 0x300) return false;  // the first unsafe code point is U+0300
  auto it = std::upper_bound(std::begin(kUnsafe), std::end(kUnsafe), cp,
                             [](char32_t v, const RangeEntry& r) { return v < r.lo; });
  return it != std::begin(kUnsafe) && cp <= std::prev(it)->hi;
}

std::uint8_t Ccc(char32_t cp) {
  if (cp < 0x300) return 0;
  auto it = std::lower_bound(std::begin(kCcc), std::end(kCcc), cp,
                             [](const CccEntry& e, char32_t v) { return e.cp < v; });
  return it != std::end(kCcc) && it->cp == cp ? it->ccc : 0;
}

void DecomposeInto(char32_t cp, std::vector<char32_t>* out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const char32_t s = cp - kSBase;
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  auto it = std::lower_bound(std::begin(kDecomp), std::end(kDecomp), cp,
                             [](const DecompEntry& e, char32_t v) { return e.cp < v; });
  if (it != std::end(kDecomp) && it->cp == cp) {
    out->insert(out->end(), kDecompData + it->offset, kDecompData + it->offset + it->length);
  } else {
    out->push_back(cp);
  }
}

// Returns the primary composite of (a, b), or 0 when there is none.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount) {
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  }
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount) {
    return a + (b - kTBase);
  }
  const ComposeEntry key{a, b, 0};
  auto it = std::lower_bound(std::begin(kCompose), std::end(kCompose), key,
                             [](const ComposeEntry& x, const ComposeEntry& y) {
                               return x.first != y.first ? x.first < y.first : x.second < y.second;
                             });
  return it != std::end(kCompose) && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

bool IsNfcQuick(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0xCC) {  // every code point below U+0300 is safe
      i += utf8::SequenceLength(c);
      continue;
    }
    std::size_t len;
    const char32_t cp = utf8::Decode(text, i, &len);
    if (cp != 0xFFFFFFFF && IsUnsafe(cp)) return false;
    i += len;
  }
  return true;
}

std::string NormalizeNfc(std::string_view text) {
  if (IsNfcQuick(text)) return std::string(text);
  // 1. Full canonical decomposition.
  std::vector<char32_t> cps;
  cps.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t len;
    const char32_t cp = utf8::Decode(text, i, &len);
    DecomposeInto(cp == 0xFFFFFFFF ? 0xFFFD : cp, &cps);
    i += len;
  }
  // 2. Canonical ordering: stable sort of each run of non-starters by combining class.
  for (std::size_t i = 0; i < cps.size();) {
    if (Ccc(cps[i]) == 0) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < cps.size() && Ccc(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + static_cast<std::ptrdiff_t>(i),
                     cps.begin() + static_cast<std::ptrdiff_t>(j),
                     [](char32_t a, char32_t b) { return Ccc(a) < Ccc(b); });
    i = j;
  }
  // 3. Canonical composition (Unicode 3.11, D117).
  std::vector<char32_t> out;
  out.reserve(cps.size());
  std::size_t starter = SIZE_MAX;  // index in `out` of the last starter
  int last_ccc = -1;               // ccc of the last character appended after the starter
  for (char32_t cp : cps) {
    const int ccc = Ccc(cp);
    if (starter != SIZE_MAX) {
      const bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (char32_t comp = Compose(out[starter], cp); comp != 0) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = out.size();
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string result;
  result.reserve(text.size());
  for (char32_t cp : out) utf8::Append(cp, &result);
  return result;
}

const char* UnicodeVersionOfNfc() { return kUnicodeVersion; }

}  // namespace kvroute::tokenize
