// The context-length check vLLM applies before admitting a request, with vLLM's exact 400
// message text (clients and tests match on it):
//   prompt alone too long:
//     "This model's maximum context length is N tokens. However, you requested P tokens in
//      the messages, Please reduce the length of the messages."
//   prompt + max_tokens too long:
//     "This model's maximum context length is N tokens. However, you requested M tokens
//      (P in the messages, C in the completion). Please reduce the length of the messages or
//      completion."
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <expected>
#include <optional>

#include "api/api_error.h"

namespace kvroute::api {

// The error's param is "messages" when the prompt alone is too long and "max_tokens" otherwise
// (vLLM leaves it null; naming the field helps clients and costs nothing).
//
// Returns the number of tokens the request may generate: `max_tokens` when given, else what
// is left of the context (vLLM's default for chat). 400 when the prompt fills the context or
// prompt + max_tokens exceeds it.
std::expected<std::int64_t, ApiError> CheckContextLength(std::int64_t prompt_tokens,
                                                         std::optional<std::int64_t> max_tokens,
                                                         std::int64_t max_model_len);

}  // namespace kvroute::api
