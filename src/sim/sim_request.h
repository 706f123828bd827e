// SimRequest: one generation request of `kvroute sim` between the engine loop and the HTTP
// connection. It turns engine tokens into the OpenAI answer — SSE chunks pushed into a
// net::ChunkQueue, or one JSON body set into a net::DeferredSlot — and records the request's
// latency metrics in simulated time (TTFT, ITL, TPOT, e2e, decode time).
//
// Ownership: shared by the engine loop (as its RequestObserver) and nobody else; it holds the
// queue/slot the connection reads from.
// Thread safety: the RequestObserver callbacks run on the loop thread only; the queue and slot
// are thread-safe hand-offs to the connection.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/generation_params.h"
#include "api/responses.h"
#include "api/stream_chunks.h"
#include "net/body_queue.h"
#include "sim/engine_loop.h"
#include "sim/kv_puller.h"
#include "sim/kv_transfer_params.h"
#include "telemetry/vllm_metrics.h"
#include "tokenize/tokenizer.h"

namespace kvroute::sim {

struct SimRequestInfo {
  api::Endpoint endpoint = api::Endpoint::kCompletions;
  api::ResponseMeta meta;
  bool stream = false;
  std::optional<api::StreamOptions> stream_options;
  std::int64_t prompt_tokens = 0;
  std::int64_t max_tokens = 0;
  Nanos arrival{0};  // simulated time the request arrived
  // P/D prefill leg: who to name in the answer's kv_transfer_params.
  std::optional<PrefillIdentity> prefill_identity;
  // P/D decode leg: the puller holding its claim, released when the request ends (a no-op
  // if the arrived transfer already released it).
  KvPuller* puller = nullptr;
};

class SimRequest final : public RequestObserver {
 public:
  // Streaming: chunks go to `queue`. Non-streaming: the response goes to `slot`. Exactly one
  // of them is set.
  SimRequest(SimRequestInfo info, tokenize::TokenizerPtr tokenizer, telemetry::VllmMetrics* metrics,
             std::shared_ptr<net::ChunkQueue> queue, std::shared_ptr<net::DeferredSlot> slot);

  void OnToken(const engine::TokenEvent& event, Nanos at) override;
  void OnEnded(const std::string& error, Nanos at) override;

 private:
  std::string TokenText(TokenId token) const;
  void Finish(const std::string& reason, Nanos at);

  const SimRequestInfo info_;
  const tokenize::TokenizerPtr tokenizer_;
  telemetry::VllmMetrics* const metrics_;
  const std::shared_ptr<net::ChunkQueue> queue_;
  const std::shared_ptr<net::DeferredSlot> slot_;
  api::StreamEncoder encoder_;

  std::int64_t completion_tokens_ = 0;
  std::int64_t cached_tokens_ = 0;
  std::string text_;  // non-streaming: the whole output
  Nanos first_token_at_{0};
  Nanos last_token_at_{0};
};

// "stop" | "length" | "abort", as vLLM's finish_reason.
const char* FinishReasonName(engine::FinishReason reason);

}  // namespace kvroute::sim
