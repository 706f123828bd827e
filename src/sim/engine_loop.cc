#include "sim/engine_loop.h"

#include <algorithm>
#include <chrono>

namespace kvroute::sim {
namespace {

double WallClockSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

EngineLoop::EngineLoop(std::unique_ptr<engine::Engine> engine, const SteadyClock& clock,
                       EngineLoopOptions options)
    : clock_(clock),
      options_(std::move(options)),
      config_(engine->config()),
      profile_(engine->profile()),
      engine_(std::move(engine)) {
  stats_ = engine_->Stats();
}

EngineLoop::~EngineLoop() { Stop(); }

void EngineLoop::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Run(); });
}

void EngineLoop::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::Submit(engine::RequestSpec spec, std::shared_ptr<RequestObserver> observer) {
  {
    std::lock_guard lock(mu_);
    submitted_.push_back({std::move(spec), std::move(observer)});
  }
  cv_.notify_all();
}

void EngineLoop::Abort(std::string request_id) {
  {
    std::lock_guard lock(mu_);
    aborted_.push_back(std::move(request_id));
  }
  cv_.notify_all();
}

void EngineLoop::ResetPrefixCache(std::function<void(bool)> done) {
  {
    std::lock_guard lock(mu_);
    resets_.push_back(std::move(done));
  }
  cv_.notify_all();
}

void EngineLoop::InspectCache(std::function<void(CacheContents)> done) {
  {
    std::lock_guard lock(mu_);
    inspections_.push_back(std::move(done));
  }
  cv_.notify_all();
}

