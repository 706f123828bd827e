// jinja::Value: the dynamic value of kvroute's Jinja2 subset (chat templates).
//
// Kinds follow Python/Jinja2: undefined, none, bool, int, float, string, list, dict (insertion
// ordered, as Python dicts and JSON objects are), namespace (a dict whose attributes `set`
// may assign) and callable (macros and built-in functions). Lists, dicts and namespaces are
// shared by reference, like Python objects.
//
// Thread safety: a Value is not synchronized; each render owns the values it creates, and the
// values of a request are built per render.
#pragma once

#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvroute::tokenize::jinja {

struct Value;
struct Dict;
using List = std::vector<Value>;
struct CallArgs;
using Function = std::function<std::expected<Value, std::string>(CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // dicts and namespaces
  std::shared_ptr<Function> fn;
  bool is_namespace = false;

  static Value None() { return Value{.kind = Kind::kNone}; }
  static Value Bool(bool v) { return Value{.kind = Kind::kBool, .b = v}; }
  static Value Int(std::int64_t v) { return Value{.kind = Kind::kInt, .i = v}; }
  static Value Float(double v) { return Value{.kind = Kind::kFloat, .f = v}; }
  static Value Str(std::string v) { return Value{.kind = Kind::kString, .s = std::move(v)}; }
  static Value MakeList(List items = {});
  static Value MakeDict();
  static Value MakeFunction(Function fn);

  bool IsUndefined() const { return kind == Kind::kUndefined; }
  bool IsNone() const { return kind == Kind::kNone; }
  bool IsString() const { return kind == Kind::kString; }
  bool IsList() const { return kind == Kind::kList; }
  bool IsDict() const { return kind == Kind::kDict; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat; }

  // Python truthiness.
  bool Truthy() const;
  // Jinja's {{ value }} text: str() in Python (None -> "None", True -> "True"), except that
  // undefined prints as "".
  std::string ToString() const;
  // Python repr() (used for lists and dicts printed as text).
  std::string Repr() const;
  // The "tojson" filter: JSON with ", " and ": " separators, non-ASCII kept, or pretty-printed
  // with `indent` spaces (then "," between items).
  std::string ToJson(int indent = -1) const;
};

struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(std::string_view key) const;
  void Set(const std::string& key, Value v);
};

// Arguments of a call: positional, then keyword.
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  const Value* Kwarg(std::string_view name) const;
};

bool Equal(const Value& a, const Value& b);

}  // namespace kvroute::tokenize::jinja
