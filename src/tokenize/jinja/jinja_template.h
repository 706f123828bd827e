// jinja::Template: a parsed chat template, rendered many times with different variables.
//
// Semantics follow Python Jinja2 as transformers configures it for chat templates
// (trim_blocks, lstrip_blocks, Python str methods, transformers' tojson) — what vLLM renders.
// Unsupported constructs fail in Parse (load time); type errors that depend on the request
// (e.g. "string + list") fail in Render with a message, as Jinja2 would raise.
//
// Ownership: owns its syntax tree. Thread safety: Render is const and safe to call
// concurrently; each call has its own scopes and output.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "tokenize/jinja/jinja_ast.h"
#include "tokenize/jinja/jinja_value.h"

namespace kvroute::tokenize::jinja {

class Template {
 public:
  static std::expected<Template, std::string> Parse(std::string_view source);

  // Renders with `vars` (a dict value) as the template's global variables. `size_hint`: the
  // expected output size in bytes (reserved up front, so long prompts are not re-copied as
  // the output grows).
  std::expected<std::string, std::string> Render(const Value& vars,
                                                 std::size_t size_hint = 0) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace kvroute::tokenize::jinja
