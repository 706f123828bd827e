// Jinja lexer: template source -> tokens, with the whitespace handling of Hugging Face chat
// templates (transformers and @huggingface/jinja render with trim_blocks and lstrip_blocks, and
// drop one trailing newline of the template), plus "-" whitespace control on tags.
//
// Thread safety: pure function.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::tokenize::jinja {

struct Token {
  enum class Kind {
    kText,       // literal template text
    kOpenStmt,   // {%
    kCloseStmt,  // %}
    kOpenExpr,   // {{
    kCloseExpr,  // }}
    kName,       // identifiers and keywords
    kString,     // string literal (unescaped)
    kInt,
    kFloat,
    kOp,  // operators and punctuation
    kEnd,
  };
  Kind kind;
  std::string text;
  std::size_t offset = 0;  // in the preprocessed source, for error messages
};

// Applies the chat-template preprocessing (trailing newline, lstrip_blocks, trim_blocks).
std::string Preprocess(std::string_view source);

std::expected<std::vector<Token>, std::string> Lex(std::string_view source);

}  // namespace kvroute::tokenize::jinja
