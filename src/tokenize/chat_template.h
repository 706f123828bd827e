// ChatTemplate: renders a model's chat_template (tokenizer_config.json) for a ChatRequest,
// with the variables transformers' apply_chat_template and vLLM provide:
//   messages               list of {role, content, [tool_calls], [tool_call_id], [name]}
//   tools                  the request's tools (undefined when there are none)
//   add_generation_prompt  bool
//   bos_token, eos_token, pad_token, unk_token   strings from tokenizer_config.json
//
// Message conversion follows vLLM: a null content arrives as "" (ChatMessage.content is a
// string); each tool call becomes {id, type: "function", function: {name, arguments}} with
// `arguments` parsed from its JSON text into an object (vLLM's _postprocess_messages), kept as
// the string when it is not valid JSON. continue_final_message cuts the prompt after the final
// message's stripped content, as transformers does.
//
// The template is parsed once at load; unsupported constructs fail there.
//
// Ownership: owns the parsed template. Thread safety: Render is const and thread-safe.
#pragma once

#include <expected>
#include <memory>
#include <string>
#include <string_view>

#include "tokenize/jinja/jinja_template.h"
#include "tokenize/tokenizer.h"

namespace kvroute::tokenize {

class ChatTemplate {
 public:
  struct SpecialTokens {
    std::string bos, eos, pad, unk;
  };

  static std::expected<std::unique_ptr<ChatTemplate>, std::string> Create(std::string_view source,
                                                                          SpecialTokens tokens);

  std::expected<std::string, std::string> Render(const ChatRequest& request) const;

 private:
  ChatTemplate(jinja::Template t, SpecialTokens tokens)
      : template_(std::move(t)), tokens_(std::move(tokens)) {}

  jinja::Template template_;
  SpecialTokens tokens_;
};

// Converts JSON text to a template value (objects keep their key order). Exposed for tests.
std::expected<jinja::Value, std::string> JsonToValue(std::string_view json_text);

}  // namespace kvroute::tokenize
