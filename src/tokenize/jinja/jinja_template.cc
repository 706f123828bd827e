#include "tokenize/jinja/jinja_template.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "tokenize/jinja/jinja_builtins.h"
#include "tokenize/jinja/jinja_parser.h"

namespace kvroute::tokenize::jinja {
namespace {

using Error = std::unexpected<std::string>;

enum class Flow { kNormal, kBreak, kContinue };

// Limits that keep a hostile template or request from running away.
constexpr std::size_t kMaxOutputBytes = 64u << 20;
constexpr int kMaxCallDepth = 64;

class Interpreter {
 public:
  Interpreter(const Value& vars, std::size_t size_hint) {
    out_.reserve(std::min(size_hint, kMaxOutputBytes));
    frames_.emplace_back();
    for (const auto& [k, v] : vars.dict->items) frames_[0][k] = v;
  }

  std::expected<std::string, std::string> Run(const Body& body) {
    auto r = Exec(body);
    if (!r) return Error(r.error());
    return std::move(out_);
  }

 private:
  using Frame = std::unordered_map<std::string, Value>;

  const Value* Lookup(const std::string& name) const {
    for (std::size_t k = frames_.size(); k-- > base_;) {
      if (k == 0) break;
      auto it = frames_[k].find(name);
      if (it != frames_[k].end()) return &it->second;
    }
    auto it = frames_[0].find(name);
    return it == frames_[0].end() ? nullptr : &it->second;
  }

  std::expected<Flow, std::string> Exec(const Body& body) {
    for (const auto& s : body) {
      auto r = ExecStmt(*s);
      if (!r) return r;
      if (*r != Flow::kNormal) return r;
      if (out_.size() > kMaxOutputBytes) return Error("chat template output too large");
    }
    return Flow::kNormal;
  }

