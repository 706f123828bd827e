#include "fleet/router_state.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <utility>

#include "engine/engine.h"
#include "engine/kv_transfer.h"
#include "engine/step_time.h"
#include "sched/latency_model.h"

namespace kvroute::fleet {

RouterState::RouterState(RouterStateOptions options)
    : options_(options),
      health_(options.health),
      rates_(options.rates),
      load_(&rates_),
      pools_(options.peer_prior) {}

std::expected<WorkerId, std::string> RouterState::Add(WorkerSpec spec, Nanos now) {
  if (spec.profile.empty()) spec.profile = std::string(engine::kDefaultProfileName);
  auto profile = engine::LoadProfile(spec.profile);
  if (!profile) return std::unexpected("worker " + spec.name + ": " + profile.error());
  return Add(std::move(spec), *profile, now);
}

std::expected<WorkerId, std::string> RouterState::Add(WorkerSpec spec,
                                                      const engine::Profile& profile, Nanos now) {
  if (spec.name.empty()) return std::unexpected("worker name is empty");
  if (spec.models.empty()) return std::unexpected("worker " + spec.name + ": no models");
  if (spec.block_size == 0) return std::unexpected("worker " + spec.name + ": block_size is 0");
  if (!(spec.profile_speedup > 0)) {
    return std::unexpected("worker " + spec.name + ": profile_speedup must be > 0");
  }
  if (spec.profile.empty()) spec.profile = profile.name;  // the peer pool's key
  auto seed = SeedFromProfile(profile);
  if (!seed) return std::unexpected("worker " + spec.name + ": " + seed.error());
  ScaleSeedTime(*seed, 1.0 / spec.profile_speedup);

  Entry entry;
  engine::StepTimeModel model(profile);
  const std::int64_t blocks = model.NumGpuBlocks(spec.block_size);
  if (blocks > 0) entry.profile_capacity_blocks = static_cast<std::uint64_t>(blocks);
  entry.kv_bytes_per_block = model.KvBytesPerTokenTransfer() * spec.block_size;
  // P/D: ranks, GPUs, the bytes a pull into this worker moves per block, its link's seed.
  if (spec.tp == 0) spec.tp = profile.hardware.num_gpus;
  if (spec.gpus == 0) spec.gpus = spec.tp;
  if (spec.tp == 0 || spec.gpus < spec.tp) {
    return std::unexpected("worker " + spec.name + ": gpus must be >= tp > 0");
  }
  entry.kv_transfer_bytes_per_block =
      engine::KvTransferBytesPerToken(profile.model, spec.tp) * spec.block_size;
  {
    const engine::LinkSpec* link = profile.FindLink(spec.link);
    if (!spec.link.empty() && link == nullptr && !spec.link_bytes_per_s) {
      return std::unexpected("worker " + spec.name + ": link '" + spec.link +
                             "' is not in profile " + profile.name + " and has no bandwidth");
    }
    double bw = spec.link_bytes_per_s.value_or(link != nullptr ? link->bandwidth_bytes_per_s : 0);
    double latency = spec.link_latency_s.value_or(link != nullptr ? link->latency_s : 0);
    if (spec.link_bytes_per_s && !(std::isfinite(bw) && bw > 0)) {
      return std::unexpected("worker " + spec.name + ": link_bytes_per_s must be > 0");
    }
    if (!(std::isfinite(latency) && latency >= 0)) {
      return std::unexpected("worker " + spec.name + ": link_latency_s must be >= 0");
    }
    if (spec.link.empty() && link != nullptr) spec.link = link->name;
    if (bw > 0 && std::isfinite(bw)) {
      entry.link = LinkLearner(bw * spec.profile_speedup, latency / spec.profile_speedup);
    }
  }
  constexpr int kCpu = static_cast<int>(Tier::kCpu);
  if (options_.default_cpu_tier_bandwidth && !spec.tier_load_bytes_per_s[kCpu]) {
    spec.tier_load_bytes_per_s[kCpu] =
        engine::EngineConfig{}.cpu_to_gpu_bandwidth_bytes_per_s * spec.profile_speedup;
  }
  entry.tiers = TierLoadLearner(spec.tier_load_bytes_per_s, options_.tier_learner);
  entry.spec = std::move(spec);

  std::unique_lock lock(mu_);
  for (const auto& [other_id, other] : workers_) {
    if (other.spec.name == entry.spec.name) {
      return std::unexpected("worker name " + entry.spec.name + " is not unique");
    }
  }
  const WorkerId id = next_id_++;
  rates_.Seed(id, *seed);
  health_.Add(id, now);
  pools_.Join(id, entry.spec.profile);
  if (auto estimate = rates_.Estimate(id)) pools_.Update(id, *estimate);
  workers_.emplace(id, std::move(entry));
  ++table_version_;
  return id;
}

bool RouterState::Remove(WorkerId worker) {
  std::unique_lock lock(mu_);
  if (workers_.erase(worker) == 0) return false;
  pools_.Leave(worker);
  health_.Remove(worker);
  load_.ForgetWorker(worker);
  rates_.Remove(worker);
  ++table_version_;
  return true;
}

std::vector<WorkerInfo> RouterState::List() const {
  std::shared_lock lock(mu_);
  std::vector<WorkerInfo> out;
  out.reserve(workers_.size());
  for (const auto& [id, e] : workers_) out.push_back({id, e.spec});
  return out;
}

std::optional<WorkerInfo> RouterState::Find(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return WorkerInfo{worker, it->second.spec};
}

std::optional<WorkerId> RouterState::FindByName(std::string_view name) const {
  std::shared_lock lock(mu_);
  for (const auto& [id, e] : workers_) {
    if (e.spec.name == name) return id;
  }
  return std::nullopt;
}

void RouterState::SetMetrics(WorkerId worker, EngineMetrics metrics) {
  std::unique_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  Entry& e = it->second;
  if (e.metrics) {
    // The engine's own load counters: what finished between the two scrapes, one sample per
    // tier (a sped-up sim reports model time; the router learns in wall time, as its seeds).
    for (int t = static_cast<int>(Tier::kGpu) + 1; t < kNumTiers; ++t) {
      const auto& b0 = e.metrics->tier_load_bytes_sum[t];
      const auto& s0 = e.metrics->tier_load_seconds_sum[t];
      const auto& b1 = metrics.tier_load_bytes_sum[t];
      const auto& s1 = metrics.tier_load_seconds_sum[t];
      if (!b0 || !s0 || !b1 || !s1 || !(*b1 > *b0) || !(*s1 > *s0)) continue;
      e.tiers.Observe(static_cast<Tier>(t), *b1 - *b0, (*s1 - *s0) / e.spec.profile_speedup,
                      TierSampleSource::kTransfer);
    }
  }
  e.metrics = std::move(metrics);
}

void RouterState::ClearMetrics(WorkerId worker) {
  std::unique_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it != workers_.end()) it->second.metrics.reset();
}

