#include "tokenize/jinja/jinja_parser.h"

#include <set>

#include "tokenize/jinja/jinja_cursor.h"
#include "tokenize/jinja/jinja_lexer.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) { c_.t = std::move(tokens); }

  std::expected<Body, std::string> ParseTemplate() {
    auto body = ParseBody({});
    if (!body) return body;
    if (Peek().kind != Token::Kind::kEnd) return Fail("unexpected {% " + end_tag_ + " %}");
    for (const auto& name : c_.called_names) {
      if (!IsKnownGlobalFunction(name) && !macros_.contains(name)) {
        return Error("template uses unsupported function '" + name + "'");
      }
    }
    return body;
  }

 private:
  const Token& Peek(std::size_t k = 0) const { return c_.Peek(k); }
  const Token& Next() { return c_.Next(); }
  bool IsOp(std::string_view op, std::size_t k = 0) const { return c_.IsOp(op, k); }
  bool IsName(std::string_view n, std::size_t k = 0) const { return c_.IsName(n, k); }
  Error Fail(const std::string& what) const { return c_.Fail(what); }
  std::expected<void, std::string> ExpectOp(std::string_view op) { return c_.ExpectOp(op); }
  std::expected<std::string, std::string> ExpectName() { return c_.ExpectName(); }
  std::expected<ExprPtr, std::string> ParseExpr() { return ParseExpression(c_); }
  std::expected<ExprPtr, std::string> ParseOr() { return ParseOrExpression(c_); }
  std::expected<ExprPtr, std::string> ParseTernaryFree() { return ParseOrExpression(c_); }
  std::expected<void, std::string> ExpectClose() {
    if (Peek().kind != Token::Kind::kCloseStmt) return Fail("expected '%}'");
    ++c_.pos;
    return {};
  }
  // Parses statements until a {% tag %} whose name is in `ends`; leaves c_.pos after that tag
  // name and records it in end_tag_.
  std::expected<Body, std::string> ParseBody(const std::set<std::string>& ends) {
    Body body;
    while (true) {
      const Token& tok = Peek();
      if (tok.kind == Token::Kind::kEnd) {
        if (!ends.empty()) return Fail("missing {% " + *ends.begin() + " %}");
        return body;
      }
      if (tok.kind == Token::Kind::kText) {
        auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kText, .text = tok.text});
        body.push_back(std::move(s));
        ++c_.pos;
        continue;
      }
      if (tok.kind == Token::Kind::kOpenExpr) {
        ++c_.pos;
        auto e = ParseExpr();
        if (!e) return Error(e.error());
        if (Peek().kind != Token::Kind::kCloseExpr) return Fail("expected '}}'");
        ++c_.pos;
        auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kOutput});
        s->exprs.push_back(std::move(*e));
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind != Token::Kind::kOpenStmt) return Fail("unexpected token");
      if (Peek(1).kind != Token::Kind::kName) return Fail("expected a statement name");
      const std::string name = Peek(1).text;
      if (ends.contains(name)) {
        c_.pos += 2;
        end_tag_ = name;
        return body;
      }
      c_.pos += 2;
      auto s = ParseStatement(name);
      if (!s) return Error(s.error());
      body.push_back(std::move(*s));
    }
  }

  std::expected<std::unique_ptr<Stmt>, std::string> ParseStatement(const std::string& name) {
    if (name == "if") return ParseIf();
    if (name == "for") return ParseFor();
    if (name == "set") return ParseSet();
    if (name == "macro") return ParseMacro();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) return Fail(name + " outside a loop");
      auto r = ExpectClose();
      if (!r) return Error(r.error());
      return std::make_unique<Stmt>(
          Stmt{.kind = name == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue});
    }
    return Fail("unsupported statement '" + name + "'");
  }

  std::expected<std::unique_ptr<Stmt>, std::string> ParseIf() {
    auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kIf});
    while (true) {
      auto cond = ParseExpr();
      if (!cond) return Error(cond.error());
      if (auto r = ExpectClose(); !r) return Error(r.error());
      auto body = ParseBody({"elif", "else", "endif"});
      if (!body) return Error(body.error());
      s->exprs.push_back(std::move(*cond));
      s->bodies.push_back(std::move(*body));
      if (end_tag_ == "elif") continue;
      if (end_tag_ == "else") {
        if (auto r = ExpectClose(); !r) return Error(r.error());
        auto else_body = ParseBody({"endif"});
        if (!else_body) return Error(else_body.error());
        s->bodies.push_back(std::move(*else_body));
      }
      break;
    }
    if (auto r = ExpectClose(); !r) return Error(r.error());
    return s;
  }

  std::expected<std::unique_ptr<Stmt>, std::string> ParseFor() {
    auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kFor});
    while (true) {
      auto n = ExpectName();
      if (!n) return Error(n.error());
      s->names.push_back(*n);
      if (!IsOp(",")) break;
      ++c_.pos;
    }
    if (!IsName("in")) return Fail("expected 'in'");
    ++c_.pos;
    auto iter = ParseTernaryFree();
    if (!iter) return Error(iter.error());
    s->exprs.push_back(std::move(*iter));
    if (IsName("if")) {
      ++c_.pos;
      auto cond = ParseOr();
      if (!cond) return Error(cond.error());
      s->exprs.push_back(std::move(*cond));
    }
    if (IsName("recursive")) return Fail("recursive loops are not supported");
    if (auto r = ExpectClose(); !r) return Error(r.error());
    ++loop_depth_;
    auto body = ParseBody({"else", "endfor"});
    --loop_depth_;
    if (!body) return Error(body.error());
    s->bodies.push_back(std::move(*body));
    if (end_tag_ == "else") {
      if (auto r = ExpectClose(); !r) return Error(r.error());
      auto else_body = ParseBody({"endfor"});
      if (!else_body) return Error(else_body.error());
      s->bodies.push_back(std::move(*else_body));
    }
    if (auto r = ExpectClose(); !r) return Error(r.error());
    return s;
  }

  std::expected<std::unique_ptr<Stmt>, std::string> ParseSet() {
    auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kSet});
    auto n = ExpectName();
    if (!n) return Error(n.error());
    s->names.push_back(*n);
    if (IsOp(".")) {
      ++c_.pos;
      auto attr = ExpectName();
      if (!attr) return Error(attr.error());
      s->names.push_back(*attr);
    } else if (IsOp(",")) {
      return Fail("tuple assignment in set is not supported");
    }
    if (Peek().kind == Token::Kind::kCloseStmt && s->names.size() == 1) {
      ++c_.pos;
      auto body = ParseBody({"endset"});
      if (!body) return Error(body.error());
      if (auto r = ExpectClose(); !r) return Error(r.error());
      s->kind = Stmt::Kind::kSetBlock;
      s->bodies.push_back(std::move(*body));
      return s;
    }
    if (auto r = ExpectOp("="); !r) return Error(r.error());
    auto value = ParseExpr();
    if (!value) return Error(value.error());
    s->exprs.push_back(std::move(*value));
    if (auto r = ExpectClose(); !r) return Error(r.error());
    return s;
  }

  std::expected<std::unique_ptr<Stmt>, std::string> ParseMacro() {
    auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kMacro});
    auto n = ExpectName();
    if (!n) return Error(n.error());
    s->names.push_back(*n);
    if (auto r = ExpectOp("("); !r) return Error(r.error());
    bool seen_default = false;
    while (!IsOp(")")) {
      auto p = ExpectName();
      if (!p) return Error(p.error());
      s->names.push_back(*p);
      if (IsOp("=")) {
        ++c_.pos;
        auto d = ParseExpr();
        if (!d) return Error(d.error());
        if (!seen_default) s->defaults_from = s->names.size() - 2;
        seen_default = true;
        s->exprs.push_back(std::move(*d));
      } else if (seen_default) {
        return Fail("macro parameter without default after one with a default");
      }
      if (IsOp(",")) ++c_.pos;
    }
    ++c_.pos;
    if (!seen_default) s->defaults_from = s->names.size() - 1;
    if (auto r = ExpectClose(); !r) return Error(r.error());
    macros_.insert(*n);
    auto body = ParseBody({"endmacro"});
    if (!body) return Error(body.error());
    if (auto r = ExpectClose(); !r) return Error(r.error());
    s->bodies.push_back(std::move(*body));
    return s;
  }

  TokenCursor c_;
  std::string end_tag_;
  int loop_depth_ = 0;
  std::set<std::string> macros_;
};

}  // namespace

std::expected<Body, std::string> Parse(std::string_view source) {
  auto tokens = Lex(source);
  if (!tokens) return Error(tokens.error());
  Parser p(std::move(*tokens));
  return p.ParseTemplate();
}

}  // namespace kvroute::tokenize::jinja
