#include "api/responses.h"

#include <array>

namespace kvroute::api {
namespace {

boost::json::value StopReason(const Finish& finish) {
  if (finish.stop_string) return boost::json::value(*finish.stop_string);
  return nullptr;
}

boost::json::value KvParams(const boost::json::object* kv_transfer_params) {
  if (kv_transfer_params == nullptr) return nullptr;
  return boost::json::value(*kv_transfer_params);
}

void PutMeta(boost::json::object& out, const ResponseMeta& meta, std::string_view object) {
  out["id"] = meta.id;
  out["object"] = object;
  out["created"] = meta.created;
  out["model"] = meta.model;
}

}  // namespace

boost::json::object UsageJson(const Usage& usage, bool null_details) {
  boost::json::object out;
  out["prompt_tokens"] = usage.prompt_tokens;
  out["total_tokens"] = usage.prompt_tokens + usage.completion_tokens;
  out["completion_tokens"] = usage.completion_tokens;
  if (usage.cached_tokens) {
    boost::json::object details;
    details["cached_tokens"] = *usage.cached_tokens;
    out["prompt_tokens_details"] = std::move(details);
  } else if (null_details) {
    out["prompt_tokens_details"] = nullptr;
  }
  return out;
}

std::string MakeResponseId(std::string_view prefix, std::uint64_t random_hi,
                           std::uint64_t random_lo) {
  static constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                                '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  std::string id(prefix);
  id.reserve(prefix.size() + 32);
  for (std::uint64_t word : {random_hi, random_lo}) {
    for (int shift = 60; shift >= 0; shift -= 4) id.push_back(kHex[(word >> shift) & 0xf]);
  }
  return id;
}

boost::json::object CompletionResponseJson(const ResponseMeta& meta, std::string_view text,
                                           const Finish& finish, const Usage& usage,
                                           const boost::json::object* kv_transfer_params) {
  boost::json::object choice;
  choice["index"] = 0;
  choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish.reason;
  choice["stop_reason"] = StopReason(finish);
  choice["token_ids"] = nullptr;
  choice["prompt_logprobs"] = nullptr;
  choice["prompt_token_ids"] = nullptr;

  boost::json::object out;
  PutMeta(out, meta, "text_completion");
  out["choices"] = boost::json::array{std::move(choice)};
  out["service_tier"] = nullptr;
  out["system_fingerprint"] = nullptr;
  out["usage"] = UsageJson(usage, /*null_details=*/true);
  out["kv_transfer_params"] = KvParams(kv_transfer_params);
  return out;
}

boost::json::object ChatCompletionResponseJson(const ResponseMeta& meta, std::string_view content,
                                               const Finish& finish, const Usage& usage,
                                               const boost::json::object* kv_transfer_params) {
  boost::json::object message;
  message["role"] = "assistant";
  message["content"] = content;
  message["refusal"] = nullptr;
  message["annotations"] = nullptr;
  message["audio"] = nullptr;
  message["function_call"] = nullptr;
  message["tool_calls"] = boost::json::array();
  message["reasoning"] = nullptr;

  boost::json::object choice;
  choice["index"] = 0;
  choice["message"] = std::move(message);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish.reason;
  choice["stop_reason"] = StopReason(finish);
  choice["token_ids"] = nullptr;

  boost::json::object out;
  PutMeta(out, meta, "chat.completion");
  out["choices"] = boost::json::array{std::move(choice)};
  out["service_tier"] = nullptr;
  out["system_fingerprint"] = nullptr;
  out["usage"] = UsageJson(usage, /*null_details=*/true);
  out["prompt_logprobs"] = nullptr;
  out["prompt_token_ids"] = nullptr;
  out["kv_transfer_params"] = KvParams(kv_transfer_params);
  return out;
}

boost::json::object ModelsListJson(const std::vector<ModelCard>& models) {
  boost::json::array data;
  data.reserve(models.size());
  for (const ModelCard& m : models) {
    boost::json::object card;
    card["id"] = m.id;
    card["object"] = "model";
    card["created"] = m.created;
    card["owned_by"] = m.owned_by;
    card["root"] = m.root.empty() ? m.id : m.root;
    if (m.parent) {
      card["parent"] = *m.parent;
    } else {
      card["parent"] = nullptr;
    }
    card["max_model_len"] = m.max_model_len;
    card["permission"] = boost::json::array();
    data.push_back(std::move(card));
  }
  boost::json::object out;
  out["object"] = "list";
  out["data"] = std::move(data);
  return out;
}

}  // namespace kvroute::api
