// Token cursor shared by the Jinja statement and expression parsers (internal to
// jinja_parser.cc and jinja_expr_parser.cc).
//
// Thread safety: one cursor per parse.
#pragma once

#include <algorithm>
#include <expected>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/jinja/jinja_ast.h"
#include "tokenize/jinja/jinja_lexer.h"

namespace kvroute::tokenize::jinja {

struct TokenCursor {
  std::vector<Token> t;
  std::size_t pos = 0;
  std::set<std::string> called_names;  // plain-name calls, checked after the whole parse

  const Token& Peek(std::size_t k = 0) const { return t[std::min(pos + k, t.size() - 1)]; }
  const Token& Next() { return t[std::min(pos++, t.size() - 1)]; }
  bool IsOp(std::string_view op, std::size_t k = 0) const {
    return Peek(k).kind == Token::Kind::kOp && Peek(k).text == op;
  }
  bool IsName(std::string_view n, std::size_t k = 0) const {
    return Peek(k).kind == Token::Kind::kName && Peek(k).text == n;
  }
  std::unexpected<std::string> Fail(const std::string& what) const {
    return std::unexpected("template syntax error at offset " + std::to_string(Peek().offset) +
                           ": " + what);
  }
  std::expected<void, std::string> ExpectOp(std::string_view op) {
    if (!IsOp(op)) return Fail("expected '" + std::string(op) + "'");
    ++pos;
    return {};
  }
  std::expected<std::string, std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Fail("expected a name");
    return Next().text;
  }
};

// expression := conditional expression (a if b else c) and everything below it.
std::expected<ExprPtr, std::string> ParseExpression(TokenCursor& c);
// An expression without the conditional form (for-loop iterables and loop filters, where
// "if" belongs to the loop).
std::expected<ExprPtr, std::string> ParseOrExpression(TokenCursor& c);

}  // namespace kvroute::tokenize::jinja
