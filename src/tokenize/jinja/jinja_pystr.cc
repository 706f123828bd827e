#include "tokenize/jinja/jinja_pystr.h"

#include "tokenize/utf8.h"

namespace kvroute::tokenize::jinja::py {

using Error = std::unexpected<std::string>;

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len;
    const char32_t cp = utf8::Decode(s, i, &len);
    out.push_back(cp == 0xFFFFFFFF ? 0xFFFD : cp);
    i += len;
  }
  return out;
}

std::string ToU8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8::Append(cp, &out);
  return out;
}

// Python's str.isspace().
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// str.strip/lstrip/rstrip with Python semantics: `chars` None strips whitespace. Only the
// ends are decoded, so stripping a long message costs what it strips.
std::string Strip(std::string_view s, const Value* chars, bool left, bool right) {
  const bool whitespace = chars == nullptr || chars->IsNone() || chars->IsUndefined();
  std::u32string set;
  if (!whitespace) set = ToU32(chars->s);
  const auto strip = [&](char32_t c) {
    return whitespace ? IsPySpace(c) : set.find(c) != std::u32string::npos;
  };
  std::size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      std::size_t len;
      const char32_t cp = utf8::Decode(s, b, &len);
      if (!strip(cp)) break;
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      std::size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      std::size_t len;
      const char32_t cp = utf8::Decode(s.substr(0, e), start, &len);
      if (start + len != e || !strip(cp)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string AsciiCase(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

std::string Title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) {
      c = prev_cased ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    }
    prev_cased = alpha;
  }
  return out;
}

std::vector<std::string> Split(std::string_view s, const Value* sep, std::int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr || sep->IsNone()) {
    const std::u32string u = ToU32(s);
    std::size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && IsPySpace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
        // Python keeps the rest as it is, trailing whitespace included: '  a  b c '.split(None, 1)
        // is ['a', 'b c '].
        parts.push_back(ToU8(std::u32string_view(u).substr(i)));
        break;
      }
      std::size_t j = i;
      while (j < u.size() && !IsPySpace(u[j])) ++j;
      parts.push_back(ToU8(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  std::size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) break;
    const std::size_t hit = s.find(sep->s, pos);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->s.size();
  }
  parts.emplace_back(s.substr(pos));
  return parts;
}

Value StrList(const std::vector<std::string>& parts) {
  List items;
  for (const auto& p : parts) items.push_back(Value::Str(p));
  return Value::MakeList(std::move(items));
}

const Value* Arg(CallArgs& a, std::size_t index, std::string_view kw) {
  if (index < a.args.size()) return &a.args[index];
  return a.Kwarg(kw);
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to,
                    std::int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    const std::u32string u = ToU32(s);
    std::int64_t n = 0;
    for (char32_t c : u) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      utf8::Append(c, &out);
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::size_t pos = 0;
  std::int64_t n = 0;
  while (count < 0 || n < count) {
    const std::size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

Result Items(const Value& v) {
  if (!v.IsDict()) return Error("items() needs a dict");
  List items;
  for (const auto& [k, x] : v.dict->items) items.push_back(Value::MakeList({Value::Str(k), x}));
  return Value::MakeList(std::move(items));
}

Result ToList(const Value& v) {
  if (v.IsList()) return Value::MakeList(*v.list);
  if (v.IsString()) {
    List items;
    for (char32_t c : ToU32(v.s)) items.push_back(Value::Str(ToU8(std::u32string(1, c))));
    return Value::MakeList(std::move(items));
  }
  if (v.IsDict()) {
    List items;
    for (const auto& [k, x] : v.dict->items) items.push_back(Value::Str(k));
    return Value::MakeList(std::move(items));
  }
  return Error("value is not iterable");
}

Value GetAttribute(const Value& v, std::string_view path) {
  Value cur = v;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t dot = path.find('.', pos);
    const std::string_view part = path.substr(pos, dot == std::string_view::npos ? dot : dot - pos);
    if (cur.IsDict()) {
      const Value* x = cur.dict->Find(part);
      cur = x ? *x : Value{};
    } else {
      return Value{};
    }
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return cur;
}

}  // namespace kvroute::tokenize::jinja::py