std::optional<EngineMetrics> RouterState::Metrics(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return it->second.metrics;
}

namespace {

// Whether the booking's cached prefix reaches past its GPU part (a lower tier will load).
bool LoadsFromLowerTier(const RoutedRequest& r) {
  const std::uint32_t gpu = r.cached_blocks[static_cast<int>(Tier::kGpu)];
  if (r.cached_any_blocks > gpu) return true;
  for (int t = static_cast<int>(Tier::kGpu) + 1; t < kNumTiers; ++t) {
    if (r.cached_blocks[t] > gpu) return true;
  }
  return false;
}

}  // namespace

TierLoadLearner::Bandwidths RouterState::TierBandwidths(const Entry& e) const {
  return options_.learn_tier_bandwidths ? e.tiers.bytes_per_s() : e.spec.tier_load_bytes_per_s;
}

void RouterState::PriceTierLoads(RoutedRequest* booking) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(booking->worker);
  if (it == workers_.end() || !it->second.kv_bytes_per_block || booking->block_size == 0) return;
  const Entry& e = it->second;
  // The same plan the decision priced (sched::PlanLoad: layering, unloadable tiers, mixed
  // blocks at the slowest loadable tier), at the bandwidths the snapshot carries.
  sched::RequestProfile request;
  request.prompt_tokens = booking->prompt_tokens;
  request.block_size = booking->block_size;
  request.num_full_blocks = booking->num_full_blocks;
  sched::CacheView view;
  view.worker = booking->worker;
  view.depth_blocks = booking->cached_blocks;
  view.any_depth_blocks = booking->cached_any_blocks;
  sched::WorkerSnapshot worker;
  worker.tier_load_bytes_per_s = TierBandwidths(e);
  worker.kv_bytes_per_block = e.kv_bytes_per_block;
  const sched::LoadPlan plan = sched::PlanLoad(request, view, worker);
  for (int t = static_cast<int>(Tier::kGpu) + 1; t < kNumTiers; ++t) {
    booking->tier_load_bytes[t] = plan.load_blocks[t] * *e.kv_bytes_per_block;
  }
  booking->predicted_load_s = plan.load_s;
}

