// SimServer: one simulated vLLM model server — `kvroute sim` minus flag parsing.
//
// Wires an engine model (engine/) running on an EngineLoop in sped-up real time, vLLM's HTTP
// surface (sim_handlers.h) on a net::HttpServer, vLLM's Prometheus metrics (telemetry/) and
// vLLM's KV event publisher (kv/wire/zmq_publisher.h). A real vLLM server is a drop-in
// replacement: same paths, JSON, SSE, metric names and KV event wire format.
//
// Lifecycle: Create (validates, loads the profile, binds the KV event sockets) → Start (binds
// HTTP, starts the threads) → Shutdown(grace) (vLLM --shutdown-timeout: stop accepting, let
// in-flight requests finish until the deadline, abort the rest, stop the engine, flush the
// event publisher).
//
// Ownership: owns everything it starts. Thread safety: Start/Shutdown from one thread; the
// accessors from any thread after Start.
#pragma once

#include <chrono>
#include <cstdint>
#include <expected>
#include <memory>
#include <string>

#include "sim/sim_config.h"
#include "tokenize/tokenizer.h"

namespace kvroute::sim {

class SimServer {
 public:
  static std::expected<std::unique_ptr<SimServer>, std::string> Create(
      const SimConfig& config, tokenize::TokenizerPtr tokenizer);
  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  std::expected<void, std::string> Start();
  // Returns the number of requests cut at the deadline.
  std::size_t Shutdown(std::chrono::milliseconds grace);

  std::uint16_t port() const;
  const std::string& served_model_name() const;
  // As bound (wildcard ports resolved); empty when KV events are off / no replay socket.
  std::string kv_events_endpoint() const;
  std::string kv_events_replay_endpoint() const;
  // P/D: "host:port" of the side channel (empty without one) and the engine id prefill
  // answers carry (empty without --kv-transfer-config).
  std::string kv_side_channel() const;
  std::string kv_engine_id() const;

 private:
  struct State;
  explicit SimServer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace kvroute::sim
