#include "gateway/proxy/stream_migration.h"

#include <boost/json.hpp>

namespace kvroute::gateway {

namespace json = boost::json;

namespace {

const json::object* FirstChoice(const json::object& chunk, std::string* unsupported) {
  const json::value* choices = chunk.if_contains("choices");
  if (choices == nullptr || !choices->is_array() || choices->as_array().empty()) return nullptr;
  const json::array& list = choices->as_array();
  if (list.size() > 1) {
    *unsupported = "several choices";
    return nullptr;
  }
  return list[0].if_object();
}

// max_tokens-like fields lowered by what was streamed. False: nothing is left to generate.
bool ReduceBudget(json::object& body, std::uint64_t streamed) {
  bool left = true;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    json::value* v = body.if_contains(key);
    if (v == nullptr || !v->is_number()) continue;
    const auto limit = v->to_number<std::int64_t>();
    const auto remaining = limit - static_cast<std::int64_t>(streamed);
    if (remaining <= 0) left = false;
    *v = std::max<std::int64_t>(remaining, 0);
  }
  if (json::value* v = body.if_contains("min_tokens"); v != nullptr && v->is_number()) {
    *v = std::max<std::int64_t>(v->to_number<std::int64_t>() - static_cast<std::int64_t>(streamed),
                                0);
  }
  return left;
}

}  // namespace

void StreamedText::Feed(std::string_view piece) {
  std::size_t i = 0;
  while (i < piece.size() && unsupported_.empty()) {
    if (skip_lf_) {
      skip_lf_ = false;
      if (piece[i] == '\n') {
        ++i;
        continue;
      }
    }
    const std::size_t end = api::FindSseLineEnd(piece, i);
    if (end == std::string_view::npos) {  // the line goes on in the next piece
      partial_.append(piece.substr(i));
      if (partial_.size() > kMaxTextBytes) unsupported_ = "an event over the bound";
      return;
    }
    skip_lf_ = piece[end] == '\r';
    if (partial_.empty()) {
      Line(piece.substr(i, end - i));
    } else {
      partial_.append(piece.substr(i, end - i));
      Line(partial_);
      partial_.clear();
    }
    i = end + 1;
  }
}

void StreamedText::Line(std::string_view line) {
  if (line.empty()) {
    in_event_ = false;
    return;
  }
  if (!line.starts_with("data:")) return;  // comments, event:, id:
  if (in_event_) {
    unsupported_ = "an event of several data lines";
    return;
  }
  in_event_ = true;
  line.remove_prefix(5);
  if (line.starts_with(' ')) line.remove_prefix(1);
  if (line == "[DONE]") return;
  Event(line);
}

