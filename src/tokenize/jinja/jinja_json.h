// JSON text -> jinja::Value, with Python json.loads semantics: objects keep key order (a
// repeated key keeps its first position and last value), integers stay integers, other numbers
// become correctly rounded doubles (strtod) so tojson re-prints them exactly as Python would.
//
// Thread safety: pure function.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include "tokenize/jinja/jinja_value.h"

namespace kvroute::tokenize::jinja {

std::expected<Value, std::string> ParseJson(std::string_view text);

}  // namespace kvroute::tokenize::jinja
