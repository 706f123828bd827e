// Binary operators and subscripts of kvroute's Jinja subset, with Python semantics
// (floor division and modulo round toward negative infinity; + joins strings and lists).
#include <algorithm>
#include <cmath>

#include "tokenize/jinja/jinja_builtins.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

// The most a string repetition ("x" * n) may produce.
constexpr std::size_t kMaxRepeatBytes = 64u << 20;

}  // namespace

Result BinaryOp(const std::string& op, Value a, const Value& b) {
  using K = Value::Kind;
  if (op == "==") return Value::Bool(Equal(a, b));
  if (op == "!=") return Value::Bool(!Equal(a, b));
  if (op == "in" || op == "not in") {
    bool found;
    if (b.IsList()) {
      found =
          std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return Equal(x, a); });
    } else if (b.IsString() && a.IsString()) {
      found = b.s.find(a.s) != std::string::npos;
    } else if (b.IsDict() && a.IsString()) {
      found = b.dict->Find(a.s) != nullptr;
    } else {
      return Error("unsupported operands for '" + op + "'");
    }
    return Value::Bool(op == "in" ? found : !found);
  }
  if (op == "~") return Value::Str(a.ToString() + b.ToString());
  const bool numeric = (a.kind == K::kInt || a.kind == K::kFloat || a.kind == K::kBool) &&
                       (b.kind == K::kInt || b.kind == K::kFloat || b.kind == K::kBool);
  const auto num = [](const Value& v) {
    return v.kind == K::kInt     ? static_cast<double>(v.i)
           : v.kind == K::kFloat ? v.f
                                 : (v.b ? 1.0 : 0.0);
  };
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    int cmp;
    if (numeric) {
      const double x = num(a), y = num(b);
      cmp = x < y ? -1 : x > y ? 1 : 0;
    } else if (a.IsString() && b.IsString()) {
      cmp = a.s.compare(b.s);
    } else {
      return Error("cannot compare these values with " + op);
    }
    const bool r = op == "<" ? cmp < 0 : op == ">" ? cmp > 0 : op == "<=" ? cmp <= 0 : cmp >= 0;
    return Value::Bool(r);
  }
  if (op == "+") {
    if (a.IsString() && b.IsString()) {
      // `a` is a temporary: appending keeps a chain of + linear. Growing to twice the need
      // lets the next short operand (a closing tag after a message) append without another
      // copy of a long string.
      const std::size_t need = a.s.size() + b.s.size();
      if (a.s.capacity() < need) a.s.reserve(2 * need);
      a.s += b.s;
      return a;
    }
    if (a.IsList() && b.IsList()) {
      List items = *a.list;
      items.insert(items.end(), b.list->begin(), b.list->end());
      return Value::MakeList(std::move(items));
    }
  }
  if (op == "*" && a.IsString() && b.kind == K::kInt) {
    std::string out;
    for (std::int64_t k = 0; k < b.i && out.size() < kMaxRepeatBytes; ++k) out += a.s;
    return Value::Str(std::move(out));
  }
  if (!numeric) return Error("unsupported operand types for " + op);
  const bool ints = a.kind != K::kFloat && b.kind != K::kFloat;
  const std::int64_t x = a.kind == K::kInt ? a.i : static_cast<std::int64_t>(num(a));
  const std::int64_t y = b.kind == K::kInt ? b.i : static_cast<std::int64_t>(num(b));
  if (op == "+") return ints ? Value::Int(x + y) : Value::Float(num(a) + num(b));
  if (op == "-") return ints ? Value::Int(x - y) : Value::Float(num(a) - num(b));
  if (op == "*") return ints ? Value::Int(x * y) : Value::Float(num(a) * num(b));
  if (num(b) == 0) return Error("division by zero");
  if (op == "/") return Value::Float(num(a) / num(b));
  if (op == "//") {
    if (ints) return Value::Int(x / y - ((x % y != 0) && ((x < 0) != (y < 0)) ? 1 : 0));
    return Value::Float(std::floor(num(a) / num(b)));
  }
  if (op == "%") {
    if (ints) {
      std::int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::Int(m);
    }
    const double m = std::fmod(num(a), num(b));
    return Value::Float(m != 0 && ((m < 0) != (num(b) < 0)) ? m + num(b) : m);
  }
  return Error("unsupported operator " + op);
}

Result Subscript(const Value& obj, const Value& key) {
  if (obj.IsDict()) {
    if (!key.IsString()) return Value{};
    const Value* v = obj.dict->Find(key.s);
    return v ? *v : Value{};
  }
  if (obj.IsList() || obj.IsString()) {
    if (key.kind != Value::Kind::kInt) return Error("list indices must be integers");
    auto n = Length(obj);
    std::int64_t k = key.i < 0 ? key.i + *n : key.i;
    if (k < 0 || k >= *n) return Value{};
    if (obj.IsList()) return (*obj.list)[static_cast<std::size_t>(k)];
    return Slice(obj, Value::Int(k), Value::Int(k + 1), Value{});
  }
  if (obj.IsUndefined()) return Error("subscript of an undefined value");
  return Value{};
}

}  // namespace kvroute::tokenize::jinja
