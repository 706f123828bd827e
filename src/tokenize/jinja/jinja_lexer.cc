#include "tokenize/jinja/jinja_lexer.h"

#include <cctype>

namespace kvroute::tokenize::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

}  // namespace

std::string Preprocess(std::string_view src) {
  std::string s(src);
  if (!s.empty() && s.back() == '\n') s.pop_back();
  // lstrip_blocks: spaces and tabs before a block or comment tag at the start of a line go.
  std::string a;
  a.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const bool line_start = i == 0 || s[i - 1] == '\n' || s[i - 1] == '\r';
    if (line_start) {
      std::size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j > i && j + 1 < s.size() && s[j] == '{' &&
          (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        i = j;
      }
    }
    a.push_back(s[i]);
    ++i;
  }
  // trim_blocks: the newline right after a block or comment tag goes.
  std::string b;
  b.reserve(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    b.push_back(a[i]);
    if (a[i] == '}' && i > 0 && (a[i - 1] == '#' || a[i - 1] == '%' || a[i - 1] == '-') &&
        i + 1 < a.size() && a[i + 1] == '\n') {
      ++i;
    }
  }
  return b;
}

std::expected<std::vector<Token>, std::string> Lex(std::string_view source) {
  const std::string src = Preprocess(source);
  std::vector<Token> tokens;
  std::size_t i = 0;
  const auto err = [&](const std::string& what) {
    return std::unexpected("template syntax error at offset " + std::to_string(i) + ": " + what);
  };
  const auto strip_previous_text = [&] {
    if (!tokens.empty() && tokens.back().kind == Token::Kind::kText) {
      std::string& t = tokens.back().text;
      while (!t.empty() && IsSpace(t.back())) t.pop_back();
      if (t.empty()) tokens.pop_back();
    }
  };
  const auto skip_space = [&] {
    while (i < src.size() && IsSpace(src[i])) ++i;
  };
  while (i < src.size()) {
    // Text up to the next tag.
    std::size_t j = i;
    while (j < src.size() && !(src[j] == '{' && j + 1 < src.size() &&
                               (src[j + 1] == '%' || src[j + 1] == '{' || src[j + 1] == '#'))) {
      ++j;
    }
    if (j > i) {
      tokens.push_back(Token{Token::Kind::kText, src.substr(i, j - i), i});
      i = j;
      continue;
    }
    if (src[i + 1] == '#') {  // comment
      const std::size_t end = src.find("#}", i + 2);
      if (end == std::string::npos) return err("unterminated comment");
      if (src[i + 2] == '-') strip_previous_text();
      const bool strip_after = end > i + 2 && src[end - 1] == '-';
      i = end + 2;
      if (strip_after) skip_space();
      continue;
    }
    const bool is_stmt = src[i + 1] == '%';
    const std::string close = is_stmt ? "%}" : "}}";
    tokens.push_back(Token{is_stmt ? Token::Kind::kOpenStmt : Token::Kind::kOpenExpr, "", i});
    i += 2;
    if (i < src.size() && src[i] == '-') {
      ++i;
      tokens.pop_back();
      strip_previous_text();
      tokens.push_back(Token{is_stmt ? Token::Kind::kOpenStmt : Token::Kind::kOpenExpr, "", i});
    } else if (i < src.size() && src[i] == '+') {
      ++i;
    }
    // Tokens inside the tag.
    int depth = 0;  // brackets, so "}}" inside a dict literal does not close the tag
    while (true) {
      skip_space();
      if (i >= src.size()) return err("unterminated tag");
      const bool minus_close = src.compare(i, 3, "-" + close) == 0;
      const bool plus_close = src.compare(i, 3, "+" + close) == 0;
      if (depth == 0 && (minus_close || plus_close || src.compare(i, 2, close) == 0)) {
        tokens.push_back(Token{is_stmt ? Token::Kind::kCloseStmt : Token::Kind::kCloseExpr, "", i});
        i += (minus_close || plus_close) ? 3 : 2;
        if (minus_close) skip_space();
        break;
      }
      const char c = src[i];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t k = i;
        while (k < src.size() &&
               (std::isalnum(static_cast<unsigned char>(src[k])) || src[k] == '_'))
          ++k;
        tokens.push_back(Token{Token::Kind::kName, src.substr(i, k - i), i});
        i = k;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t k = i;
        while (k < src.size() && std::isdigit(static_cast<unsigned char>(src[k]))) ++k;
        bool is_float = false;
        if (k + 1 < src.size() && src[k] == '.' &&
            std::isdigit(static_cast<unsigned char>(src[k + 1]))) {
          is_float = true;
          ++k;
          while (k < src.size() && std::isdigit(static_cast<unsigned char>(src[k]))) ++k;
        }
        tokens.push_back(
            Token{is_float ? Token::Kind::kFloat : Token::Kind::kInt, src.substr(i, k - i), i});
        i = k;
      } else if (c == '\'' || c == '"') {
        std::string value;
        std::size_t k = i + 1;
        while (k < src.size() && src[k] != c) {
          if (src[k] == '\\' && k + 1 < src.size()) {
            const char e = src[k + 1];
            switch (e) {
              case 'n':
                value += '\n';
                break;
              case 't':
                value += '\t';
                break;
              case 'r':
                value += '\r';
                break;
              case 'b':
                value += '\b';
                break;
              case 'f':
                value += '\f';
                break;
              case 'v':
                value += '\v';
                break;
              case '\\':
                value += '\\';
                break;
              case '\'':
                value += '\'';
                break;
              case '"':
                value += '"';
                break;
              default:
                return err(std::string("unsupported escape \\") + e);
            }
            k += 2;
            continue;
          }
          value.push_back(src[k++]);
        }
        if (k >= src.size()) return err("unterminated string");
        tokens.push_back(Token{Token::Kind::kString, std::move(value), i});
        i = k + 1;
      } else {
        static constexpr std::string_view kOps2[] = {"==", "!=", "<=", ">=", "//", "**"};
        std::string op(1, c);
        for (std::string_view two : kOps2) {
          if (src.compare(i, 2, two) == 0) op = std::string(two);
        }
        if (op.size() == 1 &&
            std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
          return err(std::string("unexpected character '") + c + "'");
        }
        if (c == '(' || c == '[' || c == '{') ++depth;
        if (c == ')' || c == ']' || c == '}') --depth;
        tokens.push_back(Token{Token::Kind::kOp, op, i});
        i += op.size();
      }
    }
  }
  tokens.push_back(Token{Token::Kind::kEnd, "", src.size()});
  return tokens;
}

}  // namespace kvroute::tokenize::jinja
