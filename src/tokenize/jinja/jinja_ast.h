// Jinja syntax tree of kvroute's chat-template subset. Built once per template by
// jinja_parser.cc; evaluated per request by jinja_interpreter.cc.
//
// Ownership: a tree owns its children through unique_ptr. Thread safety: immutable after
// parsing; many renders may walk it at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenize/jinja/jinja_value.h"

namespace kvroute::tokenize::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // kids[0].name
    kItem,     // kids[0][kids[1]]
    kSlice,    // kids[0][kids[1]:kids[2]:kids[3]] (null kids are omitted parts)
    kCall,     // kids[0](kids[1..], kw_names for the last kw_names.size() kids)
    kFilter,   // kids[0] | name(kids[1..])
    kTest,     // kids[0] is [not] name(kids[1..])
    kNot,      // not kids[0]
    kNeg,      // -kids[0]
    kBinary,   // kids[0] name kids[1]; name is the operator (and, or, +, ==, in, not in, ...)
    kTernary,  // kids[0] if kids[1] else kids[2] (kids[2] may be null)
    kList,     // [kids...] (also tuples)
    kDict,     // {kids[0]: kids[1], ...}
  };
  Kind kind;
  Value literal;
  std::string name;
  std::vector<ExprPtr> kids;
  std::vector<std::string> kw_names;
  bool negated = false;
  std::size_t offset = 0;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kOutput,    // {{ exprs[0] }}
    kIf,        // exprs[k] -> bodies[k]; bodies[exprs.size()] is the else branch if present
    kFor,       // for names in exprs[0] [if exprs[1]]: bodies[0], else bodies[1]
    kSet,       // set names[0][.names[1]] = exprs[0]
    kSetBlock,  // set names[0] %} bodies[0] {% endset
    kMacro,     // macro names[0](names[1..], defaults exprs) bodies[0]
    kBreak,
    kContinue,
  };
  Kind kind;
  std::string text;
  std::vector<ExprPtr> exprs;
  std::vector<Body> bodies;
  std::vector<std::string> names;
  std::size_t defaults_from = 0;  // macro: index of the first parameter with a default
};

}  // namespace kvroute::tokenize::jinja
