// Request rewrites for disaggregated prefill/decode (vLLM NixlConnector, the algorithm of
// vLLM's toy_proxy_server.py and llm-d's nixlv2 sidecar), as pure JSON transforms:
//
//   1. prefill leg: the client's body with kv_transfer_params = {do_remote_decode: true,
//      do_remote_prefill: false, remote_engine_id/remote_block_ids/remote_host/remote_port:
//      null}, stream = false, max_tokens = 1 (and max_completion_tokens = 1 if present),
//      stream_options, min_tokens and min_completion_tokens removed;
//   2. read the top-level kv_transfer_params of the prefill response;
//   3. decode leg: the client's body unchanged except kv_transfer_params = that object.
//
// Every other field is forwarded untouched, in its original order.
//
// Thread safety: pure functions.
#pragma once

#include <boost/json/object.hpp>
#include <expected>
#include <string_view>

#include "api/api_error.h"

namespace kvroute::api {

boost::json::object MakePrefillBody(const boost::json::object& client_body);

boost::json::object MakeDecodeBody(const boost::json::object& client_body,
                                   const boost::json::object& prefill_kv_transfer_params);

// The kv_transfer_params object of a prefill response body. A 502-style internal error when
// the prefiller answered without one (it did not run with a KV connector, or the request
// did not finish with finish_reason "length"): the caller falls back to plain decoding.
std::expected<boost::json::object, ApiError> ExtractKvTransferParams(
    std::string_view prefill_response_body);

}  // namespace kvroute::api
