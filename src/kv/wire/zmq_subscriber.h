// ZmqEventSubscriber: receives one engine's (worker's) KV event stream, checks its sequence,
// repairs gaps through the engine's replay socket, and hands decoded batches to callbacks in
// sequence order (shared/reference/vllm-protocol.md §1.2–1.3, §1.8).
//
// Sequence rules, per worker (expected = last + 1, or 0 before the first message):
//   seq == expected      deliver.
//   seq >  expected      a gap (messages lost, or we joined late): ask the replay ROUTER for
//                        [expected, seq) through a DEALER (["", start] → ["", seq, payload]…
//                        until the FF×8 end marker, within replay_timeout), deliver what it
//                        returns in order, then this message. If replay is not configured, times
//                        out or no longer holds the missing batches, the worker is reported
//                        stale (on_stale(true)): its index view is incomplete.
//   seq <= last          the engine restarted (its counter starts again at 0): on_restart();
//                        then the message is treated as the first of a new stream.
// Resuming (options.resume_after = S: the consumer holds every batch up to S already, e.g. an
// index merged from a snapshot taken at S): the stream starts as if S had been delivered, so
// the first message's gap is repaired from S + 1 (only what the consumer lacks, never the
// batches before it), and a first message at or below S is the engine's restart.
// A stale worker becomes fresh again (on_stale(false)) after a restart or after a delivered
// batch that contains AllBlocksCleared: both give the index a complete view again.
// A message whose frames are wrong (not 3 frames, seq not 8 bytes) is counted and dropped. A
// message with a valid seq but an undecodable payload advances the sequence, is counted and
// marks the worker stale (its events are lost).
//
// Threading: one background thread per subscriber (one worker), polling its SUB socket every
// poll_interval; callbacks run on that thread, in order, and must not throw, block for long or call
// Stop(). One thread per worker keeps gap repair (which waits on the replay socket) from
// delaying other workers; at hundreds of workers a shared zmq_poll loop would be the next step.
// Stop() (also run by the destructor) returns within about two poll intervals.
//
// Thread safety: stats() from any thread; Stop() from any thread but one at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/types.h"
#include "kv/kv_event.h"

namespace kvroute::kv {

enum class SocketMode : std::uint8_t {
  kAuto,     // bind if the endpoint has a wildcard ('*' host or port, 0.0.0.0, [::]), else connect
  kConnect,  // the engine binds (vLLM's default tcp://*:5557)
  kBind,     // the engine connects to us (llm-d's "global socket" mode)
};

// Where a subscriber must listen for an engine, derived from the engine's own kv_events_config
// endpoint by inverting vLLM's rule (EngineBindsEndpoint): if the engine binds
// ("tcp://*:5557", "tcp://[::]:5557", ipc://, inproc://), we connect to it, with a wildcard host
// replaced by `engine_host`; if the engine connects ("tcp://indexer:5557"), we bind that port on
// every interface ("tcp://*:5557").
struct SubscriberEndpoint {
  std::string endpoint;
  SocketMode mode = SocketMode::kConnect;
  bool operator==(const SubscriberEndpoint&) const = default;
};
SubscriberEndpoint SubscriberEndpointFor(std::string_view engine_endpoint,
                                         std::string_view engine_host);

// The engine's replay ROUTER is always bound: connect to it, a wildcard host replaced by
// `engine_host`.
std::string ReplayEndpointFor(std::string_view engine_replay_endpoint,
                              std::string_view engine_host);

struct ZmqSubscriberOptions {
  WorkerId worker = 0;
  // The engine's PUB address to connect to, or our address to bind (wildcard port allowed:
  // tcp://127.0.0.1:* — see endpoint()).
  std::string endpoint;
  SocketMode mode = SocketMode::kAuto;
  std::string replay_endpoint;  // the engine's ROUTER; empty: gaps cannot be repaired
  std::string topic;            // subscription prefix; empty: everything
  std::chrono::milliseconds replay_timeout{1000};
  std::chrono::milliseconds poll_interval{100};
  int rcvhwm = 100000;
  // The last seq the consumer holds already (see "Resuming" above); nullopt: from scratch.
  std::optional<std::uint64_t> resume_after;
};

struct SubscriberCallbacks {
  // A decoded batch, in sequence order (replayed batches included).
  std::function<void(WorkerId, std::uint64_t seq, const KvEventBatch&)> on_batch;
  // The engine restarted: forget everything known about this worker before the next batch.
  std::function<void(WorkerId)> on_restart;
  // true: events were lost and not recovered; false: the view is complete again.
  std::function<void(WorkerId, bool stale)> on_stale;
};

struct ZmqSubscriberStats {
  std::uint64_t messages = 0;        // multipart messages received on SUB
  std::uint64_t batches = 0;         // batches delivered (live + replayed)
  std::uint64_t events = 0;          // events in delivered batches
  std::uint64_t malformed = 0;       // bad framing or undecodable payloads (live or replayed)
  std::uint64_t gaps = 0;            // times seq jumped ahead
  std::uint64_t replayed = 0;        // batches delivered from the replay socket
  std::uint64_t stale_episodes = 0;  // times the worker went stale
  std::uint64_t restarts = 0;
  std::uint64_t unknown_events = 0;  // events skipped for an unknown tag
};

class ZmqEventSubscriber {
 public:
  static std::expected<std::unique_ptr<ZmqEventSubscriber>, std::string> Create(
      ZmqSubscriberOptions options, SubscriberCallbacks callbacks);

  ~ZmqEventSubscriber();
  ZmqEventSubscriber(const ZmqEventSubscriber&) = delete;
  ZmqEventSubscriber& operator=(const ZmqEventSubscriber&) = delete;

  void Stop();  // idempotent

  // The SUB endpoint as bound (wildcard port resolved) or connected.
  const std::string& endpoint() const { return endpoint_; }
  ZmqSubscriberStats stats() const;

 private:
  struct Impl;
  explicit ZmqEventSubscriber(std::unique_ptr<Impl> impl);

  std::unique_ptr<Impl> impl_;  // sockets and sequence state: subscriber thread only
  std::string endpoint_;
  std::thread thread_;
};

}  // namespace kvroute::kv