void EngineLoop::RunOnLoop(std::function<void(engine::Engine&, Nanos)> task) {
  {
    std::lock_guard lock(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_all();
}

engine::EngineStats EngineLoop::Stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void EngineLoop::DrainMailbox() {
  std::vector<Submission> submitted;
  std::vector<std::string> aborted;
  std::vector<std::function<void(bool)>> resets;
  std::vector<std::function<void(CacheContents)>> inspections;
  std::vector<std::function<void(engine::Engine&, Nanos)>> tasks;
  {
    std::lock_guard lock(mu_);
    submitted.swap(submitted_);
    aborted.swap(aborted_);
    resets.swap(resets_);
    inspections.swap(inspections_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task(*engine_, clock_.Now());
  // Inspections first: they see the state the published batches describe, before this turn's
  // adds (which emit no events until the next step anyway).
  for (auto& done : inspections) {
    CacheContents contents;
    for (int t = 0; t < kv::kNumTiers; ++t) {
      contents.tiers[t] = engine_->CachedBlockHashes(static_cast<kv::Tier>(t));
    }
    contents.stats = engine_->Stats();
    done(std::move(contents));
  }
  for (auto& s : submitted) {
    std::string id = s.spec.id;
    if (auto error = engine_->Add(std::move(s.spec))) {
      s.observer->OnEnded(*error, clock_.Now());
      continue;
    }
    live_[id] = std::move(s.observer);
  }
  // Aborts after adds: a request submitted and aborted in the same turn is added then dropped.
  for (const auto& id : aborted) {
    if (live_.erase(id) > 0) engine_->Abort(id);
  }
  for (auto& done : resets) done(engine_->ResetPrefixCache());
}

void EngineLoop::Run() {
  constexpr auto kMaxLag = std::chrono::milliseconds(2);
  Nanos timeline{0};  // simulated end of the previous step
  for (;;) {
    const bool was_idle = !engine_->HasWork();
    {
      std::unique_lock lock(mu_);
      auto ready = [this] {
        return stop_ || !submitted_.empty() || !aborted_.empty() || !resets_.empty() ||
               !inspections_.empty() || !tasks_.empty() || engine_->HasWork();
      };
      // Nothing to step: sleep until input arrives or the next timed event is due.
      if (const std::optional<Nanos> timed = engine_->NextTimedEvent()) {
        const Nanos wait = std::max(Nanos(0), *timed - clock_.Now());
        cv_.wait_for(lock, clock_.ToReal(wait), ready);
      } else {
        cv_.wait(lock, ready);
      }
      if (stop_) break;
    }
    DrainMailbox();
    // An idle engine starts its next step when work arrives, not in the past.
    if (was_idle) timeline = std::max(timeline, clock_.Now());
    // One reading of the clock for both: an event that falls due after it waits for the
    // next turn instead of being stepped (and its tokens dropped) by the idle step below.
    const Nanos woke = clock_.Now();
    const std::optional<Nanos> timed = engine_->NextTimedEvent();
    const bool timed_due = timed && *timed <= woke;
    if (!engine_->HasWork() && !timed_due) {
      // A reset with no live request still owes its AllBlocksCleared batch: step once. (It
      // also refreshes the gauges after a mailbox task such as a pinned-KV release.)
      engine::StepResult r = engine_->Step(woke);
      if (!r.kv_events.empty() && options_.publish) {
        options_.publish(
            kv::KvEventBatch{.ts = WallClockSeconds(), .events = std::move(r.kv_events)});
      }
      UpdateMetrics(r);
      continue;
    }
    // Back-to-back steps start where the previous one ended on the simulated timeline, not
    // when this thread woke up: wake-up latency then does not add to every ITL. A loop that
    // fell behind real time (more than kMaxLag of real time, e.g. CPU-bound at a huge
    // speedup) resynchronises instead of replaying the backlog in a burst.
    Nanos real_now = clock_.Now();
    if (timeline < real_now && clock_.ToReal(real_now - timeline) > kMaxLag) timeline = real_now;
    Nanos now = timeline;
    engine::StepResult result = engine_->Step(now);
    Nanos at = now + result.duration;
    timeline = at;
    if (result.duration > Nanos(0)) {
      // Sleep until the step is over in simulated time. Aborts arriving meanwhile wait for the
      // next turn, as they would wait for the running step on a GPU.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, clock_.ToReal(at - clock_.Now()), [this] { return stop_; });
      if (stop_) break;
    } else if (result.tokens.empty() && result.finished_without_token.empty()) {
      // Work exists but nothing could be scheduled (e.g. KV memory full): do not spin.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_; });
    }
    // Before the tokens: a decode leg's release names the blocks it read, before its end
    // (which releases with none read) can.
    if (options_.on_pd_events &&
        (!result.kv_transfers_done.empty() || !result.pins_expired.empty())) {
      options_.on_pd_events(result);
    }
    Deliver(result, at);
    if (!result.kv_events.empty() && options_.publish) {
      options_.publish(
          kv::KvEventBatch{.ts = WallClockSeconds(), .events = std::move(result.kv_events)});
    }
    UpdateMetrics(result);
  }
  // Stopping: everything still live is aborted.
  Nanos at = clock_.Now();
  for (auto& [id, observer] : live_) {
    engine_->Abort(id);
    observer->OnEnded("", at);
  }
  live_.clear();
  std::vector<Submission> submitted;
  {
    std::lock_guard lock(mu_);
    submitted.swap(submitted_);
  }
  for (auto& s : submitted) s.observer->OnEnded("", at);
  // Pending inspections still get an answer (the final state), so no caller waits forever.
  std::vector<std::function<void(CacheContents)>> inspections;
  {
    std::lock_guard lock(mu_);
    inspections.swap(inspections_);
  }
  for (auto& done : inspections) {
    CacheContents contents;
    for (int t = 0; t < kv::kNumTiers; ++t) {
      contents.tiers[t] = engine_->CachedBlockHashes(static_cast<kv::Tier>(t));
    }
    contents.stats = engine_->Stats();
    done(std::move(contents));
  }
  std::vector<std::function<void(engine::Engine&, Nanos)>> tasks;
  {
    std::lock_guard lock(mu_);
    tasks.swap(tasks_);
  }
  for (auto& task : tasks) task(*engine_, at);
}

void EngineLoop::Deliver(const engine::StepResult& result, Nanos at) {
  for (const auto& event : result.tokens) {
    auto it = live_.find(event.request_id);
    if (it == live_.end()) continue;  // aborted after the step was planned
    std::shared_ptr<RequestObserver> observer = it->second;
    if (event.finished) live_.erase(it);
    observer->OnToken(event, at);
  }
  for (const auto& id : result.finished_without_token) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    std::shared_ptr<RequestObserver> observer = std::move(it->second);
    live_.erase(it);
    observer->OnEnded("", at);
  }
}

void EngineLoop::UpdateMetrics(const engine::StepResult& result) {
  engine::EngineStats s = engine_->Stats();
  {
    std::lock_guard lock(mu_);
    stats_ = s;
  }
  if (options_.pinned_blocks != nullptr) options_.pinned_blocks->Set(static_cast<double>(s.num_pinned_blocks));
  if (options_.pinned_requests != nullptr) options_.pinned_requests->Set(s.num_pinned_requests);
  if (options_.on_stats) options_.on_stats(s);
  telemetry::VllmMetrics* m = options_.metrics;
  if (m == nullptr) return;
  m->num_requests_running.Set(s.num_running);
  m->num_requests_waiting.Set(s.num_waiting);
  m->kv_cache_usage_perc.Set(s.kv_cache_usage);
  telemetry::VllmMetrics::AdvanceTo(m->prefix_cache_queries,
                                    static_cast<double>(s.prefix_cache_queries));
  if (options_.external_queries != nullptr && options_.external_hits != nullptr) {
    // Lower-tier hits are the connector's, not the local (GPU) prefix cache's.
    const std::uint64_t gpu_hits = s.tier_hit_tokens[static_cast<int>(kv::Tier::kGpu)];
    telemetry::VllmMetrics::AdvanceTo(m->prefix_cache_hits, static_cast<double>(gpu_hits));
    telemetry::VllmMetrics::AdvanceTo(*options_.external_queries,
                                      static_cast<double>(s.prefix_cache_queries));
    telemetry::VllmMetrics::AdvanceTo(*options_.external_hits,
                                      static_cast<double>(s.prefix_cache_hits - gpu_hits));
  } else {
    telemetry::VllmMetrics::AdvanceTo(m->prefix_cache_hits,
                                      static_cast<double>(s.prefix_cache_hits));
  }
  telemetry::VllmMetrics::AdvanceTo(m->prompt_tokens, static_cast<double>(s.prompt_tokens));
  telemetry::VllmMetrics::AdvanceTo(m->generation_tokens, static_cast<double>(s.generation_tokens));
  telemetry::VllmMetrics::AdvanceTo(m->num_preemptions, static_cast<double>(s.num_preemptions));
  std::uint32_t step_tokens = result.num_prefill_tokens + result.num_decode_tokens;
  if (step_tokens > 0) m->iteration_tokens.Observe(step_tokens);
}

}  // namespace kvroute::sim
