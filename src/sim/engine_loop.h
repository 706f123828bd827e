// EngineLoop: runs one engine model on its own thread in (sped-up) real time, for
// `kvroute sim`.
//
//   loop {
//     take submitted requests, aborts and resets from the mailbox
//     r = engine.Step(now)                     // simulated time
//     sleep until now + r.duration             // real sleep = duration / speedup
//     hand r.tokens to each request's observer // "visible at" now + r.duration
//     publish r.kv_events as one batch         // one batch per step, as vLLM
//     update the scheduler metrics
//   }
//
// Requests come from HTTP threads through a mutex-guarded mailbox; outputs go back through
// RequestObserver callbacks, which run on the loop thread and must only hand data over (push
// to a net::ChunkQueue, set a net::DeferredSlot), never block.
//
// Ownership: owns the engine and the thread. The clock and the metrics (optional) must
// outlive the loop.
// Thread safety: Submit, Abort, ResetPrefixCache, InspectCache, RunOnLoop, Now, Stats may be
// called from any thread.
//
// Timed events (P/D): with nothing to step, the loop still wakes at the engine's
// NextTimedEvent() — remote KV arriving, a pinned prefill expiring — and steps then.
// Start/Stop from the owning thread.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/types.h"
#include "engine/engine.h"
#include "kv/kv_event.h"
#include "telemetry/vllm_metrics.h"

namespace kvroute::sim {

// Receives one request's output. Called on the loop thread, in order, never concurrently.
class RequestObserver {
 public:
  virtual ~RequestObserver() = default;
  // One output token, visible at simulated time `at`. The last one has `finished` set.
  virtual void OnToken(const engine::TokenEvent& event, Nanos at) = 0;
  // The request ended without (further) tokens: the engine refused it (`error` says why)
  // or it was aborted (`error` empty).
  virtual void OnEnded(const std::string& error, Nanos at) = 0;
};

// The engine's cache contents at one moment, taken on the loop thread between steps.
struct CacheContents {
  // Engine hashes (as they appear in KV events) of the blocks cached per tier, by kv::Tier.
  std::array<std::vector<kv::EngineHash>, kv::kNumTiers> tiers;
  engine::EngineStats stats;  // the same moment's stats (running/waiting requests)
};

struct EngineLoopOptions {
  // Called on the loop thread with each step's KV events (one batch per step, non-empty).
  std::function<void(kv::KvEventBatch)> publish;
  // Scheduler gauges and token counters are updated after every step when set.
  telemetry::VllmMetrics* metrics = nullptr;
  // With a lower tier (CPU, disk, store): vLLM's KV-connector counters
  // (vllm:external_prefix_cache_{queries,hits}), both in prompt tokens. When set,
  // `metrics->prefix_cache_hits` counts GPU hits only and these count every prompt token
  // queried and the tokens loaded from the lower tiers, as vLLM counts its local prefix cache
  // apart from an offloading connector.
  prometheus::Counter* external_queries = nullptr;
  prometheus::Counter* external_hits = nullptr;
  // P/D: called on the loop thread after a step in which remote KV arrived or pins expired
  // (StepResult::kv_transfers_done / pins_expired non-empty); must only hand data over.
  std::function<void(const engine::StepResult&)> on_pd_events;
  // P/D: the pinned-block gauges, updated after every step when set.
  prometheus::Gauge* pinned_blocks = nullptr;
  prometheus::Gauge* pinned_requests = nullptr;
  // Called on the loop thread after every step with the engine's stats (the KV tiers'
  // gauges and counters, sim_server.cc); must only update metrics.
  std::function<void(const engine::EngineStats&)> on_stats;
};

class EngineLoop {
 public:
  EngineLoop(std::unique_ptr<engine::Engine> engine, const SteadyClock& clock,
             EngineLoopOptions options);
  ~EngineLoop();  // Stop()
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  void Start();
  // Ends the thread; requests still live get OnEnded("") (aborted).
  void Stop();

  // Queues a request. The observer is kept until the request's last callback.
  void Submit(engine::RequestSpec spec, std::shared_ptr<RequestObserver> observer);
  // Aborts a live request (no-op if unknown or finished). Its observer gets no more calls.
  void Abort(std::string request_id);
  // Drops the prefix cache on the loop thread; `done` runs there with the engine's answer.
  void ResetPrefixCache(std::function<void(bool)> done);
  // Reads the cache contents on the loop thread at its next turn (between two steps, so the
  // contents match the KV event batches published so far); `done` runs there and must only
  // hand the value over (debug endpoint, tests).
  void InspectCache(std::function<void(CacheContents)> done);
  // Runs `task` on the loop thread at its next turn, between two steps, with the engine and
  // the simulated now (the P/D side channel reads and frees pinned KV this way). A task
  // still queued when the loop stops runs then. It must not block.
  void RunOnLoop(std::function<void(engine::Engine&, Nanos)> task);

  // Simulated now.
  Nanos Now() const { return clock_.Now(); }
  // The engine's stats after the latest step.
  engine::EngineStats Stats() const;
  // Fixed at construction.
  const engine::EngineConfig& engine_config() const { return config_; }
  const engine::Profile& profile() const { return profile_; }

 private:
  struct Submission {
    engine::RequestSpec spec;
    std::shared_ptr<RequestObserver> observer;
  };
  void Run();
  void DrainMailbox();
  void Deliver(const engine::StepResult& result, Nanos at);
  void UpdateMetrics(const engine::StepResult& result);

  const SteadyClock& clock_;
  EngineLoopOptions options_;
  const engine::EngineConfig config_;
  const engine::Profile profile_;

  // Loop thread only.
  std::unique_ptr<engine::Engine> engine_;
  std::unordered_map<std::string, std::shared_ptr<RequestObserver>> live_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // Guarded by mu_.
  std::vector<Submission> submitted_;
  std::vector<std::string> aborted_;
  std::vector<std::function<void(bool)>> resets_;
  std::vector<std::function<void(CacheContents)>> inspections_;
  std::vector<std::function<void(engine::Engine&, Nanos)>> tasks_;
  bool stop_ = false;
  engine::EngineStats stats_;

  std::thread thread_;
};

}  // namespace kvroute::sim
