// ChatCompletionRequest: a validated POST /v1/chat/completions body.
//
// The messages become tokenize::ChatRequest (what the chat template renders): list-of-parts
// content is flattened to text joined by "\n" (vLLM's string content format); tool calls keep
// their arguments as JSON text; `tools` is kept as the JSON text of the array.
//
// Images (OpenAI `image_url` parts: {"type": "image_url", "image_url": {"url": U} or U,
// "uuid"?}) are accepted only when ImageOptions::accept is set, otherwise refused with a 400.
// An accepted image becomes one `placeholder` line at the front of its message's text, as
// vLLM's string content format puts the placeholders it adds, and an ImagePart whose
// identifier names it in the blocks' extra keys (kv/keys/extra_keys.h): the part's own `uuid` (what
// vLLM then uses as the item's identifier), else ImageIdentifier(U) — the content's hash for
// a data URL, the reference's for a remote one (kvroute never fetches it).
//
// The parsed JSON object is kept in `body` so a proxy can forward it unchanged.
//
// Thread safety: plain value type; the parse functions are pure.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <string_view>
#include <vector>

#include "api/api_error.h"
#include "api/generation_params.h"
#include "tokenize/tokenizer.h"

namespace kvroute::api {

struct ImageOptions {
  bool accept = false;                  // false: an image part is a 400 (text-only serving)
  std::string placeholder = "<image>";  // the text that stands for one image in the prompt
};

struct ImagePart {
  std::string identifier;  // the part's uuid, or ImageIdentifier(url)
  bool has_uuid = false;   // the client named it
};

struct ChatCompletionRequest {
  GenerationParams params;  // max_tokens = max_completion_tokens if given, else max_tokens
  tokenize::ChatRequest chat;
  boost::json::object body;       // the original request, as parsed
  std::vector<ImagePart> images;  // in order of appearance over all messages
};

std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(
    std::string_view body, const ImageOptions& images = {});
std::expected<ChatCompletionRequest, ApiError> ParseChatCompletionRequest(
    boost::json::object body, const ImageOptions& images = {});

// Reads `messages`, `tools`, `add_generation_prompt` and `continue_final_message` of a chat
// body (shared with the chat form of /tokenize). Images are collected into *images when
// options.accept (REQUIRES: images != nullptr then).
std::expected<tokenize::ChatRequest, ApiError> ParseChatFields(
    const boost::json::object& body, const ImageOptions& options = {},
    std::vector<ImagePart>* images = nullptr);

// An image's identifier from its URL: "kvimg-" + the first 128 bits of SHA-256 (hex) of a
// data URL's payload (the bytes after its first comma), or "kvurl-" + the same of a remote
// URL's text.
std::string ImageIdentifier(std::string_view url);

// Sets `uuid` = identifier on every image_url part of `body`'s messages that has none (in
// order of appearance, matching `images`), so the engine names each image as kvroute keyed it.
void SetImageUuids(boost::json::object* body, const std::vector<ImagePart>& images);

}  // namespace kvroute::api
