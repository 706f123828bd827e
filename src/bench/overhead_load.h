// The closed-loop load of `kvroute bench overhead`: C concurrent clients, each sending its
// next request as soon as its previous one ended, against one or more base URLs (request i
// goes to urls[i mod n], so the "direct" baseline spreads over the sims by itself).
//
// Deliberately lean, because the client shares the machine's cores with the proxy it
// measures: a streamed response is split into SSE events (api::SseParser) and only the
// events up to the first content chunk are parsed as JSON (to time TTFT); later events are
// counted, and parsed only if they look like an error object.
//
// Bounded by count AND time: `warmup_requests` unrecorded requests, then `requests` recorded
// ones, and no request starts after `duration_s` (warm-up included); every request has a
// total timeout. In-flight requests finish (or time out) before RunOverheadLoad returns.
//
// Thread safety: RunOverheadLoad runs its own io_context on the calling thread; separate
// calls share nothing.
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

#include "bench/overhead.h"

namespace kvroute::bench {

struct OverheadLoadOptions {
  std::vector<std::string> urls;  // base URLs ("http://127.0.0.1:P"); at least one
  std::string path = "/v1/chat/completions";
  std::vector<std::string> bodies;  // request i sends bodies[i mod n]; at least one
  bool stream = true;               // the bodies ask for a stream (read as SSE)
  int concurrency = 1;
  int warmup_requests = 0;  // sent first, not recorded
  int requests = 100;       // recorded
  double duration_s = 60;   // no request starts later than this after the level began
  double request_timeout_s = 30;
  bool progress = false;       // a progress line on stderr
  std::string progress_label;  // names the level in that line
};

struct OverheadLoadResult {
  std::vector<OverheadSample> samples;  // recorded requests, in completion order
  // First recorded send to last recorded completion (the window throughput is measured in).
  double elapsed_s = 0;
  int warmup_errors = 0;
  int completed = 0;  // every request that ended, warm-up included
};

// The JSON body of one chat completion: one user message, `max_tokens` with ignore_eos (vLLM's
// extension, honoured by kvroute sim) so every response has exactly that many tokens,
// temperature 0, and "stream" as asked.
std::string OverheadChatBody(std::string_view model, std::string_view prompt,
                             std::uint32_t max_tokens, bool stream);

// Errors are setup failures (bad URL, no bodies); request failures are samples.
std::expected<OverheadLoadResult, std::string> RunOverheadLoad(const OverheadLoadOptions& options);

}  // namespace kvroute::bench
