// str, dict and list methods and the global functions of kvroute's Jinja subset.
#include <algorithm>

#include "tokenize/jinja/jinja_builtins.h"
#include "tokenize/jinja/jinja_pystr.h"

namespace kvroute::tokenize::jinja {

using py::Arg;
using py::AsciiCase;
using py::Items;
using py::Split;
using py::Strip;
using py::StrList;
using py::ToList;
using py::ToU32;
using Error = std::unexpected<std::string>;

Result CallMethod(const Value& obj, std::string_view name, CallArgs& args) {
  if (obj.IsString()) {
    const std::string& s = obj.s;
    if (name == "startswith" || name == "endswith") {
      const Value* p = Arg(args, 0, "prefix");
      if (!p) return Error(std::string(name) + "() needs an argument");
      const auto test = [&](const std::string& x) {
        return name == "startswith" ? s.starts_with(x) : s.ends_with(x);
      };
      if (p->IsString()) return Value::Bool(test(p->s));
      if (p->IsList()) {
        for (const Value& x : *p->list) {
          if (x.IsString() && test(x.s)) return Value::Bool(true);
        }
        return Value::Bool(false);
      }
      return Error(std::string(name) + "() needs a string or tuple");
    }
    if (name == "strip") return Value::Str(Strip(s, Arg(args, 0, "chars"), true, true));
    if (name == "lstrip") return Value::Str(Strip(s, Arg(args, 0, "chars"), true, false));
    if (name == "rstrip") return Value::Str(Strip(s, Arg(args, 0, "chars"), false, true));
    if (name == "split") {
      const Value* sep = Arg(args, 0, "sep");
      if (sep && sep->IsString() && sep->s.empty()) return Error("empty separator");
      if (sep && !sep->IsString() && !sep->IsNone())
        return Error("split() separator must be a string");
      return StrList(Split(s, sep, IntArg(args, 1, "maxsplit", -1)));
    }
    if (name == "upper") return Value::Str(AsciiCase(s, true));
    if (name == "lower") return Value::Str(AsciiCase(s, false));
    if (name == "title" || name == "capitalize" || name == "replace") {
      return ApplyFilter(name, obj, args);
    }
    if (name == "find") {
      const Value* sub = StringArg(args, 0, "sub");
      if (!sub) return Error("find() needs a string");
      const std::size_t at = s.find(sub->s);
      if (at == std::string::npos) return Value::Int(-1);
      return Value::Int(static_cast<std::int64_t>(ToU32(std::string_view(s).substr(0, at)).size()));
    }
    if (name == "join") {
      const Value* items = Arg(args, 0, "iterable");
      if (!items) return Error("join() needs an argument");
      auto l = ToList(*items);
      if (!l) return l;
      std::string out;
      for (std::size_t k = 0; k < l->list->size(); ++k) {
        const Value& x = (*l->list)[k];
        if (!x.IsString()) return Error("join() items must be strings");
        if (k > 0) out += s;
        out += x.s;
      }
      return Value::Str(std::move(out));
    }
    return Error("str has no method '" + std::string(name) + "'");
  }
  if (obj.IsDict()) {
    if (name == "items") return Items(obj);
    if (name == "keys" || name == "values") {
      List out;
      for (const auto& [k, x] : obj.dict->items) out.push_back(name == "keys" ? Value::Str(k) : x);
      return Value::MakeList(std::move(out));
    }
    if (name == "get") {
      // Template dicts only have string keys, so any other key is simply absent (Python:
      // {'a': 1}.get(1) is None), never an error.
      const Value* key = StringArg(args, 0, "key");
      if (key != nullptr) {
        if (const Value* x = obj.dict->Find(key->s)) return *x;
      }
      const Value* fallback = Arg(args, 1, "default");
      return fallback ? *fallback : Value::None();
    }
    return Error("dict has no method '" + std::string(name) + "'");
  }
  if (obj.IsList()) {
    if (name == "append") {
      if (args.args.size() != 1) return Error("append() needs one argument");
      obj.list->push_back(args.args[0]);
      return Value::None();
    }
    if (name == "index") {
      if (args.args.empty()) return Error("index() needs an argument");
      for (std::size_t k = 0; k < obj.list->size(); ++k) {
        if (Equal((*obj.list)[k], args.args[0])) return Value::Int(static_cast<std::int64_t>(k));
      }
      return Error("value is not in list");
    }
    return Error("list has no method '" + std::string(name) + "'");
  }
  return Error("cannot call method '" + std::string(name) + "' on this value");
}

Result CallGlobal(std::string_view name, CallArgs& args) {
  if (name == "namespace" || name == "dict") {
    Value ns = Value::MakeDict();
    ns.is_namespace = name == "namespace";
    for (const Value& positional : args.args) {  // namespace({...}) / dict({...})
      if (positional.IsDict()) {
        for (const auto& [k, v] : positional.dict->items) ns.dict->Set(k, v);
      }
    }
    for (auto& [k, v] : args.kwargs) ns.dict->Set(k, v);
    return ns;
  }
  if (name == "range") {
    std::int64_t start = 0, stop = 0, step = 1;
    for (const Value& a : args.args) {
      if (a.kind != Value::Kind::kInt) return Error("range() needs integers");
    }
    if (args.args.size() == 1) {
      stop = args.args[0].i;
    } else if (args.args.size() >= 2) {
      start = args.args[0].i;
      stop = args.args[1].i;
      if (args.args.size() == 3) step = args.args[2].i;
    } else {
      return Error("range() needs arguments");
    }
    if (step == 0) return Error("range() step cannot be zero");
    List out;
    for (std::int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
      if (out.size() > 1000000) return Error("range() too large");
      out.push_back(Value::Int(k));
    }
    return Value::MakeList(std::move(out));
  }
  if (name == "raise_exception") {
    return Error("chat template raised: " +
                 (args.args.empty() ? std::string() : args.args[0].ToString()));
  }
  return Error("unsupported function '" + std::string(name) + "'");
}

}  // namespace kvroute::tokenize::jinja
