// Builders of the non-streaming responses of /v1/completions, /v1/chat/completions and
// GET /v1/models, field for field as vLLM emits them (key order included, so a byte
// comparison against a recorded vLLM response only differs in ids and timestamps).
//
// Ids and timestamps are inputs, never read here: callers own randomness and clocks
// (MakeResponseId takes the random bits).
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvroute::api {

// What every response and chunk of one request shares.
struct ResponseMeta {
  std::string id;            // "cmpl-…" or "chatcmpl-…"
  std::int64_t created = 0;  // Unix seconds
  std::string model;         // the model name as the client asked for it
};

// Token accounting of one request.
struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  // Prompt tokens served from the prefix cache; emitted as prompt_tokens_details only when
  // set (vLLM fills it only with --enable-prompt-tokens-details).
  std::optional<std::int64_t> cached_tokens;
};

// {"prompt_tokens","total_tokens","completion_tokens"[,"prompt_tokens_details"]} (vLLM order).
// Without cached_tokens, prompt_tokens_details is null when `null_details` (vLLM's full
// model_dump(): non-streaming responses, completion chunks) and left out otherwise (vLLM's
// exclude_unset / exclude_none dumps: chat chunks, final usage chunks).
boost::json::object UsageJson(const Usage& usage, bool null_details);

// "<prefix><32 lowercase hex digits>" from 128 random bits, like vLLM's random_uuid().hex.
std::string MakeResponseId(std::string_view prefix, std::uint64_t random_hi,
                           std::uint64_t random_lo);
inline constexpr std::string_view kCompletionIdPrefix = "cmpl-";
inline constexpr std::string_view kChatCompletionIdPrefix = "chatcmpl-";

// Why generation stopped: "stop" (EOS or a stop string), "length" (max_tokens or context),
// "abort"; "tool_calls" for chat when tools were called.
struct Finish {
  std::string reason = "stop";
  // vLLM's stop_reason: the matched stop string or token id; null when EOS/length.
  std::optional<std::string> stop_string;
};

// A /v1/completions answer (vLLM main's CompletionResponse.model_dump()):
// {id, object: "text_completion", created, model, choices: [{index, text, logprobs: null,
//  finish_reason, stop_reason, token_ids: null, prompt_logprobs: null,
//  prompt_token_ids: null}], service_tier: null, system_fingerprint: null, usage,
//  kv_transfer_params: <object or null>}
boost::json::object CompletionResponseJson(const ResponseMeta& meta, std::string_view text,
                                           const Finish& finish, const Usage& usage,
                                           const boost::json::object* kv_transfer_params);

// A /v1/chat/completions answer (vLLM main's ChatCompletionResponse.model_dump()):
// {id, object: "chat.completion", created, model, choices: [{index, message: {role:
//  "assistant", content, refusal: null, annotations: null, audio: null, function_call: null,
//  tool_calls: [], reasoning: null}, logprobs: null, finish_reason, stop_reason,
//  token_ids: null}], service_tier: null, system_fingerprint: null, usage,
//  prompt_logprobs: null, prompt_token_ids: null, kv_transfer_params: <object or null>}
boost::json::object ChatCompletionResponseJson(const ResponseMeta& meta, std::string_view content,
                                               const Finish& finish, const Usage& usage,
                                               const boost::json::object* kv_transfer_params);

// One entry of GET /v1/models.
struct ModelCard {
  std::string id;
  std::int64_t created = 0;
  std::string owned_by = "vllm";
  std::string root;                   // the base model path/name; defaults to id when empty
  std::optional<std::string> parent;  // the base model of a LoRA adapter
  std::int64_t max_model_len = 0;
};

// {"object": "list", "data": [{id, object: "model", created, owned_by, root, parent,
//  max_model_len, permission: []}, ...]}
boost::json::object ModelsListJson(const std::vector<ModelCard>& models);

}  // namespace kvroute::api
