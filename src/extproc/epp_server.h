// EppServer: kvroute's Endpoint Picker as a gRPC server — Envoy's
// envoy.service.ext_proc.v3.ExternalProcessor/Process (one bidirectional stream per HTTP
// request, each driven by an EppStream) plus the standard gRPC health service with the
// services `liveness`, `readiness` and `envoy.service.ext_proc.v3.ExternalProcessor`.
// Built only where Debian's gRPC is installed (libgrpc++-dev). Not yet wired into
// `kvroute serve --epp` (issue 22): the picker is supplied by the caller. No Envoy runs where
// this is tested; tests/integration/extproc plays Envoy's side with @grpc/grpc-js.
//
// Thread safety: gRPC's synchronous server runs each stream on one of its threads; the Picker
// must be thread-safe. SetReady and Shutdown may be called from any thread.
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <string>

#include "extproc/epp_stream.h"

namespace kvroute::extproc {

struct EppServerOptions {
  // host:port to listen on; port 0 picks a free one (see port()). The EPP's usual port is 9002.
  std::string address = "0.0.0.0:9002";
  // Larger request bodies are answered 413.
  std::size_t max_body_bytes = 10 << 20;
};

class EppServer {
 public:
  static std::expected<std::unique_ptr<EppServer>, std::string> Start(const EppServerOptions& options,
                                                                      Picker picker);
  // One PickSession per stream (made on the stream's thread): a picker that books the load of
  // what it routed and hears the response (kvroute serve --epp). `sessions` must be
  // thread-safe; each session it makes is used by one stream only.
  static std::expected<std::unique_ptr<EppServer>, std::string> Start(const EppServerOptions& options,
                                                                      SessionFactory sessions);
  ~EppServer();
  EppServer(const EppServer&) = delete;
  EppServer& operator=(const EppServer&) = delete;

  int port() const;
  // `readiness` (and the ext_proc service's own status) serving or not; liveness stays serving.
  void SetReady(bool ready);
  // Reports NOT_SERVING, then lets open streams finish for up to `grace`, then cancels them.
  void Shutdown(std::chrono::milliseconds grace);

  struct Impl;

 private:
  explicit EppServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvroute::extproc
