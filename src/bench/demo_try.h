// What `kvroute demo` prints once its comparison is done and a fresh cluster is left running:
// commands a newcomer can paste to see what kvroute does. Cache-aware routing shows in two
// fields of one chat request sent twice: the response header `x-kvroute-worker` (the worker
// kvroute chose) and the body's `usage.prompt_tokens_details.cached_tokens` (how many prompt
// tokens that worker found in its KV cache): 0 the first time, nearly all of the prompt the
// second, on the same worker.
//
// Thread safety: pure functions.
#pragma once

#include <string>

namespace kvroute::bench {

// A chat request (JSON) for `model` whose system prompt spans many KV blocks (about 2,000
// tokens with the chat template) and whose answer is short: a prefix worth finding again.
std::string CacheProbeBody(const std::string& model);

// The try-it block for a router at `url` (http://host:port) serving `model`, the probe body
// saved at `probe_file` (best absolute: the user pastes from anywhere): each command under a
// comment line saying what it shows. Ends with a newline.
std::string TryItText(const std::string& url, const std::string& model,
                      const std::string& probe_file);

}  // namespace kvroute::bench
