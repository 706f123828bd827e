// Built-in filters, tests, methods and global functions of kvroute's Jinja subset, with
// Python semantics (str.strip(chars) strips only `chars`; split() without a separator splits
// on whitespace runs; slicing and negative indices as in Python).
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <expected>
#include <string>
#include <string_view>

#include "tokenize/jinja/jinja_value.h"

namespace kvroute::tokenize::jinja {

using Result = std::expected<Value, std::string>;

Result ApplyFilter(std::string_view name, const Value& input, CallArgs& args);
Result ApplyTest(std::string_view name, const Value& input, CallArgs& args);
// obj.name(args) for str, list and dict methods.
Result CallMethod(const Value& obj, std::string_view name, CallArgs& args);
// namespace(), range(), dict(), raise_exception().
Result CallGlobal(std::string_view name, CallArgs& args);

// Python's obj[start:stop:step] for lists and strings (code points).
Result Slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// a op b for ==, !=, in, not in, ~, <, >, <=, >=, +, -, *, /, //, % (not and/or, which
// short-circuit in the interpreter).
Result BinaryOp(const std::string& op, Value a, const Value& b);
// obj[key]: dict entry, list item (negative from the end) or character; undefined when absent.
Result Subscript(const Value& obj, const Value& key);
// Python's len() (code points for strings).
std::expected<std::int64_t, std::string> Length(const Value& v);

// Argument checks shared by the filters (jinja_builtins.cc) and the methods
// (jinja_methods.cc): the positional argument `index`, else the keyword `kw`, of one kind.
// The string argument; null when it is absent or not a string.
const Value* StringArg(CallArgs& args, std::size_t index, std::string_view kw);
// The integer argument; `fallback` when it is absent or not an integer.
std::int64_t IntArg(CallArgs& args, std::size_t index, std::string_view kw, std::int64_t fallback);

}  // namespace kvroute::tokenize::jinja