bool RouterState::Book(RequestId id, const RoutedRequest& booking, Nanos now) {
  bool booked = false;
  // Priced whenever a prefill loads from a lower tier: the bytes are the worker's tier-path
  // backlog (sched::TtftTerms::tier_queue) as well as the learner's sample.
  if (booking.observe_prefill && LoadsFromLowerTier(booking)) {
    RoutedRequest priced = booking;
    PriceTierLoads(&priced);
    booked = load_.OnRouted(id, priced, now);
  } else {
    booked = load_.OnRouted(id, booking, now);
  }
  if (!booked) return false;
  if (BookingListener* l = listener_.load()) l->OnBooked(id, booking);
  return true;
}

void RouterState::OnFirstToken(RequestId id, Nanos now) {
  // The one call that adds a prefill sample: the worker's share of its pool moves.
  FirstTokenObservation observed;
  if (auto worker = load_.OnFirstToken(id, now, &observed)) {
    UpdatePool(*worker, &observed);
    if (BookingListener* l = listener_.load()) l->OnFirstToken(id);
  }
}

void RouterState::OnToken(RequestId id, Nanos now, std::uint32_t tokens) {
  load_.OnToken(id, now, tokens);  // decode samples reach the pool at OnDone
}

void RouterState::OnDone(RequestId id, Nanos now, bool ok) {
  if (auto worker = load_.OnDone(id, now, ok)) UpdatePool(*worker);
  if (BookingListener* l = listener_.load()) l->OnReleased(id);
}

void RouterState::Cancel(RequestId id, Nanos now) {
  load_.OnDone(id, now, false);  // nothing was observed: the pool has nothing to learn
  if (BookingListener* l = listener_.load()) l->OnReleased(id);
}

void RouterState::ForgetBookings(WorkerId worker) { load_.ForgetWorker(worker); }

bool RouterState::OnKvTransfer(WorkerId decode_worker, double bytes, std::uint32_t lanes,
                               double seconds) {
  std::unique_lock lock(mu_);
  auto it = workers_.find(decode_worker);
  if (it == workers_.end()) return false;
  return it->second.link.Observe(bytes, lanes, seconds);
}

std::optional<LinkLearner> RouterState::Link(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return it->second.link;
}

bool RouterState::OnTierLoad(WorkerId worker, Tier tier, double bytes, double seconds) {
  std::unique_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return false;
  return it->second.tiers.Observe(tier, bytes, seconds, TierSampleSource::kTransfer);
}

std::optional<TierLoadLearner> RouterState::TierLoads(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return it->second.tiers;
}

void RouterState::UpdatePool(WorkerId worker, const FirstTokenObservation* observed) {
  // Read and applied under the exclusive lock, so two updates of one worker land in order.
  std::unique_lock lock(mu_);
  if (auto estimate = rates_.Estimate(worker)) pools_.Update(worker, *estimate);
  if (observed == nullptr || !options_.learn_tier_bandwidths) return;
  const RoutedRequest& r = observed->routed;
  if (!r.observe_prefill || !r.predicted_ttft_s || !r.predicted_wait_s) return;
  auto it = workers_.find(worker);
  if (it == workers_.end()) return;
  TierLoadObservation o;
  o.load_bytes = r.tier_load_bytes;
  o.predicted_ttft_s = *r.predicted_ttft_s;
  o.predicted_wait_s = *r.predicted_wait_s;
  o.predicted_load_s = r.predicted_load_s;
  // Any request still waiting for its first token when this one was routed: with async loads
  // its load may still hold the tier's path (the decayed count reads 0 once the learned
  // prefill rate says it is done), and the wait would read as a slow tier.
  o.queued_ahead_tokens = std::max(observed->queued_ahead_tokens, observed->booked_ahead_tokens);
  o.measured_ttft_s = observed->ttft_s;
  if (auto sample = AttributeTierLoad(o, options_.tier_attribution)) {
    it->second.tiers.Observe(sample->tier, sample->bytes, sample->seconds,
                             TierSampleSource::kTtft);
  }
}

void RouterState::FillSpec(WorkerId id, const Entry& e, sched::WorkerSnapshot* s) {
  s->id = id;
  s->name = e.spec.name;
  s->models = e.spec.models;
  s->role = e.spec.role;
  s->kv_bytes_per_block = e.kv_bytes_per_block;
  s->tp = e.spec.tp;
  s->gpus = e.spec.gpus;
  s->kv_transfer_bytes_per_block = e.kv_transfer_bytes_per_block;
}

