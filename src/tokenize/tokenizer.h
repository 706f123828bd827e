// Tokenizer: the interface every tokenizer in kvroute implements.
//
// Two implementations: SimpleTokenizer (deterministic, needs no model files; the default of
// `kvroute sim` and of approximate tests) and the exact Hugging Face tokenizer.json BPE
// with the model's chat template (tokenize/hf_*.h), which must produce the engine's token ids
// bit for bit.
//
// Thread safety: every method is const and safe to call concurrently from many threads.
#pragma once

#include <expected>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"

namespace kvroute::tokenize {

// One chat message after the API layer parsed it. `content` is the text (list-of-parts
// content is flattened by the API layer); tool calls are kept as their JSON text so the chat
// template can render them the way the model expects.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // the JSON text of the arguments object
};

struct ChatMessage {
  std::string role;  // system | user | assistant | tool | developer
  std::string content;
  std::vector<ToolCall> tool_calls;         // assistant messages only
  std::optional<std::string> tool_call_id;  // tool messages only
  std::optional<std::string> name;
};

struct ChatRequest {
  std::vector<ChatMessage> messages;
  std::string tools_json;  // JSON array text of OpenAI `tools`, empty if none
  bool add_generation_prompt = true;
  bool continue_final_message = false;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Token ids of `text`. With add_special_tokens the model's BOS (if any) is prepended, as
  // vLLM's /v1/completions does for text prompts.
  virtual std::vector<TokenId> Encode(std::string_view text, bool add_special_tokens) const = 0;

  // Text of `ids`. Ids outside the vocabulary are an error.
  virtual std::expected<std::string, std::string> Decode(const std::vector<TokenId>& ids) const = 0;

  // Renders the chat template to the exact prompt text the engine would tokenize.
  virtual std::expected<std::string, std::string> RenderChat(const ChatRequest& request) const = 0;

  // Renders and tokenizes a chat request (chat prompts carry their special tokens in the
  // rendered text, so no BOS is added on top — vLLM's add_special_tokens=false for chat).
  // Implementations may reuse cached segments across calls.
  virtual std::expected<std::vector<TokenId>, std::string> EncodeChat(
      const ChatRequest& request) const = 0;

  // Largest token id + 1.
  virtual std::size_t VocabSize() const = 0;

  // The model's end-of-sequence token id.
  virtual TokenId EosTokenId() const = 0;
};

using TokenizerPtr = std::shared_ptr<const Tokenizer>;

}  // namespace kvroute::tokenize
