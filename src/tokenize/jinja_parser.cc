#include "tokenize/jinja_parser.h"

#include <set>

#include "tokenize/jinja_lexer.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  std::expected<Body, std::string> ParseTemplate() {
    auto body = ParseBody({});
    if (!body) return body;
    if (Peek().kind != Token::Kind::kEnd) return Fail("unexpected {% " + end_tag_ + " %}");
    for (const auto& name : called_names_) {
      if (!IsKnownGlobalFunction(name) && !macros_.contains(name)) {
        return Error("template uses unsupported function '" + name + "'");
      }
    }
    return body;
  }

 private:
  const Token& Peek(std::size_t k = 0) const { return t_[std::min(pos_ + k, t_.size() - 1)]; }
  const Token& Next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  bool IsOp(std::string_view op, std::size_t k = 0) const {
    return Peek(k).kind == Token::Kind::kOp && Peek(k).text == op;
  }
  bool IsName(std::string_view n, std::size_t k = 0) const {
    return Peek(k).kind == Token::Kind::kName && Peek(k).text == n;
  }
  Error Fail(const std::string& what) const {
    return Error("template syntax error at offset " + std::to_string(Peek().offset) + ": " + what);
  }
  std::expected<void, std::string> ExpectOp(std::string_view op) {
    if (!IsOp(op)) return Fail("expected '" + std::string(op) + "'");
    ++pos_;
    return {};
  }
  std::expected<void, std::string> ExpectClose() {
    if (Peek().kind != Token::Kind::kCloseStmt) return Fail("expected '%}'");
    ++pos_;
    return {};
  }
  std::expected<std::string, std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Fail("expected a name");
    return Next().text;
  }

  // Parses statements until a {% tag %} whose name is in `ends`; leaves pos_ after that tag
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
        ++pos_;
        continue;
      }
      if (tok.kind == Token::Kind::kOpenExpr) {
        ++pos_;
        auto e = ParseExpr();
        if (!e) return Error(e.error());
        if (Peek().kind != Token::Kind::kCloseExpr) return Fail("expected '}}'");
        ++pos_;
        auto s = std::make_unique<Stmt>(Stmt{.kind = Stmt::Kind::kOutput});
        s->exprs.push_back(std::move(*e));
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind != Token::Kind::kOpenStmt) return Fail("unexpected token");
      if (Peek(1).kind != Token::Kind::kName) return Fail("expected a statement name");
      const std::string name = Peek(1).text;
      if (ends.contains(name)) {
        pos_ += 2;
        end_tag_ = name;
        return body;
      }
      pos_ += 2;
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
      ++pos_;
    }
    if (!IsName("in")) return Fail("expected 'in'");
    ++pos_;
    auto iter = ParseTernaryFree();
    if (!iter) return Error(iter.error());
    s->exprs.push_back(std::move(*iter));
    if (IsName("if")) {
      ++pos_;
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
      ++pos_;
      auto attr = ExpectName();
      if (!attr) return Error(attr.error());
      s->names.push_back(*attr);
    } else if (IsOp(",")) {
      return Fail("tuple assignment in set is not supported");
    }
    if (Peek().kind == Token::Kind::kCloseStmt && s->names.size() == 1) {
      ++pos_;
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
        ++pos_;
        auto d = ParseExpr();
        if (!d) return Error(d.error());
        if (!seen_default) s->defaults_from = s->names.size() - 2;
        seen_default = true;
        s->exprs.push_back(std::move(*d));
      } else if (seen_default) {
        return Fail("macro parameter without default after one with a default");
      }
      if (IsOp(",")) ++pos_;
    }
    ++pos_;
    if (!seen_default) s->defaults_from = s->names.size() - 1;
    if (auto r = ExpectClose(); !r) return Error(r.error());
    macros_.insert(*n);
    auto body = ParseBody({"endmacro"});
    if (!body) return Error(body.error());
    if (auto r = ExpectClose(); !r) return Error(r.error());
    s->bodies.push_back(std::move(*body));
    return s;
  }

  // ---- expressions ----
  static ExprPtr Make(Expr::Kind kind, std::size_t offset) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->offset = offset;
    return e;
  }

  std::expected<ExprPtr, std::string> ParseExpr() {
    // A bare tuple (a, b) without parentheses only appears in for targets, handled there.
    return ParseTernary();
  }

  std::expected<ExprPtr, std::string> ParseTernary() {
    auto a = ParseOr();
    if (!a) return a;
    if (!IsName("if")) return a;
    const std::size_t off = Next().offset;
    auto cond = ParseOr();
    if (!cond) return cond;
    auto e = Make(Expr::Kind::kTernary, off);
    e->kids.push_back(std::move(*a));
    e->kids.push_back(std::move(*cond));
    if (IsName("else")) {
      ++pos_;
      auto b = ParseTernary();
      if (!b) return b;
      e->kids.push_back(std::move(*b));
    } else {
      e->kids.push_back(nullptr);
    }
    return e;
  }

  // For-loop iterables: a conditional expression would swallow the loop filter's "if".
  std::expected<ExprPtr, std::string> ParseTernaryFree() { return ParseOr(); }

  std::expected<ExprPtr, std::string> ParseOr() {
    auto a = ParseAnd();
    if (!a) return a;
    while (IsName("or")) {
      const std::size_t off = Next().offset;
      auto b = ParseAnd();
      if (!b) return b;
      a = Binary("or", std::move(*a), std::move(*b), off);
    }
    return a;
  }

  std::expected<ExprPtr, std::string> ParseAnd() {
    auto a = ParseNot();
    if (!a) return a;
    while (IsName("and")) {
      const std::size_t off = Next().offset;
      auto b = ParseNot();
      if (!b) return b;
      a = Binary("and", std::move(*a), std::move(*b), off);
    }
    return a;
  }

  std::expected<ExprPtr, std::string> ParseNot() {
    if (IsName("not")) {
      const std::size_t off = Next().offset;
      auto a = ParseNot();
      if (!a) return a;
      auto e = Make(Expr::Kind::kNot, off);
      e->kids.push_back(std::move(*a));
      return e;
    }
    return ParseCompare();
  }

  std::expected<ExprPtr, std::string> ParseCompare() {
    auto a = ParseConcat();
    if (!a) return a;
    while (true) {
      std::string op;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == ">" ||
           Peek().text == "<=" || Peek().text == ">=")) {
        op = Peek().text;
        ++pos_;
      } else if (IsName("in")) {
        op = "in";
        ++pos_;
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        pos_ += 2;
      } else {
        return a;
      }
      auto b = ParseConcat();
      if (!b) return b;
      a = Binary(op, std::move(*a), std::move(*b), Peek().offset);
    }
  }

  std::expected<ExprPtr, std::string> ParseConcat() {
    auto a = ParseAdd();
    if (!a) return a;
    while (IsOp("~")) {
      const std::size_t off = Next().offset;
      auto b = ParseAdd();
      if (!b) return b;
      a = Binary("~", std::move(*a), std::move(*b), off);
    }
    return a;
  }

  std::expected<ExprPtr, std::string> ParseAdd() {
    auto a = ParseMul();
    if (!a) return a;
    while (IsOp("+") || IsOp("-")) {
      const Token& op = Next();
      auto b = ParseMul();
      if (!b) return b;
      a = Binary(op.text, std::move(*a), std::move(*b), op.offset);
    }
    return a;
  }

  std::expected<ExprPtr, std::string> ParseMul() {
    auto a = ParseUnary();
    if (!a) return a;
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token& op = Next();
      auto b = ParseUnary();
      if (!b) return b;
      a = Binary(op.text, std::move(*a), std::move(*b), op.offset);
    }
    return a;
  }

  std::expected<ExprPtr, std::string> ParseUnary() {
    if (IsOp("-") || IsOp("+")) {
      const Token& op = Next();
      auto a = ParseUnary();
      if (!a) return a;
      if (op.text == "+") return a;
      auto e = Make(Expr::Kind::kNeg, op.offset);
      e->kids.push_back(std::move(*a));
      return PostfixFilters(std::move(e));
    }
    auto p = ParsePrimary();
    if (!p) return p;
    auto post = ParsePostfix(std::move(*p));
    if (!post) return post;
    return PostfixFilters(std::move(*post));
  }

  // Filters and tests bind to the unary expression before them (Jinja2's parse_filter_expr).
  std::expected<ExprPtr, std::string> PostfixFilters(ExprPtr a) {
    while (true) {
      if (IsOp("|")) {
        const std::size_t off = Next().offset;
        auto name = ExpectName();
        if (!name) return Error(name.error());
        if (!IsKnownFilter(*name)) return Fail("unsupported filter '" + *name + "'");
        auto e = Make(Expr::Kind::kFilter, off);
        e->name = *name;
        e->kids.push_back(std::move(a));
        if (IsOp("(")) {
          ++pos_;
          if (auto r = ParseArgs(e.get()); !r) return Error(r.error());
        }
        a = std::move(e);
      } else if (IsName("is")) {
        const std::size_t off = Next().offset;
        bool negated = false;
        if (IsName("not")) {
          negated = true;
          ++pos_;
        }
        auto name = ExpectName();
        if (!name) return Error(name.error());
        if (!IsKnownTest(*name)) return Fail("unsupported test '" + *name + "'");
        auto e = Make(Expr::Kind::kTest, off);
        e->name = *name;
        e->negated = negated;
        e->kids.push_back(std::move(a));
        if (IsOp("(")) {
          ++pos_;
          if (auto r = ParseArgs(e.get()); !r) return Error(r.error());
        } else if (Peek().kind == Token::Kind::kString || Peek().kind == Token::Kind::kInt ||
                   (Peek().kind == Token::Kind::kName && !IsName("and") && !IsName("or") &&
                    !IsName("else") && !IsName("if") && !IsName("in") && !IsName("not") &&
                    !IsName("is"))) {
          // A test with one argument and no parentheses: "x is sameas false".
          auto arg = ParsePrimary();
          if (!arg) return arg;
          e->kids.push_back(std::move(*arg));
        }
        a = std::move(e);
      } else {
        return a;
      }
    }
  }

  // Parses "args)" after "(" into e->kids (after the existing ones) and e->kw_names.
  std::expected<void, std::string> ParseArgs(Expr* e) {
    while (!IsOp(")")) {
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        e->kw_names.push_back(Next().text);
        ++pos_;
      } else if (!e->kw_names.empty()) {
        return Fail("positional argument after keyword argument");
      }
      auto arg = ParseExpr();
      if (!arg) return Error(arg.error());
      e->kids.push_back(std::move(*arg));
      if (IsOp(",")) {
        ++pos_;
      } else if (!IsOp(")")) {
        return Fail("expected ',' or ')'");
      }
    }
    ++pos_;
    return {};
  }

  std::expected<ExprPtr, std::string> ParsePostfix(ExprPtr a) {
    while (true) {
      if (IsOp(".")) {
        const std::size_t off = Next().offset;
        auto name = ExpectName();
        if (!name) return Error(name.error());
        auto e = Make(Expr::Kind::kAttr, off);
        e->name = *name;
        e->kids.push_back(std::move(a));
        a = std::move(e);
      } else if (IsOp("[")) {
        const std::size_t off = Next().offset;
        ExprPtr parts[3];
        int part = 0;
        bool is_slice = false;
        while (!IsOp("]")) {
          if (IsOp(":")) {
            ++pos_;
            is_slice = true;
            if (++part > 2) return Fail("bad slice");
            continue;
          }
          auto x = ParseExpr();
          if (!x) return x;
          parts[part] = std::move(*x);
        }
        ++pos_;
        if (is_slice) {
          auto e = Make(Expr::Kind::kSlice, off);
          e->kids.push_back(std::move(a));
          for (auto& p : parts) e->kids.push_back(std::move(p));
          a = std::move(e);
        } else {
          if (!parts[0]) return Fail("empty subscript");
          auto e = Make(Expr::Kind::kItem, off);
          e->kids.push_back(std::move(a));
          e->kids.push_back(std::move(parts[0]));
          a = std::move(e);
        }
      } else if (IsOp("(")) {
        const std::size_t off = Next().offset;
        if (a->kind == Expr::Kind::kName) {
          called_names_.insert(a->name);
        } else if (a->kind == Expr::Kind::kAttr && !IsKnownMethod(a->name)) {
          return Fail("unsupported method '" + a->name + "'");
        }
        auto e = Make(Expr::Kind::kCall, off);
        e->kids.push_back(std::move(a));
        if (auto r = ParseArgs(e.get()); !r) return Error(r.error());
        a = std::move(e);
      } else {
        return a;
      }
    }
  }

  std::expected<ExprPtr, std::string> ParsePrimary() {
    const Token& tok = Peek();
    switch (tok.kind) {
      case Token::Kind::kString: {
        // Adjacent string literals concatenate.
        std::string s;
        while (Peek().kind == Token::Kind::kString) s += Next().text;
        auto e = Make(Expr::Kind::kLiteral, tok.offset);
        e->literal = Value::Str(std::move(s));
        return e;
      }
      case Token::Kind::kInt: {
        auto e = Make(Expr::Kind::kLiteral, tok.offset);
        e->literal = Value::Int(std::stoll(Next().text));
        return e;
      }
      case Token::Kind::kFloat: {
        auto e = Make(Expr::Kind::kLiteral, tok.offset);
        e->literal = Value::Float(std::stod(Next().text));
        return e;
      }
      case Token::Kind::kName: {
        const std::string n = Next().text;
        auto e = Make(Expr::Kind::kLiteral, tok.offset);
        if (n == "true" || n == "True") {
          e->literal = Value::Bool(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value::Bool(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value::None();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case Token::Kind::kOp:
        if (tok.text == "(") {
          ++pos_;
          auto first = ParseExpr();
          if (!first) return first;
          if (IsOp(")")) {
            ++pos_;
            return first;
          }
          auto e = Make(Expr::Kind::kList, tok.offset);  // a tuple
          e->kids.push_back(std::move(*first));
          while (IsOp(",")) {
            ++pos_;
            if (IsOp(")")) break;
            auto x = ParseExpr();
            if (!x) return x;
            e->kids.push_back(std::move(*x));
          }
          if (auto r = ExpectOp(")"); !r) return Error(r.error());
          return e;
        }
        if (tok.text == "[") {
          ++pos_;
          auto e = Make(Expr::Kind::kList, tok.offset);
          while (!IsOp("]")) {
            auto x = ParseExpr();
            if (!x) return x;
            e->kids.push_back(std::move(*x));
            if (IsOp(","))
              ++pos_;
            else if (!IsOp("]"))
              return Fail("expected ',' or ']'");
          }
          ++pos_;
          return e;
        }
        if (tok.text == "{") {
          ++pos_;
          auto e = Make(Expr::Kind::kDict, tok.offset);
          while (!IsOp("}")) {
            auto k = ParseExpr();
            if (!k) return k;
            if (auto r = ExpectOp(":"); !r) return Error(r.error());
            auto v = ParseExpr();
            if (!v) return v;
            e->kids.push_back(std::move(*k));
            e->kids.push_back(std::move(*v));
            if (IsOp(","))
              ++pos_;
            else if (!IsOp("}"))
              return Fail("expected ',' or '}'");
          }
          ++pos_;
          return e;
        }
        break;
      default:
        break;
    }
    return Fail("unexpected token in expression");
  }

  static ExprPtr Binary(const std::string& op, ExprPtr a, ExprPtr b, std::size_t off) {
    auto e = Make(Expr::Kind::kBinary, off);
    e->name = op;
    e->kids.push_back(std::move(a));
    e->kids.push_back(std::move(b));
    return e;
  }

  std::vector<Token> t_;
  std::size_t pos_ = 0;
  std::string end_tag_;
  int loop_depth_ = 0;
  std::set<std::string> called_names_;
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
