// POST /tokenize and POST /detokenize (vLLM's extra endpoints): request parsing and response
// building.
//
// /tokenize has two forms, told apart by the presence of `messages`:
//   completion form {model?, prompt: string, add_special_tokens = true, return_token_strs}
//   chat form       {model?, messages, add_generation_prompt = true,
//                    continue_final_message = false, add_special_tokens = false, tools?}
// and answers {count, max_model_len, tokens, token_strs?}.
// /detokenize {model?, tokens: [int]} answers {prompt}.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/api_error.h"
#include "common/types.h"
#include "tokenize/tokenizer.h"

namespace kvroute::api {

struct TokenizeRequest {
  std::optional<std::string> model;
  // Completion form: the text; chat form: the messages to render.
  std::variant<std::string, tokenize::ChatRequest> input;
  bool add_special_tokens = true;  // the chat form's default is false
  bool return_token_strs = false;

  bool IsChat() const { return std::holds_alternative<tokenize::ChatRequest>(input); }
};

struct DetokenizeRequest {
  std::optional<std::string> model;
  std::vector<TokenId> tokens;
};

std::expected<TokenizeRequest, ApiError> ParseTokenizeRequest(std::string_view body);
std::expected<DetokenizeRequest, ApiError> ParseDetokenizeRequest(std::string_view body);

// {"count": n, "max_model_len": m, "tokens": [...], "token_strs": [...] or null}
boost::json::object TokenizeResponseJson(const std::vector<TokenId>& tokens,
                                         std::int64_t max_model_len,
                                         const std::optional<std::vector<std::string>>& token_strs);
// {"prompt": text}
boost::json::object DetokenizeResponseJson(std::string_view text);

}  // namespace kvroute::api