// The fast path: vLLM and `kvroute sim` write token events without spaces, the text as the
// first "text":"…" (completions) or "content":"…" (chat) of the event. Inside a JSON string
// every quote is escaped, so an unescaped `"content":"` is a key, never text.
void StreamedText::Event(std::string_view data) {
  // Patterns start after their opening quote: find() runs memchr for a pattern's first byte,
  // and a quote is every tenth byte of an event.
  constexpr auto npos = std::string_view::npos;
  const std::string_view key =
      endpoint_ == api::Endpoint::kCompletions ? R"(text":")" : R"(content":")";
  const std::size_t choices = data.find(R"(choices":[)");
  if (choices == npos) {
    // No choices (an error event), or another layout of them.
    if (data.find("choices") != npos) ParsedEvent(data);
    return;
  }
  const std::string_view rest = data.substr(choices + 10);
  if (rest.starts_with(']')) return;  // usage only
  const std::size_t at = rest.find(key);
  if (at == npos || at == 0 || rest[at - 1] != '"' || rest.find(R"(tool_calls":)") != npos ||
      rest.find("reasoning") != npos || rest.find(R"(index":1)") != npos) {
    return ParsedEvent(data);
  }
  const std::size_t from = at + key.size();
  if (rest.find(R"(role":)") != npos) {
    // The role chunk, {"role":"assistant","content":""}, opens the message: no token.
    if (from < rest.size() && rest[from] == '"') return;
    return ParsedEvent(data);
  }
  std::size_t end = from;
  while (end < rest.size() && rest[end] != '"') end += rest[end] == '\\' ? 2 : 1;
  if (end >= rest.size()) {
    unsupported_ = "malformed event";
    return;
  }
  ++tokens_;
  escaped_.append(rest.substr(from, end - from));
  if (escaped_.size() > kMaxTextBytes) unsupported_ = "streamed text over the bound";
}

void StreamedText::ParsedEvent(std::string_view data) {
  json::error_code ec;
  json::value v = json::parse(data, ec);
  if (ec || !v.is_object()) {
    unsupported_ = "malformed event";
    return;
  }
  const json::object* choice = FirstChoice(v.as_object(), &unsupported_);
  if (choice == nullptr) return;  // usage-only or error events carry no text
  const json::string* text = nullptr;
  if (endpoint_ == api::Endpoint::kCompletions) {
    if (const json::value* t = choice->if_contains("text")) text = t->if_string();
  } else if (const json::value* d = choice->if_contains("delta"); d && d->is_object()) {
    const json::object& delta = d->as_object();
    for (const char* key : {"tool_calls", "reasoning_content", "reasoning"}) {
      const json::value* extra = delta.if_contains(key);
      if (extra != nullptr && !extra->is_null() &&
          !(extra->is_array() && extra->as_array().empty())) {
        unsupported_ = std::string("a streamed ") + key;
        return;
      }
    }
    if (const json::value* c = delta.if_contains("content")) text = c->if_string();
    // The role chunk ({"role":"assistant","content":""}) opens the message: no token.
    if (delta.contains("role") && (text == nullptr || text->empty())) return;
  }
  if (text == nullptr) return;
  ++tokens_;
  const std::string quoted = json::serialize(*text);  // back to the escaped form
  escaped_.append(quoted, 1, quoted.size() - 2);
  if (escaped_.size() > kMaxTextBytes) unsupported_ = "streamed text over the bound";
}

std::optional<std::string> StreamedText::text() const {
  json::error_code ec;
  json::value v = json::parse("\"" + escaped_ + "\"", ec);
  if (ec || !v.is_string()) return std::nullopt;
  return std::string(v.as_string());
}

Continuation BuildContinuation(api::Endpoint endpoint, std::string_view original_body,
                               std::string_view streamed_text, std::uint64_t streamed_tokens) {
  Continuation out;
  json::error_code ec;
  json::value parsed = json::parse(original_body, ec);
  if (ec || !parsed.is_object()) {
    out.reason = "the forwarded body is not a JSON object";
    return out;
  }
  json::object& body = parsed.as_object();
  if (const json::value* n = body.if_contains("n"); n && n->is_number() && n->to_number<double>() != 1) {
    out.reason = "n > 1";
    return out;
  }
  if (!ReduceBudget(body, streamed_tokens)) {
    out.kind = Continuation::Kind::kComplete;
    return out;
  }
  if (endpoint == api::Endpoint::kCompletions) {
    if (const json::value* echo = body.if_contains("echo"); echo && echo->is_bool() && echo->as_bool()) {
      out.reason = "echo";
      return out;
    }
    json::value* prompt = body.if_contains("prompt");
    if (prompt != nullptr && prompt->is_array() && prompt->as_array().size() == 1) {
      prompt = &prompt->as_array()[0];
    }
    if (prompt == nullptr || !prompt->is_string()) {
      out.reason = "the prompt is not one text";
      return out;
    }
    prompt->as_string().append(streamed_text);
  } else {
    json::value* messages = body.if_contains("messages");
    if (messages == nullptr || !messages->is_array()) {
      out.reason = "no messages";
      return out;
    }
    json::array& list = messages->as_array();
    const json::value* cont = body.if_contains("continue_final_message");
    const bool prefilled = cont != nullptr && cont->is_bool() && cont->as_bool() && !list.empty();
    json::object* last = prefilled ? list.back().if_object() : nullptr;
    json::value* content = last != nullptr ? last->if_contains("content") : nullptr;
    if (prefilled && (content == nullptr || !content->is_string())) {
      out.reason = "the client's prefilled assistant message is not one text";
      return out;
    }
    if (prefilled) {
      // The client already asked to continue its own assistant text: extend that message.
      content->as_string().append(streamed_text);
    } else {
      list.push_back(json::object{{"role", "assistant"}, {"content", streamed_text}});
    }
    body["continue_final_message"] = true;
    body["add_generation_prompt"] = false;
  }
  out.kind = Continuation::Kind::kSend;
  out.body = json::serialize(body);
  return out;
}

std::string ContinuationRelay::Feed(std::string_view piece) {
  std::string out;
  events_.clear();
  // A malformed continuation is relayed as far as it parsed; the token count then shows it.
  (void)parser_.Feed(piece, events_);
  for (const auto& e : events_) Event(e, &out);
  return out;
}

void ContinuationRelay::Event(const api::SseMessage& event, std::string* out) {
  if (event.done) {
    out->append("data: [DONE]\n\n");
    return;
  }
  json::error_code ec;
  json::value v = json::parse(event.data, ec);
  if (ec || !v.is_object()) {
    out->append("data: ").append(event.data).append("\n\n");
    return;
  }
  json::object& chunk = v.as_object();
  bool changed = false;
  if (!role_dropped_ && endpoint_ == api::Endpoint::kChatCompletions) {
    std::string ignored;
    const json::object* choice = FirstChoice(chunk, &ignored);
    const json::value* delta = choice != nullptr ? choice->if_contains("delta") : nullptr;
    if (delta != nullptr && delta->is_object() && delta->as_object().contains("role")) {
      role_dropped_ = true;
      const json::value* c = delta->as_object().if_contains("content");
      const bool empty = c == nullptr || (c->is_string() && c->as_string().empty());
      if (empty && (choice->if_contains("finish_reason") == nullptr ||
                    choice->at("finish_reason").is_null())) {
        return;  // the client's stream already opened the assistant message
      }
    }
  }
  if (json::value* usage = chunk.if_contains("usage"); usage != nullptr && usage->is_object()) {
    json::object& u = usage->as_object();
    const auto streamed = static_cast<std::int64_t>(streamed_tokens_);
    json::value* prompt = u.if_contains("prompt_tokens");
    json::value* completion = u.if_contains("completion_tokens");
    if (prompt != nullptr && prompt->is_number() && completion != nullptr && completion->is_number()) {
      *prompt = std::max<std::int64_t>(prompt->to_number<std::int64_t>() - streamed, 0);
      *completion = completion->to_number<std::int64_t>() + streamed;
      changed = true;
    }
  }
  out->append("data: ");
  if (changed) {
    out->append(json::serialize(chunk));
  } else {
    out->append(event.data);
  }
  out->append("\n\n");
}

}  // namespace kvroute::gateway
