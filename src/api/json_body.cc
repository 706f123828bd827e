#include "api/json_body.h"

#include <boost/json/monotonic_resource.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parse_options.hpp>
#include <boost/json/string.hpp>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace kvroute::api {
namespace {

namespace json = boost::json;

json::parse_options Options() {
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  // Strict JSON, as Python's json module parses it in vLLM: no comments, no trailing
  // commas; invalid UTF-8 is rejected by default.
  return options;
}

// True for a byte that may stand for itself inside a JSON string without a closer look.
inline bool IsPlain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

// The first byte at or after `p` that is not plain (or `end`).
const char* SkipPlain(const char* p, const char* end) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (end - p >= 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches non-ASCII.
    const __m128i special =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    const int mask = _mm_movemask_epi8(special);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p != end && IsPlain(static_cast<unsigned char>(*p))) ++p;
  return p;
}

// Writes `cp` as UTF-8 at `w` and advances it.
void AppendUtf8(char*& w, std::uint32_t cp) {
  if (cp < 0x80) {
    *w++ = static_cast<char>(cp);
  } else if (cp < 0x800) {
    *w++ = static_cast<char>(0xC0 | (cp >> 6));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *w++ = static_cast<char>(0xE0 | (cp >> 12));
    *w++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *w++ = static_cast<char>(0xF0 | (cp >> 18));
    *w++ = static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *w++ = static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *w++ = static_cast<char>(0x80 | (cp & 0x3F));
  }
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Recursive descent over the body. Every method returns false to decline; the caller then
// lets Boost.JSON parse the whole body, so a false here never reaches a client.
class FastParser {
 public:
  explicit FastParser(std::string_view text)
      : p_(text.data()), end_(text.data() + text.size()), size_(text.size()) {}

  bool Document(json::value& out) {
    SkipWs();
    if (!Value(out, 0)) return false;
    SkipWs();
    return p_ == end_;
  }

 private:
  void SkipWs() {
    while (p_ != end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }

  bool Value(json::value& out, std::size_t depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{':
        return Object(out.emplace_object(), depth + 1);
      case '[':
        return Array(out.emplace_array(), depth + 1);
      case '"': {
        ++p_;
        std::string_view s;
        if (!ScanString(s)) return false;
        out.emplace_string().assign(s);
        return true;
      }
      case 't':
        if (!Literal("true")) return false;
        out = true;
        return true;
      case 'f':
        if (!Literal("false")) return false;
        out = false;
        return true;
      case 'n':
        if (!Literal("null")) return false;
        out = nullptr;
        return true;
      default:
        return Number(out);
    }
  }

  bool Literal(std::string_view word) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return false;
    }
    p_ += word.size();
    return true;
  }

  // Numbers are rare in a request (max_tokens, temperature): Boost.JSON parses each token,
  // so their kinds (int64 / uint64 / double) and rounding are exactly its own.
  bool Number(json::value& out) {
    const char* start = p_;
    while (p_ != end_ && ((*p_ >= '0' && *p_ <= '9') || *p_ == '-' || *p_ == '+' || *p_ == '.' ||
                          *p_ == 'e' || *p_ == 'E')) {
      ++p_;
    }
    if (p_ == start) return false;
    boost::system::error_code ec;
    json::value n = json::parse(json::string_view(start, static_cast<std::size_t>(p_ - start)), ec,
                                out.storage());
    if (ec || !n.is_number()) return false;
    out = std::move(n);
    return true;
  }

  bool Object(json::object& obj, std::size_t depth) {
    if (depth >= kMaxJsonDepth) return false;  // Boost.JSON decides at its own limit
    ++p_;
    SkipWs();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      return true;
    }
    for (;;) {
      if (p_ == end_ || *p_ != '"') return false;
      ++p_;
      std::string_view key;
      if (!ScanString(key)) return false;
      SkipWs();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      SkipWs();
      // A duplicate key is left to Boost.JSON (which keeps the last one).
      auto [it, inserted] = obj.emplace(key, nullptr);
      if (!inserted) return false;
      if (!Value(it->value(), depth)) return false;
      const Next next = AfterElement('}');
      if (next != Next::kMore) return next == Next::kClosed;
    }
  }

  bool Array(json::array& arr, std::size_t depth) {
    if (depth >= kMaxJsonDepth) return false;
    ++p_;
    SkipWs();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      return true;
    }
    for (;;) {
      if (!Value(arr.emplace_back(nullptr), depth)) return false;
      const Next next = AfterElement(']');
      if (next != Next::kMore) return next == Next::kClosed;
    }
  }

  // After a member or element: a comma (another follows), the container's closing byte, or
  // anything else (not JSON this parser accepts).
  enum class Next { kMore, kClosed, kInvalid };
  Next AfterElement(char close) {
    SkipWs();
    if (p_ == end_) return Next::kInvalid;
    if (*p_ == ',') {
      ++p_;
      SkipWs();
      return Next::kMore;
    }
    if (*p_ != close) return Next::kInvalid;
    ++p_;
    return Next::kClosed;
  }

  // After the opening quote: the unescaped string, a view into the body when it has no
  // escapes, else into scratch_ (valid until the next call). Unescaping never lengthens
  // text, so scratch_ (as long as the body) always has room: no bounds checks per byte.
  bool ScanString(std::string_view& out) {
    const char* run = p_;  // literal bytes not yet copied
    char* w = nullptr;     // write position in scratch_ once an escape was seen
    for (;;) {
      p_ = SkipPlain(p_, end_);
      if (p_ == end_) return false;
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        if (w != nullptr) {
          w = Copy(w, run, p_);
          out = std::string_view(scratch_.get(), static_cast<std::size_t>(w - scratch_.get()));
        } else {
          out = std::string_view(run, static_cast<std::size_t>(p_ - run));
        }
        ++p_;
        return true;
      }
      if (c >= 0x80) {
        if (!SkipUtf8()) return false;
        continue;
      }
      if (c != '\\') return false;  // a raw control character
      if (w == nullptr) {
        if (!scratch_) scratch_ = std::make_unique_for_overwrite<char[]>(size_);
        w = scratch_.get();
      }
      w = Copy(w, run, p_);
      ++p_;
      if (p_ == end_) return false;
      switch (*p_++) {
        case '"':
          *w++ = '"';
          break;
        case '\\':
          *w++ = '\\';
          break;
        case '/':
          *w++ = '/';
          break;
        case 'b':
          *w++ = '\b';
          break;
        case 'f':
          *w++ = '\f';
          break;
        case 'n':
          *w++ = '\n';
          break;
        case 'r':
          *w++ = '\r';
          break;
        case 't':
          *w++ = '\t';
          break;
        case 'u':
          if (!UnicodeEscape(w)) return false;
          break;
        default:
          return false;
      }
      run = p_;
    }
  }

  static char* Copy(char* w, const char* from, const char* to) {
    const auto n = static_cast<std::size_t>(to - from);
    if (n != 0) std::memcpy(w, from, n);
    return w + n;
  }

  bool Hex4(std::uint32_t& v) {
    if (end_ - p_ < 4) return false;
    v = 0;
    for (int i = 0; i < 4; ++i) {
      const int d = HexDigit(p_[i]);
      if (d < 0) return false;
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    p_ += 4;
    return true;
  }

  // After "\u": one code point, or a surrogate pair; a lone surrogate is left to Boost.JSON.
  bool UnicodeEscape(char*& w) {
    std::uint32_t u1 = 0;
    if (!Hex4(u1)) return false;
    if (u1 < 0xD800 || u1 > 0xDFFF) {
      AppendUtf8(w, u1);
      return true;
    }
    if (u1 > 0xDBFF) return false;
    if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') return false;
    p_ += 2;
    std::uint32_t u2 = 0;
    if (!Hex4(u2) || u2 < 0xDC00 || u2 > 0xDFFF) return false;
    AppendUtf8(w, 0x10000 + ((u1 - 0xD800) << 10) + (u2 - 0xDC00));
    return true;
  }

  // One well-formed UTF-8 sequence (RFC 3629: no overlongs, no surrogates, ≤ U+10FFFF).
  bool SkipUtf8() {
    const auto* s = reinterpret_cast<const unsigned char*>(p_);
    const auto left = static_cast<std::size_t>(end_ - p_);
    auto cont = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
      return i < left && s[i] >= lo && s[i] <= hi;
    };
    const unsigned char c = s[0];
    std::size_t n = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      n = cont(1) ? 2 : 0;
    } else if (c == 0xE0) {
      n = cont(1, 0xA0) && cont(2) ? 3 : 0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      n = cont(1) && cont(2) ? 3 : 0;
    } else if (c == 0xED) {
      n = cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;
    } else if (c == 0xF0) {
      n = cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
    } else if (c >= 0xF1 && c <= 0xF3) {
      n = cont(1) && cont(2) && cont(3) ? 4 : 0;
    } else if (c == 0xF4) {
      n = cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;
    }
    if (n == 0) return false;
    p_ += n;
    return true;
  }

  const char* p_;
  const char* end_;
  std::size_t size_;                 // of the body
  std::unique_ptr<char[]> scratch_;  // size_ bytes, made at the first escape
};

}  // namespace

