#include "gateway/worker_registry.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "client/client_types.h"
#include "engine/engine.h"
#include "engine/step_time.h"

namespace kvroute::gateway {
namespace {

// Sample-weighted pool of the learned rates of the workers of one profile that have enough
// samples of their own (see PeerPrior in worker_registry.h).
struct PeerPool {
  double prefill_weight = 0;
  double prefill_s_per_token = 0;  // weighted sum of 1 / rate
  double decode_weight = 0;
  sched::StepTimeModel decode;  // weighted sums of the coefficients

  void Add(const RateEstimate& e, double min_samples) {
    if (static_cast<double>(e.prefill_samples) >= min_samples && e.prefill_tokens_per_s > 0) {
      const double w = static_cast<double>(e.prefill_samples);
      prefill_weight += w;
      prefill_s_per_token += w / e.prefill_tokens_per_s;
    }
    if (static_cast<double>(e.decode_samples) >= min_samples) {
      const double w = static_cast<double>(e.decode_samples);
      decode_weight += w;
      decode.base_s += w * e.decode.base_s;
      decode.per_sequence_s += w * e.decode.per_sequence_s;
      decode.per_kv_token_s += w * e.decode.per_kv_token_s;
    }
  }
};

}  // namespace

WorkerRegistry::WorkerRegistry(RegistryOptions options)
    : options_(options), health_(options.health), rates_(options.rates), load_(&rates_) {}

std::expected<WorkerId, std::string> WorkerRegistry::Add(WorkerSpec spec, Nanos now) {
  if (spec.name.empty()) return std::unexpected("worker name is empty");
  auto url = client::ParseUrl(spec.base_url);
  if (!url) return std::unexpected("worker " + spec.name + ": " + url.error());
  if (spec.models.empty()) return std::unexpected("worker " + spec.name + ": no models");
  if (spec.block_size == 0) return std::unexpected("worker " + spec.name + ": block_size is 0");
  if (spec.profile.empty()) spec.profile = std::string(engine::kDefaultProfileName);
  auto profile = engine::LoadProfile(spec.profile);
  if (!profile) return std::unexpected("worker " + spec.name + ": " + profile.error());
  if (!(spec.profile_speedup > 0)) {
    return std::unexpected("worker " + spec.name + ": profile_speedup must be > 0");
  }
  auto seed = SeedFromProfile(*profile);
  if (!seed) return std::unexpected("worker " + spec.name + ": " + seed.error());
  ScaleSeedTime(*seed, 1.0 / spec.profile_speedup);

  Entry entry;
  engine::StepTimeModel model(*profile);
  std::int64_t blocks = model.NumGpuBlocks(spec.block_size);
  if (blocks > 0) entry.profile_capacity_blocks = static_cast<std::uint64_t>(blocks);
  entry.kv_bytes_per_block = model.KvBytesPerTokenTransfer() * spec.block_size;
  // The CPU tier's load bandwidth, unless the config gives one: the engine model's (what the
  // sims charge for a CPU-tier hit). Without it predicted_ttft treats blocks held only in
  // host memory as recomputed; a worker with no CPU tier never reports such blocks.
  constexpr int kCpu = static_cast<int>(kv::Tier::kCpu);
  if (!spec.tier_load_bytes_per_s[kCpu]) {
    spec.tier_load_bytes_per_s[kCpu] =
        engine::EngineConfig{}.cpu_to_gpu_bandwidth_bytes_per_s * spec.profile_speedup;
  }
  entry.spec = std::move(spec);

  WorkerId id;
  {
    std::unique_lock lock(mu_);
    for (const auto& [other_id, other] : workers_) {
      if (other.spec.name == entry.spec.name) {
        return std::unexpected("worker name " + entry.spec.name + " is not unique");
      }
    }
    id = next_id_++;
    workers_.emplace(id, std::move(entry));
  }
  rates_.Seed(id, *seed);
  health_.Add(id, now);
  return id;
}

bool WorkerRegistry::Remove(WorkerId worker) {
  {
    std::unique_lock lock(mu_);
    if (workers_.erase(worker) == 0) return false;
  }
  health_.Remove(worker);
  load_.ForgetWorker(worker);
  rates_.Remove(worker);
  return true;
}

std::vector<WorkerInfo> WorkerRegistry::List() const {
  std::shared_lock lock(mu_);
  std::vector<WorkerInfo> out;
  out.reserve(workers_.size());
  for (const auto& [id, e] : workers_) out.push_back({id, e.spec});
  return out;
}

std::optional<WorkerInfo> WorkerRegistry::Find(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return WorkerInfo{worker, it->second.spec};
}

std::optional<WorkerId> WorkerRegistry::FindByName(std::string_view name) const {
  std::shared_lock lock(mu_);
  for (const auto& [id, e] : workers_) {
    if (e.spec.name == name) return id;
  }
  return std::nullopt;
}

void WorkerRegistry::SetMetrics(WorkerId worker, EngineMetrics metrics) {
  std::unique_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it != workers_.end()) it->second.metrics = std::move(metrics);
}