std::pair<std::uint64_t, bool> RouterState::FillState(WorkerId id, const Entry& e, Nanos now,
                                                      std::optional<std::uint64_t> known_version,
                                                      bool was_lent, bool read_health,
                                                      sched::WorkerSnapshot* s) const {
  if (read_health) {
    const HealthStatus h = health_.Status(id, now);
    s->healthy = h.Up();
    s->draining = h.draining;
  }
  const LoadTracker::View view = load_.ViewOf(id, now);
  s->wait_correction = view.wait_correction;
  // Capacity: what the engine says (cache_config_info), else the spec, else the profile. A
  // capacity reported in another block size than ours is not comparable: skipped.
  const WorkerSpec& spec = e.spec;
  if (e.metrics && e.metrics->num_gpu_blocks && *e.metrics->num_gpu_blocks > 0 &&
      e.metrics->block_size.value_or(spec.block_size) == spec.block_size) {
    s->kv_capacity_blocks = *e.metrics->num_gpu_blocks;
  } else if (spec.kv_capacity_blocks) {
    s->kv_capacity_blocks = *spec.kv_capacity_blocks;
  } else {
    s->kv_capacity_blocks = e.profile_capacity_blocks.value_or(0);
  }
  if (e.metrics && now - e.metrics->scraped_at <= options_.metrics_max_age) {
    s->scraped = e.metrics->ToScraped(now);
  } else {
    s->scraped.reset();
  }
  // The link bandwidth moves with every observed pull (no version): rewritten at every call.
  s->kv_link_bytes_per_s = e.link.lane_bytes_per_s();
  s->kv_link_latency_s = e.link.latency_s();
  // So do the tier bandwidths (every first token with a lower-tier load may teach one).
  s->tier_load_bytes_per_s = TierBandwidths(e);
  // Pooled rates move with every peer's sample: rewritten at every call.
  const bool lent = pools_.Apply(id, s);
  const bool reread = !known_version || *known_version != view.version || (was_lent && !lent);
  // The prefill still ahead drains with time (LoadTracker::PendingPrefillTokens): read at
  // every call.
  s->pending_prefill_tokens = view.pending_prefill_tokens;
  if (reread) {
    const WorkerLoad l = load_.Load(id);
    s->inflight_requests = l.inflight_requests;
    s->pending_prefill_requests = l.inflight_requests - std::min(l.inflight_requests, l.decoding_requests);
    s->active_kv_blocks = l.active_kv_blocks;
    for (int t = 0; t < kNumTiers; ++t) {
      s->pending_tier_load_bytes[t] = static_cast<double>(l.pending_tier_load_bytes[t]);
    }
    if (!lent) {
      if (auto r = rates_.Estimate(id)) s->decode_step = r->decode;
    }
  }
  return {view.version, lent};
}

std::vector<sched::WorkerSnapshot> RouterState::Snapshot(Nanos now,
                                                         std::string_view model) const {
  std::vector<sched::WorkerSnapshot> out;
  std::shared_lock lock(mu_);
  out.reserve(workers_.size());
  for (const auto& [id, e] : workers_) {
    if (!model.empty() &&
        std::find(e.spec.models.begin(), e.spec.models.end(), model) == e.spec.models.end()) {
      continue;
    }
    sched::WorkerSnapshot& s = out.emplace_back();
    FillSpec(id, e, &s);
    FillState(id, e, now, std::nullopt, false, true, &s);
  }
  return out;
}

void RouterState::Refresh(Nanos now, SnapshotCache* cache) const {
  std::shared_lock lock(mu_);
  if (cache->table_version_ != table_version_) {  // a worker came or went: rows anew
    cache->rows_.assign(workers_.size(), sched::WorkerSnapshot{});
    cache->versions_.assign(workers_.size(), std::nullopt);
    cache->lent_.assign(workers_.size(), 0);
    std::size_t i = 0;
    for (const auto& [id, e] : workers_) FillSpec(id, e, &cache->rows_[i++]);
    cache->table_version_ = table_version_;
  }
  // Statuses are re-read only when WorkerHealth's version moved: time alone changes only an
  // ejection into probing, which the snapshot does not show (neither is healthy). The version
  // is read first, so a change while the statuses are read makes the next Refresh read again.
  const std::uint64_t health_version = health_.version();
  const bool read_health = cache->health_version_ != health_version;
  cache->health_version_ = health_version;
  std::size_t i = 0;
  for (const auto& [id, e] : workers_) {
    auto [version, lent] = FillState(id, e, now, cache->versions_[i], cache->lent_[i] != 0,
                                     read_health, &cache->rows_[i]);
    cache->versions_[i] = version;
    cache->lent_[i] = lent ? 1 : 0;
    ++i;
  }
}

}  // namespace kvroute::fleet
