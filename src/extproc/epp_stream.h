// EppStream: the Endpoint Picker's side of one ext_proc stream (one HTTP request), as a
// sans-I/O state machine: each message from the gateway goes in, the responses to send come
// out, in the order the protocol requires (FULL_DUPLEX_STREAMED bodies: the header response
// only once the whole request body is in, then the body chunks; response bodies echoed as
// they stream). The gRPC server (epp_server.h) only moves these messages; tests drive this
// class directly. No Envoy runs where this is tested.
//
// Thread safety: one stream, one thread at a time (gRPC's reader loop); not shared.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "extproc/epp_messages.h"

namespace kvroute::extproc {

struct PickRequest {
  std::map<std::string, std::string> headers;  // lower-case keys, as Envoy sends them
  std::string body;                            // the whole request body
  // The gateway's subset hint; when set the pick must come from it (EppStream enforces it).
  std::optional<std::vector<std::string>> subset;
};

struct PickResult {
  // "ip:port", best first; the rest are the ordered fallbacks. Empty: no endpoint (503).
  std::vector<std::string> endpoints;
  // Non-zero: answer with an ImmediateResponse of this status (429 to shed, 503) instead.
  int reject_status = 0;
  std::string reject_message;
  // The body to forward, when the picker rewrote it (kvroute adds a tenant's cache_salt or
  // image uuids); nullopt: the client's, unchanged. Content-Length follows it.
  std::optional<std::string> body;
};

// Token counts of the response, from OpenAI's `usage` object: the last SSE `data:` event
// that carries one (stream_options.include_usage), or the JSON body of a non-streamed answer.
struct Usage {
  long prompt_tokens = 0;
  long completion_tokens = 0;
};

// The routing decision. Must be safe to call from several streams' threads at once.
using Picker = std::function<PickResult(const PickRequest&)>;

// One stream's routing side, for a picker that must also hear what becomes of the request it
// routed (kvroute serve --epp books load on the decision and releases it as the response
// streams back: extproc/epp_router.h). EppStream calls it in stream order, on the stream's
// thread; one session per stream, never shared.
class PickSession {
 public:
  virtual ~PickSession() = default;
  // Once per stream, when the request (headers, whole body) is in.
  virtual PickResult Pick(const PickRequest& request) = 0;
  // The upstream's response headers: its :status, whether it is SSE, and the endpoint the
  // gateway reports it used (envoy.lb served metadata; may be a fallback, or absent).
  virtual void OnResponseHeaders(int /*status*/, bool /*sse*/,
                                 const std::optional<std::string>& /*served*/) {}
  // Each response body chunk as it streams, before it is echoed.
  virtual void OnResponseBody(std::string_view /*bytes*/, bool /*end_of_stream*/) {}
  // The stream is over (exactly once, after everything else). `response_complete`: the
  // response body's end_of_stream was seen; `destination_sent`: the header response naming
  // the destination was written to the gateway (false: the worker never got the request).
  virtual void OnStreamEnd(bool /*response_complete*/, bool /*destination_sent*/) {}
};
using SessionFactory = std::function<std::unique_ptr<PickSession>()>;

class EppStream {
 public:
  // `max_body_bytes`: a larger request body is refused with 413 (the lightweight EPP caps 10 MB).
  explicit EppStream(Picker picker, std::size_t max_body_bytes = 10 << 20);
  explicit EppStream(std::unique_ptr<PickSession> session, std::size_t max_body_bytes = 10 << 20);
  ~EppStream();  // calls End() if the server did not
  EppStream(const EppStream&) = delete;
  EppStream& operator=(const EppStream&) = delete;

  // Consumes one gateway message; returns what to send back, in order (possibly nothing).
  std::vector<pb::ProcessingResponse> OnMessage(const pb::ProcessingRequest& request);

  // An ImmediateResponse was sent: the gateway ignores anything after it; close the stream.
  bool finished() const { return finished_; }
  // What the gateway reported on the response path.
  const std::optional<std::string>& served_endpoint() const { return served_; }
  bool response_is_sse() const { return sse_; }
  const std::vector<std::string>& picked() const { return picked_; }
  // Set once a usage object has been seen on the response path.
  const std::optional<Usage>& usage() const { return usage_; }

  // The server wrote the responses OnMessage returned (false: the gateway was gone).
  void MarkSent(bool ok);
  // The stream is over: the session hears it once (OnStreamEnd). Idempotent.
  void End();

 private:
  std::vector<pb::ProcessingResponse> Pick(bool with_body);
  std::vector<pb::ProcessingResponse> Finish(pb::ProcessingResponse r);
  // Feeds response bytes to the usage reader: SSE by lines as they stream, JSON at the end.
  void ObserveResponse(const std::string& bytes, bool end_of_stream);
  void ReadUsage(std::string_view json);

  std::unique_ptr<PickSession> session_;
  std::size_t max_body_bytes_;
  PickRequest request_;
  std::vector<std::string> picked_;
  std::optional<std::string> served_;
  bool sse_ = false;
  std::string response_buffer_;  // SSE: the incomplete last line; JSON: the body so far (capped)
  std::optional<Usage> usage_;
  bool finished_ = false;
  bool response_complete_ = false;
  bool destination_pending_ = false;  // a destination response is in the last batch returned
  bool destination_sent_ = false;
  bool ended_ = false;
};

}  // namespace kvroute::extproc
