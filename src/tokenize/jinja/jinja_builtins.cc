#include "tokenize/jinja/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tokenize/jinja/jinja_parser.h"
#include "tokenize/jinja/jinja_pystr.h"

namespace kvroute::tokenize::jinja {

using py::Arg;
using py::AsciiCase;
using py::GetAttribute;
using py::Items;
using py::Replace;
using py::Strip;
using py::Title;
using py::ToList;
using py::ToU32;
using py::ToU8;
using Error = std::unexpected<std::string>;

const Value* StringArg(CallArgs& args, std::size_t index, std::string_view kw) {
  const Value* v = Arg(args, index, kw);
  return v && v->IsString() ? v : nullptr;
}

std::int64_t IntArg(CallArgs& args, std::size_t index, std::string_view kw, std::int64_t fallback) {
  const Value* v = Arg(args, index, kw);
  return v && v->kind == Value::Kind::kInt ? v->i : fallback;
}

namespace {

// Whether `item` is kept by select/reject (`at` 0) or selectattr/rejectattr (`at` 1, after
// the attribute name): the test named by positional argument `at`, given the arguments
// after it, or the item's truthiness when no test is named.
std::expected<bool, std::string> PassesTest(std::string_view filter, const Value& item,
                                            const CallArgs& args, std::size_t at) {
  if (args.args.size() <= at) return item.Truthy();
  if (!args.args[at].IsString()) return Error(std::string(filter) + " needs a test name");
  CallArgs test_args;
  test_args.args.assign(args.args.begin() + static_cast<std::ptrdiff_t>(at) + 1, args.args.end());
  auto r = ApplyTest(args.args[at].s, item, test_args);
  if (!r) return Error(r.error());
  return r->b;
}

}  // namespace

std::expected<std::int64_t, std::string> Length(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return static_cast<std::int64_t>(ToU32(v.s).size());
    case Value::Kind::kList:
      return static_cast<std::int64_t>(v.list->size());
    case Value::Kind::kDict:
      return static_cast<std::int64_t>(v.dict->items.size());
    default:
      return Error("object has no length");
  }
}

Result Slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const auto is_set = [](const Value& v) { return !v.IsUndefined() && !v.IsNone(); };
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (is_set(*v) && v->kind != Value::Kind::kInt) return Error("slice indices must be integers");
  }
  const std::int64_t step = is_set(step_v) ? step_v.i : 1;
  if (step == 0) return Error("slice step cannot be zero");
  std::u32string u;
  std::int64_t n;
  if (obj.IsList()) {
    n = static_cast<std::int64_t>(obj.list->size());
  } else if (obj.IsString()) {
    u = ToU32(obj.s);
    n = static_cast<std::int64_t>(u.size());
  } else {
    return Error("object is not sliceable");
  }
  const auto clamp = [&](const Value& v, std::int64_t def) {
    if (!is_set(v)) return def;
    std::int64_t x = v.i;
    if (x < 0) x += n;
    if (step > 0) return std::clamp<std::int64_t>(x, 0, n);
    return std::clamp<std::int64_t>(x, -1, n - 1);
  };
  const std::int64_t start = clamp(start_v, step > 0 ? 0 : n - 1);
  const std::int64_t stop = clamp(stop_v, step > 0 ? n : -1);
  List items;
  std::u32string chars;
  for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
    if (obj.IsList()) {
      items.push_back((*obj.list)[static_cast<std::size_t>(k)]);
    } else {
      chars.push_back(u[static_cast<std::size_t>(k)]);
    }
  }
  if (obj.IsList()) return Value::MakeList(std::move(items));
  return Value::Str(ToU8(chars));
}

