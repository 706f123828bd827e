// The request's `kv_transfer_params` as vLLM's NixlConnector reads them
// (shared/reference/vllm-protocol.md §4), validated before anything is claimed or pinned:
//
//   prefill leg: {"do_remote_decode": true, "do_remote_prefill": false, remote_*: null}
//   decode leg:  the prefill response's object verbatim —
//                {"do_remote_prefill": true, "do_remote_decode": false,
//                 "remote_block_ids": [int, ...], "remote_engine_id": str,
//                 "remote_request_id": str, "remote_host": str, "remote_port": int,
//                 "tp_size": int}
//
// remote_block_ids may also come as one list per KV cache group ([[int, ...]], what vLLM's
// hybrid-allocator builds send); only single-group models are simulated, so exactly one
// group is accepted. remote_request_id is required: without it (vLLM before PR #29665) the
// prefill engine cannot be asked for the right request. Both flags true, a wrong type, or a
// missing field is a 400 naming the field; nothing is pinned or claimed.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <vector>

#include "api/api_error.h"

namespace kvroute::sim {

struct DecodeLegParams {
  std::vector<std::int32_t> remote_block_ids;
  std::string remote_engine_id;
  std::string remote_request_id;
  std::string remote_host;
  int remote_port = 0;
  std::uint32_t tp_size = 1;  // the prefill engine's TP (1 when absent, as vLLM defaults)
};

struct KvTransferRequest {
  bool prefill_leg = false;               // do_remote_decode
  std::optional<DecodeLegParams> decode;  // do_remote_prefill
};

// Absent or null params → neither leg.
std::expected<KvTransferRequest, api::ApiError> ParseKvTransferParams(
    const std::optional<boost::json::object>& params);

// What the prefill engine answers, in vLLM's key order.
struct PrefillIdentity {
  std::string engine_id;
  std::string host;  // the side channel's host and port, as advertised
  int port = 0;
  std::uint32_t tp_size = 1;
};
boost::json::object PrefillResponseParams(const PrefillIdentity& self,
                                          const std::vector<std::int32_t>& block_ids,
                                          const std::string& request_id);

}  // namespace kvroute::sim
