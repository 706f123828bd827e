// The HTTP surface of `kvroute sim`, path for path as vLLM serves it
// (shared/reference/vllm-protocol.md §5):
//   POST /v1/completions, POST /v1/chat/completions (SSE or JSON), GET /v1/models,
//   GET /health, GET /health/ready, POST /tokenize, POST /detokenize, GET /metrics,
//   POST /reset_prefix_cache.
// Plus one kvroute-only debug endpoint (not vLLM's surface): GET /debug/kv_cache, the
// engine's cached block hashes per tier (debug_cache.h), read through the loop's mailbox.
// Requests are parsed and validated by api/ (OpenAI error objects with vLLM's types), the
// model name is checked (404; an adapter of --lora-modules runs with its LoRA), the prompt
// is tokenized (image_url parts expanded to their placeholder tokens, as kvroute serve
// counts them) and checked against max_model_len (400), and the request is submitted to the
// EngineLoop; the connection gets a ChunkQueue (stream) or a DeferredSlot (JSON) that a SimRequest
// fills. A client that disconnects cancels the queue/slot, which aborts the engine request.
// P/D (sim/kv_transfer_params.h): a prefill leg (do_remote_decode, not streamed) runs pinned
// and answers with kv_transfer_params; a decode leg (do_remote_prefill) first claims its
// KV from the prefill sim (KvPuller, off the HTTP thread) and enters the engine only then,
// so a bad claim or a dead prefill sim is an error response, never a hang.
//
// Ownership: SimContext members are borrowed; they must outlive the HttpServer.
// Thread safety: handlers run concurrently on HTTP threads; everything they touch is
// immutable, atomic, or internally synchronised (EngineLoop, prometheus-cpp, tokenizer).
#pragma once

#include <prometheus/registry.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kv/wire/zmq_publisher.h"
#include "net/http_server.h"
#include "sim/engine_loop.h"
#include "sim/kv_puller.h"
#include "sim/kv_transfer_config.h"
#include "sim/kv_transfer_params.h"
#include "telemetry/vllm_metrics.h"
#include "tokenize/image_tokens.h"
#include "tokenize/tokenizer.h"

namespace kvroute::sim {

// P/D (--kv-transfer-config): what a prefill leg names itself in its answer, and the puller
// a decode leg claims its KV through. Absent: kv_transfer_params are ignored, as vLLM
// ignores them without a KV connector.
struct PdContext {
  KvTransferConfig config;
  PrefillIdentity identity;    // engine id, side channel host:port, TP
  KvPuller* puller = nullptr;  // decode legs
};

struct SimContext {
  std::string served_model_name;
  std::string model_root;  // /v1/models "root": the HF model name
  // LoRA adapters (--lora-modules NAME[=PATH]): requests may name them instead of the model.
  std::vector<std::string> lora_modules;
  tokenize::ImageTokenOptions image_tokens;  // how images are counted (tokenize/image_tokens.h)
  std::int64_t max_model_len = 0;
  std::uint64_t seed = 0;    // output seed when a request has none
  std::int64_t created = 0;  // Unix seconds the server started (/v1/models)
  tokenize::TokenizerPtr tokenizer;
  EngineLoop* loop = nullptr;
  prometheus::Registry* registry = nullptr;
  telemetry::VllmMetrics* metrics = nullptr;
  const std::atomic<bool>* draining = nullptr;       // /health/ready answers 503 while set
  const kv::ZmqEventPublisher* publisher = nullptr;  // null when KV events are off
  const PdContext* pd = nullptr;                     // null without --kv-transfer-config
};

void RegisterSimHandlers(const SimContext& context, net::HttpServer& server);

}  // namespace kvroute::sim