  std::expected<Flow, std::string> ExecStmt(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::kText:
        out_ += s.text;
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        Value scratch;
        auto v = Ref(*s.exprs[0], &scratch);
        if (!v) return Error(v.error());
        if ((*v)->IsString()) {
          out_ += (*v)->s;
        } else {
          out_ += (*v)->ToString();
        }
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (std::size_t k = 0; k < s.exprs.size(); ++k) {
          auto c = Eval(*s.exprs[k]);
          if (!c) return Error(c.error());
          if (c->Truthy()) return Exec(s.bodies[k]);
        }
        if (s.bodies.size() > s.exprs.size()) return Exec(s.bodies.back());
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        return ExecFor(s);
      case Stmt::Kind::kSet: {
        auto v = Eval(*s.exprs[0]);
        if (!v) return Error(v.error());
        if (s.names.size() == 1) {
          frames_.back()[s.names[0]] = std::move(*v);
          return Flow::kNormal;
        }
        const Value* target = Lookup(s.names[0]);
        if (target == nullptr || !target->IsDict() || !target->is_namespace) {
          return Error("cannot set attribute '" + s.names[1] + "' of '" + s.names[0] +
                       "' (not a namespace)");
        }
        target->dict->Set(s.names[1], std::move(*v));
        return Flow::kNormal;
      }
      case Stmt::Kind::kSetBlock: {
        std::string saved = std::move(out_);
        out_.clear();
        auto r = Exec(s.bodies[0]);
        if (!r) return r;
        frames_.back()[s.names[0]] = Value::Str(std::move(out_));
        out_ = std::move(saved);
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        frames_.back()[s.names[0]] = MakeMacro(s);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  std::expected<Flow, std::string> ExecFor(const Stmt& s) {
    auto iterable = Eval(*s.exprs[0]);
    if (!iterable) return Error(iterable.error());
    List items;
    if (iterable->IsList()) {
      items = *iterable->list;
    } else if (iterable->IsDict()) {
      for (const auto& [k, v] : iterable->dict->items) items.push_back(Value::Str(k));
    } else if (iterable->IsString()) {
      CallArgs none;
      auto l = ApplyFilter("list", *iterable, none);
      if (!l) return Error(l.error());
      items = *l->list;
    } else if (!iterable->IsUndefined() && !iterable->IsNone()) {
      return Error("for loop over a value that is not iterable");
    } else if (iterable->IsNone()) {
      return Error("for loop over none");
    }
    frames_.emplace_back();
    const auto bind = [&](const Value& item) -> std::expected<void, std::string> {
      if (s.names.size() == 1) {
        frames_.back()[s.names[0]] = item;
        return {};
      }
      if (!item.IsList() || item.list->size() != s.names.size()) {
        return Error("cannot unpack loop item into " + std::to_string(s.names.size()) + " names");
      }
      for (std::size_t k = 0; k < s.names.size(); ++k) frames_.back()[s.names[k]] = (*item.list)[k];
      return {};
    };
    // The loop filter ("for x in xs if cond") selects items before loop.* is computed.
    if (s.exprs.size() > 1) {
      List kept;
      for (const Value& item : items) {
        if (auto r = bind(item); !r) return PopWith(Error(r.error()));
        auto c = Eval(*s.exprs[1]);
        if (!c) return PopWith(Error(c.error()));
        if (c->Truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    const auto n = static_cast<std::int64_t>(items.size());
    for (std::int64_t k = 0; k < n; ++k) {
      if (auto r = bind(items[static_cast<std::size_t>(k)]); !r) return PopWith(Error(r.error()));
      SetLoopValue(items, k, &frames_.back()["loop"]);
      auto r = Exec(s.bodies[0]);
      if (!r) return PopWith(Error(r.error()));
      if (*r == Flow::kBreak) break;
    }
    if (n == 0 && s.bodies.size() > 1) {
      auto r = Exec(s.bodies[1]);
      if (!r) return PopWith(Error(r.error()));
    }
    frames_.pop_back();
    return Flow::kNormal;
  }

  // Makes *slot the `loop` object of iteration k. The dict of the previous iteration is
  // updated in place unless the body kept a reference to it (e.g. {% set l = loop %}), which
  // saves building nine entries per iteration; a kept dict is left as it was.
  static void SetLoopValue(const List& items, std::int64_t k, Value* slot) {
    const auto n = static_cast<std::int64_t>(items.size());
    const auto at = [&](std::int64_t j) { return items[static_cast<std::size_t>(j)]; };
    if (!slot->IsDict() || slot->is_namespace || slot->dict.use_count() != 1 ||
        slot->dict->items.size() != 9) {
      *slot = Value::MakeDict();
      auto& d = slot->dict->items;
      d.reserve(9);
      for (const char* key : {"index0", "index", "revindex0", "revindex", "first", "last", "length",
                              "previtem", "nextitem"}) {
        d.emplace_back(key, Value{});
      }
    }
    auto& d = slot->dict->items;
    d[0].second = Value::Int(k);
    d[1].second = Value::Int(k + 1);
    d[2].second = Value::Int(n - k - 1);
    d[3].second = Value::Int(n - k);
    d[4].second = Value::Bool(k == 0);
    d[5].second = Value::Bool(k == n - 1);
    d[6].second = Value::Int(n);
    d[7].second = k > 0 ? at(k - 1) : Value{};
    d[8].second = k + 1 < n ? at(k + 1) : Value{};
  }

  std::expected<Flow, std::string> PopWith(Error e) {
    frames_.pop_back();
    return e;
  }

  Value MakeMacro(const Stmt& s) {
    const Stmt* macro = &s;
    return Value::MakeFunction([this, macro](CallArgs& args) -> std::expected<Value, std::string> {
      if (++depth_ > kMaxCallDepth) return Error("macro recursion too deep");
      Frame frame;
      const std::size_t nparams = macro->names.size() - 1;
      if (args.args.size() > nparams)
        return Error("too many arguments to macro " + macro->names[0]);
      for (std::size_t k = 0; k < nparams; ++k) {
        const std::string& p = macro->names[k + 1];
        if (k < args.args.size()) {
          frame[p] = args.args[k];
        } else if (const Value* kw = args.Kwarg(p)) {
          frame[p] = *kw;
        } else if (k >= macro->defaults_from && k - macro->defaults_from < macro->exprs.size()) {
          auto d = Eval(*macro->exprs[k - macro->defaults_from]);
          if (!d) return Error(d.error());
          frame[p] = std::move(*d);
        }
      }
      // A macro sees the template's globals and its parameters, not the caller's locals.
      const std::size_t saved_base = base_;
      frames_.push_back(std::move(frame));
      base_ = frames_.size() - 1;
      std::string saved_out = std::move(out_);
      out_.clear();
      auto r = Exec(macro->bodies[0]);
      std::string result = std::move(out_);
      out_ = std::move(saved_out);
      frames_.pop_back();
      base_ = saved_base;
      --depth_;
      if (!r) return Error(r.error());
      return Value::Str(std::move(result));
    });
  }

  // Evaluates `e` without copying when it names an existing value (a variable, a dict entry or
  // a list item): returns a pointer to it, or to *scratch holding a computed value. The
  // pointer is valid until the next statement runs, so callers use it before evaluating
  // anything else.
  std::expected<const Value*, std::string> Ref(const Expr& e, Value* scratch) {
    if (e.kind == Expr::Kind::kName) {
      if (const Value* v = Lookup(e.name)) return v;
      *scratch = Value{};
      return scratch;
    }
    if (e.kind == Expr::Kind::kAttr || e.kind == Expr::Kind::kItem) {
      Value key_scratch;
      const Value* key = nullptr;
      if (e.kind == Expr::Kind::kItem) {
        auto k = Eval(*e.kids[1]);
        if (!k) return Error(k.error());
        key_scratch = std::move(*k);
        key = &key_scratch;
      }
      Value obj_scratch;
      auto obj = Ref(*e.kids[0], &obj_scratch);
      if (!obj) return obj;
      const Value& o = **obj;
      // A computed container dies with obj_scratch: copy out of it instead of pointing in.
      const auto found = [&](const Value* v) -> const Value* {
        if (*obj != &obj_scratch) return v;
        *scratch = *v;
        return scratch;
      };
      if (o.IsDict() && o.dict) {
        const std::string& name = e.kind == Expr::Kind::kAttr ? e.name : key->s;
        if (e.kind == Expr::Kind::kAttr || key->IsString()) {
          if (const Value* v = o.dict->Find(name)) return found(v);
          *scratch = Value{};
          return scratch;
        }
      }
      if (e.kind == Expr::Kind::kItem && o.IsList() && key->kind == Value::Kind::kInt) {
        const auto n = static_cast<std::int64_t>(o.list->size());
        const std::int64_t k = key->i < 0 ? key->i + n : key->i;
        if (k >= 0 && k < n) return found(&(*o.list)[static_cast<std::size_t>(k)]);
      }
    }
    auto v = Eval(e);
    if (!v) return Error(v.error());
    *scratch = std::move(*v);
    return scratch;
  }

  std::expected<Value, std::string> Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        const Value* v = Lookup(e.name);
        return v ? *v : Value{};
      }
      case Expr::Kind::kAttr: {
        Value scratch;
        auto obj = Ref(*e.kids[0], &scratch);
        if (!obj) return Error(obj.error());
        if ((*obj)->IsUndefined()) return Error("'" + e.name + "' of an undefined value");
        if ((*obj)->IsDict()) {
          const Value* v = (*obj)->dict->Find(e.name);
          return v ? *v : Value{};
        }
        return Value{};
      }
      case Expr::Kind::kItem: {
        auto key = Eval(*e.kids[1]);
        if (!key) return key;
        Value scratch;
        auto obj = Ref(*e.kids[0], &scratch);
        if (!obj) return Error(obj.error());
        return Subscript(**obj, *key);
      }
      case Expr::Kind::kSlice: {
        auto obj = Eval(*e.kids[0]);
        if (!obj) return obj;
        Value parts[3];
        for (int k = 0; k < 3; ++k) {
          if (e.kids[k + 1]) {
            auto p = Eval(*e.kids[k + 1]);
            if (!p) return p;
            parts[k] = std::move(*p);
          }
        }
        return Slice(*obj, parts[0], parts[1], parts[2]);
      }
      case Expr::Kind::kCall:
        return EvalCall(e);
      case Expr::Kind::kFilter:
      case Expr::Kind::kTest: {
        CallArgs args;
        if (auto r = EvalArgs(e, 1, &args); !r) return Error(r.error());
        Value scratch;
        auto in = Ref(*e.kids[0], &scratch);
        if (!in) return Error(in.error());
        return e.kind == Expr::Kind::kFilter ? ApplyFilter(e.name, **in, args)
                                             : NegateIf(ApplyTest(e.name, **in, args), e.negated);
      }
      case Expr::Kind::kNot: {
        auto v = Eval(*e.kids[0]);
        if (!v) return v;
        return Value::Bool(!v->Truthy());
      }
      case Expr::Kind::kNeg: {
        auto v = Eval(*e.kids[0]);
        if (!v) return v;
        if (v->kind == Value::Kind::kInt) return Value::Int(-v->i);
        if (v->kind == Value::Kind::kFloat) return Value::Float(-v->f);
        return Error("bad operand for unary -");
      }
      case Expr::Kind::kBinary:
        return EvalBinary(e);
      case Expr::Kind::kTernary: {
        auto c = Eval(*e.kids[1]);
        if (!c) return c;
        if (c->Truthy()) return Eval(*e.kids[0]);
        if (e.kids[2]) return Eval(*e.kids[2]);
        return Value{};
      }
      case Expr::Kind::kList: {
        List items;
        for (const auto& k : e.kids) {
          auto v = Eval(*k);
          if (!v) return v;
          items.push_back(std::move(*v));
        }
        return Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Value d = Value::MakeDict();
        for (std::size_t k = 0; k + 1 < e.kids.size(); k += 2) {
          auto key = Eval(*e.kids[k]);
          if (!key) return key;
          if (!key->IsString()) return Error("dict literal keys must be strings");
          auto v = Eval(*e.kids[k + 1]);
          if (!v) return v;
          d.dict->Set(key->s, std::move(*v));
        }
        return d;
      }
    }
    return Error("unknown expression");
  }

  static std::expected<Value, std::string> NegateIf(std::expected<Value, std::string> r, bool neg) {
    if (r && neg) return Value::Bool(!r->b);
    return r;
  }

  std::expected<void, std::string> EvalArgs(const Expr& e, std::size_t first, CallArgs* args) {
    const std::size_t nkw = e.kw_names.size();
    const std::size_t npos = e.kids.size() - first - nkw;
    for (std::size_t k = first; k < e.kids.size(); ++k) {
      auto v = Eval(*e.kids[k]);
      if (!v) return Error(v.error());
      if (k - first < npos) {
        args->args.push_back(std::move(*v));
      } else {
        args->kwargs.emplace_back(e.kw_names[k - first - npos], std::move(*v));
      }
    }
    return {};
  }

  std::expected<Value, std::string> EvalCall(const Expr& e) {
    const Expr& callee = *e.kids[0];
    CallArgs args;
    if (auto r = EvalArgs(e, 1, &args); !r) return Error(r.error());
    if (callee.kind == Expr::Kind::kAttr) {
      Value scratch;
      auto ref = Ref(*callee.kids[0], &scratch);
      if (!ref) return Error(ref.error());
      const Value obj_holder = (*ref)->IsDict() || (*ref)->IsList() ? **ref : Value{};
      const Value& obj = (*ref)->IsDict() || (*ref)->IsList() ? obj_holder : **ref;
      if (obj.IsDict()) {
        const Value* f = obj.dict->Find(callee.name);
        if (f != nullptr && f->kind == Value::Kind::kFunction) return (*f->fn)(args);
      }
      return CallMethod(obj, callee.name, args);
    }
    if (callee.kind == Expr::Kind::kName) {
      const Value* f = Lookup(callee.name);
      if (f != nullptr && f->kind == Value::Kind::kFunction) return (*f->fn)(args);
      return CallGlobal(callee.name, args);
    }
    auto f = Eval(callee);
    if (!f) return f;
    if (f->kind != Value::Kind::kFunction) return Error("value is not callable");
    return (*f->fn)(args);
  }

  std::expected<Value, std::string> EvalBinary(const Expr& e) {
    const std::string& op = e.name;
    auto a = Eval(*e.kids[0]);
    if (!a) return a;
    if (op == "and") return a->Truthy() ? Eval(*e.kids[1]) : a;
    if (op == "or") return a->Truthy() ? a : Eval(*e.kids[1]);
    Value b_scratch;
    auto b_ref = Ref(*e.kids[1], &b_scratch);
    if (!b_ref) return Error(b_ref.error());
    const Value* b = *b_ref;
    return BinaryOp(op, std::move(*a), *b);
  }

  std::vector<Frame> frames_;
  std::size_t base_ = 0;  // frames below base_ (except globals) are hidden inside a macro
  int depth_ = 0;
  std::string out_;
};

}  // namespace

std::expected<Template, std::string> Template::Parse(std::string_view source) {
  auto body = jinja::Parse(source);
  if (!body) return Error(body.error());
  Template t;
  t.body_ = std::make_shared<const Body>(std::move(*body));
  return t;
}

std::expected<std::string, std::string> Template::Render(const Value& vars,
                                                         std::size_t size_hint) const {
  if (!vars.IsDict()) return Error("template variables must be a dict");
  Interpreter interp(vars, size_hint);
  return interp.Run(*body_);
}

}  // namespace kvroute::tokenize::jinja
