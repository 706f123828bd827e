#include "tokenize/jinja/jinja_json.h"

#include <charconv>
#include <cstdlib>

#include "tokenize/utf8.h"

namespace kvroute::tokenize::jinja {
namespace {

constexpr int kMaxDepth = 256;

class JsonParser {
 public:
  explicit JsonParser(std::string_view s) : s_(s) {}

  std::expected<Value, std::string> Run() {
    auto v = ParseValue(0);
    if (!v) return v;
    SkipSpace();
    if (i_ != s_.size()) return Fail("trailing characters");
    return v;
  }

 private:
  std::unexpected<std::string> Fail(const std::string& what) const {
    return std::unexpected("invalid JSON at offset " + std::to_string(i_) + ": " + what);
  }
  void SkipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r'))
      ++i_;
  }
  bool Consume(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }

  std::expected<Value, std::string> ParseValue(int depth) {
    if (depth > kMaxDepth) return Fail("nested too deeply");
    SkipSpace();
    if (i_ >= s_.size()) return Fail("unexpected end");
    const char c = s_[i_];
    if (c == '{') return ParseObject(depth);
    if (c == '[') return ParseArray(depth);
    if (c == '"') {
      auto str = ParseString();
      if (!str) return std::unexpected(str.error());
      return Value::Str(std::move(*str));
    }
    if (Consume("true")) return Value::Bool(true);
    if (Consume("false")) return Value::Bool(false);
    if (Consume("null")) return Value::None();
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
    return Fail("unexpected character");
  }

  std::expected<Value, std::string> ParseObject(int depth) {
    ++i_;
    Value obj = Value::MakeDict();
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == '}') {
      ++i_;
      return obj;
    }
    while (true) {
      SkipSpace();
      if (i_ >= s_.size() || s_[i_] != '"') return Fail("expected a key");
      auto key = ParseString();
      if (!key) return std::unexpected(key.error());
      SkipSpace();
      if (i_ >= s_.size() || s_[i_] != ':') return Fail("expected ':'");
      ++i_;
      auto v = ParseValue(depth + 1);
      if (!v) return v;
      obj.dict->Set(*key, std::move(*v));
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == '}') {
        ++i_;
        return obj;
      }
      return Fail("expected ',' or '}'");
    }
  }

  std::expected<Value, std::string> ParseArray(int depth) {
    ++i_;
    List items;
    SkipSpace();
    if (i_ < s_.size() && s_[i_] == ']') {
      ++i_;
      return Value::MakeList(std::move(items));
    }
    while (true) {
      auto v = ParseValue(depth + 1);
      if (!v) return v;
      items.push_back(std::move(*v));
      SkipSpace();
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        continue;
      }
      if (i_ < s_.size() && s_[i_] == ']') {
        ++i_;
        return Value::MakeList(std::move(items));
      }
      return Fail("expected ',' or ']'");
    }
  }

  std::expected<unsigned, std::string> Hex4() {
    if (i_ + 4 > s_.size()) return Fail("short \\u escape");
    unsigned v = 0;
    const auto [ptr, ec] = std::from_chars(s_.data() + i_, s_.data() + i_ + 4, v, 16);
    if (ec != std::errc() || ptr != s_.data() + i_ + 4) return Fail("bad \\u escape");
    i_ += 4;
    return v;
  }

  std::expected<std::string, std::string> ParseString() {
    ++i_;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) return Fail("unterminated string");
      const char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return Fail("control character in string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return Fail("unterminated escape");
      const char e = s_[i_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          auto hi = Hex4();
          if (!hi) return std::unexpected(hi.error());
          char32_t cp = *hi;
          if (cp >= 0xD800 && cp <= 0xDBFF && s_.substr(i_, 2) == "\\u") {
            i_ += 2;
            auto lo = Hex4();
            if (!lo) return std::unexpected(lo.error());
            if (*lo >= 0xDC00 && *lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (*lo - 0xDC00);
            } else {
              return Fail("unpaired surrogate");
            }
          } else if (cp >= 0xD800 && cp <= 0xDFFF) {
            return Fail("unpaired surrogate");
          }
          utf8::Append(cp, &out);
          break;
        }
        default:
          return Fail("bad escape");
      }
    }
  }

  std::expected<Value, std::string> ParseNumber() {
    const std::size_t start = i_;
    if (s_[i_] == '-') ++i_;
    bool is_float = false;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c >= '0' && c <= '9') {
        ++i_;
      } else if (c == '.' || c == 'e' || c == 'E' || ((c == '+' || c == '-') && is_float)) {
        is_float = true;
        ++i_;
      } else {
        break;
      }
    }
    const std::string text(s_.substr(start, i_ - start));
    if (!is_float) {
      std::int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec == std::errc() && ptr == text.data() + text.size()) return Value::Int(v);
    }
    char* end = nullptr;
    const double d = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) return Fail("bad number");
    return Value::Float(d);
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

std::expected<Value, std::string> ParseJson(std::string_view text) {
  return JsonParser(text).Run();
}

}  // namespace kvroute::tokenize::jinja
