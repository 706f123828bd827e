#include "tokenize/chat_template.h"

#include "tokenize/jinja/jinja_json.h"

namespace kvroute::tokenize {
namespace {

using jinja::Value;

Value MessageValue(const ChatMessage& m) {
  Value msg = Value::MakeDict();
  // Room for every key below, so the entries (and the content string) are never moved.
  msg.dict->items.reserve(5);
  msg.dict->items.emplace_back("role", Value::Str(m.role));
  msg.dict->items.emplace_back("content", Value::Str(m.content));
  if (!m.tool_calls.empty()) {
    jinja::List calls;
    for (const ToolCall& c : m.tool_calls) {
      Value fn = Value::MakeDict();
      fn.dict->Set("name", Value::Str(c.name));
      if (c.arguments_json.empty()) {
        fn.dict->Set("arguments", Value::MakeDict());
      } else if (auto args = JsonToValue(c.arguments_json); args) {
        fn.dict->Set("arguments", std::move(*args));
      } else {
        fn.dict->Set("arguments", Value::Str(c.arguments_json));
      }
      Value call = Value::MakeDict();
      call.dict->Set("id", Value::Str(c.id));
      call.dict->Set("type", Value::Str("function"));
      call.dict->Set("function", std::move(fn));
      calls.push_back(std::move(call));
    }
    msg.dict->Set("tool_calls", Value::MakeList(std::move(calls)));
  }
  if (m.tool_call_id) msg.dict->Set("tool_call_id", Value::Str(*m.tool_call_id));
  if (m.name) msg.dict->Set("name", Value::Str(*m.name));
  return msg;
}

std::string_view StripSpace(std::string_view s) {
  const auto space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
  };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::expected<Value, std::string> JsonToValue(std::string_view json_text) {
  return jinja::ParseJson(json_text);
}

std::expected<std::unique_ptr<ChatTemplate>, std::string> ChatTemplate::Create(
    std::string_view source, SpecialTokens tokens) {
  auto t = jinja::Template::Parse(source);
  if (!t) return std::unexpected("chat_template: " + t.error());
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(*t), std::move(tokens)));
}

std::expected<std::string, std::string> ChatTemplate::Render(const ChatRequest& request) const {
  Value vars = Value::MakeDict();
  jinja::List messages;
  messages.reserve(request.messages.size());
  std::size_t size_hint = 4096 + request.tools_json.size();
  for (const ChatMessage& m : request.messages) size_hint += m.content.size() + 64;
  for (const ChatMessage& m : request.messages) messages.push_back(MessageValue(m));
  vars.dict->Set("messages", Value::MakeList(std::move(messages)));
  if (!request.tools_json.empty()) {
    auto tools = JsonToValue(request.tools_json);
    if (!tools) return std::unexpected("tools: " + tools.error());
    if (!tools->IsNone()) vars.dict->Set("tools", std::move(*tools));
  }
  const bool continue_final = request.continue_final_message && !request.messages.empty();
  vars.dict->Set("add_generation_prompt",
                 Value::Bool(request.add_generation_prompt && !continue_final));
  vars.dict->Set("bos_token", Value::Str(tokens_.bos));
  vars.dict->Set("eos_token", Value::Str(tokens_.eos));
  vars.dict->Set("pad_token", Value::Str(tokens_.pad));
  vars.dict->Set("unk_token", Value::Str(tokens_.unk));
  auto text = template_.Render(vars, size_hint);
  if (!text) return std::unexpected("chat template: " + text.error());
  if (continue_final) {
    const std::string_view final_content = StripSpace(request.messages.back().content);
    const std::size_t at = text->rfind(final_content);
    if (final_content.empty() || at == std::string::npos) {
      return std::unexpected("continue_final_message: the final message is not in the prompt");
    }
    text->resize(at + final_content.size());
  }
  return text;
}

}  // namespace kvroute::tokenize
