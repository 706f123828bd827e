#include "bench/runner_request.h"

#include <boost/json.hpp>

namespace kvroute::bench {
namespace json = boost::json;

namespace {

void AddStreamFields(json::object& body, std::string_view model, std::uint32_t max_tokens) {
  body["model"] = model;
  body["stream"] = true;
  body["stream_options"] = json::object{{"include_usage", true}};
  body["max_tokens"] = max_tokens;
  body["ignore_eos"] = true;  // vLLM extension: generate exactly max_tokens
  body["temperature"] = 0;
}

std::uint32_t ToU32(const json::value* v) {
  if (v == nullptr) return 0;
  if (v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint32_t>(v->as_int64());
  if (v->is_uint64()) return static_cast<std::uint32_t>(v->as_uint64());
  return 0;
}

}  // namespace

std::string ChatRequestBody(std::string_view model, std::span<const Message> messages,
                            std::uint32_t max_tokens) {
  json::object body;
  json::array msgs;
  msgs.reserve(messages.size());
  for (const Message& m : messages) {
    msgs.push_back(json::object{{"role", m.role}, {"content", m.content}});
  }
  body["messages"] = std::move(msgs);
  AddStreamFields(body, model, max_tokens);
  return json::serialize(body);
}

std::string CompletionRequestBody(std::string_view model, std::span<const TokenId> prompt,
                                  std::uint32_t max_tokens) {
  json::object body;
  json::array ids;
  ids.reserve(prompt.size());
  for (TokenId t : prompt) ids.push_back(t);
  body["prompt"] = std::move(ids);
  AddStreamFields(body, model, max_tokens);
  return json::serialize(body);
}

StreamAccounting::StreamAccounting(double start_s) { result_.start_s = start_s; }

bool StreamAccounting::OnEvent(std::string_view data, double now_s) {
  boost::system::error_code ec;
  json::value v = json::parse(data, ec);
  if (ec || !v.is_object()) {
    stream_error_ = "bad json in stream";
    return false;
  }
  const json::object& o = v.as_object();
  if (o.contains("error")) {
    stream_error_ = "error event in stream";
    return false;
  }
  // Content: chat delta.content or completion text.
  if (const json::value* choices = o.if_contains("choices"); choices && choices->is_array()) {
    for (const json::value& c : choices->as_array()) {
      if (!c.is_object()) continue;
      std::string_view text;
      if (const json::value* delta = c.as_object().if_contains("delta");
          delta && delta->is_object()) {
        if (const json::value* content = delta->as_object().if_contains("content");
            content && content->is_string()) {
          text = content->as_string();
        }
      } else if (const json::value* t = c.as_object().if_contains("text"); t && t->is_string()) {
        text = t->as_string();
      }
      if (text.empty()) continue;  // the role chunk, or a finish-only chunk
      reply_.append(text);
      if (!last_chunk_s_) {
        result_.ttft_s = now_s - result_.start_s;
      } else {
        result_.itl_s.push_back(now_s - *last_chunk_s_);
      }
      last_chunk_s_ = now_s;
      ++chunks_;
    }
  }
  if (const json::value* usage = o.if_contains("usage"); usage && usage->is_object()) {
    const json::object& u = usage->as_object();
    usage_seen_ = true;
    result_.prompt_tokens = ToU32(u.if_contains("prompt_tokens"));
    result_.output_tokens = ToU32(u.if_contains("completion_tokens"));
    if (const json::value* d = u.if_contains("prompt_tokens_details"); d && d->is_object()) {
      result_.cached_tokens = ToU32(d->as_object().if_contains("cached_tokens"));
    }
  }
  return true;
}

void StreamAccounting::OnDone(double /*now_s*/) { done_ = true; }

workload::RequestResult StreamAccounting::Finish(double end_s, std::string_view error_kind) {
  result_.e2e_s = end_s - result_.start_s;
  if (!usage_seen_) result_.output_tokens = chunks_;
  if (!error_kind.empty()) {
    result_.error_kind = std::string(error_kind);
  } else if (!stream_error_.empty() || !done_ || chunks_ == 0) {
    result_.error_kind = "stream";
  }
  result_.ok = result_.error_kind.empty();
  return result_;
}

}  // namespace kvroute::bench
