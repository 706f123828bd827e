// kvroute_tokenize_tool: reads JSON Lines on stdin, writes one JSON line per input line.
//
//   kvroute_tokenize_tool --model <qwen3|llama3_1|deepseek_v3|model directory>
//
// Input lines (one object each):
//   {"op":"encode","text":"...","add_special_tokens":false}   -> {"ids":[...]}
//   {"op":"decode","ids":[...]}                                -> {"text":"..."}
//   {"op":"render","request":{OpenAI chat body}}              -> {"text":"..."}
//   {"op":"encode_chat","request":{...}}                      -> {"ids":[...]}
// Failures answer {"error":"..."} for that line; the tool keeps going.
#include <boost/json.hpp>
#include <iostream>
#include <string>

#include "tokenize/hf_tokenizer.h"

namespace json = boost::json;
using kvroute::tokenize::ChatMessage;
using kvroute::tokenize::ChatRequest;
using kvroute::tokenize::ToolCall;

namespace {

std::string Str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v != nullptr && v->is_string() ? std::string(v->as_string()) : std::string();
}

// The subset of an OpenAI chat completions body that the chat template sees.
ChatRequest ParseRequest(const json::object& body) {
  ChatRequest req;
  if (const json::value* msgs = body.if_contains("messages"); msgs && msgs->is_array()) {
    for (const auto& m : msgs->as_array()) {
      const auto& mo = m.as_object();
      ChatMessage msg;
      msg.role = Str(mo, "role");
      msg.content = Str(mo, "content");
      if (const json::value* id = mo.if_contains("tool_call_id"); id && id->is_string()) {
        msg.tool_call_id = std::string(id->as_string());
      }
      if (const json::value* n = mo.if_contains("name"); n && n->is_string()) {
        msg.name = std::string(n->as_string());
      }
      if (const json::value* calls = mo.if_contains("tool_calls"); calls && calls->is_array()) {
        for (const auto& c : calls->as_array()) {
          const auto& co = c.as_object();
          ToolCall call;
          call.id = Str(co, "id");
          if (const json::value* f = co.if_contains("function"); f && f->is_object()) {
            call.name = Str(f->as_object(), "name");
            call.arguments_json = Str(f->as_object(), "arguments");
          }
          msg.tool_calls.push_back(std::move(call));
        }
      }
      req.messages.push_back(std::move(msg));
    }
  }
  if (const json::value* tools = body.if_contains("tools"); tools && tools->is_array()) {
    req.tools_json = json::serialize(*tools);
  }
  if (const json::value* g = body.if_contains("add_generation_prompt"); g && g->is_bool()) {
    req.add_generation_prompt = g->as_bool();
  }
  return req;
}

json::array IdsToJson(const std::vector<kvroute::TokenId>& ids) {
  json::array a;
  a.reserve(ids.size());
  for (auto id : ids) a.emplace_back(id);
  return a;
}

json::object Handle(const kvroute::tokenize::Tokenizer& tok, const json::object& in) {
  json::object out;
  const std::string op = Str(in, "op");
  if (op == "encode") {
    const json::value* special = in.if_contains("add_special_tokens");
    out["ids"] =
        IdsToJson(tok.Encode(Str(in, "text"), special && special->is_bool() && special->as_bool()));
  } else if (op == "decode") {
    std::vector<kvroute::TokenId> ids;
    if (const json::value* a = in.if_contains("ids"); a && a->is_array()) {
      for (const auto& v : a->as_array())
        ids.push_back(static_cast<kvroute::TokenId>(v.to_number<std::int64_t>()));
    }
    auto text = tok.Decode(ids);
    if (text)
      out["text"] = *text;
    else
      out["error"] = text.error();
  } else if (op == "render" || op == "encode_chat") {
    const json::value* body = in.if_contains("request");
    if (body == nullptr || !body->is_object()) {
      out["error"] = "missing request";
      return out;
    }
    const ChatRequest req = ParseRequest(body->as_object());
    if (op == "render") {
      auto text = tok.RenderChat(req);
      if (text)
        out["text"] = *text;
      else
        out["error"] = text.error();
    } else {
      auto ids = tok.EncodeChat(req);
      if (ids)
        out["ids"] = IdsToJson(*ids);
      else
        out["error"] = ids.error();
    }
  } else {
    out["error"] = "unknown op '" + op + "'";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--model") model = argv[i + 1];
  }
  if (model.empty()) {
    std::cerr << "usage: kvroute_tokenize_tool --model <name|dir> < in.jsonl > out.jsonl\n";
    return 2;
  }
  std::string dir = model;
  if (model.find('/') == std::string::npos) {
    auto found = kvroute::tokenize::FindShippedModelDir(model);
    if (!found) {
      std::cerr << found.error() << "\n";
      return 1;
    }
    dir = *found;
  }
  auto tok = kvroute::tokenize::LoadHfTokenizer(dir);
  if (!tok) {
    std::cerr << tok.error() << "\n";
    return 1;
  }
  std::ios::sync_with_stdio(false);
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    json::object out;
    if (ec || !v.is_object()) {
      out["error"] = "bad input line";
    } else {
      out = Handle(**tok, v.as_object());
    }
    std::cout << json::serialize(out) << '\n';
  }
  return 0;
}
