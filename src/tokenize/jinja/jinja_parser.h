// Jinja parser: tokens -> syntax tree, for the subset used by Hugging Face chat templates.
//
// Supported: text, {{ }}, {# #}, whitespace control; if/elif/else, for (tuple targets, loop
// filter, else, loop.*), set (names, namespace attributes, blocks), macro, break, continue;
// expressions with literals (strings, numbers, lists, tuples, dicts), attribute and item access,
// slices, calls with keyword arguments, filters, tests, not/and/or, comparisons, in, ~, + - *
// / // %, conditional expressions.
//
// Every filter, test, statement and global function name is checked here against what the
// interpreter implements, so an unsupported construct is a load-time error with its location,
// never a wrong prompt at request time.
//
// Thread safety: pure function.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "tokenize/jinja/jinja_ast.h"

namespace kvroute::tokenize::jinja {

std::expected<Body, std::string> Parse(std::string_view source);

// Names the interpreter implements (the parser's allow-lists).
bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);
bool IsKnownGlobalFunction(std::string_view name);
bool IsKnownMethod(std::string_view name);

}  // namespace kvroute::tokenize::jinja
