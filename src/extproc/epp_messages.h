// The Endpoint Picker's side of Envoy's ext_proc messages (Gateway API Inference Extension,
// EPP protocol; ../shared/reference/traces-and-k8s.md §5): building the responses a picker
// sends and reading what the gateway tells it. Sans-I/O: protobuf messages in and out, no
// gRPC, no sockets; EppStream (epp_stream.h) is built on top of this. No Envoy runs where this
// is tested: the wire format is checked against @grpc/proto-loader in Node
// (tests/integration/extproc).
//
// Thread safety: free functions over values; safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "envoy/service/ext_proc/v3/external_processor.pb.h"

namespace kvroute::extproc {

namespace pb = ::envoy::service::ext_proc::v3;

// Header and metadata key the gateway routes on; identical in both places (protocol MUST).
inline constexpr std::string_view kDestinationHeader = "x-gateway-destination-endpoint";
inline constexpr std::string_view kLbNamespace = "envoy.lb";
inline constexpr std::string_view kSubsetNamespace = "envoy.lb.subset_hint";
inline constexpr std::string_view kSubsetKey = "x-gateway-destination-endpoint-subset";
inline constexpr std::string_view kServedKey = "x-gateway-destination-endpoint-served";
// Largest body chunk a picker sends back; Envoy recommends at most 64 KiB.
inline constexpr std::size_t kMaxBodyChunk = 62000;

// The answer to request_headers once the picker has chosen: `endpoints` ("ip:port", best
// first, the rest the ordered fallbacks) joined by ',' in the x-gateway-destination-endpoint
// header and in dynamic_metadata["envoy.lb"]; clear_route_cache so the route is recomputed;
// Content-Length set when given (FULL_DUPLEX_STREAMED drops it otherwise).
// REQUIRES: !endpoints.empty().
pb::ProcessingResponse DestinationResponse(const std::vector<std::string>& endpoints,
                                           std::optional<std::size_t> content_length);

// The (possibly rewritten) body as streamed_response chunks of at most `max_chunk` bytes, the
// last with end_of_stream; an empty body is one empty final chunk. `request` picks
// request_body or response_body.
std::vector<pb::ProcessingResponse> StreamedBody(std::string_view body, bool request,
                                                 std::size_t max_chunk = kMaxBodyChunk);

// An ImmediateResponse: 503 when no endpoint is ready, 429 to shed load.
pb::ProcessingResponse Immediate(int http_status, std::string_view body, std::string_view details);

// A header's value (raw_value, which Envoy sends, else value), or nullopt. `name` lower-case.
std::optional<std::string> HeaderValue(const pb::HttpHeaders& headers, std::string_view name);

// The subset hint: nullopt when absent; else its endpoints (a list or a comma string in the
// Struct), possibly empty — then the picker must answer 503.
std::optional<std::vector<std::string>> SubsetHint(const pb::ProcessingRequest& request);

// The endpoint the gateway actually used (response path), or nullopt.
std::optional<std::string> ServedEndpoint(const pb::ProcessingRequest& request);

}  // namespace kvroute::extproc