Result ApplyFilter(std::string_view name, const Value& in, CallArgs& args) {
  if (name == "tojson") {
    return Value::Str(in.ToJson(static_cast<int>(IntArg(args, 0, "indent", -1))));
  }
  if (name == "length" || name == "count") {
    auto n = Length(in);
    if (!n) return Error(n.error());
    return Value::Int(*n);
  }
  if (name == "safe") return in;
  if (name == "string") return Value::Str(in.ToString());
  if (name == "default" || name == "d") {
    const Value* fallback = Arg(args, 0, "default_value");
    const Value* boolean = Arg(args, 1, "boolean");
    const bool use_fallback = in.IsUndefined() || (boolean && boolean->Truthy() && !in.Truthy());
    if (use_fallback) return fallback ? *fallback : Value::Str("");
    return in;
  }
  if (name == "list") return ToList(in);
  if (name == "items") return Items(in);
  if (name == "first" || name == "last") {
    auto l = ToList(in);
    if (!l) return l;
    if (l->list->empty()) return Value{};
    return name == "first" ? l->list->front() : l->list->back();
  }
  if (name == "reverse") {
    if (in.IsString()) return Slice(in, Value{}, Value{}, Value::Int(-1));
    auto l = ToList(in);
    if (!l) return l;
    std::reverse(l->list->begin(), l->list->end());
    return l;
  }
  if (name == "join") {
    const Value* sep = Arg(args, 0, "d");
    const Value* attr = Arg(args, 1, "attribute");
    auto l = ToList(in);
    if (!l) return l;
    std::string out;
    bool first = true;
    for (const Value& x : *l->list) {
      if (!first && sep) out += sep->ToString();
      out += attr ? GetAttribute(x, attr->s).ToString() : x.ToString();
      first = false;
    }
    return Value::Str(std::move(out));
  }
  if (name == "abs") {
    if (in.kind == Value::Kind::kInt) return Value::Int(in.i < 0 ? -in.i : in.i);
    if (in.kind == Value::Kind::kFloat) return Value::Float(std::fabs(in.f));
    return Error("abs needs a number");
  }
  if (name == "int") {
    if (in.kind == Value::Kind::kInt) return in;
    if (in.kind == Value::Kind::kFloat) return Value::Int(static_cast<std::int64_t>(in.f));
    if (in.kind == Value::Kind::kBool) return Value::Int(in.b);
    if (in.IsString()) {
      const std::string t = Strip(in.s, nullptr, true, true);
      std::int64_t x = 0;
      const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
      return Value::Int(ec == std::errc() && ptr == t.data() + t.size() ? x : 0);
    }
    return Value::Int(0);
  }
  if (name == "float") {
    if (in.kind == Value::Kind::kInt) return Value::Float(static_cast<double>(in.i));
    if (in.kind == Value::Kind::kFloat) return in;
    return Value::Float(0);
  }
  if (!in.IsString() && (name == "trim" || name == "upper" || name == "lower" || name == "title" ||
                         name == "capitalize" || name == "replace")) {
    return Error(std::string(name) + " needs a string");
  }
  if (name == "trim") return Value::Str(Strip(in.s, Arg(args, 0, "chars"), true, true));
  if (name == "upper") return Value::Str(AsciiCase(in.s, true));
  if (name == "lower") return Value::Str(AsciiCase(in.s, false));
  if (name == "title") return Value::Str(Title(in.s));
  if (name == "capitalize") {
    std::string s = AsciiCase(in.s, false);
    if (!s.empty()) s[0] = static_cast<char>(std::toupper(s[0]));
    return Value::Str(s);
  }
  if (name == "replace") {
    const Value* from = StringArg(args, 0, "old");
    const Value* to = StringArg(args, 1, "new");
    if (!from || !to) return Error("replace needs strings");
    return Value::Str(Replace(in.s, from->s, to->s, IntArg(args, 2, "count", -1)));
  }
  if (name == "selectattr" || name == "rejectattr") {
    auto l = ToList(in);
    if (!l) return l;
    const Value* attr = StringArg(args, 0, "attribute");
    if (!attr) return Error(std::string(name) + " needs an attribute name");
    List out;
    for (const Value& x : *l->list) {
      auto keep = PassesTest(name, GetAttribute(x, attr->s), args, 1);
      if (!keep) return Error(keep.error());
      if (*keep == (name == "selectattr")) out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "select" || name == "reject") {
    // select/reject(test_name, test args...): keep items for which the test is true/false;
    // without a test, truthiness.
    auto l = ToList(in);
    if (!l) return l;
    List out;
    for (const Value& x : *l->list) {
      auto keep = PassesTest(name, x, args, 0);
      if (!keep) return Error(keep.error());
      if (*keep == (name == "select")) out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "map") {
    auto l = ToList(in);
    if (!l) return l;
    List out;
    if (const Value* attr = args.Kwarg("attribute")) {
      const Value* fallback = args.Kwarg("default");
      for (const Value& x : *l->list) {
        Value a = GetAttribute(x, attr->s);
        out.push_back(a.IsUndefined() && fallback ? *fallback : a);
      }
    } else if (!args.args.empty() && args.args[0].IsString()) {
      CallArgs rest;
      rest.args.assign(args.args.begin() + 1, args.args.end());
      for (const Value& x : *l->list) {
        auto r = ApplyFilter(args.args[0].s, x, rest);
        if (!r) return r;
        out.push_back(std::move(*r));
      }
    } else {
      return Error("map needs a filter name or attribute=");
    }
    return Value::MakeList(std::move(out));
  }
  return Error("unsupported filter '" + std::string(name) + "'");
}

Result ApplyTest(std::string_view name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  const Value* arg = args.args.empty() ? nullptr : &args.args[0];
  bool r;
  if (name == "defined")
    r = !v.IsUndefined();
  else if (name == "undefined")
    r = v.IsUndefined();
  else if (name == "none")
    r = v.IsNone();
  else if (name == "string")
    r = v.IsString();
  else if (name == "number")
    r = v.kind == K::kInt || v.kind == K::kFloat;
  else if (name == "integer")
    r = v.kind == K::kInt;
  else if (name == "float")
    r = v.kind == K::kFloat;
  else if (name == "boolean")
    r = v.kind == K::kBool;
  else if (name == "true")
    r = v.kind == K::kBool && v.b;
  else if (name == "false")
    r = v.kind == K::kBool && !v.b;
  else if (name == "mapping")
    r = v.IsDict();
  else if (name == "sequence")
    r = v.IsList() || v.IsString() || v.IsDict();
  else if (name == "iterable")
    r = v.IsList() || v.IsString() || v.IsDict();
  else if (name == "callable")
    r = v.kind == K::kFunction;
  else if (name == "odd" || name == "even" || name == "divisibleby") {
    if (v.kind != K::kInt) return Error(std::string(name) + " needs an integer");
    if (name == "divisibleby") {
      if (!arg || arg->kind != K::kInt || arg->i == 0) return Error("divisibleby needs a number");
      r = v.i % arg->i == 0;
    } else {
      r = (v.i % 2 != 0) == (name == "odd");
    }
  } else if (name == "eq" || name == "equalto" || name == "sameas") {
    r = arg && Equal(v, *arg);
  } else if (name == "ne") {
    r = !(arg && Equal(v, *arg));
  } else if (name == "in") {
    if (!arg) return Error("in needs an argument");
    if (arg->IsList()) {
      r = std::any_of(arg->list->begin(), arg->list->end(),
                      [&](const Value& x) { return Equal(x, v); });
    } else if (arg->IsString() && v.IsString()) {
      r = arg->s.find(v.s) != std::string::npos;
    } else if (arg->IsDict() && v.IsString()) {
      r = arg->dict->Find(v.s) != nullptr;
    } else {
      return Error("bad operands for 'in'");
    }
  } else if (name == "lower" || name == "upper") {
    r = v.IsString() && AsciiCase(v.s, name == "upper") == v.s;
  } else {
    return Error("unsupported test '" + std::string(name) + "'");
  }
  return Value::Bool(r);
}

bool IsKnownFilter(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "tojson",  "length",     "count",      "safe",   "string",  "default", "d",
      "list",    "items",      "first",      "last",   "reverse", "join",    "abs",
      "int",     "float",      "trim",       "upper",  "lower",   "title",   "capitalize",
      "replace", "selectattr", "rejectattr", "select", "reject",  "map"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

bool IsKnownTest(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "defined",     "undefined", "none",    "string",   "number",   "integer",  "float", "boolean",
      "true",        "false",     "mapping", "sequence", "iterable", "callable", "odd",   "even",
      "divisibleby", "eq",        "equalto", "sameas",   "ne",       "in",       "lower", "upper"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

bool IsKnownGlobalFunction(std::string_view n) {
  return n == "namespace" || n == "dict" || n == "range" || n == "raise_exception";
}

bool IsKnownMethod(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "startswith", "endswith", "strip",      "lstrip",  "rstrip", "split", "upper",
      "lower",      "title",    "capitalize", "replace", "find",   "join",  "items",
      "keys",       "values",   "get",        "append",  "index"};
  return std::find(std::begin(kNames), std::end(kNames), n) != std::end(kNames);
}

}  // namespace kvroute::tokenize::jinja
