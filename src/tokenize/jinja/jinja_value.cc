#include "tokenize/jinja/jinja_value.h"

#include <cmath>
#include <cstdio>

#include "tokenize/utf8.h"

namespace kvroute::tokenize::jinja {
namespace {

// JSON string literal as JSON.stringify / Python json.dumps(ensure_ascii=False) write it.
void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          *out += buf;
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

std::string FloatText(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == std::floor(f) && std::fabs(f) < 1e16) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", f);
    return buf;
  }
  // Shortest representation that round-trips, as Python's repr(float).
  for (int precision = 1; precision <= 17; ++precision) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, f);
    if (std::strtod(buf, nullptr) == f) return buf;
  }
  return std::to_string(f);
}

void AppendPyStringRepr(std::string_view s, std::string* out) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  out->push_back(q);
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (ch == q || ch == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (ch == '\n') {
      *out += "\\n";
    } else if (ch == '\r') {
      *out += "\\r";
    } else if (ch == '\t') {
      *out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      *out += buf;
    } else {
      out->push_back(ch);
    }
  }
  out->push_back(q);
}

void AppendJson(const Value& v, int indent, int depth, std::string* out) {
  const auto newline = [&](int d) {
    out->push_back('\n');
    out->append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
    case Value::Kind::kFunction:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.b ? "true" : "false";
      return;
    case Value::Kind::kInt:
      *out += std::to_string(v.i);
      return;
    case Value::Kind::kFloat:
      *out += FloatText(v.f);
      return;
    case Value::Kind::kString:
      AppendJsonString(v.s, out);
      return;
    case Value::Kind::kList: {
      out->push_back('[');
      bool first = true;
      for (const Value& item : *v.list) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        AppendJson(item, indent, depth + 1, out);
        first = false;
      }
      if (indent >= 0 && !v.list->empty()) newline(depth);
      out->push_back(']');
      return;
    }
    case Value::Kind::kDict: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.dict->items) {
        if (!first) *out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        AppendJsonString(key, out);
        *out += ": ";
        AppendJson(item, indent, depth + 1, out);
        first = false;
      }
      if (indent >= 0 && !v.dict->items.empty()) newline(depth);
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

Value Value::MakeList(List items) {
  Value v{.kind = Kind::kList};
  v.list = std::make_shared<List>(std::move(items));
  return v;
}

Value Value::MakeDict() {
  Value v{.kind = Kind::kDict};
  v.dict = std::make_shared<Dict>();
  return v;
}

Value Value::MakeFunction(Function fn) {
  Value v{.kind = Kind::kFunction};
  v.fn = std::make_shared<Function>(std::move(fn));
  return v;
}

bool Value::Truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b;
    case Kind::kInt:
      return i != 0;
    case Kind::kFloat:
      return f != 0;
    case Kind::kString:
      return !s.empty();
    case Kind::kList:
      return !list->empty();
    case Kind::kDict:
      return !dict->items.empty();
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string Value::ToString() const {
  switch (kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s;
    default:
      return Repr();
  }
}

std::string Value::Repr() const {
  std::string out;
  switch (kind) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i);
    case Kind::kFloat:
      return FloatText(f);
    case Kind::kString:
      AppendPyStringRepr(s, &out);
      return out;
    case Kind::kFunction:
      return "<function>";
    case Kind::kList: {
      out = "[";
      for (std::size_t k = 0; k < list->size(); ++k) {
        if (k > 0) out += ", ";
        out += (*list)[k].Repr();
      }
      return out + "]";
    }
    case Kind::kDict: {
      out = is_namespace ? "<Namespace {" : "{";
      bool first = true;
      for (const auto& [key, item] : dict->items) {
        if (!first) out += ", ";
        AppendPyStringRepr(key, &out);
        out += ": " + item.Repr();
        first = false;
      }
      return out + (is_namespace ? "}>" : "}");
    }
  }
  return out;
}

std::string Value::ToJson(int indent) const {
  std::string out;
  AppendJson(*this, indent, 0, &out);
  return out;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::Set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::Kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

bool Equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if ((a.kind == K::kInt || a.kind == K::kFloat || a.kind == K::kBool) &&
      (b.kind == K::kInt || b.kind == K::kFloat || b.kind == K::kBool)) {
    const double x = a.kind == K::kInt ? static_cast<double>(a.i) : a.kind == K::kFloat ? a.f : a.b;
    const double y = b.kind == K::kInt ? static_cast<double>(b.i) : b.kind == K::kFloat ? b.f : b.b;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.s == b.s;
    case K::kList:
      if (a.list->size() != b.list->size()) return false;
      for (std::size_t k = 0; k < a.list->size(); ++k) {
        if (!Equal((*a.list)[k], (*b.list)[k])) return false;
      }
      return true;
    case K::kDict:
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [key, v] : a.dict->items) {
        const Value* other = b.dict->Find(key);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
    case K::kFunction:
      return a.fn == b.fn;
    default:
      return false;
  }
}

}  // namespace kvroute::tokenize::jinja
