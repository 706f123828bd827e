#include "tokenize/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "tokenize/jinja_parser.h"
#include "tokenize/utf8.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

std::u32string ToU32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    std::size_t len;
    const char32_t cp = utf8::Decode(s, i, &len);
    out.push_back(cp == 0xFFFFFFFF ? 0xFFFD : cp);
    i += len;
  }
  return out;
}

std::string ToU8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) utf8::Append(cp, &out);
  return out;
}

// Python's str.isspace().
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// str.strip/lstrip/rstrip with Python semantics: `chars` None strips whitespace. Only the
// ends are decoded, so stripping a long message costs what it strips.
std::string Strip(std::string_view s, const Value* chars, bool left, bool right) {
  const bool whitespace = chars == nullptr || chars->IsNone() || chars->IsUndefined();
  std::u32string set;
  if (!whitespace) set = ToU32(chars->s);
  const auto strip = [&](char32_t c) {
    return whitespace ? IsPySpace(c) : set.find(c) != std::u32string::npos;
  };
  std::size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      std::size_t len;
      const char32_t cp = utf8::Decode(s, b, &len);
      if (!strip(cp)) break;
      b += len;
    }
  }
  if (right) {
    while (e > b) {
      std::size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
      std::size_t len;
      const char32_t cp = utf8::Decode(s.substr(0, e), start, &len);
      if (start + len != e || !strip(cp)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::string AsciiCase(std::string s, bool upper) {
  for (char& c : s) {
    if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  }
  return s;
}

std::string Title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (alpha) {
      c = prev_cased ? static_cast<char>(std::tolower(c)) : static_cast<char>(std::toupper(c));
    }
    prev_cased = alpha;
  }
  return out;
}

std::vector<std::string> Split(std::string_view s, const Value* sep, std::int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep == nullptr || sep->IsNone()) {
    const std::u32string u = ToU32(s);
    std::size_t i = 0;
    while (i < u.size()) {
      while (i < u.size() && IsPySpace(u[i])) ++i;
      if (i >= u.size()) break;
      if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) {
        std::size_t e = u.size();
        while (e > i && IsPySpace(u[e - 1])) --e;
        parts.push_back(ToU8(std::u32string_view(u).substr(i, e - i)));
        break;
      }
      std::size_t j = i;
      while (j < u.size() && !IsPySpace(u[j])) ++j;
      parts.push_back(ToU8(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  std::size_t pos = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<std::int64_t>(parts.size()) >= maxsplit) break;
    const std::size_t hit = s.find(sep->s, pos);
    if (hit == std::string_view::npos) break;
    parts.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep->s.size();
  }
  parts.emplace_back(s.substr(pos));
  return parts;
}

Value StrList(const std::vector<std::string>& parts) {
  List items;
  for (const auto& p : parts) items.push_back(Value::Str(p));
  return Value::MakeList(std::move(items));
}

const Value* Arg(CallArgs& a, std::size_t index, std::string_view kw) {
  if (index < a.args.size()) return &a.args[index];
  return a.Kwarg(kw);
}

std::string Replace(std::string_view s, std::string_view from, std::string_view to,
                    std::int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every character (and at both ends).
    const std::u32string u = ToU32(s);
    std::int64_t n = 0;
    for (char32_t c : u) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      utf8::Append(c, &out);
    }
    if (count < 0 || n < count) out += to;
    return out;
  }
  std::size_t pos = 0;
  std::int64_t n = 0;
  while (count < 0 || n < count) {
    const std::size_t hit = s.find(from, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(to);
    pos = hit + from.size();
    ++n;
  }
  out.append(s.substr(pos));
  return out;
}

Result Items(const Value& v) {
  if (!v.IsDict()) return Error("items() needs a dict");
  List items;
  for (const auto& [k, x] : v.dict->items) items.push_back(Value::MakeList({Value::Str(k), x}));
  return Value::MakeList(std::move(items));
}

Result ToList(const Value& v) {
  if (v.IsList()) return Value::MakeList(*v.list);
  if (v.IsString()) {
    List items;
    for (char32_t c : ToU32(v.s)) items.push_back(Value::Str(ToU8(std::u32string(1, c))));
    return Value::MakeList(std::move(items));
  }
  if (v.IsDict()) {
    List items;
    for (const auto& [k, x] : v.dict->items) items.push_back(Value::Str(k));
    return Value::MakeList(std::move(items));
  }
  return Error("value is not iterable");
}

Value GetAttribute(const Value& v, std::string_view path) {
  Value cur = v;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    const std::size_t dot = path.find('.', pos);
    const std::string_view part = path.substr(pos, dot == std::string_view::npos ? dot : dot - pos);
    if (cur.IsDict()) {
      const Value* x = cur.dict->Find(part);
      cur = x ? *x : Value{};
    } else {
      return Value{};
    }
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return cur;
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
    const Value* indent = Arg(args, 0, "indent");
    return Value::Str(
        in.ToJson(indent && indent->kind == Value::Kind::kInt ? static_cast<int>(indent->i) : -1));
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
    const Value* from = Arg(args, 0, "old");
    const Value* to = Arg(args, 1, "new");
    const Value* count = Arg(args, 2, "count");
    if (!from || !to || !from->IsString() || !to->IsString()) return Error("replace needs strings");
    return Value::Str(
        Replace(in.s, from->s, to->s, count && count->kind == Value::Kind::kInt ? count->i : -1));
  }
  if (name == "selectattr" || name == "rejectattr") {
    auto l = ToList(in);
    if (!l) return l;
    const Value* attr = Arg(args, 0, "attribute");
    if (!attr || !attr->IsString()) return Error(std::string(name) + " needs an attribute name");
    List out;
    for (const Value& x : *l->list) {
      const Value a = GetAttribute(x, attr->s);
      bool keep;
      if (args.args.size() >= 2) {
        CallArgs test_args;
        test_args.args.assign(args.args.begin() + 2, args.args.end());
        auto r = ApplyTest(args.args[1].s, a, test_args);
        if (!r) return r;
        keep = r->b;
      } else {
        keep = a.Truthy();
      }
      if (keep == (name == "selectattr")) out.push_back(x);
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
      const Value* maxsplit = Arg(args, 1, "maxsplit");
      if (sep && sep->IsString() && sep->s.empty()) return Error("empty separator");
      if (sep && !sep->IsString() && !sep->IsNone())
        return Error("split() separator must be a string");
      return StrList(
          Split(s, sep, maxsplit && maxsplit->kind == Value::Kind::kInt ? maxsplit->i : -1));
    }
    if (name == "upper") return Value::Str(AsciiCase(s, true));
    if (name == "lower") return Value::Str(AsciiCase(s, false));
    if (name == "title" || name == "capitalize" || name == "replace") {
      return ApplyFilter(name, obj, args);
    }
    if (name == "find") {
      const Value* sub = Arg(args, 0, "sub");
      if (!sub || !sub->IsString()) return Error("find() needs a string");
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
      const Value* key = Arg(args, 0, "key");
      if (!key || !key->IsString()) return Error("get() needs a string key");
      if (const Value* x = obj.dict->Find(key->s)) return *x;
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

bool IsKnownFilter(std::string_view n) {
  static constexpr std::string_view kNames[] = {
      "tojson",  "length",     "count",      "safe",  "string",  "default", "d",
      "list",    "items",      "first",      "last",  "reverse", "join",    "abs",
      "int",     "float",      "trim",       "upper", "lower",   "title",   "capitalize",
      "replace", "selectattr", "rejectattr", "map"};
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
