#include "gateway/worker_registry.h"

#include <algorithm>
#include <mutex>

#include "client/client_types.h"
#include "engine/step_time.h"

namespace kvroute::gateway {

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
  auto seed = SeedFromProfile(*profile);
  if (!seed) return std::unexpected("worker " + spec.name + ": " + seed.error());

  Entry entry;
  engine::StepTimeModel model(*profile);
  std::int64_t blocks = model.NumGpuBlocks(spec.block_size);
  if (blocks > 0) entry.profile_capacity_blocks = static_cast<std::uint64_t>(blocks);
  entry.kv_bytes_per_block = model.KvBytesPerTokenTransfer() * spec.block_size;
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
  for (const auto& [id, e] : workers_) {
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
    if (auto r = rates_.Estimate(id)) {
      s.prefill_tokens_per_s = r->prefill_tokens_per_s;
      s.decode_step = r->decode;
    }
    s.tier_load_bytes_per_s = spec.tier_load_bytes_per_s;
    s.kv_bytes_per_block = e.kv_bytes_per_block;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvroute::gateway