std::optional<EngineMetrics> WorkerRegistry::Metrics(WorkerId worker) const {
  std::shared_lock lock(mu_);
  auto it = workers_.find(worker);
  if (it == workers_.end()) return std::nullopt;
  return it->second.metrics;
}

std::vector<sched::WorkerSnapshot> WorkerRegistry::Snapshot(Nanos now,
                                                            std::string_view model) const {
  std::vector<sched::WorkerSnapshot> out;
  std::shared_lock lock(mu_);
  out.reserve(workers_.size());
  // Learned rates of every worker (in workers_ order), and per profile the pool of those
  // that have enough samples to stand on their own (lock order registry -> learner). Flat
  // vectors: this runs for every routed request, and fleets have one or two profiles.
  std::vector<std::optional<RateEstimate>> estimates;
  estimates.reserve(workers_.size());
  std::vector<std::pair<std::string_view, PeerPool>> pools;
  auto pool_of = [&pools](std::string_view profile) -> PeerPool* {
    for (auto& [name, pool] : pools) {
      if (name == profile) return &pool;
    }
    return nullptr;
  };
  const double min_samples = std::max(1.0, std::ceil(options_.peer_prior_min_samples));
  for (const auto& [id, e] : workers_) {
    estimates.push_back(rates_.Estimate(id));
    if (!estimates.back() || !options_.peer_prior) continue;
    PeerPool* pool = pool_of(e.spec.profile);
    if (pool == nullptr) pool = &pools.emplace_back(e.spec.profile, PeerPool{}).second;
    pool->Add(*estimates.back(), min_samples);
  }
  std::size_t position = 0;
  for (const auto& [id, e] : workers_) {
    const std::optional<RateEstimate>& estimate = estimates[position++];
    const WorkerSpec& spec = e.spec;
    if (!model.empty() &&
        std::find(spec.models.begin(), spec.models.end(), model) == spec.models.end()) {
      continue;
    }
    sched::WorkerSnapshot s;
    s.id = id;
    s.name = spec.name;
    s.models = spec.models;
    s.role = spec.role;
    HealthStatus h = health_.Status(id, now);
    s.healthy = h.state == HealthState::kHealthy;
    s.draining = h.draining;
    WorkerLoad l = load_.Load(id);
    s.inflight_requests = l.inflight_requests;
    s.pending_prefill_tokens = l.pending_prefill_tokens;
    s.active_kv_blocks = l.active_kv_blocks;
    s.wait_correction = load_.WaitCorrection(id, now);
    // Capacity: what the engine says (cache_config_info), else config, else the profile. A
    // capacity reported in another block size than ours is not comparable: skipped.
    if (e.metrics && e.metrics->num_gpu_blocks && *e.metrics->num_gpu_blocks > 0 &&
        e.metrics->block_size.value_or(spec.block_size) == spec.block_size) {
      s.kv_capacity_blocks = *e.metrics->num_gpu_blocks;
    } else if (spec.kv_capacity_blocks) {
      s.kv_capacity_blocks = *spec.kv_capacity_blocks;
    } else {
      s.kv_capacity_blocks = e.profile_capacity_blocks.value_or(0);
    }
    if (e.metrics && now - e.metrics->scraped_at <= options_.metrics_max_age) {
      s.scraped = e.metrics->ToScraped(now);
    }
    if (estimate) {
      s.prefill_tokens_per_s = estimate->prefill_tokens_per_s;
      s.prefill_attention_per_token = estimate->attention_q;
      s.decode_step = estimate->decode;
      // A worker with too few samples of its own still sits near its profile's seed; its
      // measured peers are the better prior (PeerPrior in the header says why).
      if (const PeerPool* p = pool_of(spec.profile)) {
        const PeerPool& pool = *p;
        if (pool.prefill_weight > 0 && pool.prefill_s_per_token > 0) {
          const double peer_rate = pool.prefill_weight / pool.prefill_s_per_token;
          const auto own = static_cast<double>(estimate->prefill_samples);
          s.prefill_tokens_per_s =
              own < min_samples ? peer_rate
                                : ShrinkTowardPeers(estimate->prefill_tokens_per_s, own, peer_rate,
                                                    options_.peer_prefill_prior_samples);
        }
        if (static_cast<double>(estimate->decode_samples) < min_samples && pool.decode_weight > 0) {
          s.decode_step = sched::StepTimeModel{pool.decode.base_s / pool.decode_weight,
                                               pool.decode.per_sequence_s / pool.decode_weight,
                                               pool.decode.per_kv_token_s / pool.decode_weight};
        }
      }
    }
    s.tier_load_bytes_per_s = spec.tier_load_bytes_per_s;
    s.kv_bytes_per_block = e.kv_bytes_per_block;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvroute::gateway