namespace detail {

std::optional<json::value> ParseJsonFast(std::string_view text, json::storage_ptr sp) {
  std::optional<json::value> out(std::in_place, std::move(sp));
  if (!FastParser(text).Document(*out)) return std::nullopt;
  return out;
}

}  // namespace detail

std::expected<json::object, ApiError> ParseJsonObjectBody(std::string_view body) {
  // The strings of the body are most of what the value holds; the rest is a few dozen bytes
  // per value. One block that fits them all (the resource grows if it must).
  json::storage_ptr sp =
      json::make_shared_resource<json::monotonic_resource>(body.size() + body.size() / 4 + 1024);
  // Move-construct (never move-assign) values so that they keep `sp`: a move-assignment
  // between different storages copies.
  std::optional<json::value> fast = detail::ParseJsonFast(body, sp);
  boost::system::error_code ec;
  json::value value =
      fast ? std::move(*fast)
           : json::parse(json::string_view(body.data(), body.size()), ec, sp, Options());
  if (ec) {
    return std::unexpected(
        ApiError::InvalidRequest("The request body is not valid JSON: " + ec.message() + "."));
  }
  if (!value.is_object()) {
    return std::unexpected(ApiError::InvalidRequest("The request body must be a JSON object."));
  }
  return std::move(value.as_object());
}

}  // namespace kvroute::api
