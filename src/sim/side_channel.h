// The prefill side of kvroute sim's P/D control path: the "side channel" a decode sim
// contacts at the remote_host:remote_port its kv_transfer_params name (vLLM's
// VLLM_NIXL_SIDE_CHANNEL_HOST/PORT), served over HTTP/1.1 on its own port.
//
// vLLM's side channel is a ZMQ socket that hands out NIXL agent metadata, after which the
// decoder reads the blocks by RDMA and notifies the prefiller; no real vLLM can pull from
// a kvroute sim or the other way round, so the messages here are kvroute's own and only the
// roles are vLLM's:
//
//   POST /kv/claim    {"engine_id", "request_id", "block_ids": [..], "num_prompt_tokens",
//                      "block_size"}
//     200 {"engine_id", "tp_size", "block_size", "num_blocks"}  the blocks are pinned here
//     404 {"error"}  wrong engine id, or the request holds nothing (unknown, read, expired)
//     409 {"error"}  block ids / prompt length / block size differ from what is pinned
//   POST /kv/release  {"engine_id", "request_id", "blocks_read"}
//     200 {"released": true}  the pinned blocks are freed (NIXL's "read done" notification)
//     404 {"error"}           nothing pinned under that id (already freed or expired)
//
// A claim does not free anything: if the decoder dies after claiming, the pin expires at
// the timeout (VLLM_NIXL_ABORT_REQUEST_TIMEOUT), as in vLLM.
//
// Ownership: the context's pointers are borrowed and must outlive the server.
// Thread safety: handlers run on HTTP threads; engine access goes through
// EngineLoop::RunOnLoop, answers through a DeferredSlot.
#pragma once

#include <cstdint>
#include <string>

#include "net/http_server.h"
#include "sim/engine_loop.h"
#include "sim/pd_metrics.h"

namespace kvroute::sim {

struct SideChannelContext {
  EngineLoop* loop = nullptr;
  std::string engine_id;
  std::uint32_t tp_size = 1;
  std::uint32_t block_size = 16;
  PdMetrics* metrics = nullptr;  // released_reqs; may be null
};

void RegisterSideChannelHandlers(const SideChannelContext& context, net::HttpServer& server);

}  // namespace kvroute::sim
