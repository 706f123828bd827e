// Python semantics for the Jinja built-ins: str methods on UTF-8 text (code points), list
// conversion, attribute paths. Shared by jinja_builtins.cc and jinja_methods.cc.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/jinja/jinja_builtins.h"

namespace kvroute::tokenize::jinja::py {

std::u32string ToU32(std::string_view s);
std::string ToU8(std::u32string_view s);
// Python's str.isspace() for one code point.
bool IsPySpace(char32_t c);
// str.strip/lstrip/rstrip: `chars` null/none/undefined strips whitespace.
std::string Strip(std::string_view s, const Value* chars, bool left, bool right);
std::string AsciiCase(std::string s, bool upper);
std::string Title(std::string_view s);
// str.split(sep=None, maxsplit=-1).
std::vector<std::string> Split(std::string_view s, const Value* sep, std::int64_t maxsplit);
Value StrList(const std::vector<std::string>& parts);
// Positional argument `index`, else keyword `kw`, else null.
const Value* Arg(CallArgs& a, std::size_t index, std::string_view kw);
// str.replace(old, new, count) (count < 0: all).
std::string Replace(std::string_view s, std::string_view from, std::string_view to,
                    std::int64_t count);
Result Items(const Value& v);
// list(v): lists copy, strings split into characters, dicts give their keys.
Result ToList(const Value& v);
// v.a.b for a dotted path; undefined when missing.
Value GetAttribute(const Value& v, std::string_view path);

}  // namespace kvroute::tokenize::jinja::py
