#include "api/context_length.h"

#include <cstdint>
#include <string>

namespace kvroute::api {

std::expected<std::int64_t, ApiError> CheckContextLength(std::int64_t prompt_tokens,
                                                         std::optional<std::int64_t> max_tokens,
                                                         std::int64_t max_model_len) {
  const std::string head = "This model's maximum context length is " +
                           std::to_string(max_model_len) + " tokens. However, you requested ";
  // A prompt that fills the whole context leaves no room for even one generated token.
  if (prompt_tokens >= max_model_len) {
    // vLLM's text, odd comma included: clients match on it.
    return std::unexpected(ApiError::InvalidRequest(
        head + std::to_string(prompt_tokens) +
            " tokens in the messages, Please reduce the length of the messages.",
        "messages"));
  }
  if (!max_tokens) return max_model_len - prompt_tokens;
  // Compare without overflow: max_tokens may be as large as int64 allows.
  if (*max_tokens > max_model_len - prompt_tokens) {
    const std::string total = *max_tokens > INT64_MAX - prompt_tokens
                                  ? std::to_string(static_cast<unsigned long long>(*max_tokens) +
                                                   static_cast<unsigned long long>(prompt_tokens))
                                  : std::to_string(*max_tokens + prompt_tokens);
    return std::unexpected(ApiError::InvalidRequest(
        head + total + " tokens (" + std::to_string(prompt_tokens) + " in the messages, " +
            std::to_string(*max_tokens) +
            " in the completion). Please reduce the length of the messages or completion.",
        "max_tokens"));
  }
  return *max_tokens;
}

}  // namespace kvroute::api
