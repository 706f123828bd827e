// ParityProbe: before the first request, asks every worker whether it keys KV blocks as
// kvroute does (DESIGN principle 4), so a mismatch is a warning naming the worker and the
// setting at start — not a ratio that drifts down after the first 50 requests (ParityChecker
// keeps watching after that).
//
//   block_size     the worker's vllm:cache_config_info{block_size} against kvroute's
//   tokenizer      POST /tokenize of a probe text: the worker's ids against kvroute's
//   chat_template  POST /tokenize of a probe chat (the chat form): the same for templates
//   hash           (precise mode, the worker has KV events) a one-token completion of a probe
//                  prompt sent as token ids, unique to this start (a nonce, so no earlier
//                  cached copy hides its BlockStored); kvroute's keys for it must then be
//                  found on that worker in the index, from the engine's own event
//   kv_events      the same probe found no event at all from the worker within the timeout
//
// An endpoint the worker does not have (/tokenize on some servers: 404) skips that check.
// Pure apart from the injected HTTP call and sleep: the gateway runs one probe per worker on
// its own thread with a blocking client (gateway.cc); tests pass fakes.
//
// Thread safety: ProbeWorker is reentrant; its dependencies must be safe to call from the
// calling thread (the index and the feed counters are).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/types.h"
#include "kv/index/index.h"
#include "tokenize/tokenizer.h"

namespace kvroute::gateway {

// The settings a probe checks: the `setting` label of kvroute_parity_mismatch.
inline constexpr std::array<std::string_view, 5> kParitySettings = {
    "block_size", "tokenizer", "chat_template", "hash", "kv_events"};

struct ParityTarget {
  WorkerId id = 0;
  std::string name;
  std::string base_url;
  std::string model;                        // the worker's base model (its first configured)
  std::optional<std::uint32_t> block_size;  // scraped cache_config_info; nullopt: unknown
  bool kv_events = false;                   // kvroute subscribes to its events
};

struct ProbeFinding {
  WorkerId worker = 0;
  std::string setting;  // one of kParitySettings
  std::string message;  // one line for the log, naming the worker and what to check
};

struct HttpReply {
  int status = 0;
  std::string body;
};
// POST `body` (JSON) to `url`; an error string when no answer came.
using ProbeHttp = std::function<std::expected<HttpReply, std::string>(const std::string& url,
                                                                      const std::string& body)>;

struct ParityProbeDeps {
  const tokenize::Tokenizer* tokenizer = nullptr;  // null: no tokenizer checks, no hash probe
  std::uint32_t block_size = 16;
  const kv::KvIndex* index = nullptr;  // null (approximate mode): no hash probe
  // Event batches received from the worker so far (KvFeed counters); null: unknown.
  std::function<std::uint64_t(WorkerId)> event_batches;
  ProbeHttp http;
  std::function<void(std::chrono::milliseconds)> sleep;  // null: std::this_thread::sleep_for
  std::chrono::milliseconds timeout{3000};               // how long to wait for the event
  std::uint64_t nonce = 0;  // makes the hash probe's prompt unique to this start
};

// Checks one worker; every mismatch found, in kParitySettings order. No finding = parity.
std::vector<ProbeFinding> ProbeWorker(const ParityTarget& worker, const ParityProbeDeps& deps);

// ProbeWorker for every target at once, each on its own thread with its own blocking HTTP
// client (deps.http is replaced; every exchange bounded by deps.timeout, at least 0.5 s).
std::vector<ProbeFinding> ProbeWorkers(const std::vector<ParityTarget>& targets,
                                       const ParityProbeDeps& deps);

}  // namespace kvroute::gateway
