// Expression half of the Jinja parser (precedence climbing, Jinja2's order: conditional,
// or, and, not, comparisons/in, ~, + -, * / // %, unary, postfix filters/tests, primary).
#include "tokenize/jinja/jinja_cursor.h"
#include "tokenize/jinja/jinja_parser.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

class ExprParser {
 public:
  explicit ExprParser(TokenCursor& c) : c_(c) {}

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
      ++c_.pos;
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
        ++c_.pos;
      } else if (IsName("in")) {
        op = "in";
        ++c_.pos;
      } else if (IsName("not") && IsName("in", 1)) {
        op = "not in";
        c_.pos += 2;
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
          ++c_.pos;
          if (auto r = ParseArgs(e.get()); !r) return Error(r.error());
        }
        a = std::move(e);
      } else if (IsName("is")) {
        const std::size_t off = Next().offset;
        bool negated = false;
        if (IsName("not")) {
          negated = true;
          ++c_.pos;
        }
        auto name = ExpectName();
        if (!name) return Error(name.error());
        if (!IsKnownTest(*name)) return Fail("unsupported test '" + *name + "'");
        auto e = Make(Expr::Kind::kTest, off);
        e->name = *name;
        e->negated = negated;
        e->kids.push_back(std::move(a));
        if (IsOp("(")) {
          ++c_.pos;
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
        ++c_.pos;
      } else if (!e->kw_names.empty()) {
        return Fail("positional argument after keyword argument");
      }
      auto arg = ParseExpr();
      if (!arg) return Error(arg.error());
      e->kids.push_back(std::move(*arg));
      if (IsOp(",")) {
        ++c_.pos;
      } else if (!IsOp(")")) {
        return Fail("expected ',' or ')'");
      }
    }
    ++c_.pos;
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
            ++c_.pos;
            is_slice = true;
            if (++part > 2) return Fail("bad slice");
            continue;
          }
          auto x = ParseExpr();
          if (!x) return x;
          parts[part] = std::move(*x);
        }
        ++c_.pos;
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
          c_.called_names.insert(a->name);
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
          ++c_.pos;
          auto first = ParseExpr();
          if (!first) return first;
          if (IsOp(")")) {
            ++c_.pos;
            return first;
          }
          auto e = Make(Expr::Kind::kList, tok.offset);  // a tuple
          e->kids.push_back(std::move(*first));
          while (IsOp(",")) {
            ++c_.pos;
            if (IsOp(")")) break;
            auto x = ParseExpr();
            if (!x) return x;
            e->kids.push_back(std::move(*x));
          }
          if (auto r = ExpectOp(")"); !r) return Error(r.error());
          return e;
        }
        if (tok.text == "[") {
          ++c_.pos;
          auto e = Make(Expr::Kind::kList, tok.offset);
          while (!IsOp("]")) {
            auto x = ParseExpr();
            if (!x) return x;
            e->kids.push_back(std::move(*x));
            if (IsOp(","))
              ++c_.pos;
            else if (!IsOp("]"))
              return Fail("expected ',' or ']'");
          }
          ++c_.pos;
          return e;
        }
        if (tok.text == "{") {
          ++c_.pos;
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
              ++c_.pos;
            else if (!IsOp("}"))
              return Fail("expected ',' or '}'");
          }
          ++c_.pos;
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

 private:
  const Token& Peek(std::size_t k = 0) const { return c_.Peek(k); }
  const Token& Next() { return c_.Next(); }
  bool IsOp(std::string_view op, std::size_t k = 0) const { return c_.IsOp(op, k); }
  bool IsName(std::string_view n, std::size_t k = 0) const { return c_.IsName(n, k); }
  Error Fail(const std::string& what) const { return c_.Fail(what); }
  std::expected<void, std::string> ExpectOp(std::string_view op) { return c_.ExpectOp(op); }
  std::expected<std::string, std::string> ExpectName() { return c_.ExpectName(); }

  TokenCursor& c_;
};

}  // namespace

std::expected<ExprPtr, std::string> ParseExpression(TokenCursor& c) {
  return ExprParser(c).ParseExpr();
}

std::expected<ExprPtr, std::string> ParseOrExpression(TokenCursor& c) {
  return ExprParser(c).ParseOr();
}

}  // namespace kvroute::tokenize::jinja
